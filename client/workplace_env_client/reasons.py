"""The error registry: every ``google.rpc.ErrorInfo.reason`` and what each surface makes of it.

One :class:`Reason` row per reason: its gRPC status code (with the RPCs that answer another),
the SDK exception class, the HTTP gateway's status and NeMo Gym ``failure_kind``, the MCP
JSON-RPC error code, the ``run`` command's and a rollout's failure kind, whether a retry can
succeed, who raises it and what it means. :data:`BY_CODE` gives the same for a status without
a reason (a transport failure, gRPC's own message-size refusal), :data:`UNKNOWN` for any other.
The server's status codes, the SDK's exception classes, the gateway's HTTP and JSON-RPC answers,
the failure kinds and docs/reference/errors.md are all read from here. No server import: the
SDK and the server both read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import grpc

Code = grpc.StatusCode

#: JSON-RPC error codes of the MCP endpoint (the implementation-defined range -32000..-32099).
JSONRPC_SERVICE_ERROR = -32000
JSONRPC_SESSION_LOST = -32004

#: Failure kinds of an episode of the ``run`` command (``runner.FAILURE_KINDS``).
RUN_SERVER_UNAVAILABLE = "server_unavailable"
RUN_SERVER_CAPACITY = "server_capacity"
RUN_ADMIN_UNAUTHENTICATED = "admin_unauthenticated"
RUN_SESSION_LOST = "session_lost"
RUN_ERROR = "error"

#: Failure kinds of a masked rollout (``rollouts.MASK_KINDS``) an environment error gives.
ROLLOUT_SESSION_LOST = "session_lost"
ROLLOUT_SESSION_EXPIRED = "session_expired"
ROLLOUT_ENVIRONMENT_ERROR = "workplace_env:environment_error"

#: Who raises a reason (the ``raised_by`` column).
SERVER = "server"
ADMIN = "server (admin RPCs)"
SDK = "SDK"
GATEWAY = "HTTP gateway"


@dataclass(frozen=True)
class RpcException:
    """Where an RPC answers a reason otherwise than its row: the status ``code`` there, and the
    HTTP gateway's ``http_status`` and ``failure_kind`` (None: no HTTP route runs that RPC)."""

    code: grpc.StatusCode
    http_status: int | None = None
    failure_kind: str = ""


@dataclass(frozen=True)
class Reason:
    """One error reason and its mappings.

    ``name``: the ``ErrorInfo.reason`` ("" for a row of :data:`BY_CODE`: its SDK errors carry
    their status code's name, :func:`carried`). ``code``: its gRPC status (None: never sent
    over gRPC). ``sdk_class``: the name of the SDK exception (``workplace_env_client.errors``)
    it raises ("": none).
    ``http_status``, ``failure_kind``: the gateway's answer, the body's ``failure_kind``.
    ``jsonrpc``: the MCP ``tools/call`` error code (None: not reached there). ``run_kind``,
    ``rollout_kind``: an episode's failure kind in ``run`` and in a model rollout.
    ``retryable``: the same request can succeed later. ``raised_by``: who refuses.
    ``admin_only``: raised by admin RPCs only, which no HTTP route runs. ``on_rpc``: the RPCs
    that answer it otherwise (:class:`RpcException`). ``meaning``: one line for people.
    """

    name: str
    code: grpc.StatusCode | None
    sdk_class: str
    http_status: int
    failure_kind: str
    meaning: str
    raised_by: str = SERVER
    jsonrpc: int | None = JSONRPC_SERVICE_ERROR
    run_kind: str = RUN_ERROR
    rollout_kind: str = ROLLOUT_ENVIRONMENT_ERROR
    retryable: bool = False
    admin_only: bool = False
    on_rpc: Mapping[str, RpcException] = field(default_factory=dict)

    def code_on(self, rpc: str) -> grpc.StatusCode:
        """The status code ``rpc`` answers this reason with (INTERNAL for a gateway reason)."""
        exception = self.on_rpc.get(rpc)
        if exception is not None:
            return exception.code
        return self.code or Code.INTERNAL

    def http_on(self, rpc: str) -> tuple[int, str]:
        """``(status, failure_kind)`` of the gateway's answer when ``rpc`` refused."""
        exception = self.on_rpc.get(rpc)
        if exception is not None and exception.http_status is not None:
            return exception.http_status, exception.failure_kind
        return self.http_status, self.failure_kind


_ROWS: dict[str, Reason] = {}


def _row(name: str, code: grpc.StatusCode | None, sdk_class: str, http: tuple[int, str],
         meaning: str, **more: object) -> Reason:  # fmt: skip
    reason = Reason(name, code, sdk_class, http[0], http[1], meaning, **more)  # type: ignore[arg-type]
    _ROWS[name] = reason
    return reason


_INVALID = (422, "invalid_request")
_LOST = (404, "session_lost")
_UNAVAILABLE = (503, "unavailable")
_SERVICE_ERROR = (502, "service_error")
_LOST_KINDS = {"jsonrpc": JSONRPC_SESSION_LOST, "run_kind": RUN_SESSION_LOST}

# -- the environment service --------------------------------------------------------------------
INVALID_REQUEST = _row(
    "INVALID_REQUEST", Code.INVALID_ARGUMENT, "InvalidRequestError", _INVALID,
    "A malformed identity, task or request; `BadRequest` names each offending field (S5, V5).",
)  # fmt: skip
INVALID_TOOL_ARGUMENTS = _row(
    "INVALID_TOOL_ARGUMENTS", Code.INVALID_ARGUMENT, "InvalidRequestError", _INVALID,
    "CallTool `arguments` is not the JSON text of an object (T3).",
)  # fmt: skip
MALFORMED_REQUEST = _row(
    "MALFORMED_REQUEST", Code.INVALID_ARGUMENT, "InvalidRequestError", _INVALID,
    "A request that is not a valid message of its type (bytes, non-UTF-8 text).",
)  # fmt: skip
SESSION_HEADER_MISMATCH = _row(
    "SESSION_HEADER_MISMATCH", Code.INVALID_ARGUMENT, "SessionHeaderMismatchError", _INVALID,
    "The `x-resources-session-id` header names another session than the request (X4).",
)  # fmt: skip
SESSION_CONFLICT = _row(
    "SESSION_CONFLICT", Code.ALREADY_EXISTS, "SessionConflictError", (409, "session_conflict"),
    "The id is bound to another episode or task (S3).",
)  # fmt: skip
SESSION_CLAIMED = _row(
    "SESSION_CLAIMED", Code.ALREADY_EXISTS, "SessionClaimedError", (409, "session_claimed"),
    "Restored state was claimed by its own binding; another episode may not use it (K5).",
)  # fmt: skip
SESSION_CLOSED = _row(
    "SESSION_CLOSED", Code.NOT_FOUND, "SessionClosedError", _LOST,
    "The id was closed; a fence refuses seeds (S4) and tool calls (T5).",
    jsonrpc=JSONRPC_SESSION_LOST,
    on_rpc={
        "SeedSession": RpcException(Code.ALREADY_EXISTS, 409, "session_closed"),
        "RestoreSessions": RpcException(Code.FAILED_PRECONDITION),
    },
)  # fmt: skip
SESSION_LOST = _row(
    "SESSION_LOST", Code.NOT_FOUND, "SessionLostError", _LOST,
    "The server does not hold the id: never seeded, released, or lost in a restart (T4).",
    rollout_kind=ROLLOUT_SESSION_LOST, **_LOST_KINDS,
)  # fmt: skip
SESSION_EXPIRED = _row(
    "SESSION_EXPIRED", Code.NOT_FOUND, "SessionExpiredError", _LOST,
    "The session was evicted after its idle TTL (X1).",
    rollout_kind=ROLLOUT_SESSION_EXPIRED, **_LOST_KINDS,
)  # fmt: skip
CALL_ID_REUSED = _row(
    "CALL_ID_REUSED", Code.ALREADY_EXISTS, "CallIdReusedError", (409, "call_id_reused"),
    "A `call_id` was reused with another tool or other arguments (T7).",
)  # fmt: skip
EPISODE_MISMATCH = _row(
    "EPISODE_MISMATCH", Code.FAILED_PRECONDITION, "EpisodeMismatchError",
    (409, "episode_mismatch"), "A close names another episode than the session's binding (C4).",
)  # fmt: skip
TABLES_UNAVAILABLE = _row(
    "TABLES_UNAVAILABLE", Code.UNAVAILABLE, "UnavailableError", _UNAVAILABLE,
    "Building the session's tables failed; nothing was bound and a retry may succeed (S6).",
    run_kind=RUN_SERVER_UNAVAILABLE, retryable=True,
)  # fmt: skip
DRAINING = _row(
    "DRAINING", Code.UNAVAILABLE, "UnavailableError", _UNAVAILABLE,
    "The server (or the gateway) is shutting down and takes no new seeds (X2), nor MCP "
    "requests once the gateway's MCP server stopped.",
    run_kind=RUN_SERVER_UNAVAILABLE, retryable=True, raised_by=f"{SERVER}, {GATEWAY}",
)  # fmt: skip
INJECTED_FAULT = _row(
    "INJECTED_FAULT", Code.UNAVAILABLE, "UnavailableError", _UNAVAILABLE,
    "A transient failure injected by a test's fault hooks (e.g. a lost tool-call response).",
    run_kind=RUN_SERVER_UNAVAILABLE, retryable=True, raised_by="server (test fault hooks)",
)  # fmt: skip
CAPACITY_EXHAUSTED = _row(
    "CAPACITY_EXHAUSTED", Code.RESOURCE_EXHAUSTED, "CapacityError", (429, "capacity_exhausted"),
    "The server holds its maximum of live sessions (S7); retry after `RetryInfo`'s delay.",
    run_kind=RUN_SERVER_CAPACITY, retryable=True,
)  # fmt: skip
TOO_MANY_RPCS = _row(
    "TOO_MANY_RPCS", Code.RESOURCE_EXHAUSTED, "CapacityError", (429, "capacity_exhausted"),
    "The server runs its maximum of concurrent RPCs; the RPC did not run (X3, `RetryInfo`).",
    run_kind=RUN_SERVER_CAPACITY, retryable=True,
)  # fmt: skip
RESPONSE_TOO_LARGE = _row(
    "RESPONSE_TOO_LARGE", Code.RESOURCE_EXHAUSTED, "CapacityError", (502, "response_too_large"),
    "An answer over the message limit of the server (or of the SDK); the call itself was "
    "applied (`ErrorInfo` `limit_bytes`, `size_bytes`).",
    run_kind=RUN_SERVER_CAPACITY, raised_by=f"{SERVER}, {SDK}",
)  # fmt: skip
SESSION_TOO_LARGE = _row(
    "SESSION_TOO_LARGE", Code.RESOURCE_EXHAUSTED, "SessionTooLargeError",
    (413, "session_too_large"),
    "A write call would take its session over `max_session_write_bytes`; nothing was applied "
    "(`ErrorInfo` `limit_bytes`, `size_bytes`, `call_bytes`).",
    run_kind=RUN_SERVER_CAPACITY,
)  # fmt: skip
RELEASE_FAILED = _row(
    "RELEASE_FAILED", Code.INTERNAL, "ReleaseFailedError", _SERVICE_ERROR,
    "Releasing a session's tables failed; it is not recorded as closed (C5).",
    retryable=True,
)  # fmt: skip
# -- the admin service ---------------------------------------------------------------------
_ADMIN = {"raised_by": ADMIN, "admin_only": True}


def _unauthenticated(name: str, meaning: str) -> Reason:
    return _row(
        name, Code.UNAUTHENTICATED, "UnauthenticatedError", _SERVICE_ERROR, meaning,
        run_kind=RUN_ADMIN_UNAUTHENTICATED, **_ADMIN,
    )  # fmt: skip


ADMIN_DISABLED = _unauthenticated(
    "ADMIN_DISABLED", "An admin RPC to a server started without an admin token (A1)."
)
ADMIN_TOKEN_REQUIRED = _unauthenticated(
    "ADMIN_TOKEN_REQUIRED",
    "An admin RPC without the metadata `authorization: Bearer <token>` (A1).",
)
ADMIN_TOKEN_INVALID = _unauthenticated(
    "ADMIN_TOKEN_INVALID", "An admin RPC whose bearer token is not the server's (A1)."
)
SESSION_LIVE = _row(
    "SESSION_LIVE", Code.FAILED_PRECONDITION, "SessionLiveError", _SERVICE_ERROR,
    "A restore names ids the server holds live; nothing was installed (K3).", **_ADMIN,
)  # fmt: skip
SANDBOX_MISMATCH = _row(
    "SANDBOX_MISMATCH", Code.FAILED_PRECONDITION, "SandboxMismatchError", _SERVICE_ERROR,
    "A restore of snapshots exported on another sandbox than the server's; nothing was "
    "installed.", **_ADMIN,
)  # fmt: skip
# -- the SDK --------------------------------------------------------------------------------
REPLAY_DIVERGED = _row(
    "REPLAY_DIVERGED", Code.DATA_LOSS, "ReplayDivergedError", _SERVICE_ERROR,
    "A call replayed by `Session.recover` gave another output than the first time.",
    raised_by=SDK,
)  # fmt: skip
EXPORT_FAILED = _row(
    "EXPORT_FAILED", Code.FAILED_PRECONDITION, "WorkplaceEnvError", _SERVICE_ERROR,
    "`Session.checkpoint`: the server could not export the session.", raised_by=SDK,
)  # fmt: skip
CLIENT_CLOSED = _row(
    "CLIENT_CLOSED", Code.FAILED_PRECONDITION, "ClientClosedError", _SERVICE_ERROR,
    "An RPC through a client (or a channel) already closed; nothing was sent.", raised_by=SDK,
)  # fmt: skip
WRONG_EVENT_LOOP = _row(
    "WRONG_EVENT_LOOP", Code.FAILED_PRECONDITION, "EventLoopError", _SERVICE_ERROR,
    "An async client used in another event loop than the one of its first call (make one "
    "client per loop, i.e. per `asyncio.run`); nothing was sent.", raised_by=SDK,
)  # fmt: skip
# -- the HTTP gateway (never sent over gRPC) ------------------------------------------------
_HTTP_ONLY = {"raised_by": GATEWAY, "jsonrpc": None, "run_kind": "", "rollout_kind": ""}
REQUEST_TOO_LARGE = _row(
    "REQUEST_TOO_LARGE", Code.RESOURCE_EXHAUSTED, "CapacityError", (413, "request_too_large"),
    "A body over the gateway's limit, or a request over gRPC's message limit (a status "
    "without `ErrorInfo`).",
    raised_by=f"{GATEWAY}, gRPC", run_kind=RUN_SERVER_CAPACITY,
)  # fmt: skip
TOO_MANY_CONNECTIONS = _row(
    "TOO_MANY_CONNECTIONS", None, "", _UNAVAILABLE,
    "The gateway holds `http_max_connections` connections; retry later.",
    retryable=True, **_HTTP_ONLY,
)  # fmt: skip
REQUEST_TIMEOUT = _row(
    "REQUEST_TIMEOUT", None, "", (408, "request_timeout"),
    "A request's headers or body did not arrive within the gateway's timeouts.",
    retryable=True, **_HTTP_ONLY,
)  # fmt: skip
BODY_UNPARSABLE = _row(
    "BODY_UNPARSABLE", None, "", (400, "invalid_request"),
    "A body that cannot be read: its bytes are not text in the encoding detected as JSON's "
    "(UTF-8/16/32); 400 as NeMo Gym's server answers. On the MCP endpoint, a body that is "
    "not JSON (JSON-RPC -32700) or JSON that is no JSON-RPC message, such as an array "
    "(-32600 Invalid Request, naming what is wrong).", **_HTTP_ONLY,
)  # fmt: skip
ROUTE_NOT_FOUND = _row(
    "ROUTE_NOT_FOUND", None, "", (404, "not_found"),
    "A path the gateway serves nothing at.", **_HTTP_ONLY,
)  # fmt: skip
METHOD_NOT_ALLOWED = _row(
    "METHOD_NOT_ALLOWED", None, "", (405, "method_not_allowed"),
    "A method the path does not take; `Allow` names those it does.", **_HTTP_ONLY,
)  # fmt: skip
NOT_ACCEPTABLE = _row(
    "NOT_ACCEPTABLE", None, "", (406, "not_acceptable"),
    "An MCP request whose `Accept` header does not take `application/json`.", **_HTTP_ONLY,
)  # fmt: skip
UNSUPPORTED_MEDIA_TYPE = _row(
    "UNSUPPORTED_MEDIA_TYPE", None, "", (415, "unsupported_media_type"),
    "An MCP request whose `Content-Type` is not `application/json`.", **_HTTP_ONLY,
)  # fmt: skip
SESSION_COOKIE_REQUIRED = _row(
    "SESSION_COOKIE_REQUIRED", None, "", (403, "forbidden"),
    "`POST /session_token` names another session than the request's cookie.", **_HTTP_ONLY,
)  # fmt: skip

#: Every row, by ``ErrorInfo.reason``.
REASONS: Mapping[str, Reason] = MappingProxyType(_ROWS)


def _by_code(code: grpc.StatusCode, sdk_class: str, http: tuple[int, str], meaning: str,
             **more: object) -> Reason:  # fmt: skip
    return Reason("", code, sdk_class, http[0], http[1], meaning, raised_by="gRPC", **more)  # type: ignore[arg-type]


#: Statuses without a reason of this table (a transport failure, another server), by code.
BY_CODE: Mapping[grpc.StatusCode, Reason] = MappingProxyType({
    Code.INVALID_ARGUMENT: _by_code(
        Code.INVALID_ARGUMENT, "InvalidRequestError", _INVALID, "An invalid request."
    ),
    Code.NOT_FOUND: _by_code(
        Code.NOT_FOUND, "SessionLostError", _LOST, "The session is not held.",
        rollout_kind=ROLLOUT_SESSION_LOST, **_LOST_KINDS,
    ),
    Code.UNAVAILABLE: _by_code(
        Code.UNAVAILABLE, "UnavailableError", _UNAVAILABLE,
        "No server answered (unreachable, TLS refused, shutting down).",
        run_kind=RUN_SERVER_UNAVAILABLE, retryable=True,
    ),
    Code.RESOURCE_EXHAUSTED: REQUEST_TOO_LARGE,
    Code.DEADLINE_EXCEEDED: _by_code(
        Code.DEADLINE_EXCEEDED, "DeadlineError", (504, "deadline_exceeded"),
        "No answer within the call's deadline.", run_kind=RUN_SERVER_UNAVAILABLE, retryable=True,
    ),
    Code.UNAUTHENTICATED: _by_code(
        Code.UNAUTHENTICATED, "UnauthenticatedError", _SERVICE_ERROR,
        "The server (or a proxy) refused the client's credentials.",
        run_kind=RUN_ADMIN_UNAUTHENTICATED,
    ),
})  # fmt: skip
#: Any other status with no reason of this table.
UNKNOWN = Reason(
    "", None, "WorkplaceEnvError", *_SERVICE_ERROR, "Any other failure.", raised_by="gRPC"
)


def lookup(code: grpc.StatusCode, reason: str) -> Reason:
    """The row of an error: its ``reason``'s, else its status ``code``'s, else :data:`UNKNOWN`."""
    return REASONS.get(reason) or BY_CODE.get(code, UNKNOWN)


def carried(code: grpc.StatusCode, reason: str) -> str:
    """The reason an SDK error with status ``code`` carries: ``reason`` when one was sent, else
    its status's row's name (``REQUEST_TOO_LARGE`` for RESOURCE_EXHAUSTED), else the code's
    name (``DEADLINE_EXCEEDED``), the key of its row under "Statuses without a reason"."""
    return reason or lookup(code, "").name or code.name


def is_registry_name(name: str) -> bool:
    """Whether ``name`` is a reason of the registry: a row of :data:`REASONS`, or the name of a
    status code (a status without one, mapped by :data:`BY_CODE` or :data:`UNKNOWN`)."""
    return name in REASONS or name in grpc.StatusCode.__members__
