"""Messages <-> domain values, shared by the environment and admin servicers."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from workplace.env.v1 import admin_pb2 as admin_pb
from workplace.env.v1 import environment_pb2 as pb
from workplace_env.checkpoint.snapshot import Snapshot
from workplace_env.errors import FieldViolation, InvalidRequest
from workplace_env.model import EpisodeId, FunctionCall, Task, TaskId


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
    )


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
    )


def optional(request: Any, field: str, convert: Any) -> Any:
    """``convert(request.<field>)`` when the message field is set, else None."""
    return convert(getattr(request, field)) if request.HasField(field) else None


def task_id(message: pb.TaskId) -> TaskId:
    """A ``TaskId`` message as the domain value."""
    return TaskId(message.taskset, message.task_id)


def snapshot(message: admin_pb.SessionSnapshot, where: str) -> Snapshot:
    """A ``SessionSnapshot`` message as the domain snapshot; its state JSON is parsed here.

    Raises InvalidRequest naming ``where.state_json`` when that is not JSON.
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
    )


def snapshot_message(value: Snapshot) -> admin_pb.SessionSnapshot:
    """The domain snapshot as a ``SessionSnapshot`` message."""
    message = admin_pb.SessionSnapshot(
        resources_session_id=value.session_id,
        legacy=value.legacy,
        state_json=json.dumps(value.state, ensure_ascii=False, separators=(",", ":")),
        state=pb.SessionState.Value(f"SESSION_STATE_{value.session_state}"),
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
