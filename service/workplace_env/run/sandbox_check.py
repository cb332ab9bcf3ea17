"""Which sandbox a run plays on, and whether the lines of its file were written for it.

A line was written for another sandbox when

* its ``sandbox`` (what ``generate-tasks`` writes: ``{"digest", "origin"}`` of the sandbox the
  task was made on) names another digest than the server's, or
* it names an entity the sandbox does not hold: its ground truth an argument ``*_id`` (a
  customer, event, task or e-mail the call updates, deletes or answers) that the table column
  of that name does not hold (any cell, for an id no column is named after), or an address of
  the company (a domain of the sandbox's directory) that no cell holds; its prompt a person by
  first name (:func:`~workplace_env.sandbox.generate.person_first_names`, outside quoted text
  and the ground truth's own values) that no cell holds as a word, a quoted subject it looks
  an e-mail up by (``about 'Update on X'``) that no cell holds, or an event by its name
  (``the next Budget Review meeting``) that no ``event_name`` holds. WorkBench's tasks name its
  customers, events and employees, which the generated sandbox does not have, and tasks
  generated on one sandbox name those of that one.

The entity check needs the sandbox's tables here (:func:`local_tables`): the in-process server's,
a generated sandbox made again from its seed and scale, or a data directory this machine can
read with the same digest. Otherwise only the ``sandbox`` fields are checked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workplace_env.plurals import some_of
from workplace_env.sandbox.generate import generate_sandbox, person_first_names
from workplace_env.sandbox.tables import CALENDAR, DIRECTORY, BaseTables, TablesUnavailableError
from workplace_env.terminal import CommandError, console, plain
from workplace_env_client import EnvironmentClient, ServerSandbox

_GENERATED = re.compile(r"generated:seed=(-?\d+),scale=([0-9.eE+-]+)")
_ADDRESS = re.compile(r"[^@\s]+@([^@\s]+)")
_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
#: Quoted text of a prompt (a subject, a new name): its words name no one; an apostrophe inside
#: a word (``carlos's``, ``don't``) opens no quote.
_QUOTED = re.compile(r"(?<![A-Za-z])'[^']+'(?![A-Za-z])|\"[^\"]*\"")
#: An event the prompt names by its name: ``the next Budget Review meeting``; a name holding a
#: word of :data:`_LINKING` (``the first meeting on Friday and ...``) is no name.
_EVENT = re.compile(
    r"\b(?:next|upcoming|future|last|previous|latest|first)\s+"
    r"((?:[A-Za-z0-9&'-]+\s+){1,6}?)(?:meetings?|events?)\b",
    re.IGNORECASE,
)
_LINKING = frozenset(
    [
        "a",
        "about",
        "all",
        "an",
        "and",
        "any",
        "at",
        "for",
        "from",
        "i",
        "in",
        "is",
        "my",
        "of",
        "on",
        "the",
        "to",
        "with",
    ]
)
#: A quoted subject the prompt looks an e-mail up by: ``... email about 'Update on X'``.
_ABOUT = re.compile(r"\babout (?:'([^']+)'|\"([^\"]+)\")(?![A-Za-z])", re.IGNORECASE)


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


@dataclass(frozen=True)
class _Held:
    """What a sandbox holds, for the entity check: every text cell, the values of each ``*_id``
    column, the domains of its directory's addresses, every word of its cells and its events'
    names (lower case)."""

    cells: frozenset[str]
    ids: Mapping[str, frozenset[str]]
    domains: frozenset[str]
    words: frozenset[str]
    event_names: frozenset[str]


def _held_values(base: BaseTables) -> _Held:
    """What the sandbox's tables hold (:class:`_Held`)."""
    cells: set[str] = set()
    ids: dict[str, set[str]] = {}
    for table in base.tables.values():
        for name in table.columns:
            values = {value for value in table.data[name] if isinstance(value, str)}
            cells |= values
            if name.endswith("_id"):
                ids.setdefault(name, set()).update(values)
    directory = base.tables[DIRECTORY]
    domains = {
        match[1].lower()
        for name in directory.columns
        for value in directory.data[name]
        if isinstance(value, str) and (match := _ADDRESS.fullmatch(value))
    }
    words = {word for cell in cells for word in _words(cell)}
    calendar = base.tables[CALENDAR].data["event_name"]
    return _Held(
        frozenset(cells),
        {name: frozenset(values) for name, values in ids.items()},
        frozenset(domains),
        frozenset(words),
        frozenset(name.lower() for name in calendar if isinstance(name, str)),
    )


def _words(text: str) -> set[str]:
    """The words of ``text``, lower case, a possessive ``'s`` dropped, contractions (``don't``)
    left out; an address or dotted name counts word by word."""
    found = set()
    for word in _WORD.findall(text):
        word = word.lower()
        if "'" in word and not word.endswith("'s"):
            continue
        found.add(word.removesuffix("'s"))
    return found


def _ground_truth_arguments(line: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The ``(argument, value)`` pairs of every call of the line's ground truth (arguments given
    as an object or as its JSON text; others skipped)."""
    truth = line.get("ground_truth")
    pairs = []
    for call in truth if isinstance(truth, list) else []:
        arguments = call.get("arguments") if isinstance(call, Mapping) else None
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                continue
        if isinstance(arguments, Mapping):
            pairs += [(str(key), value) for key, value in arguments.items()]
    return pairs


def named_entities(line: Mapping[str, Any], domains: frozenset[str]) -> list[tuple[str, str]]:
    """The ``(argument, value)`` pairs of the line's ground truth that name an entity: an
    argument ``*_id``, or an address at one of ``domains``."""
    named = []
    for key, value in _ground_truth_arguments(line):
        if not isinstance(value, str):
            continue
        address = _ADDRESS.fullmatch(value)
        if key.endswith("_id") or (address and address[1].lower() in domains):
            named.append((key, value))
    return named


def prompt_text(line: Mapping[str, Any]) -> str:
    """The user's words of a line: its ``prompt``, else the text of the user messages of its
    ``responses_create_params.input`` (NeMo Gym's rows)."""
    if isinstance(line.get("prompt"), str):
        return line["prompt"]
    params = line.get("responses_create_params")
    messages = params.get("input") if isinstance(params, Mapping) else None
    texts = []
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        content = message.get("content")
        parts = content if isinstance(content, list) else [content]
        for part in parts:
            text = part.get("text") if isinstance(part, Mapping) else part
            if isinstance(text, str):
                texts.append(text)
    return "\n".join(texts)


def named_people(line: Mapping[str, Any]) -> list[str]:
    """The first names (lower case) the line's prompt names a person by, outside quoted text
    and the words of its ground truth's values (a name given as a new value is no entity)."""
    given = {
        word
        for _, value in _ground_truth_arguments(line)
        if isinstance(value, str)
        for word in _words(value)
    }
    known = person_first_names()
    words = _words(_QUOTED.sub(" ", prompt_text(line)))
    return sorted(word for word in words - given if word in known)


def _missing_entity(line: Mapping[str, Any], held: _Held) -> str | None:
    """Why ``line`` names an entity ``held`` does not have (see the module docstring), or
    None."""
    for key, value in named_entities(line, held.domains):
        column = held.ids.get(key)
        if value not in (column if column is not None else held.cells):
            where = f"its {key} column" if column is not None else "no table of it"
            return f"names {key} {value!r}, which {where} holds"
    for name in named_people(line):
        if name not in held.words:
            return f"names {name!r} in its prompt, a person no table of it holds"
    prompt = prompt_text(line)
    for match in _ABOUT.finditer(prompt):
        subject = match[1] or match[2]
        if not any(subject.lower() in cell.lower() for cell in held.cells):
            return f"names {subject!r} in its prompt, which no table of it holds"
    for match in _EVENT.finditer(prompt):
        event = " ".join(match[1].split()).lower()
        if _LINKING.isdisjoint(event.split()) and not any(event in n for n in held.event_names):
            return f"names the event {event!r} in its prompt, which no event_name of it holds"
    return None


def foreign_lines(
    lines: Sequence[Mapping[str, Any]], sandbox: ServerSandbox, base: BaseTables | None
) -> list[tuple[int, str]]:
    """``(index, why)`` of each line written for another sandbox than ``sandbox`` (whose tables
    are ``base``, None when not at hand): see the module docstring."""
    held = _held_values(base) if base is not None else None
    found = []
    for index, line in enumerate(lines):
        own = line.get("sandbox")
        digest = own.get("digest") if isinstance(own, Mapping) else None
        if isinstance(digest, str) and sandbox.digest and digest != sandbox.digest:
            origin = own.get("origin") if isinstance(own, Mapping) else None
            found.append((index, f"was made for the sandbox {digest} ({origin or '?'})"))
            continue
        if held is None or isinstance(digest, str):
            continue
        if (why := _missing_entity(line, held)) is not None:
            found.append((index, why))
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
        f"{some_of(len(found), len(lines), 'line', 'was', 'were')} written for another "
        f"sandbox than this run's ({sandbox_text(sandbox)}): {examples}."
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
