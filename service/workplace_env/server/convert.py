"""Messages <-> domain values, shared by the environment and admin servicers."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from workplace.env.v1 import admin_pb2 as admin_pb
from workplace.env.v1 import environment_pb2 as pb
from workplace_env.checkpoint.snapshot import CallSnapshot, FenceSnapshot, Snapshot
from workplace_env.errors import FieldViolation, InvalidRequest
from workplace_env.identity import EpisodeId, FunctionCall, Task, TaskId
from workplace_env.memo import BoundedMemo


def episode(message: pb.EpisodeId) -> EpisodeId:
    """An ``EpisodeId`` message as the domain value."""
    return EpisodeId(rollout_id=message.rollout_id, attempt=message.attempt)


def calls(messages: Iterable[pb.FunctionCall]) -> tuple[FunctionCall, ...]:
    """``FunctionCall`` messages as domain calls, in order."""
    return tuple(FunctionCall(m.name, m.arguments) for m in messages)


def task(message: pb.WorkplaceTask) -> Task:
    """A ``WorkplaceTask`` message as the domain task."""
    return Task(
        id=message.id,
        category=message.category,
        environment_name=message.environment_name,
        ground_truth=calls(message.ground_truth),
        prompt=message.prompt,
        system=message.system,
        data_digest=message.data_digest,
    )


class TaskMemo:
    """:func:`task` remembered by the message's bytes, for up to ``max_entries`` tasks of at
    most ``max_bytes`` each (about 20 MB at most with the defaults; a larger task is converted
    every time).

    A task is seeded once per rollout of it, so most seeds carry a task seen before; the
    remembered :class:`Task` is the same immutable value and carries its digest and checks
    (:func:`~workplace_env.sessions.types.task_digest`, :func:`~workplace_env.identity.
    task_violations`), so a repeat does not convert, check or digest it again. Equal bytes
    parse to equal messages, so a hit is always the task :func:`task` would build. Thread-safe
    (single dictionary operations); when full it starts over.
    """

    def __init__(self, max_entries: int = 512, max_bytes: int = 16_384) -> None:
        self.max_bytes = max_bytes
        self._tasks: BoundedMemo[bytes, Task] = BoundedMemo(max_entries)

    def __call__(self, message: pb.WorkplaceTask) -> Task:
        key = message.SerializeToString()
        value = self._tasks.entries.get(key)
        if value is None:
            value = task(message)
            if len(key) <= self.max_bytes:
                self._tasks.put(key, value)
        return value


def task_message(value: Task) -> pb.WorkplaceTask:
    """The domain task as a ``WorkplaceTask`` message."""
    return pb.WorkplaceTask(
        id=value.id,
        category=value.category,
        environment_name=value.environment_name,
        ground_truth=[
            pb.FunctionCall(name=c.name, arguments=c.arguments) for c in value.ground_truth
        ],
        prompt=value.prompt,
        system=value.system,
        data_digest=value.data_digest,
    )


def optional(request: Any, field: str, convert: Any) -> Any:
    """``convert(request.<field>)`` when the message field is set, else None."""
    return convert(getattr(request, field)) if request.HasField(field) else None


def task_id(message: pb.TaskId) -> TaskId:
    """A ``TaskId`` message as the domain value."""
    return TaskId(message.taskset, message.task_id)


def _age_s(message: Any) -> float | None:
    """The seconds of a message's ``age`` Duration, or None when unset or not normalised and
    non-negative."""
    age = message.age
    if not message.HasField("age") or age.seconds < 0 or not 0 <= age.nanos < 1_000_000_000:
        return None
    return age.seconds + age.nanos / 1e9


def _set_age(message: Any, age_s: float) -> None:
    """Set a message's ``age`` Duration to ``age_s`` seconds (to the nanosecond)."""
    nanos = round(age_s * 1e9)
    message.age.seconds, message.age.nanos = divmod(nanos, 1_000_000_000)


def fence(message: admin_pb.SessionFence, where: str) -> FenceSnapshot:
    """A ``SessionFence`` message as the domain fence (validated by the store's restore).

    Raises InvalidRequest naming ``where.age`` when the age is unset or not a normalised,
    non-negative ``Duration``.
    """
    age_s = _age_s(message)
    if age_s is None:
        raise InvalidRequest(
            [FieldViolation(f"{where}.age", "must be a duration >= 0")],
            message.resources_session_id,
        )
    return FenceSnapshot(
        message.resources_session_id, age_s, optional(message, "episode_id", episode)
    )


def fence_message(value: FenceSnapshot) -> admin_pb.SessionFence:
    """The domain fence as a ``SessionFence`` message."""
    message = admin_pb.SessionFence(resources_session_id=value.session_id)
    if value.episode is not None:
        message.episode_id.CopyFrom(
            pb.EpisodeId(rollout_id=value.episode.rollout_id, attempt=value.episode.attempt)
        )
    _set_age(message, value.age_s)
    return message


def call_records(
    messages: Iterable[admin_pb.CallRecord], where: str, session_id: str
) -> tuple[CallSnapshot, ...]:
    """``CallRecord`` messages as domain records (validated by ``decode_snapshot``).

    Raises InvalidRequest naming ``where.call_records[j].age`` when the age is unset or not a
    normalised, non-negative ``Duration``.
    """
    out = []
    for j, m in enumerate(messages):
        age_s = _age_s(m)
        if age_s is None:
            raise InvalidRequest(
                [FieldViolation(f"{where}.call_records[{j}].age", "must be a duration >= 0")],
                session_id,
            )
        out.append(CallSnapshot(m.call_id, m.call_digest, m.output, age_s))
    return tuple(out)


def call_record_message(value: CallSnapshot) -> admin_pb.CallRecord:
    """A domain call record as a ``CallRecord`` message (age to the nanosecond)."""
    message = admin_pb.CallRecord(
        call_id=value.call_id, call_digest=value.call, output=value.output
    )
    _set_age(message, value.age_s)
    return message


def snapshot(message: admin_pb.SessionSnapshot, where: str) -> Snapshot:
    """A ``SessionSnapshot`` message as the domain snapshot; its state JSON is parsed here.

    Raises InvalidRequest naming ``where.state_json`` when that is not JSON, or a call
    record's age when it is malformed (see :func:`call_records`).
    """
    try:
        state = json.loads(message.state_json)
    except (ValueError, RecursionError) as exc:
        raise InvalidRequest(
            [FieldViolation(f"{where}.state_json", f"not JSON: {exc}")],
            message.resources_session_id,
        ) from exc
    if message.state not in pb.SessionState.values():
        raise InvalidRequest(
            [FieldViolation(f"{where}.state", f"unknown session state {message.state}")],
            message.resources_session_id,
        )
    return Snapshot(
        session_id=message.resources_session_id,
        episode=optional(message, "episode_id", episode),
        task_id=optional(message, "task_id", task_id),
        task=optional(message, "task", task),
        legacy=message.legacy,
        state=state,
        session_state=pb.SessionState.Name(message.state).removeprefix("SESSION_STATE_"),
        calls=call_records(message.call_records, where, message.resources_session_id),
        write_bytes=message.write_bytes,
    )


def snapshot_message(value: Snapshot) -> admin_pb.SessionSnapshot:
    """The domain snapshot as a ``SessionSnapshot`` message."""
    message = admin_pb.SessionSnapshot(
        resources_session_id=value.session_id,
        legacy=value.legacy,
        state_json=json.dumps(value.state, ensure_ascii=False, separators=(",", ":")),
        state=pb.SessionState.Value(f"SESSION_STATE_{value.session_state}"),
        call_records=[call_record_message(c) for c in value.calls],
        write_bytes=value.write_bytes,
    )
    if value.episode is not None:
        message.episode_id.CopyFrom(
            pb.EpisodeId(rollout_id=value.episode.rollout_id, attempt=value.episode.attempt)
        )
    if value.task_id is not None:
        message.task_id.CopyFrom(
            pb.TaskId(taskset=value.task_id.taskset, task_id=value.task_id.task_id)
        )
    if value.task is not None:
        message.task.CopyFrom(task_message(value.task))
    return message
