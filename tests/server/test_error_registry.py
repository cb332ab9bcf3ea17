"""The error registry (``workplace_env_client.reasons``) against the behaviour it describes.

Every reason the server raises has a row; each domain error raised inside the servicer reaches
an SDK client and an HTTP agent as its row says (gRPC code, SDK class, HTTP status and
``failure_kind``), and the SDK error maps to the row's JSON-RPC code and failure kinds; a status
without a reason maps as :data:`~workplace_env_client.reasons.BY_CODE` says; every SDK exception
class is some row's.
"""

from __future__ import annotations

import ast
import inspect
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from tests.helpers import EP, HANG_S, TASK, TID, local
from workplace.env.v1 import error_reason_pb2
from workplace_env import errors
from workplace_env.config import Settings
from workplace_env.gateway import start_gateway
from workplace_env.gateway.mcp_tools import _call_error
from workplace_env.gateway.translate import draining_problem, service_error, too_large_problem
from workplace_env.run import scripted
from workplace_env.server import guard
from workplace_env.session_header import SessionHeaderMismatch
from workplace_env_client import AdminClient, EnvironmentClient, UnauthenticatedError, reasons
from workplace_env_client import errors as sdk_errors
from workplace_env_client.rollouts import _session_failure

#: Domain errors whose constructor is not ``(message, session_id)``, one instance each.
_SPECIAL: dict[type[errors.SessionError], Callable[[], errors.SessionError]] = {
    errors.InvalidRequest: lambda: errors.InvalidRequest([errors.FieldViolation("task.id", "x")]),
    SessionHeaderMismatch: lambda: SessionHeaderMismatch("other", "sid"),
    errors.CapacityExhausted: lambda: errors.CapacityExhausted("full", "sid", 2.5),
    guard.TooManyRpcs: lambda: guard.TooManyRpcs("busy", "sid", 0.5),
    errors.ResponseTooLarge: lambda: errors.ResponseTooLarge("big", "sid", 10, 5),
    errors.SessionTooLarge: lambda: errors.SessionTooLarge("big", "sid", 10, 5, 3),
}


def _domain_classes() -> list[type[errors.SessionError]]:
    found: list[type[errors.SessionError]] = []
    todo = list(errors.SessionError.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def _instances() -> dict[str, errors.SessionError]:
    """One domain error per reason the servicer and its guards raise."""
    out: dict[str, errors.SessionError] = {}
    for cls in _domain_classes():
        if cls is errors.Unauthenticated:
            continue  # its reason is per instance (the admin reasons, below)
        out[cls.reason] = _SPECIAL.get(cls, lambda c=cls: c("refused", "sid"))()  # type: ignore[misc]
    malformed = errors.InvalidRequest([errors.FieldViolation("", "not a valid request")])
    malformed.reason = reasons.MALFORMED_REQUEST.name
    out[malformed.reason] = malformed
    for name in ("ADMIN_DISABLED", "ADMIN_TOKEN_REQUIRED", "ADMIN_TOKEN_INVALID"):
        out[name] = errors.Unauthenticated("refused", name)
    return out


SERVER_ERRORS = _instances()


def test_every_reason_the_server_raises_has_a_row():
    missing = sorted(set(SERVER_ERRORS) - set(reasons.REASONS))
    assert missing == []
    # and the rows the registry says the server raises are those
    said = {n for n, r in reasons.REASONS.items() if r.raised_by.startswith(reasons.SERVER)}
    assert said == set(SERVER_ERRORS)


def test_the_admin_refusals_are_the_registry_rows(make_server):
    """The admin guard's reasons, observed: no token configured, none sent, a wrong one."""
    seen = set()
    for server_token, sent in ((None, None), ("right-token", None), ("right-token", "wrong")):
        served = make_server(settings=Settings(admin_token=server_token))
        admin = AdminClient(local(served.running.port), token=sent, timeout_s=HANG_S)
        with admin, pytest.raises(UnauthenticatedError) as caught:
            admin.export_sessions([])
        row = reasons.REASONS[caught.value.reason]
        assert row.admin_only and caught.value.code == row.code
        assert caught.value.hint
        assert _shared_words(caught.value.message, caught.value.hint) < _REPEATED_WORDS
        seen.add(caught.value.reason)
    assert seen == {"ADMIN_DISABLED", "ADMIN_TOKEN_REQUIRED", "ADMIN_TOKEN_INVALID"}


#: A run of this many words in both a refusal's message and its hint says the same twice.
_REPEATED_WORDS = 4


def _shared_words(message: str, hint: str) -> int:
    """The longest run of words (lower case, punctuation stripped) in both texts."""

    def words(text: str) -> list[str]:
        return [w.strip(".,;:()'\"").lower() for w in text.split()]

    said, told = words(message), words(hint)
    runs = [[0] * (len(told) + 1) for _ in range(len(said) + 1)]
    for i, word in enumerate(said):
        for j, other in enumerate(told):
            if word == other:
                runs[i + 1][j + 1] = runs[i][j] + 1
    return max(max(row) for row in runs)


def test_a_reused_call_id_says_what_happened_and_its_hint_what_to_do(once):
    """CALL_ID_REUSED: the server's message names the call_id and the call; the remedy is the
    hint's alone."""
    sid = f"reg-{uuid.uuid4().hex}"
    once.seed(sid, EP, TID, TASK)
    once.call_tool_raw(sid, "email_search_emails", '{"query": "a"}', "c1")
    with pytest.raises(sdk_errors.CallIdReusedError) as caught:
        once.call_tool_raw(sid, "email_search_emails", '{"query": "b"}', "c1")
    message, hint = caught.value.message, caught.value.hint
    assert "'c1'" in message and "email_search_emails" in message
    assert hint and _shared_words(message, hint) < _REPEATED_WORDS


# -- each domain error through the servicer, the SDK and the HTTP gateway ---------------------


@pytest.fixture(scope="module")
def once(server) -> Iterator[EnvironmentClient]:
    """An SDK client that neither retries UNAVAILABLE nor waits out a refusal."""
    with EnvironmentClient(
        local(server.port), timeout_s=HANG_S, max_attempts=1, retry_refusals=False
    ) as client:
        yield client


@pytest.fixture(scope="module")
def agent(once) -> Iterator[httpx.Client]:
    running = start_gateway(client=once)
    with httpx.Client(base_url=running.url, timeout=HANG_S) as client:
        yield client
    running.stop()


def _typed_seed(sid: str) -> dict[str, Any]:
    return {
        "resources_session_id": sid,
        "episode_id": {"rollout_id": "r1", "attempt": 0},
        "task_id": {"taskset": "ts", "task_id": "t1"},
        "task_data": {"id": "t1", "ground_truth": [], "responses_create_params": {"input": []}},
    }


def _check_sdk_error(exc: sdk_errors.WorkplaceEnvError, row: reasons.Reason, rpc: str) -> None:
    """The SDK error and what the surfaces over the SDK make of it agree with ``row``."""
    assert type(exc).__name__ == row.sdk_class
    assert (exc.code, exc.reason) == (row.code_on(rpc), row.name)
    assert scripted.failure_kind(exc) == row.run_kind
    assert _session_failure(exc).kind == row.rollout_kind
    assert _call_error(exc).error.code == row.jsonrpc


@pytest.mark.parametrize("name", sorted(SERVER_ERRORS))
def test_a_refused_seed_answers_as_its_row(name, server, once, agent, monkeypatch):
    row, error = reasons.REASONS[name], SERVER_ERRORS[name]

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(server.store, "seed", refuse)
    with pytest.raises(sdk_errors.WorkplaceEnvError) as caught:
        once.seed(f"reg-{uuid.uuid4().hex}", EP, TID, TASK)
    _check_sdk_error(caught.value, row, "SeedSession")
    answer = agent.post("/seed_session", json=_typed_seed(f"reg-{uuid.uuid4().hex}"))
    body = answer.json()
    assert (answer.status_code, body["failure_kind"]) == row.http_on("SeedSession")
    assert body["reason"] == name


@pytest.mark.parametrize("name", sorted(SERVER_ERRORS))
def test_a_refused_tool_call_answers_as_its_row(name, server, once, agent, monkeypatch):
    row, error = reasons.REASONS[name], SERVER_ERRORS[name]
    sid = f"reg-{uuid.uuid4().hex}"
    assert agent.post("/seed_session", json=_typed_seed(sid)).status_code == 200
    once.seed(f"{sid}-sdk", EP, TID, TASK)

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(server.store, "call_tool", refuse)
    with pytest.raises(sdk_errors.WorkplaceEnvError) as caught:
        once.call_tool_raw(f"{sid}-sdk", "email_search_emails", "{}")
    _check_sdk_error(caught.value, row, "CallTool")
    answer = agent.post("/email_search_emails", json={})
    body = answer.json()
    assert (answer.status_code, body["failure_kind"]) == row.http_on("CallTool")
    assert body["reason"] == name
    assert ("retry-after" in answer.headers) == (answer.status_code in (429, 503))


# -- statuses without a reason, SDK-raised and gateway reasons ----------------------------------


class _Status(grpc.RpcError):
    """A failed RPC without rich details (a transport failure, gRPC's own limits)."""

    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return "no details"

    def trailing_metadata(self) -> tuple:
        return ()


@pytest.mark.parametrize("code", list(grpc.StatusCode), ids=lambda c: c.name)
def test_a_status_without_a_reason_maps_by_its_code(code):
    row = reasons.BY_CODE.get(code, reasons.UNKNOWN)
    exc = sdk_errors.from_rpc_error(_Status(code))
    assert type(exc).__name__ == row.sdk_class
    # the reason it carries is its row's (REQUEST_TOO_LARGE), else its status's name
    assert exc.reason == (row.name or code.name) and reasons.is_registry_name(exc.reason)
    assert reasons.lookup(code, exc.reason) is row
    assert scripted.failure_kind(exc) == row.run_kind
    assert _session_failure(exc).kind == row.rollout_kind
    assert _call_error(exc).error.code == row.jsonrpc
    answer = service_error(exc).response
    body = json.loads(bytes(answer.body))
    assert (answer.status_code, body["failure_kind"]) == (row.http_status, row.failure_kind)


@pytest.mark.parametrize("name", sorted(reasons.REASONS))
def test_a_reason_sent_with_its_code_gets_its_rows_sdk_class(name):
    row = reasons.REASONS[name]
    if row.code is None:  # the gateway's own: never on gRPC
        assert not row.sdk_class and row.jsonrpc is None
        return
    cls = sdk_errors.error_class(row.code, name)
    assert cls.__name__ == row.sdk_class
    exc = cls("refused", row.code, reason=name)
    answer = service_error(exc).response
    assert answer.status_code == row.http_status


def test_the_gateways_own_refusals_are_their_rows():
    for problem, row in (
        (too_large_problem(), reasons.REQUEST_TOO_LARGE),
        (draining_problem(), reasons.DRAINING),
    ):
        body = json.loads(bytes(problem.response.body))
        assert (problem.response.status_code, body["failure_kind"], body["reason"]) == (
            row.http_status,
            row.failure_kind,
            row.name,
        )


def test_a_token_for_another_session_is_its_row(agent):
    sid = f"reg-{uuid.uuid4().hex}"
    assert agent.post("/seed_session", json=_typed_seed(sid)).status_code == 200
    answer = agent.post("/session_token", json={"resources_session_id": f"{sid}-other"})
    row = reasons.SESSION_COOKIE_REQUIRED
    body = answer.json()
    assert (answer.status_code, body["failure_kind"], body["reason"]) == (
        row.http_status,
        row.failure_kind,
        row.name,
    )


# -- the registry covers the SDK's classes, and says what clients may retry -----------------------


#: Every SDK exception class, by name.
SDK_CLASSES = {
    name: cls
    for name, cls in inspect.getmembers(sdk_errors, inspect.isclass)
    if issubclass(cls, sdk_errors.WorkplaceEnvError)
}


def test_every_sdk_exception_class_is_a_rows():
    classes = set(SDK_CLASSES)
    rows = [*reasons.REASONS.values(), *reasons.BY_CODE.values(), reasons.UNKNOWN]
    named = {row.sdk_class for row in rows if row.sdk_class}
    # ArgumentError is raised before sending, under the server's reasons for the same field;
    # their rows name its base class
    assert classes - named == {"ArgumentError"}
    for name in ("INVALID_REQUEST", "INVALID_TOOL_ARGUMENTS"):
        base = getattr(sdk_errors, reasons.REASONS[name].sdk_class)
        assert issubclass(sdk_errors.ArgumentError, base)
    assert named <= classes


@pytest.mark.parametrize("code", list(grpc.StatusCode), ids=lambda c: c.name)
def test_an_sdk_error_made_without_a_reason_still_carries_a_registry_name(code):
    for name, cls in SDK_CLASSES.items():
        if cls is sdk_errors.ArgumentError:  # its reason is always given (a request field's)
            continue
        made = cls("refused", code)
        assert reasons.is_registry_name(made.reason), name
        assert made.reason == reasons.carried(code, "")


def test_the_errors_the_sdk_makes_itself_carry_their_registry_rows_reason():
    """The SDK's own refusals (nothing sent, or no ErrorInfo in the answer) name a row of the
    registry, which says the SDK raises them."""
    made = {
        reasons.CLIENT_CLOSED.name: sdk_errors.client_closed(),
        reasons.WRONG_EVENT_LOOP.name: sdk_errors.wrong_event_loop(),
        reasons.INVALID_REQUEST.name: sdk_errors.ArgumentError("episode", "not a pair"),
        reasons.RESPONSE_TOO_LARGE.name: sdk_errors.from_status(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "CLIENT: Received message larger than max (90 vs. 80)",
        ),
        reasons.REQUEST_TOO_LARGE.name: sdk_errors.from_status(
            grpc.StatusCode.RESOURCE_EXHAUSTED, "Sent message larger than max (90 vs. 80)"
        ),
    }
    closed = sdk_errors.closed_channel_error(ValueError("Cannot invoke RPC on closed channel!"))
    assert closed is not None and closed.reason == reasons.CLIENT_CLOSED.name
    for name, error in made.items():
        assert error.reason == name
        assert type(error).__name__ == reasons.REASONS[name].sdk_class or isinstance(
            error, sdk_errors.ArgumentError
        )
    for name in (reasons.CLIENT_CLOSED.name, reasons.WRONG_EVENT_LOOP.name):
        assert reasons.REASONS[name].raised_by == reasons.SDK


def test_every_sdk_error_the_sdk_constructs_names_its_reason():
    """Each place in the SDK that makes one of its exceptions passes its ``reason=`` (an
    ArgumentError defaults to the server's reason for the field)."""
    package = Path(sdk_errors.__file__).parent
    missing = []
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            cls = SDK_CLASSES.get(node.func.id)
            if cls is None or cls is sdk_errors.ArgumentError:
                continue
            if not any(k.arg == "reason" for k in node.keywords):
                missing.append(f"{path.name}:{node.lineno} {node.func.id}")
    assert missing == []


def test_what_http_tells_to_retry_the_registry_calls_retryable():
    rows = [*reasons.REASONS.values(), *reasons.BY_CODE.values(), reasons.UNKNOWN]
    for row in rows:
        if row.http_status in (429, 503):
            assert row.retryable, row
        if row.http_status in (409, 413, 422):
            assert not row.retryable, row


def test_the_proto_enum_names_every_reason_of_the_registry():
    values = error_reason_pb2.ErrorReason.DESCRIPTOR.values
    assert [v.name for v in values if v.number == 0] == ["ERROR_REASON_UNSPECIFIED"]
    assert {v.name for v in values if v.number} == set(reasons.REASONS)
