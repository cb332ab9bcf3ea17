"""A session's snapshot (CONTRACT K1): identity, task, state, its tables as codec JSON, and its
call_id records (T6, T7), so a call retried after a restore replays instead of running twice.

Plain data: the store exports and restores these, the servicer converts them to and from the
``SessionSnapshot`` message, and :mod:`workplace_env.checkpoint.files` keeps them on disk.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workplace_env.checkpoint.codec import CodecError, decode_state
from workplace_env.errors import FieldViolation, InvalidRequest
from workplace_env.identity import (
    EpisodeId,
    Task,
    TaskId,
    call_id_violations,
    episode_violations,
    session_id_violations,
    task_id_violations,
    task_violations,
)
from workplace_env.sandbox.table import Table, is_missing
from workplace_env.sandbox.tables import (
    ANALYTICS,
    CALENDAR,
    DIRECTORY,
    EMAILS,
    PLOTS,
    BaseTables,
)
from workplace_env.wire import find_uncarriable, is_json_text, lone_surrogate

#: Bytes of a call record's ``call`` digest (BLAKE2b-128, see ``sessions.CallRecord``).
CALL_DIGEST_BYTES = 16


_TEXT = frozenset({str})

#: The cell types of the columns no tool stores a caller's value in: the loader's text (every
#: CSV column is read as str, ``user_engaged`` as bool) and the values the tools generate there
#: (ids, the sender, the fixed timestamp, a plot's path, the durations a plot turns to float).
#: A missing cell (None, NaN) is valid in every column. The other columns (an email's subject
#: and body, an event's name, start and duration, every task and customer column, which the
#: update tools can set) hold whatever JSON value a tool stored as sent (tool docstrings), so
#: any JSON value is valid there. Source: the loader (``sandbox.tables``) and the tools' writes.
CELL_TYPES: Mapping[str, Mapping[str, frozenset[type]]] = {
    DIRECTORY: {"email_address": _TEXT},
    EMAILS: {c: _TEXT for c in ("email_id", "inbox/outbox", "sender/recipient", "sent_datetime")},
    CALENDAR: {"event_id": _TEXT, "participant_email": _TEXT},
    ANALYTICS: {
        **{c: _TEXT for c in ("date_of_visit", "visitor_id", "page_views", "traffic_source")},
        "session_duration_seconds": frozenset({str, float}),
        "user_engaged": frozenset({bool}),
    },
    PLOTS: {"file_path": _TEXT},
}


def cell_violations(
    tables: Mapping[str, Table], where: str, session_id: str = ""
) -> list[FieldViolation]:
    """The first cell of each column that no tool could have stored: of a type that column of
    :data:`CELL_TYPES` never holds, or, in any column, holding text UTF-8 cannot carry (a lone
    surrogate: no tool output, export or checkpoint file could hold it; tools refuse such
    arguments). Named ``<where>.containers.<table>.data[<row>][<col>]``; the description names
    the session, table, row and column (such a cell breaks the next tool that reads it: a dict
    email id fails every later send)."""
    out: list[FieldViolation] = []
    for key, table in tables.items():
        types = CELL_TYPES.get(key, {})
        for col, name in enumerate(table.columns):
            allowed = types.get(name)
            for row, value in enumerate(table.data[name]):
                why = _cell_problem(value, allowed)
                if why is not None:
                    out.append(
                        FieldViolation(
                            f"{where}.containers.{key}.data[{row}][{col}]",
                            f"session {session_id!r}, table {key}, row {row}, column {name!r}: "
                            f"{why}",
                        )
                    )
                    break
    return out


def _cell_problem(value: Any, allowed: frozenset[type] | None) -> str | None:
    """Why ``value`` is not a valid cell of a column holding ``allowed`` types (None: any JSON
    value), or None."""
    if allowed is not None and type(value) not in allowed and not is_missing(value):
        kinds = " or ".join(sorted(t.__name__ for t in allowed))
        return (
            f"{value!r} ({type(value).__name__}) is not a valid cell; this column holds "
            f"{kinds} or null"
        )
    if type(value) is str and lone_surrogate(value) is None:
        return None  # the common cell, checked without a walk
    if isinstance(value, str | list | dict):
        problem = find_uncarriable(value, constants=True)
        if problem is not None:
            return f"the cell{problem[0]} holds {problem[1]}"
    return None


@dataclass(frozen=True, slots=True)
class CallSnapshot:
    """One call_id record as exported: the key, the digest of tool and arguments, the output
    JSON text, and ``age_s``, seconds between the call and the export (>= 0)."""

    call_id: str
    call: bytes
    output: str
    age_s: float


@dataclass(frozen=True)
class Snapshot:
    """One session as exported: ``state`` is the WorkplaceCheckpointState dict
    (``{"schema_version", "containers"}``); ``session_state`` is SEEDED or VERIFIED;
    ``calls`` are its call_id records, oldest first (empty in older checkpoints);
    ``write_bytes`` the bytes its write calls added (``max_session_write_bytes``; 0 in older
    checkpoints)."""

    session_id: str
    episode: EpisodeId | None
    task_id: TaskId | None
    task: Task | None
    legacy: bool
    state: Any
    session_state: str = "SEEDED"
    calls: tuple[CallSnapshot, ...] = ()
    write_bytes: int = 0


@dataclass(frozen=True, slots=True)
class FenceSnapshot:
    """A closed id as exported (C1, C3): its typed episode (None: legacy or never seeded) and
    ``age_s``, seconds between the close and the export (>= 0)."""

    session_id: str
    age_s: float
    episode: EpisodeId | None = None


#: What to do with a batch whose id is both a snapshot and a fence (a save by an older build
#: while that session closed): the fence is the truth at the end of that save.
SNAPSHOT_AND_FENCE_FIX = (
    "Send its fence without its snapshot (it had closed by the end of the save); "
    "`workplace-env checkpoint restore` does so"
)


def fence_violations(
    fences: Sequence[FenceSnapshot], snapshot_at: Mapping[str, int]
) -> list[FieldViolation]:
    """Violations of a restore's fences, each named ``fences[i].<field>``: an id malformed,
    repeated, or also a snapshot's (``snapshot_at``: each snapshot's id to its index; the
    violation names that snapshot and says which to keep), an episode malformed, an age
    negative or not finite."""
    out: list[FieldViolation] = []
    seen: set[str] = set()
    for i, fence in enumerate(fences):
        path = f"fences[{i}]"
        out += session_id_violations(fence.session_id, f"{path}.resources_session_id")
        if fence.session_id in snapshot_at:
            out.append(
                FieldViolation(
                    f"{path}.resources_session_id",
                    f"is also snapshots[{snapshot_at[fence.session_id]}]'s: the session closed "
                    f"while the checkpoint was saved. {SNAPSHOT_AND_FENCE_FIX}",
                )
            )
        elif fence.session_id in seen:
            out.append(FieldViolation(f"{path}.resources_session_id", "appears twice in the batch"))
        seen.add(fence.session_id)
        if fence.episode is not None:
            out += episode_violations(fence.episode, f"{path}.episode_id")
        if not math.isfinite(fence.age_s) or fence.age_s < 0:
            out.append(FieldViolation(f"{path}.age", "must be a duration >= 0"))
    return out


def call_violations(calls: tuple[CallSnapshot, ...], where: str) -> list[FieldViolation]:
    """Violations of a snapshot's call records, each named ``<where>.call_records[j].<field>``:
    a call_id empty, over-long or repeated, a digest not 16 bytes, an output not JSON text, an
    age negative or not finite."""
    out: list[FieldViolation] = []
    seen: set[str] = set()
    for j, record in enumerate(calls):
        path = f"{where}.call_records[{j}]"
        if not record.call_id:
            out.append(FieldViolation(f"{path}.call_id", "required"))
        out += call_id_violations(record.call_id, f"{path}.call_id")
        if record.call_id in seen:
            out.append(FieldViolation(f"{path}.call_id", "appears twice in the session"))
        seen.add(record.call_id)
        if len(record.call) != CALL_DIGEST_BYTES:
            out.append(FieldViolation(f"{path}.call_digest", f"must be {CALL_DIGEST_BYTES} bytes"))
        if not is_json_text(record.output):
            out.append(FieldViolation(f"{path}.output", "not JSON text"))
        if not math.isfinite(record.age_s) or record.age_s < 0:
            out.append(FieldViolation(f"{path}.age", "must be a duration >= 0"))
    return out


def decode_snapshot(snapshot: Snapshot, base: BaseTables, where: str) -> dict[str, Table]:
    """Validate a snapshot's identity, task, call records and tables (their codec, then every
    cell's type, :func:`cell_violations`); return the decoded tables by key.

    Raises InvalidRequest whose violations name ``where`` (e.g. ``snapshots[3]``) and the
    field (K2).
    """
    violations = [*session_id_violations(snapshot.session_id, f"{where}.resources_session_id")]
    if not snapshot.legacy:
        violations += episode_violations(snapshot.episode, f"{where}.episode_id")
        violations += task_id_violations(snapshot.task_id, f"{where}.task_id")
    violations += task_violations(snapshot.task, f"{where}.task")
    if snapshot.session_state not in ("SEEDED", "VERIFIED"):
        violations.append(FieldViolation(f"{where}.state", "must be SEEDED or VERIFIED"))
    violations += call_violations(snapshot.calls, where)
    if violations:
        raise InvalidRequest(violations, snapshot.session_id)
    try:
        tables = decode_state(snapshot.state, base.tables, f"{where}.state_json")
    except CodecError as exc:
        raise InvalidRequest([FieldViolation(exc.field, exc.message)], snapshot.session_id) from exc
    violations = cell_violations(tables, f"{where}.state_json", snapshot.session_id)
    if violations:
        raise InvalidRequest(violations, snapshot.session_id)
    return tables
