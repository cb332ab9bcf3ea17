"""The EnvironmentService servicer: messages <-> domain calls, domain errors -> rich status.

Every handler converts its request into plain domain values (:mod:`workplace_env.model`), calls
the :class:`~workplace_env.sessions.SessionStore`, and converts the answer back. A domain error
aborts the RPC with the status of :mod:`workplace_env.server.status`; nothing else is caught
here, so a bug surfaces as gRPC's INTERNAL rather than as a wrong answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import grpc

from workplace.env.v1 import environment_pb2 as pb
from workplace.env.v1 import environment_pb2_grpc as pb_grpc
from workplace_env import errors
from workplace_env.model import (
    episode_violations,
    session_id_violations,
)
from workplace_env.responses import (
    ResponseOutputError,
    field_path,
    function_calls_from_response_output,
)
from workplace_env.sandbox.tools import advertised_tools
from workplace_env.server import convert
from workplace_env.server.status import to_status
from workplace_env.sessions import CloseOutcome, SessionState, SessionStore

Handler = TypeVar("Handler", bound=Callable[..., Any])

#: Calls a verify may replay per side: far above any episode, low enough that one request
#: cannot hold a core for seconds (replaying appends grows with the square of the count).
MAX_VERIFY_CALLS = 2_000

_STATES = {
    SessionState.SEEDED: pb.SESSION_STATE_SEEDED,
    SessionState.VERIFIED: pb.SESSION_STATE_VERIFIED,
    SessionState.CLOSED: pb.SESSION_STATE_CLOSED,
    SessionState.RESTORED_UNCLAIMED: pb.SESSION_STATE_RESTORED_UNCLAIMED,
}
_OUTCOMES = {
    CloseOutcome.CLOSED: pb.CLOSE_OUTCOME_CLOSED,
    CloseOutcome.ALREADY_CLOSED: pb.CLOSE_OUTCOME_ALREADY_CLOSED,
    CloseOutcome.NOT_SEEDED: pb.CLOSE_OUTCOME_NOT_SEEDED,
}
_FAILURE_KINDS = {"": pb.FAILURE_KIND_UNSPECIFIED, "session_lost": pb.FAILURE_KIND_SESSION_LOST}


def _rpc(method: Handler) -> Handler:
    """Abort with the rich status of any domain error the handler raises."""
    name = method.__name__

    @wraps(method)
    def handler(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return method(self, request, context)
        except errors.SessionError as exc:
            context.abort_with_status(to_status(exc, name))

    return handler  # type: ignore[return-value]


def _require_session_id(session_id: str) -> None:
    violations = session_id_violations(session_id)
    if violations:
        raise errors.InvalidRequest(violations, session_id)


class EnvironmentServicer(pb_grpc.EnvironmentServiceServicer):
    """Serves one :class:`SessionStore` over gRPC."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._tools = pb.ListToolsResponse(
            tools=[
                pb.Tool(
                    name=t.name,
                    description=t.schema["description"],
                    schema_json=json.dumps(t.schema, ensure_ascii=False),
                )
                for t in advertised_tools()
            ]
        )

    @_rpc
    def SeedSession(self, request: pb.SeedSessionRequest, context: grpc.ServicerContext):
        result = self.store.seed(
            request.resources_session_id,
            convert.optional(request, "episode_id", convert.episode),
            convert.optional(request, "task_id", convert.task_id),
            convert.optional(request, "task", convert.task),
            legacy=request.legacy,
        )
        return pb.SeedSessionResponse(
            resources_session_id=request.resources_session_id,
            state=_STATES[result.state],
            already_seeded=result.already_seeded,
            rebuilt=result.rebuilt,
            restored=result.restored,
        )

    @_rpc
    def CallTool(self, request: pb.CallToolRequest, context: grpc.ServicerContext):
        _require_session_id(request.resources_session_id)
        result = self.store.call_tool(
            request.resources_session_id, request.tool_name, request.arguments, request.call_id
        )
        return pb.CallToolResponse(output=result.output, replayed=result.replayed)

    @_rpc
    def Verify(self, request: pb.VerifyRequest, context: grpc.ServicerContext):
        sid = request.resources_session_id
        _require_session_id(sid)
        which = request.WhichOneof("prediction")
        if which == "function_calls":
            predicted: list[Any] = list(convert.calls(request.function_calls.calls))
        elif which == "response_output_json":
            try:
                predicted = function_calls_from_response_output(
                    json.loads(request.response_output_json)
                )
            except ResponseOutputError as exc:  # items NeMo's Responses types refuse (V1)
                violations = [
                    errors.FieldViolation(field_path("response_output_json", path), why)
                    for path, why in exc.problems
                ]
                raise errors.InvalidRequest(violations, sid) from exc
            except (ValueError, RecursionError) as exc:
                raise errors.InvalidRequest(
                    [errors.FieldViolation("response_output_json", f"not a JSON array: {exc}")],
                    sid,
                ) from exc
        else:
            raise errors.InvalidRequest(
                [
                    errors.FieldViolation(
                        "prediction",
                        "set function_calls (possibly empty) or response_output_json",
                    )
                ],
                sid,
            )
        truth: Any = None
        override = request.WhichOneof("ground_truth_override")
        if override == "ground_truth":
            truth = list(convert.calls(request.ground_truth.calls))
        elif override == "ground_truth_json":
            try:
                truth = json.loads(request.ground_truth_json)
            except (ValueError, RecursionError) as exc:
                raise errors.InvalidRequest(
                    [errors.FieldViolation("ground_truth_json", f"not JSON: {exc}")], sid
                ) from exc
            # The reference iterates the ground truth: a list or a string (characters, each
            # skipped) scores; a number, boolean or null is an error there, V5 here.
            if not isinstance(truth, (list, str, dict)):
                raise errors.InvalidRequest(
                    [
                        errors.FieldViolation(
                            "ground_truth_json", "must be a JSON array (or a string)"
                        )
                    ],
                    sid,
                )
        for field, calls in ((which, predicted), ("ground_truth", truth)):
            if isinstance(calls, list) and len(calls) > MAX_VERIFY_CALLS:
                raise errors.InvalidRequest(
                    [errors.FieldViolation(field, f"at most {MAX_VERIFY_CALLS} calls per verify")],
                    sid,
                )
        outcome = self.store.verify(sid, predicted, truth)
        tables = []
        if outcome.result is not None:
            tables = [
                pb.TableComparison(
                    table=t.table,
                    equal=t.equal,
                    predicted_rows=t.predicted_rows,
                    expected_rows=t.expected_rows,
                )
                for t in outcome.result.tables
            ]
        return pb.VerifyResponse(
            reward=outcome.reward,
            mask_sample=outcome.mask_sample,
            failure_kind=_FAILURE_KINDS[outcome.failure_kind],
            failure_reason=outcome.failure_reason,
            tables=tables,
        )

    @_rpc
    def CloseSession(self, request: pb.CloseSessionRequest, context: grpc.ServicerContext):
        sid = request.resources_session_id
        episode = convert.episode(request.episode_id) if request.HasField("episode_id") else None
        violations = [*session_id_violations(sid), *episode_violations(episode)]
        if violations:
            raise errors.InvalidRequest(violations, sid)
        assert episode is not None
        return pb.CloseSessionResponse(outcome=_OUTCOMES[self.store.close(sid, episode)])

    def ListTools(self, request: pb.ListToolsRequest, context: grpc.ServicerContext):
        return self._tools
