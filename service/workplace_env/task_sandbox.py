"""Which sandbox a run plays on, and whether the lines of its file were written for it.

A line was written for another sandbox when

* its ``sandbox`` (what ``generate-tasks`` writes: ``{"digest", "origin"}`` of the sandbox the
  task was made on) names another digest than the server's, or
* its ground truth names an entity the sandbox does not hold: an argument ``*_id`` (a customer,
  event, task or e-mail the call updates, deletes or answers) or an address of the company (a
  domain of the sandbox's directory) that no cell of any table holds. WorkBench's tasks name
  its customers, events and employees, which the generated sandbox does not have, and tasks
  generated on one sandbox name those of that one.

The entity check needs the sandbox's tables here (:func:`local_tables`): the in-process server's,
a generated sandbox made again from its seed and scale, or a data directory this machine can
read with the same digest. Otherwise only the ``sandbox`` fields are checked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from workplace_env.sandbox.generate import generate_sandbox
from workplace_env.sandbox.tables import DIRECTORY, BaseTables, TablesUnavailableError
from workplace_env.terminal import CommandError, console, plain
from workplace_env_client import EnvironmentClient, ServerSandbox

_GENERATED = re.compile(r"generated:seed=(-?\d+),scale=([0-9.eE+-]+)")
_ADDRESS = re.compile(r"[^@\s]+@([^@\s]+)")


def sandbox_text(sandbox: ServerSandbox) -> str:
    """A sandbox for people: ``generated sandbox (seed 0, scale 1.0) sha256:<hex>`` or ``data
    directory DIR sha256:<hex>``; ``unknown (...)`` when the server does not say."""
    if not sandbox.digest:
        return "unknown (the server does not report its sandbox)"
    if match := _GENERATED.fullmatch(sandbox.origin):
        return f"generated sandbox (seed {match[1]}, scale {match[2]}) {sandbox.digest}"
    return f"data directory {sandbox.origin or '(origin unknown)'} {sandbox.digest}"


def sandbox_json(sandbox: ServerSandbox) -> dict[str, str] | None:
    """A sandbox as rollout lines and summaries record it: ``{"digest", "origin"}``; None when
    the server does not say."""
    return {"digest": sandbox.digest, "origin": sandbox.origin} if sandbox.digest else None


def local_tables(sandbox: ServerSandbox) -> BaseTables | None:
    """The tables of ``sandbox`` as this process can have them (a generated sandbox made again
    from its seed and scale, a data directory read here), only when their digest is the
    server's; None otherwise."""
    try:
        if match := _GENERATED.fullmatch(sandbox.origin):
            base = generate_sandbox(int(match[1]), float(match[2]))
        elif sandbox.origin and Path(sandbox.origin).is_dir():
            base = BaseTables.from_directory(sandbox.origin)
        else:
            return None
    except (ValueError, TablesUnavailableError):
        return None
    return base if base.digest == sandbox.digest else None


def _held_values(base: BaseTables) -> tuple[frozenset[str], frozenset[str]]:
    """Every text cell of the sandbox's tables, and the domains of its directory's addresses."""
    held = {
        value
        for table in base.tables.values()
        for name in table.columns
        for value in table.data[name]
        if isinstance(value, str)
    }
    directory = base.tables[DIRECTORY]
    domains = {
        match[1].lower()
        for name in directory.columns
        for value in directory.data[name]
        if isinstance(value, str) and (match := _ADDRESS.fullmatch(value))
    }
    return frozenset(held), frozenset(domains)


def named_entities(line: Mapping[str, Any], domains: frozenset[str]) -> list[tuple[str, str]]:
    """The ``(argument, value)`` pairs of the line's ground truth that name an entity: an
    argument ``*_id``, or an address at one of ``domains``."""
    truth = line.get("ground_truth")
    named = []
    for call in truth if isinstance(truth, list) else []:
        arguments = call.get("arguments") if isinstance(call, Mapping) else None
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                continue
        if not isinstance(arguments, Mapping):
            continue
        for key, value in arguments.items():
            if not isinstance(value, str):
                continue
            address = _ADDRESS.fullmatch(value)
            if str(key).endswith("_id") or (address and address[1].lower() in domains):
                named.append((str(key), value))
    return named


def foreign_lines(
    lines: Sequence[Mapping[str, Any]], sandbox: ServerSandbox, base: BaseTables | None
) -> list[tuple[int, str]]:
    """``(index, why)`` of each line written for another sandbox than ``sandbox`` (whose tables
    are ``base``, None when not at hand): see the module docstring."""
    held, domains = _held_values(base) if base is not None else (frozenset(), frozenset())
    found = []
    for index, line in enumerate(lines):
        own = line.get("sandbox")
        digest = own.get("digest") if isinstance(own, Mapping) else None
        if isinstance(digest, str) and sandbox.digest and digest != sandbox.digest:
            origin = own.get("origin") if isinstance(own, Mapping) else None
            found.append((index, f"was made for the sandbox {digest} ({origin or '?'})"))
            continue
        if base is None or isinstance(digest, str):
            continue
        missing = [(k, v) for k, v in named_entities(line, domains) if v not in held]
        if missing:
            key, value = missing[0]
            found.append((index, f"names {key} {value!r}, which no table of it holds"))
    return found


def check_run_sandbox(
    client: EnvironmentClient,
    lines: Sequence[Mapping[str, Any]],
    line_numbers: Sequence[int],
    *,
    target: str | None,
    any_sandbox: bool,
) -> ServerSandbox:
    """The sandbox ``client``'s server plays on. Raises
    :class:`CommandError` (exit 2, nothing played) when some of ``lines`` were written for
    another sandbox (:func:`foreign_lines`), naming how many, the first few and the fixes
    (``--data-dir`` with the WorkBench tables from ``workplace-env data fetch``, a ``--target``
    server started on them, or ``--any-sandbox``); with ``any_sandbox`` it warns instead."""
    sandbox = client.server_sandbox()
    found = foreign_lines(lines, sandbox, local_tables(sandbox))
    if not found:
        return sandbox
    examples = "; ".join(f"line {line_numbers[i]} {why}" for i, why in found[:3])
    headline = (
        f"{len(found)} of the {len(lines)} lines were written for another sandbox than this "
        f"run's ({sandbox_text(sandbox)}): {examples}."
    )
    if any_sandbox:
        console.print(f"[yellow]{plain(headline)}[/yellow] Played anyway (--any-sandbox).")
        return sandbox
    made_for = {_own_origin(lines[i]) for i, _ in found}
    if all(_GENERATED.fullmatch(origin or "") for origin in made_for):
        drop = f"start the server at {target} without --data-dir" if target else "drop --data-dir"
        where = f"{drop} (the generated sandbox {', '.join(sorted(map(str, made_for)))})"
    else:
        data = (
            f"start the server at {target} with --data-dir DIR" if target else "pass --data-dir DIR"
        )
        where = f"{data} (the WorkBench tables: workplace-env data fetch prints DIR)"
    raise CommandError(
        headline,
        f"Nothing was played. To play them on the tables they were written for, {where}; to "
        "play them on this sandbox anyway, pass --any-sandbox.",
    )


def _own_origin(line: Mapping[str, Any]) -> str | None:
    own = line.get("sandbox")
    origin = own.get("origin") if isinstance(own, Mapping) else None
    return origin if isinstance(origin, str) else None
