"""The generation loop, the self-check of ground truths, the JSONL writer, and
``workplace-env generate-tasks`` (:func:`generate_to`)."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from random import Random
from typing import IO, Any

from workplace_env.identity import ENVIRONMENT_NAME
from workplace_env.interrupts import stop_on_signals
from workplace_env.plurals import counted
from workplace_env.sandbox.load import load_sandbox
from workplace_env.sandbox.tables import BaseTables, SessionTables, TablesUnavailableError
from workplace_env.sandbox.tools import execute
from workplace_env.taskgen.base import TEMPLATES, Draft, Template
from workplace_env.taskgen.world import SYSTEM_PROMPT, World
from workplace_env.terminal import CommandError, console, episode_progress, plain

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
    """``count`` tasks over the sandbox ``base``, in the format of WorkBench's NeMo task files
    (:func:`iter_tasks`, as a list). Raises ValueError as :func:`iter_tasks` does."""
    return list(iter_tasks(base, count, seed, templates))


def iter_tasks(
    base: BaseTables, count: int, seed: int, templates: Sequence[Template] | None = None
) -> Iterator[dict[str, Any]]:
    """``count`` tasks over the sandbox ``base``, in the format of WorkBench's NeMo task files,
    each yielded as soon as it is made.

    Each task is ``{"id": "gen-s<seed>-<n>" (n from 1), "category", "environment_name":
    "workplace_assistant", "prompt", "system", "ground_truth": [{"name", "arguments": JSON
    text}, ...], "template", "sandbox": {"digest", "origin"} of ``base``}``; an empty ground
    truth means the right answer changes nothing.
    Templates are used in turns, each turn in an order shuffled by ``seed``, so every template
    appears about equally often. Every ground truth is replayed on a fresh session before it is
    accepted, and no tool may answer it with an error or a refusal (:func:`is_failure_output`).

    Deterministic: the same sandbox, ``count``, ``seed`` and templates give the same tasks.
    Prompts repeat (with equal ground truths) only when a template runs out of new ones.

    Raises ValueError (before the first task) when ``count`` is negative, or when no template
    can make a task on ``base`` (e.g. an empty sandbox).
    """
    if count < 0:
        raise ValueError("count must be >= 0")
    return _tasks(base, count, seed, templates)


def _tasks(
    base: BaseTables, count: int, seed: int, templates: Sequence[Template] | None
) -> Iterator[dict[str, Any]]:
    world = World(base)
    rng = Random(seed)
    pool = list(TEMPLATES if templates is None else templates)
    failures = {spec.id: 0 for spec in pool}
    seen: dict[str, str] = {}
    made = 0
    queue: list[Template] = []
    while made < count:
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
        made += 1
        yield {
            "id": f"gen-s{seed}-{made}",
            "category": spec.category,
            "environment_name": ENVIRONMENT_NAME,
            "prompt": draft.prompt,
            "system": SYSTEM_PROMPT,
            "ground_truth": draft.calls,
            "template": spec.id,
            "sandbox": {"digest": base.digest, "origin": base.origin},
        }


def write_jsonl(tasks: Iterable[Mapping[str, Any]], out: IO[str]) -> None:
    """Write one task per line as compact-key JSON (UTF-8 text, ``\n`` line ends), each line
    flushed whole as soon as its task is at hand."""
    for task in tasks:
        out.write(json.dumps(task, ensure_ascii=False) + "\n")
        out.flush()


#: The most tasks one ``generate-tasks`` run makes (about 100 s and 80 MB of JSONL).
MAX_TASK_COUNT = 100_000


def generate_to(data_dir: Path | None, count: int, seed: int, out: Path | None) -> None:
    """Generate ``count`` tasks (``seed``; the CLI bounds ``count`` by :data:`MAX_TASK_COUNT`)
    on the sandbox of ``data_dir`` (None: the embedded one) and write them as JSONL to ``out``
    (None: stdout), each line as soon as its task is made, with a progress bar on stderr; a
    file is followed by ``wrote N tasks to FILE``. Raises
    :class:`~workplace_env.terminal.CommandError`: exit 2 when the sandbox cannot be loaded,
    the count cannot be met or ``out`` cannot be written; exit 130 on Ctrl-C; each naming the
    whole lines written."""
    try:
        base = load_sandbox(data_dir)
    except TablesUnavailableError as exc:
        raise CommandError("cannot load the sandbox:", exc) from exc
    where = "stdout" if out is None else str(out)
    written = 0
    try:
        with contextlib.ExitStack() as opened:
            fh = sys.stdout
            if out is not None:
                fh = opened.enter_context(out.open("w", encoding="utf-8", newline="\n"))
            bars = opened.enter_context(episode_progress())
            bar = bars.add_task("tasks", total=count)
            interrupted = opened.enter_context(stop_on_signals("task"))
            for task in iter_tasks(base, count, seed):
                write_jsonl([task], fh)
                written += 1
                bars.advance(bar)
                if interrupted():
                    raise CommandError(
                        f"interrupted: {counted(written, 'whole task')} written to {where}",
                        exit_code=interrupted.exit_status,
                    )
    except ValueError as exc:
        raise CommandError(f"{exc}; {counted(written, 'task')} written to {where}") from exc
    except BrokenPipeError:
        raise  # a reader gone (stdout, --out /dev/stdout): the CLI exits 141, quietly
    except OSError as exc:
        raise CommandError(f"cannot write {where}:", exc) from exc
    if out is not None:
        console.print(plain(f"wrote {counted(written, 'task')} to {out}"))
