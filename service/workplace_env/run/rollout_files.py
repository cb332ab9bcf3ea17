"""The files of a model run into ``--out``, and which of their lines are finished.

Beside the rollouts JSONL (NeMo Gym's rollout shape plus ``workplace_env`` diagnostics) go NeMo
Gym's ``<stem>_materialized_inputs.jsonl`` (every pair's row with its
``responses_create_params``, ``_ng_task_index`` and ``_ng_rollout_index``), the summary JSON,
the pass-rate plot and the lock file of the run writing them (:func:`only_run_into`: one run
writes an output file at a time).

A rollout line is finished when it is scored (not masked) or failed by the model itself
(``agent_run_error``); episodes masked by the endpoint or the environment (``provider_*``,
``session_*``) are played again by a rerun. Lines are strict JSON (:func:`json_line`). An
existing ``--out`` is recognised before anything in it is dropped (:func:`own_rollout_lines`):
only its last line, when cut short by a crash (no closing newline), is skipped; any other line
that is no rollout line refuses the file.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from workplace_env.locks import lock_file_of, only_writer
from workplace_env_client import checks
from workplace_env_client.rollouts import MASK_KINDS

#: Masked failures that the model caused; resume does not play these again.
FINISHED_FAILURES = frozenset(kind for kind, what in MASK_KINDS.items() if what.model_own)


def materialized_inputs_path(out: Path) -> Path:
    """NeMo Gym's companion file: ``rollouts.jsonl`` -> ``rollouts_materialized_inputs.jsonl``."""
    return out.with_name(out.stem + "_materialized_inputs.jsonl")


def plot_path(out: Path) -> Path:
    """Where the pass-rate plot goes: ``rollouts.jsonl`` -> ``rollouts_pass_rate.png``."""
    return out.with_name(out.stem + "_pass_rate.png")


def summary_path(out: Path) -> Path:
    """Where the summary JSON goes: ``rollouts.jsonl`` -> ``rollouts_summary.json``."""
    return out.with_name(out.stem + "_summary.json")


def lock_path(out: Path) -> Path:
    """The lock file of a collection into ``out``: ``rollouts.jsonl`` -> ``rollouts.jsonl.lock``
    (:func:`~workplace_env.locks.lock_file_of`, so a run and any command writing ``out`` exclude
    each other)."""
    return lock_file_of(out)


def output_files(out: Path) -> list[Path]:
    """The files a collection into ``out`` writes: rollouts, materialized inputs, summary, plot."""
    return [out, materialized_inputs_path(out), summary_path(out), plot_path(out)]


def run_outputs(out: Path) -> list[tuple[str, Path]]:
    """Every file a model run into ``out`` writes (:func:`output_files` and the lock), each with
    how a message names it: ``"--out OUT"``, ``"--out OUT's file NAME"``."""
    named = [(f"--out {out}", out)]
    named += [(f"--out {out}'s file {p.name}", p) for p in [*output_files(out)[1:], lock_path(out)]]
    return named


def rollout_key(line: Mapping[str, Any]) -> tuple[int, int, str]:
    """Which episode a rollout line or materialized input is: ``(_ng_task_index,
    _ng_rollout_index, the id as JSON)`` (-1 for a missing index; an id of ``0`` and one of
    ``"0"`` are different rows)."""
    return (
        int(line.get("_ng_task_index", -1)),
        int(line.get("_ng_rollout_index", -1)),
        json.dumps(line.get("id"), sort_keys=True, default=str),
    )


def is_finished(line: Mapping[str, Any]) -> bool:
    """True when a rollout line needs no replay (see the module docstring)."""
    return not line.get("mask_sample") or line.get("failure_kind") in FINISHED_FAILURES


class NotRolloutsFile(ValueError):
    """An existing ``--out`` that is not a rollouts file: the message names the file, the first
    line that is no rollout line (or that none is) and the way out (``--overwrite``)."""


def _rollout_line_problem(text: bytes, is_last: bool) -> tuple[str, dict[str, Any] | None]:
    """``("", line)`` for a rollout line, ``("", None)`` for a last line cut short by a crash,
    else ``(why, None)``."""
    try:
        line = json.loads(text)
    except ValueError:  # not JSON, or not UTF-8 text
        if is_last and not text.endswith(b"\n"):
            return "", None  # an append interrupted mid-line
        return "not JSON", None
    if not isinstance(line, dict):
        return "not a JSON object", None
    indices = (line.get("_ng_task_index"), line.get("_ng_rollout_index"))
    if not all(type(i) is int for i in indices):
        return "no integer _ng_task_index and _ng_rollout_index", None
    return "", line


def own_rollout_lines(out: Path) -> list[dict[str, Any]]:
    """The rollout lines of an existing ``out`` in file order (none when it is missing or
    blank), its last line skipped when cut short by a crash (no closing newline). Raises
    :class:`NotRolloutsFile` when any other non-blank line is not a JSON object with integer
    ``_ng_task_index`` and ``_ng_rollout_index``, or when no line is one: a file of another
    kind (notes, a summary JSON, a task file) is never resumed, so nothing in it is dropped."""
    if not out.exists():
        return []
    with out.open("rb") as fh:
        texts = [text for text in fh if text.strip()]
    lines: list[dict[str, Any]] = []
    for number, text in enumerate(texts, 1):
        why, line = _rollout_line_problem(text, number == len(texts))
        if why:
            raise NotRolloutsFile(
                f"{out} is not a rollouts file (its non-blank line {number} is {why}); nothing "
                "played. Use another --out, or add --overwrite to replace it."
            )
        if line is not None:
            lines.append(line)
    if texts and not lines:
        raise NotRolloutsFile(
            f"{out} is not a rollouts file (it holds no rollout line); nothing played. Use "
            "another --out, or add --overwrite to replace it."
        )
    return lines


def read_finished(out: Path) -> list[dict[str, Any]]:
    """The finished lines of an existing output file (the last line of a key wins), read by
    :func:`own_rollout_lines` (raising :class:`NotRolloutsFile` as it does)."""
    kept = {rollout_key(line): line for line in own_rollout_lines(out)}
    return [line for line in kept.values() if is_finished(line)]


def read_rollouts(
    out: Path, keys: frozenset[tuple[int, int, str]] | None = None
) -> list[dict[str, Any]]:
    """The rollout lines of ``out`` (the last line of a key wins), only those of ``keys`` when
    given."""
    kept: dict[tuple[int, int, str], dict[str, Any]] = {}
    with out.open("rb") as fh:
        for text in fh:
            try:
                line = json.loads(text)
            except ValueError:  # blank, cut short by a crash, or not UTF-8 text
                continue
            if isinstance(line, dict) and (keys is None or rollout_key(line) in keys):
                kept[rollout_key(line)] = line
    return list(kept.values())


def json_values(path: Path) -> list[Any]:
    """The JSON values of a file's non-blank lines; a line that is not JSON is ``None``."""
    values: list[Any] = []
    with path.open("rb") as fh:
        for text in fh:
            if not text.strip():
                continue
            try:
                values.append(json.loads(text))
            except ValueError:  # not JSON, or not UTF-8 text
                values.append(None)
    return values


def json_line(line: Mapping[str, Any]) -> str:
    """``line`` as one line of strict JSON (UTF-8 text, no NaN or infinities, no integer
    beyond a float's range), ending in ``\\n``. Raises ValueError naming the first part that
    cannot be written so (:func:`~workplace_env_client.checks.json_problem`)."""
    problem = checks.json_problem(line, "line", strict=True)
    if problem is not None:
        raise ValueError(f"{problem[0]}: {problem[1]}")
    return json.dumps(line, ensure_ascii=False, allow_nan=False) + "\n"


def write_lines(path: Path, lines: Iterable[Mapping[str, Any]]) -> None:
    """Replace ``path`` by ``lines``, each a :func:`json_line`, at once (a temporary file
    synced, then renamed over it). Raises ValueError for a line that cannot be strict JSON,
    OSError when the file cannot be written."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(json_line(line))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def only_run_into(out: Path) -> contextlib.AbstractContextManager[None]:
    """Hold ``out``'s lock file (:func:`lock_path`, its directory created when missing) for a
    whole collection: one run writes ``out`` at a time. Entering raises
    :class:`~workplace_env.locks.WriterBusy` at once when another run holds it (the message names
    the lock file, ``out`` and the holder's pid), OSError when the lock file cannot be written."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return only_writer(lock_path(out), f"another run is writing {out}")
