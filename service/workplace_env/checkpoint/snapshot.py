"""A session's snapshot (CONTRACT K1): identity, task, state, its tables as codec JSON, and its
call_id records (T6, T7), so a call retried after a restore replays instead of running twice.

Plain data: the store exports and restores these, the servicer converts them to and from the
``SessionSnapshot`` message, and :mod:`workplace_env.checkpoint.files` keeps them on disk.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from workplace_env.checkpoint.codec import CodecError, decode_state
from workplace_env.errors import FieldViolation, InvalidRequest
from workplace_env.model import (
    EpisodeId,
    Task,
    TaskId,
    call_id_violations,
    episode_violations,
    session_id_violations,
    task_id_violations,
    task_violations,
)
from workplace_env.sandbox.table import Table
from workplace_env.sandbox.tables import BaseTables
from workplace_env.wire import is_json_text

#: Bytes of a call record's ``call`` digest (BLAKE2b-128, see ``sessions.CallRecord``).
CALL_DIGEST_BYTES = 16


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
    """Validate a snapshot's identity, task, call records and tables; return the decoded
    tables by key.

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
        return decode_state(snapshot.state, base.tables, f"{where}.state_json")
    except CodecError as exc:
        raise InvalidRequest([FieldViolation(exc.field, exc.message)], snapshot.session_id) from exc
