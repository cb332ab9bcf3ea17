"""The synchronous Python SDK of the workplace environment service.

>>> with EnvironmentClient("localhost:50051") as env:
...     with env.session(task_row, episode=("rollout-7", 0)) as s:
...         s.call_tool("email_search_emails", {"query": "budget"})
...         reward = s.verify([("email_delete_email", '{"email_id": "00000042"}')]).reward

Every RPC has a deadline (``timeout_s``); failures raise the typed exceptions of
:mod:`workplace_env_client.errors`, never a bare ``grpc.RpcError``.

Retries: only idempotent RPCs are retried, by gRPC itself (the channel's service config,
:func:`retry_service_config`), on UNAVAILABLE, within the call's deadline: SeedSession (S2),
CloseSession (C2), Verify (V1, V3), ListTools, and CallTool, which the SDK always sends with a
``call_id`` (generated when the caller gives none) so a retry replays instead of running the
tool twice (T6).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import grpc

from workplace.env.v1 import environment_pb2 as pb
from workplace.env.v1 import environment_pb2_grpc as pb_grpc
from workplace_env_client.errors import WorkplaceEnvError, from_rpc_error

#: A call as the SDK accepts it: a ``(name, arguments)`` pair or a ``{"name", "arguments"}`` map,
#: arguments as JSON text or as a JSON-ready mapping.
CallLike = tuple[str, str | Mapping[str, Any]] | Mapping[str, Any]

DEFAULT_TIMEOUT_S = 30.0
#: Attempts per RPC (the first one included) when the server answers UNAVAILABLE; gRPC caps it at 5.
DEFAULT_MAX_ATTEMPTS = 4
SERVICE = pb.DESCRIPTOR.services_by_name["EnvironmentService"].full_name
#: The RPCs safe to retry: each is idempotent (CallTool through the SDK's call_id).
RETRIED_METHODS = ("SeedSession", "CloseSession", "Verify", "CallTool", "ListTools")
#: Largest message the SDK accepts, in bytes (the server's limit).
MAX_MESSAGE_BYTES = 64 * 1024 * 1024


def retry_service_config(max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> str:
    """The gRPC service config (JSON text) retrying :data:`RETRIED_METHODS` on UNAVAILABLE.

    Backoff: 50 ms, doubling, at most 1 s, randomised by gRPC. Pass it as channel option
    ``("grpc.service_config", ...)`` when you bring your own channel.
    """
    return json.dumps(
        {
            "methodConfig": [
                {
                    "name": [{"service": SERVICE, "method": m} for m in RETRIED_METHODS],
                    "retryPolicy": {
                        "maxAttempts": max_attempts,
                        "initialBackoff": "0.05s",
                        "maxBackoff": "1s",
                        "backoffMultiplier": 2,
                        "retryableStatusCodes": ["UNAVAILABLE"],
                    },
                }
            ]
        }
    )


def channel_options(max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> list[tuple[str, Any]]:
    """Channel options of the SDK: message size and, for ``max_attempts > 1``, retries."""
    options: list[tuple[str, Any]] = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
    if max_attempts > 1:
        options += [
            ("grpc.enable_retries", 1),
            ("grpc.service_config", retry_service_config(max_attempts)),
        ]
    else:
        options.append(("grpc.enable_retries", 0))
    return options


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


def _arguments_text(arguments: str | Mapping[str, Any] | None) -> str:
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


def to_function_call(call: CallLike) -> pb.FunctionCall:
    """A :data:`CallLike` as a ``FunctionCall`` message."""
    if isinstance(call, Mapping):
        return pb.FunctionCall(name=call["name"], arguments=_arguments_text(call.get("arguments")))
    name, arguments = call
    return pb.FunctionCall(name=name, arguments=_arguments_text(arguments))


def task_from_row(row: Mapping[str, Any]) -> pb.WorkplaceTask:
    """A dataset row (tasks JSONL: ``id, category, environment_name, ground_truth, ...``) as a task.

    A ground truth given as a JSON string is kept out of the typed task (send it with
    ``verify(ground_truth_json=...)``); other missing fields are left empty.
    """
    truth = row.get("ground_truth") or []
    return pb.WorkplaceTask(
        id=str(row.get("id", "")),
        category=str(row.get("category") or ""),
        environment_name=str(row.get("environment_name") or ""),
        ground_truth=[to_function_call(c) for c in truth] if isinstance(truth, list) else [],
        prompt=str(row.get("prompt") or ""),
        system=str(row.get("system") or ""),
    )


def _episode(episode: tuple[str, int] | pb.EpisodeId) -> pb.EpisodeId:
    if isinstance(episode, pb.EpisodeId):
        return episode
    rollout_id, attempt = episode
    return pb.EpisodeId(rollout_id=rollout_id, attempt=attempt)


class EnvironmentClient:
    """A client over a ``target`` (``host:port``) or an existing ``channel``.

    ``timeout_s`` is the deadline of every RPC (retries included), in seconds. ``max_attempts``
    bounds the attempts of a retried RPC on UNAVAILABLE (1: no retries); it applies to the
    channel the client creates (for your own channel, see :func:`channel_options`). Use as a
    context manager, or call :meth:`close` to release a channel the client created (a
    passed-in channel is the caller's).
    """

    def __init__(
        self,
        target: str | None = None,
        *,
        channel: grpc.Channel | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        if (target is None) == (channel is None):
            raise ValueError("pass exactly one of target or channel")
        if not 1 <= max_attempts <= 5:
            raise ValueError("max_attempts must be 1..5 (gRPC's limit)")
        self._own_channel = channel is None
        self.channel = (
            channel
            if channel is not None
            else grpc.insecure_channel(target, options=channel_options(max_attempts))
        )
        self.stub = pb_grpc.EnvironmentServiceStub(self.channel)
        self.timeout_s = timeout_s

    def __enter__(self) -> EnvironmentClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the channel if this client created it."""
        if self._own_channel:
            self.channel.close()

    def _invoke(self, method: str, request: Any) -> Any:
        try:
            return getattr(self.stub, method)(request, timeout=self.timeout_s)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from exc

    # -- RPCs --------------------------------------------------------------------------------

    def seed(
        self,
        session_id: str,
        episode: tuple[str, int] | pb.EpisodeId,
        task_id: tuple[str, str],
        task: Mapping[str, Any] | pb.WorkplaceTask,
    ) -> pb.SeedSessionResponse:
        """Seed ``session_id`` (CONTRACT S1-S8). Raises SessionConflictError, SessionClosedError,
        InvalidRequestError, UnavailableError, CapacityError."""
        return self._invoke(
            "SeedSession",
            pb.SeedSessionRequest(
                resources_session_id=session_id,
                episode_id=_episode(episode),
                task_id=pb.TaskId(taskset=task_id[0], task_id=task_id[1]),
                task=task if isinstance(task, pb.WorkplaceTask) else task_from_row(task),
            ),
        )

    def seed_legacy(
        self, session_id: str, task: Mapping[str, Any] | pb.WorkplaceTask
    ) -> pb.SeedSessionResponse:
        """Seed a legacy (cookie) session: no episode or task id; a re-seed rebuilds fresh
        tables, and verify releases them (CONTRACT V2). Raises SessionConflictError when the id
        is a typed session, SessionClosedError, InvalidRequestError."""
        return self._invoke(
            "SeedSession",
            pb.SeedSessionRequest(
                resources_session_id=session_id,
                task=task if isinstance(task, pb.WorkplaceTask) else task_from_row(task),
                legacy=True,
            ),
        )

    def call_tool_raw(
        self,
        session_id: str,
        name: str,
        arguments: str | Mapping[str, Any] | None = None,
        call_id: str = "",
    ) -> str:
        """Call a tool; return its output as JSON text (byte-exact to the reference).

        ``call_id`` is the idempotency key (T6); when empty the SDK generates one, so the
        call can be retried safely (a retry replays the first output).
        """
        response = self._invoke(
            "CallTool",
            pb.CallToolRequest(
                resources_session_id=session_id,
                tool_name=name,
                arguments=_arguments_text(arguments),
                call_id=call_id or f"sdk-{uuid.uuid4().hex}",
            ),
        )
        return response.output

    def call_tool(
        self,
        session_id: str,
        name: str,
        arguments: str | Mapping[str, Any] | None = None,
        call_id: str = "",
    ) -> Any:
        """Call a tool; return its decoded output (str, list, dict, ...).

        Tool failures are outputs (the reference's error texts), not exceptions. Raises
        InvalidRequestError (arguments not a JSON object), SessionLostError (SessionExpiredError
        after eviction), SessionClosedError, CallIdReusedError.
        """
        return json.loads(self.call_tool_raw(session_id, name, arguments, call_id))

    def verify(
        self,
        session_id: str,
        function_calls: Iterable[CallLike] | None = None,
        *,
        response_output: Sequence[Any] | str | None = None,
        ground_truth: Iterable[CallLike] | None = None,
        ground_truth_json: str | None = None,
    ) -> VerifyResult:
        """Score the model's calls (a list, or the raw Responses-API ``response_output``).

        The ground truth defaults to the seeded task's. A session the server does not hold
        gives ``reward 0, mask_sample True, failure_kind "session_lost"`` (no exception).
        """
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
        response = self._invoke("Verify", request)
        return VerifyResult(
            reward=response.reward,
            mask_sample=response.mask_sample,
            failure_kind=""
            if response.failure_kind == pb.FAILURE_KIND_UNSPECIFIED
            else pb.FailureKind.Name(response.failure_kind).removeprefix("FAILURE_KIND_").lower(),
            failure_reason=response.failure_reason,
            tables=tuple(
                TableDiff(t.table, t.equal, t.predicted_rows, t.expected_rows)
                for t in response.tables
            ),
        )

    def close_session(self, session_id: str, episode: tuple[str, int] | pb.EpisodeId) -> str:
        """Close a session; return the outcome ``"CLOSED"``, ``"ALREADY_CLOSED"`` or
        ``"NOT_SEEDED"``. Raises EpisodeMismatchError (C4), ReleaseFailedError (C5: not closed,
        retry)."""
        response = self._invoke(
            "CloseSession",
            pb.CloseSessionRequest(resources_session_id=session_id, episode_id=_episode(episode)),
        )
        return pb.CloseOutcome.Name(response.outcome).removeprefix("CLOSE_OUTCOME_")

    def list_tools(self) -> list[dict[str, Any]]:
        """The 27 tool schemas as the model sees them (JSON objects, in the reference's order)."""
        response = self._invoke("ListTools", pb.ListToolsRequest())
        return [json.loads(t.schema_json) for t in response.tools]

    # -- the episode context manager ---------------------------------------------------------

    @contextmanager
    def session(
        self,
        task: Mapping[str, Any] | pb.WorkplaceTask,
        *,
        episode: tuple[str, int] | None = None,
        task_id: tuple[str, str] | None = None,
        session_id: str | None = None,
    ) -> Iterator[Session]:
        """Seed a session for ``task``, yield it, and always close it on exit.

        Defaults: a fresh random session id, episode ``(<uuid>, 0)``, task id
        ``("default", <task id>)``. The block's exit closes the session whatever the exit
        (normal, exception, ``KeyboardInterrupt``); a close that fails after an error inside
        the block does not hide that error. When the seed itself fails and the id was
        generated here, the id is closed too (a seed that did land, e.g. past a deadline, is
        not leaked; the fence refuses a late one), and the seed's error is raised.
        """
        sid = session_id or f"s-{uuid.uuid4().hex}"
        ep = episode or (f"r-{uuid.uuid4().hex}", 0)
        task_msg = task if isinstance(task, pb.WorkplaceTask) else task_from_row(task)
        tid = task_id or ("default", task_msg.id or "task")
        try:
            self.seed(sid, ep, tid, task_msg)
        except BaseException:
            if session_id is None:  # our own id: nobody retries it, so fencing it is safe
                with suppress(WorkplaceEnvError):
                    self.close_session(sid, ep)
            raise
        handle = Session(self, sid, ep)
        try:
            yield handle
        except BaseException:
            with suppress(WorkplaceEnvError):
                self.close_session(sid, ep)
            raise
        else:
            self.close_session(sid, ep)


class Session:
    """A seeded session, as handed out by :meth:`EnvironmentClient.session`."""

    def __init__(
        self, client: EnvironmentClient, session_id: str, episode: tuple[str, int]
    ) -> None:
        self.client = client
        self.id = session_id
        self.episode = episode

    def call_tool(
        self, name: str, arguments: str | Mapping[str, Any] | None = None, call_id: str = ""
    ) -> Any:
        """Call a tool on this session; return its decoded output."""
        return self.client.call_tool(self.id, name, arguments, call_id)

    def verify(
        self, function_calls: Iterable[CallLike] | None = None, **kwargs: Any
    ) -> VerifyResult:
        """Score this session's episode (see :meth:`EnvironmentClient.verify`)."""
        return self.client.verify(self.id, function_calls, **kwargs)
