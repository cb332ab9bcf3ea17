"""The EnvironmentService servicer: messages <-> domain calls, domain errors -> rich status.

Every handler converts its request into plain domain values (:mod:`workplace_env.identity`), calls
the :class:`~workplace_env.sessions.SessionStore`, and converts the answer back. A domain error
aborts the RPC with the status of :mod:`workplace_env.server.status`; nothing else is caught
here, so a bug surfaces as gRPC's INTERNAL rather than as a wrong answer.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Sequence
from functools import wraps
from typing import Any, TypeVar

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message

from workplace.env.v1 import environment_pb2 as pb
from workplace.env.v1 import environment_pb2_grpc as pb_grpc
from workplace_env import errors, wire
from workplace_env.config import Settings
from workplace_env.identity import (
    episode_violations,
    session_id_violations,
)
from workplace_env.memo import BoundedMemo
from workplace_env.responses import (
    ResponseOutputError,
    calls_bound_problem,
    field_path,
    function_calls_from_response_output,
    ground_truth_problems,
    output_bound_problem,
)
from workplace_env.sandbox.tools import advertised_tools
from workplace_env.server import convert
from workplace_env.server.status import to_status
from workplace_env.sessions import CloseOutcome, SessionState, SessionStore, VerifyOutcome
from workplace_env_client.messages import each_item, enum_texts, is_repeated

Handler = TypeVar("Handler", bound=Callable[..., Any])

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
#: What a ground truth is, for the message of a refused one.
_TRUTH_SHAPE = "an array of {name, arguments} objects whose values are strings"
#: Item tuples whose messages a copier keeps per repeated message field (the verifier hands
#: out one ``tables`` tuple per pair it remembers, 1,024 pairs).
_REMEMBERED_ITEMS = 1024


def message_copier(message: Descriptor, domain: type) -> Callable[[Any], Message]:
    """The converter of a ``domain`` value (a class with a typed attribute per field of
    ``message``, by name) into ``message``, planned once: scalars as they are, an enum from
    its text (:func:`~workplace_env_client.messages.enum_texts`; another text is KeyError), a
    message field by the copier of its attribute's type (``tuple[T, ...]`` when repeated).
    Raises TypeError when ``domain`` lacks a field of ``message``."""
    hints = typing.get_type_hints(domain)
    plain: list[str] = []
    steps: list[tuple[str, Callable[[Any], Any]]] = []
    for field in message.fields:
        hint = hints.get(field.name)
        if hint is None:
            raise TypeError(f"{domain.__name__} has no field {field.name} of {message.full_name}")
        repeated = is_repeated(field)
        if field.enum_type is not None:
            numbers = {text: number for number, text in enum_texts(field.enum_type).items()}
            one: Callable[[Any], Any] = numbers.__getitem__
        elif field.message_type is not None:
            one = message_copier(field.message_type, typing.get_args(hint)[0] if repeated else hint)
            if repeated:
                steps.append((field.name, _remembered(one)))
                continue
        else:
            plain.append(field.name)
            continue
        steps.append((field.name, each_item(one) if repeated else one))
    make = message_factory.GetMessageClass(message)

    def copy(value: Any) -> Message:
        fields = {name: getattr(value, name) for name in plain}
        for name, step in steps:
            fields[name] = step(getattr(value, name))
        return make(**fields)

    return copy


def _remembered(one: Callable[[Any], Message]) -> Callable[[Sequence[Any]], list[Message]]:
    """The messages of a tuple of items, built once per tuple (by identity) for the last
    :data:`_REMEMBERED_ITEMS` tuples; an empty one is no messages."""
    memo: BoundedMemo[int, tuple[Sequence[Any], list[Message]]] = BoundedMemo(_REMEMBERED_ITEMS)

    def messages_of(items: Sequence[Any]) -> list[Message]:
        if not items:
            return []
        known = memo.entries.get(id(items))
        if known is not None and known[0] is items:
            return known[1]
        messages = [one(item) for item in items]
        memo.put(id(items), (items, messages))  # holds ``items``: its id stays its
        return messages

    return messages_of


#: A :class:`~workplace_env.sessions.VerifyOutcome` as its ``VerifyResponse``.
verify_response = message_copier(pb.VerifyResponse.DESCRIPTOR, VerifyOutcome)


def _rpc(method: Handler) -> Handler:
    """Abort with the rich status of any domain error the handler raises."""
    name = method.__name__

    @wraps(method)
    def handler(self: Any, request: Any, context: grpc.ServicerContext, **options: Any) -> Any:
        try:
            return method(self, request, context, **options)
        except errors.SessionError as exc:
            context.abort_with_status(to_status(exc, name))

    return handler  # type: ignore[return-value]


def check_truth_bound(count: int, bound: int, field: str, session_id: str) -> None:
    """Refuse a task whose ground truth has more than ``bound`` calls (0: no bound) where the
    task enters (seed, restore): a verify without a ground truth of its own replays the
    seeded one, so that episode could not be scored within ``--max-verify-calls`` (V5).

    Raises InvalidRequest naming ``field`` and the bound."""
    if bound and count > bound:
        raise errors.InvalidRequest(
            [
                errors.FieldViolation(
                    field,
                    f"at most {bound} calls (max_verify_calls: a verify replays the task's "
                    f"ground truth), got {count}",
                )
            ],
            session_id,
        )


def _require_session_id(session_id: str) -> None:
    violations = session_id_violations(session_id)
    if violations:
        raise errors.InvalidRequest(violations, session_id)


class EnvironmentServicer(pb_grpc.EnvironmentServiceServicer):
    """Serves one :class:`SessionStore` over gRPC; a verify replays at most
    ``max_verify_calls`` calls per side (0: no bound; beyond it INVALID_ARGUMENT, V5), and a
    seed whose ``task.ground_truth`` is longer is refused the same way
    (:func:`check_truth_bound`: a verify without a ground truth replays the seeded one).
    A verify's ``response_output_json`` may hold at most ``max_verify_output_items`` entries
    (:func:`~workplace_env.responses.output_bound_problem`; 0: no bound): beyond it, and
    beyond ``max_verify_calls`` in a call list, INVALID_ARGUMENT naming the field is answered
    right after the parse, before any entry is checked or converted.

    Both bounds are those of ``settings`` (default: the defaults), as is its
    ``max_message_bytes``, the server's message limit: a tool output whose response would
    be larger (the one answer whose size a caller drives; every other answer is small and
    bounded) is refused RESOURCE_EXHAUSTED ``RESPONSE_TOO_LARGE`` with the limit and the size,
    rather than left to gRPC's bare send error. The call was applied and its call_id record
    holds its output, so a retry with that call_id gets the same refusal and nothing runs
    twice (T6).
    """

    def __init__(self, store: SessionStore, settings: Settings | None = None) -> None:
        settings = settings or Settings()
        self.store = store
        self.max_verify_calls = settings.max_verify_calls
        self.max_verify_output_items = settings.max_verify_output_items
        self.max_response_bytes = max_response_bytes = settings.max_message_bytes
        # Outputs of at most this many characters always fit (<= 4 UTF-8 bytes each, plus
        # the message's framing): only longer ones are measured.
        self._always_fits = max(0, (max_response_bytes - 32) // 4)
        self._task = convert.TaskMemo()
        self._tools = pb.ListToolsResponse(
            tools=[
                pb.Tool(
                    name=t.name,
                    description=t.schema["description"],
                    schema_json=json.dumps(t.schema, ensure_ascii=False),
                )
                for t in advertised_tools()
            ],
            sandbox_digest=store.base.digest,
            sandbox_origin=store.base.origin,
        )

    @_rpc
    def SeedSession(self, request: pb.SeedSessionRequest, context: grpc.ServicerContext):
        check_truth_bound(
            len(request.task.ground_truth),
            self.max_verify_calls,
            "task.ground_truth",
            request.resources_session_id,
        )
        result = self.store.seed(
            request.resources_session_id,
            convert.optional(request, "episode_id", convert.episode),
            convert.optional(request, "task_id", convert.task_id),
            convert.optional(request, "task", self._task),
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
        response = pb.CallToolResponse(output=result.output)
        if len(result.output) > self._always_fits:
            # measured without the `replayed` flag: a retry's refusal is the first one's (T6)
            size = response.ByteSize()
            if size > self.max_response_bytes:
                raise errors.ResponseTooLarge(
                    f"the output of {request.tool_name} is {size} bytes, over the server's "
                    f"message limit of {self.max_response_bytes} bytes; the call was applied "
                    "(a retry with its call_id gets this answer again)",
                    request.resources_session_id,
                    size_bytes=size,
                    limit_bytes=self.max_response_bytes,
                )
        response.replayed = result.replayed
        return response

    @_rpc
    def Verify(
        self, request: pb.VerifyRequest, context: grpc.ServicerContext, *, checked: bool = False
    ):
        """V1-V5. ``checked`` (never set by gRPC): the caller, in this process, has already
        checked ``response_output_json`` and ``ground_truth_json`` with
        :mod:`workplace_env.responses` (the co-hosted gateway, see
        :class:`~workplace_env_client.messages.CheckedJson`); they are parsed, not checked again."""
        sid = request.resources_session_id
        _require_session_id(sid)
        bound = self.max_verify_calls

        def refuse(field: str, why: str | None) -> None:
            if why is not None:
                raise errors.InvalidRequest([errors.FieldViolation(field, why)], sid)

        which = request.WhichOneof("prediction")
        if which == "function_calls":
            refuse("function_calls", calls_bound_problem(request.function_calls.calls, bound))
            predicted: list[Any] = list(convert.calls(request.function_calls.calls))
        elif which == "response_output_json":
            try:
                output = wire.parse(request.response_output_json)
            except (ValueError, RecursionError) as exc:
                raise errors.InvalidRequest(
                    [errors.FieldViolation("response_output_json", f"not a JSON array: {exc}")],
                    sid,
                ) from exc
            if isinstance(output, list):  # bounded before any item is looked at
                refuse(
                    "response_output_json",
                    output_bound_problem(output, self.max_verify_output_items),
                )
            try:
                predicted = function_calls_from_response_output(output, checked=checked)
            except ResponseOutputError as exc:  # items NeMo's Responses types refuse (V1)
                violations = [
                    errors.FieldViolation(field_path("response_output_json", path), why)
                    for path, why in exc.explained
                ]
                raise errors.InvalidRequest(violations, sid) from exc
            except ValueError as exc:
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
            refuse("ground_truth", calls_bound_problem(request.ground_truth.calls, bound))
            truth = list(convert.calls(request.ground_truth.calls))
        elif override == "ground_truth_json":
            try:
                truth = wire.parse(request.ground_truth_json)
            except (ValueError, RecursionError) as exc:
                raise errors.InvalidRequest(
                    [errors.FieldViolation("ground_truth_json", f"not JSON: {exc}")], sid
                ) from exc
            refuse("ground_truth", calls_bound_problem(truth, bound))
            # V5, as the reference's verify body types it (responses.ground_truth_problems):
            # a JSON string ("change nothing") or an array of string-valued objects.
            if not checked and (problems := ground_truth_problems(truth)):
                violations = [
                    errors.FieldViolation(
                        field_path("ground_truth_json", path),
                        detail if path else f"{detail} (or a JSON string): {_TRUTH_SHAPE}",
                    )
                    for path, detail in problems
                ]
                raise errors.InvalidRequest(violations, sid)
        refuse(which, calls_bound_problem(predicted, bound))
        return verify_response(self.store.verify(sid, predicted, truth))

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
