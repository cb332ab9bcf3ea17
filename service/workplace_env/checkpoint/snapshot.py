"""A session's snapshot (CONTRACT K1): identity, task, state, and its tables as codec JSON.

Plain data: the store exports and restores these, the servicer converts them to and from the
``SessionSnapshot`` message, and :mod:`workplace_env.checkpoint.files` keeps them on disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workplace_env.checkpoint.codec import CodecError, decode_state
from workplace_env.errors import FieldViolation, InvalidRequest
from workplace_env.model import (
    EpisodeId,
    Task,
    TaskId,
    episode_violations,
    session_id_violations,
    task_id_violations,
    task_violations,
)
from workplace_env.sandbox.table import Table
from workplace_env.sandbox.tables import BaseTables


@dataclass(frozen=True)
class Snapshot:
    """One session as exported: ``state`` is the WorkplaceCheckpointState dict
    (``{"schema_version", "containers"}``); ``session_state`` is SEEDED or VERIFIED."""

    session_id: str
    episode: EpisodeId | None
    task_id: TaskId | None
    task: Task | None
    legacy: bool
    state: Any
    session_state: str = "SEEDED"


def decode_snapshot(snapshot: Snapshot, base: BaseTables, where: str) -> dict[str, Table]:
    """Validate a snapshot's identity, task and tables; return the decoded tables by key.

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
    if violations:
        raise InvalidRequest(violations, snapshot.session_id)
    try:
        return decode_state(snapshot.state, base.tables, f"{where}.state_json")
    except CodecError as exc:
        raise InvalidRequest([FieldViolation(exc.field, exc.message)], snapshot.session_id) from exc
