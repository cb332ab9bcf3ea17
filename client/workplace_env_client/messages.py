"""Requests and answers of the environment service, shared by the sync and asyncio clients.

Each ``*_request`` function builds the message an SDK method sends; each ``*_answer`` function
turns the response into the SDK's return value. The two clients differ only in how they wait.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from workplace.env.v1 import environment_pb2 as pb

#: A call as the SDK accepts it: a ``(name, arguments)`` pair or a ``{"name", "arguments"}`` map,
#: arguments as JSON text or as a JSON-ready mapping.
CallLike = Union[tuple[str, Union[str, Mapping[str, Any]]], Mapping[str, Any]]  # noqa: UP007
#: An episode as ``(rollout_id, attempt)`` or the message.
EpisodeLike = Union[tuple[str, int], pb.EpisodeId]  # noqa: UP007
#: A task as a dataset row (tasks JSONL) or the message.
TaskLike = Union[Mapping[str, Any], pb.WorkplaceTask]  # noqa: UP007


@dataclass(frozen=True)
class TableDiff:
    """One compared table of a verify: equal or not, and both row counts."""

    table: str
    equal: bool
    predicted_rows: int
    expected_rows: int


@dataclass(frozen=True)
class VerifyResult:
    """A verify's answer: ``reward`` (0.0 or 1.0), ``mask_sample``, why, and per-table results.

    ``failure_kind`` is ``""`` or ``"session_lost"`` (the reference's spelling).
    """

    reward: float
    mask_sample: bool
    failure_kind: str
    failure_reason: str
    tables: tuple[TableDiff, ...]


def arguments_text(arguments: str | Mapping[str, Any] | None) -> str:
    """Arguments as the JSON text the wire carries (``{}`` for None)."""
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


def to_function_call(call: CallLike) -> pb.FunctionCall:
    """A :data:`CallLike` as a ``FunctionCall`` message."""
    if isinstance(call, Mapping):
        return pb.FunctionCall(name=call["name"], arguments=arguments_text(call.get("arguments")))
    name, arguments = call
    return pb.FunctionCall(name=name, arguments=arguments_text(arguments))


def task_from_row(row: Mapping[str, Any]) -> pb.WorkplaceTask:
    """A dataset row (tasks JSONL: ``id, category, environment_name, ground_truth, ...``) as a task.

    A ground truth given as a JSON string is kept out of the typed task (send it with
    ``verify(ground_truth_json=...)``); other missing fields are left empty. ``data_digest``
    is :func:`row_digest` of the whole row, so a retried seed must send the same row.
    """
    truth = row.get("ground_truth") or []
    return pb.WorkplaceTask(
        id=str(row.get("id", "")),
        category=str(row.get("category") or ""),
        environment_name=str(row.get("environment_name") or ""),
        ground_truth=[to_function_call(c) for c in truth] if isinstance(truth, list) else [],
        prompt=str(row.get("prompt") or ""),
        system=str(row.get("system") or ""),
        data_digest=row_digest(row),
    )


def row_digest(row: Mapping[str, Any]) -> str:
    """BLAKE2b (16 bytes, hex) of ``row``'s canonical JSON (sorted keys; a value JSON cannot
    hold is written as its ``str``)."""
    try:
        text = json.dumps(row, sort_keys=True, ensure_ascii=False, default=str)
    except TypeError:  # keys of mixed types cannot be sorted: their order as given
        text = json.dumps(row, ensure_ascii=False, default=str)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def task_message(task: TaskLike) -> pb.WorkplaceTask:
    """A :data:`TaskLike` as the message."""
    return task if isinstance(task, pb.WorkplaceTask) else task_from_row(task)


def episode_message(episode: EpisodeLike) -> pb.EpisodeId:
    """An :data:`EpisodeLike` as the message."""
    if isinstance(episode, pb.EpisodeId):
        return episode
    rollout_id, attempt = episode
    return pb.EpisodeId(rollout_id=rollout_id, attempt=attempt)


def new_call_id() -> str:
    """A fresh idempotency key for a tool call (AIP-155 request id)."""
    return f"c-{uuid.uuid4().hex}"


def seed_request(
    session_id: str, episode: EpisodeLike, task_id: tuple[str, str], task: TaskLike
) -> pb.SeedSessionRequest:
    """A typed seed (CONTRACT S1)."""
    return pb.SeedSessionRequest(
        resources_session_id=session_id,
        episode_id=episode_message(episode),
        task_id=pb.TaskId(taskset=task_id[0], task_id=task_id[1]),
        task=task_message(task),
    )


def legacy_seed_request(session_id: str, task: TaskLike) -> pb.SeedSessionRequest:
    """A legacy (cookie) seed: no episode or task id."""
    return pb.SeedSessionRequest(
        resources_session_id=session_id, task=task_message(task), legacy=True
    )


def call_tool_request(
    session_id: str, name: str, arguments: str | Mapping[str, Any] | None, call_id: str
) -> pb.CallToolRequest:
    """A tool call; an empty ``call_id`` gets a fresh one (a retry then replays, T6)."""
    return pb.CallToolRequest(
        resources_session_id=session_id,
        tool_name=name,
        arguments=arguments_text(arguments),
        call_id=call_id or new_call_id(),
    )


def verify_request(
    session_id: str,
    function_calls: Iterable[CallLike] | None,
    response_output: Sequence[Any] | str | None,
    ground_truth: Iterable[CallLike] | None,
    ground_truth_json: str | None,
) -> pb.VerifyRequest:
    """A verify of a call list or of a raw Responses-API ``output`` array."""
    request = pb.VerifyRequest(resources_session_id=session_id)
    if response_output is not None:
        request.response_output_json = (
            response_output
            if isinstance(response_output, str)
            else json.dumps(list(response_output), ensure_ascii=False)
        )
    else:
        request.function_calls.SetInParent()
        request.function_calls.calls.extend(to_function_call(c) for c in (function_calls or []))
    if ground_truth_json is not None:
        request.ground_truth_json = ground_truth_json
    elif ground_truth is not None:
        request.ground_truth.SetInParent()
        request.ground_truth.calls.extend(to_function_call(c) for c in ground_truth)
    return request


def verify_answer(response: pb.VerifyResponse) -> VerifyResult:
    """The :class:`VerifyResult` of a verify response."""
    kind = ""
    if response.failure_kind != pb.FAILURE_KIND_UNSPECIFIED:
        kind = pb.FailureKind.Name(response.failure_kind).removeprefix("FAILURE_KIND_").lower()
    return VerifyResult(
        reward=response.reward,
        mask_sample=response.mask_sample,
        failure_kind=kind,
        failure_reason=response.failure_reason,
        tables=tuple(
            TableDiff(t.table, t.equal, t.predicted_rows, t.expected_rows) for t in response.tables
        ),
    )


def close_request(session_id: str, episode: EpisodeLike) -> pb.CloseSessionRequest:
    """A close of ``session_id`` for ``episode``."""
    return pb.CloseSessionRequest(
        resources_session_id=session_id, episode_id=episode_message(episode)
    )


def close_answer(response: pb.CloseSessionResponse) -> str:
    """``"CLOSED"``, ``"ALREADY_CLOSED"`` or ``"NOT_SEEDED"``."""
    return pb.CloseOutcome.Name(response.outcome).removeprefix("CLOSE_OUTCOME_")


def tools_answer(response: pb.ListToolsResponse) -> list[dict[str, Any]]:
    """The tool schemas as JSON objects, in the reference's order."""
    return [json.loads(t.schema_json) for t in response.tools]
