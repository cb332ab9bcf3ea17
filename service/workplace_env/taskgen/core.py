"""The generation loop, the self-check of ground truths, the JSONL writer, and
``workplace-env generate-tasks`` (:func:`generate_to`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from random import Random
from typing import IO, Any

from workplace_env.model import ENVIRONMENT_NAME
from workplace_env.sandbox.load import load_sandbox
from workplace_env.sandbox.tables import BaseTables, SessionTables, TablesUnavailableError
from workplace_env.sandbox.tools import execute
from workplace_env.taskgen.base import TEMPLATES, Draft, Template
from workplace_env.taskgen.world import SYSTEM_PROMPT, World
from workplace_env.terminal import CommandError, console, plain

#: Draws per template instance before it gives up on this instance.
ATTEMPTS = 40
#: Consecutive instances a template may fail before the generator stops using it.
MAX_FAILED_INSTANCES = 3

_FAILURE_PREFIXES = ("Error", "Invalid", "Missing", "Please provide", "No search parameters")
_FAILURE_PARTS = (" not found", " not valid", " not provided", " must be ")


def is_failure_output(output: Any) -> bool:
    """True when a tool's output is one of its error or rejection texts.

    Recognises the exception texts (``"Error ..."``), and the tools' own refusals: ``"... not
    found."``, ``"... not valid ..."``, ``"... not provided."``, ``"Invalid ..."``, ``"... must
    be ..."``, ``"Missing task details."``, ``"Please provide all required fields ..."`` and
    ``"No search parameters provided..."``. Search answers such as ``"No emails found."`` are
    results, not failures; non-string outputs (ids are strings, lists, dicts) never fail.
    """
    if not isinstance(output, str):
        return False
    return output.startswith(_FAILURE_PREFIXES) or any(p in output for p in _FAILURE_PARTS)


def replay(base: BaseTables, calls: Iterable[Mapping[str, Any]]) -> list[Any]:
    """Run ``calls`` (``{"name", "arguments": JSON text}``) in order on a fresh session of ``base``.

    Returns each call's output (see :func:`~workplace_env.sandbox.tools.execute`). Raises
    ValueError when a call's arguments are not the JSON text of an object.
    """
    tables = SessionTables(base)
    outputs = []
    for c in calls:
        arguments = json.loads(c["arguments"])
        if not isinstance(arguments, dict):
            raise ValueError(f"arguments of {c['name']} are not a JSON object")
        outputs.append(execute(tables, c["name"], arguments))
    return outputs


def _executes(base: BaseTables, draft: Draft) -> bool:
    return not any(is_failure_output(out) for out in replay(base, draft.calls))


def _draw(
    spec: Template, world: World, base: BaseTables, rng: Random, seen: dict[str, str]
) -> Draft | None:
    """One instance of ``spec``: a new prompt if one comes within :data:`ATTEMPTS` draws.

    Falls back to a prompt already generated (with the same ground truth), else None.
    """
    fallback = None
    for _ in range(ATTEMPTS):
        draft = spec.build(world, rng)
        if draft is None:
            continue
        truth = json.dumps(draft.calls)
        known = seen.get(draft.prompt)
        if known is not None:
            if known != truth:
                raise RuntimeError(
                    f"template {spec.id} gave two ground truths for the prompt {draft.prompt!r}"
                )
            fallback = fallback or draft
            continue
        if _executes(base, draft):
            return draft
    return fallback


def generate_tasks(
    base: BaseTables, count: int, seed: int, templates: Sequence[Template] | None = None
) -> list[dict[str, Any]]:
    """``count`` tasks over the sandbox ``base``, in the format of WorkBench's NeMo task files.

    Each task is ``{"id": "gen-s<seed>-<n>" (n from 1), "category", "environment_name":
    "workplace_assistant", "prompt", "system", "ground_truth": [{"name", "arguments": JSON
    text}, ...], "template", "sandbox": {"digest", "origin"} of ``base``}``; an empty ground
    truth means the right answer changes nothing.
    Templates are used in turns, each turn in an order shuffled by ``seed``, so every template
    appears about equally often. Every ground truth is replayed on a fresh session before it is
    accepted, and no tool may answer it with an error or a refusal (:func:`is_failure_output`).

    Deterministic: the same sandbox, ``count``, ``seed`` and templates give the same tasks.
    Prompts repeat (with equal ground truths) only when a template runs out of new ones.

    Raises ValueError when ``count`` is negative or no template can make a task on ``base``
    (e.g. an empty sandbox).
    """
    if count < 0:
        raise ValueError("count must be >= 0")
    world = World(base)
    rng = Random(seed)
    pool = list(TEMPLATES if templates is None else templates)
    failures = {spec.id: 0 for spec in pool}
    seen: dict[str, str] = {}
    tasks: list[dict[str, Any]] = []
    queue: list[Template] = []
    while len(tasks) < count:
        if not queue:
            queue = [spec for spec in pool if failures[spec.id] < MAX_FAILED_INSTANCES]
            if not queue:
                raise ValueError(f"no template can make a task on the sandbox {base.origin!r}")
            rng.shuffle(queue)
            queue.reverse()  # pop() from the end takes them in shuffled order
        spec = queue.pop()
        draft = _draw(spec, world, base, rng, seen)
        if draft is None:
            failures[spec.id] += 1
            continue
        failures[spec.id] = 0
        seen[draft.prompt] = json.dumps(draft.calls)
        tasks.append(
            {
                "id": f"gen-s{seed}-{len(tasks) + 1}",
                "category": spec.category,
                "environment_name": ENVIRONMENT_NAME,
                "prompt": draft.prompt,
                "system": SYSTEM_PROMPT,
                "ground_truth": draft.calls,
                "template": spec.id,
                "sandbox": {"digest": base.digest, "origin": base.origin},
            }
        )
    return tasks


def write_jsonl(tasks: Iterable[Mapping[str, Any]], out: IO[str]) -> None:
    """Write one task per line as compact-key JSON (UTF-8 text, ``\\n`` line ends)."""
    for task in tasks:
        out.write(json.dumps(task, ensure_ascii=False) + "\n")


def generate_to(data_dir: Path | None, count: int, seed: int, out: Path | None) -> None:
    """Generate ``count`` tasks (``seed``) on the sandbox of ``data_dir`` (None: the embedded
    one) and write them as JSONL to ``out`` (None: stdout; a file is followed by ``wrote N
    tasks to FILE`` on stderr). Raises :class:`~workplace_env.terminal.CommandError` (exit 2)
    when the sandbox cannot be loaded, the count cannot be met or ``out`` cannot be written."""
    try:
        base = load_sandbox(data_dir)
    except TablesUnavailableError as exc:
        raise CommandError("cannot load the sandbox:", exc) from exc
    try:
        tasks = generate_tasks(base, count, seed)
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    if out is None:
        write_jsonl(tasks, sys.stdout)
        sys.stdout.flush()
        return
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("w", encoding="utf-8", newline="\n") as fh:
            write_jsonl(tasks, fh)
    except OSError as exc:
        raise CommandError(f"cannot write {out}:", exc) from exc
    console.print(plain(f"wrote {len(tasks)} tasks to {out}"))
