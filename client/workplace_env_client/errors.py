"""Typed SDK exceptions, built from the server's rich status (``google.rpc.ErrorInfo``).

Every RPC failure reaches SDK users as a :class:`WorkplaceEnvError` subclass chosen by the
``ErrorInfo.reason`` (or the status code when the server sent none, e.g. a deadline), never as
a bare ``grpc.RpcError``. The original error stays available as ``__cause__``.
"""

from __future__ import annotations

import asyncio
import re
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from workplace_env_client import reasons


@dataclass(frozen=True)
class FieldViolation:
    """One offending request field reported by the server (``google.rpc.BadRequest``)."""

    field: str
    description: str


class WorkplaceEnvError(Exception):
    """Base of every SDK error: status ``code``, and from the rich status the ``reason`` and
    ``domain`` (``google.rpc.ErrorInfo``; without one, ``reason`` is the registry's name of the
    status, :func:`~workplace_env_client.reasons.carried`), ``session_id`` (its
    ``resources_session_id``), ``metadata`` (the rest of its ``ErrorInfo.metadata``, e.g.
    ``already_restored`` on a restore's SESSION_LIVE, ``limit_bytes`` on SESSION_TOO_LARGE),
    ``violations`` (``BadRequest``) and ``retry_after_s`` (``RetryInfo``, seconds). ``hint``
    says what an SDK user changes to fix it (None: :func:`fix_hint` of the code and reason, in
    the SDK's words; a note, ``fix: ...``, under the traceback), or is empty."""

    def __init__(
        self,
        message: str,
        code: grpc.StatusCode,
        reason: str = "",
        session_id: str = "",
        violations: tuple[FieldViolation, ...] = (),
        retry_after_s: float | None = None,
        domain: str = "",
        metadata: Mapping[str, str] | None = None,
        hint: str | None = None,
    ) -> None:
        reason = reasons.carried(code, reason)
        hint = fix_hint(code, reason, message) if hint is None else hint
        named = reason != code.name
        super().__init__(f"{code.name} {reason}: {message}" if named else f"{code.name}: {message}")
        self.message = message
        self.hint = hint
        if hint:
            self.add_note(f"fix: {hint}")
        self.code = code
        self.reason = reason
        self.session_id = session_id
        self.violations = violations
        self.retry_after_s = retry_after_s
        self.domain = domain
        self.metadata: dict[str, str] = dict(metadata or {})


class InvalidRequestError(WorkplaceEnvError):
    """INVALID_ARGUMENT: a malformed identity, task, arguments or verify request."""


class ArgumentError(InvalidRequestError, ValueError):
    """INVALID_ARGUMENT raised by the SDK, not the server: a Python argument of an SDK method
    has a shape no request can carry (a row that is not a mapping, an episode that is not a
    ``(rollout_id, attempt)`` pair, a lone surrogate, ...). Nothing was sent. Its message and
    its one :class:`FieldViolation` name the field as the server does (``episode_id.rollout_id``,
    ``arguments.query``, ``function_calls.calls[0]``); ``reason`` is the server's for the same
    field (``INVALID_TOOL_ARGUMENTS`` for a tool call's arguments, else ``INVALID_REQUEST``).
    Also a ValueError, the Python convention for a bad argument."""

    def __init__(
        self, field: str, description: str, reason: str = reasons.INVALID_REQUEST.name
    ) -> None:
        super().__init__(
            f"{field}: {description}",
            grpc.StatusCode.INVALID_ARGUMENT,
            reason=reason,
            violations=(FieldViolation(field, description),),
        )


class SessionHeaderMismatchError(InvalidRequestError):
    """INVALID_ARGUMENT SESSION_HEADER_MISMATCH: the ``x-resources-session-id`` header names
    another session than the request body (the header routes, the body decides)."""


class ReplayDivergedError(WorkplaceEnvError):
    """DATA_LOSS REPLAY_DIVERGED (raised by the SDK, not the server): a call replayed during
    :meth:`Session.recover` returned another output than the first time, so the recovered
    session's state is not the lost one."""


class ClientClosedError(WorkplaceEnvError, ValueError):
    """FAILED_PRECONDITION CLIENT_CLOSED (raised by the SDK, not the server): an RPC through a
    client after its ``close()`` (or over a channel its owner closed): nothing was sent; or an
    RPC in flight when the client was closed (:attr:`in_flight`: it may have run). Also a
    ValueError, what gRPC raises for it."""

    #: True when the RPC was in flight at the close (it may have reached the server).
    in_flight: bool = False


def client_closed(in_flight: bool = False) -> ClientClosedError:
    """The :class:`ClientClosedError` of a call through a closed client (``in_flight``: one
    under way when the client was closed)."""
    error = _closed_error()
    error.in_flight = in_flight
    return error


def _closed_error() -> ClientClosedError:
    return ClientClosedError(
        "the client is closed (its close() was called, or its channel was closed)",
        grpc.StatusCode.FAILED_PRECONDITION,
        reason=reasons.CLIENT_CLOSED.name,
    )


def closed_channel_error(exc: Exception) -> ClientClosedError | None:
    """The :class:`ClientClosedError` of gRPC's refusal to send on a closed channel (a
    ValueError ``Cannot invoke RPC on closed channel!``, an aio ``UsageError`` ``Channel is
    closed.``), or None for any other exception."""
    text = str(exc).lower()
    if "channel" not in text or "closed" not in text:
        return None
    return client_closed()


class EventLoopError(WorkplaceEnvError, RuntimeError):
    """FAILED_PRECONDITION WRONG_EVENT_LOOP (raised by the SDK, not the server): an async
    client's call in another event loop than the one its first call ran in (a ``grpc.aio``
    channel belongs to one loop; each ``asyncio.run`` makes a new one); nothing was sent. Also
    a RuntimeError, what asyncio raises for it."""


def wrong_event_loop() -> EventLoopError:
    """The :class:`EventLoopError` of a call in another event loop than the client's."""
    return EventLoopError(
        "this async client was first used in another event loop (each asyncio.run makes a new "
        "one) and its channel belongs to that loop",
        grpc.StatusCode.FAILED_PRECONDITION,
        reason=reasons.WRONG_EVENT_LOOP.name,
    )


class SessionConflictError(WorkplaceEnvError):
    """ALREADY_EXISTS SESSION_CONFLICT: the id is bound to another episode or task."""


class SessionClaimedError(SessionConflictError):
    """ALREADY_EXISTS SESSION_CLAIMED: restored state was claimed by its own binding (K5)."""


class SessionLiveError(WorkplaceEnvError):
    """FAILED_PRECONDITION SESSION_LIVE: a restore names ids the server holds; nothing was
    installed."""


class SandboxMismatchError(WorkplaceEnvError):
    """FAILED_PRECONDITION SANDBOX_MISMATCH: a restore of snapshots exported on another sandbox
    than the server's (the message names both); nothing was installed."""


class UnauthenticatedError(WorkplaceEnvError):
    """UNAUTHENTICATED: an admin RPC without the server's bearer token."""


class SessionClosedError(WorkplaceEnvError):
    """SESSION_CLOSED: the id was closed (seed: ALREADY_EXISTS; calls: NOT_FOUND)."""


class SessionLostError(WorkplaceEnvError):
    """NOT_FOUND SESSION_LOST / SESSION_EXPIRED: the server does not hold the session."""


class SessionExpiredError(SessionLostError):
    """NOT_FOUND SESSION_EXPIRED: the session was evicted after its idle TTL (CONTRACT X1)."""


class CallIdReusedError(WorkplaceEnvError):
    """ALREADY_EXISTS CALL_ID_REUSED: a call_id was reused for another call."""


class EpisodeMismatchError(WorkplaceEnvError):
    """FAILED_PRECONDITION EPISODE_MISMATCH: closing with another episode than the binding."""


class UnavailableError(WorkplaceEnvError):
    """UNAVAILABLE: tables could not be built, the server is draining, or it is unreachable."""


class CapacityError(WorkplaceEnvError):
    """RESOURCE_EXHAUSTED: the server is full; retry after ``retry_after_s``."""


class SessionTooLargeError(CapacityError):
    """RESOURCE_EXHAUSTED SESSION_TOO_LARGE: the write call would take its session over the
    server's ``max_session_write_bytes``. Nothing ran or was recorded; the same call gets the
    same refusal (never retry it), while the session still serves reads, verify and close.
    ``limit_bytes`` is the bound, ``size_bytes`` the session's total with this call (from
    ``ErrorInfo`` metadata; None when the server sent none)."""

    @property
    def limit_bytes(self) -> int | None:
        return _int_or_none(self.metadata.get("limit_bytes"))

    @property
    def size_bytes(self) -> int | None:
        return _int_or_none(self.metadata.get("size_bytes"))


def too_large_sizes(error: WorkplaceEnvError) -> dict[str, int]:
    """``{"limit_bytes", "size_bytes"}`` of a SESSION_TOO_LARGE refusal, those it carries
    (the HTTP gateway's and MCP's answers show them); empty for any other error."""
    if not isinstance(error, SessionTooLargeError):
        return {}
    sizes = {"limit_bytes": error.limit_bytes, "size_bytes": error.size_bytes}
    return {k: v for k, v in sizes.items() if v is not None}


def _int_or_none(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


class ReleaseFailedError(WorkplaceEnvError):
    """INTERNAL RELEASE_FAILED: a close could not release the session; it is not closed and a
    retry can succeed (CONTRACT C5)."""


class DeadlineError(WorkplaceEnvError):
    """DEADLINE_EXCEEDED: the call did not finish within its deadline."""


class SessionLeftOpenWarning(UserWarning):
    """A session was left open: a session context manager could not close its session (the
    server unreachable or slow, the client closed, any failure of the close), and the server,
    if it is still running, may keep it until its idle TTL evicts it; or a training adapter's
    episode was left before its end (reset to another, dropped, its environment closed), and
    the adapter closed its session unscored (or says it could not). The message names the
    session id and what became of it."""


#: Close failures of a server out of reach: it keeps the session until its idle TTL.
_LEFT_OPEN = (UnavailableError, DeadlineError)


#: Failure statuses after which an RPC may have run on the server: its outcome is unknown.
_OUTCOME_UNKNOWN = frozenset(
    {
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.INTERNAL,
    }
)


def may_have_run(error: BaseException) -> bool:
    """Whether an RPC that failed with ``error`` may have run on the server: its outcome is
    unknown (a deadline, an unreachable server, a connection lost mid-call, an interrupt or a
    cancellation, a call cut by its client's close); False for a definite refusal by a status
    and for an SDK error raised before sending (ArgumentError, EventLoopError,
    ClientClosedError)."""
    if isinstance(error, ClientClosedError):
        return error.in_flight
    if isinstance(error, WorkplaceEnvError):
        return error.code in _OUTCOME_UNKNOWN
    return True


#: What may become of a session whose close failed: the SDK cannot tell whether its server
#: still runs.
_STAYS_OPEN = (
    "may stay open on the server, if that server is still running, until its idle TTL evicts "
    "it (serve --idle-ttl-s, an hour by default) or close_session() reaches it"
)


def left_open(session_id: str) -> str:
    """Which session may stay open on its server after a failed close, and for how long."""
    return f"session {session_id!r} {_STAYS_OPEN}"


#: What an error without a text of its own is called in a message.
_UNSAID = {asyncio.CancelledError: "cancelled", KeyboardInterrupt: "interrupted"}


def failure_text(error: BaseException) -> str:
    """``error``'s text, never empty: a bare cancellation is ``cancelled``, a bare
    KeyboardInterrupt ``interrupted``, any other bare error its class name."""
    return str(error) or next(
        (said for kind, said in _UNSAID.items() if isinstance(error, kind)), type(error).__name__
    )


def warn_left_open(
    session_id: str, closing: BaseException | None, abandoned: str = "", stacklevel: int = 3
) -> None:
    """Issue the :class:`SessionLeftOpenWarning` about ``session_id`` (at ``stacklevel``):
    ``closing``, the error its close raised (None: it closed; :func:`failure_text` names it);
    ``abandoned``, why its episode ended before its end (``""``: it did not)."""
    left = f" after its episode was left unfinished ({abandoned})" if abandoned else ""
    if closing is None:
        text = f"session {session_id!r} was closed{left}: the episode is not scored"
    else:
        text = (
            f"session {session_id!r} was not closed ({failure_text(closing)}){left}; "
            f"it {_STAYS_OPEN}"
        )
    warnings.warn(text, SessionLeftOpenWarning, stacklevel=stacklevel + 1)


def note_close_failed(in_flight: BaseException, session_id: str, error: BaseException) -> None:
    """Note on ``in_flight`` (an exception on its way out, never replaced) that closing
    ``session_id`` failed with ``error`` too, and how long the session may stay open."""
    said = failure_text(error)
    in_flight.add_note(
        f"closing session {session_id!r} also failed: {said}; {left_open(session_id)}"
    )


def close_failed(
    session_id: str, error: BaseException, in_flight: BaseException | None, stacklevel: int = 4
) -> None:
    """What a context manager does when closing ``session_id`` at its exit raised ``error``,
    whatever it is: a :class:`SessionLeftOpenWarning` (at ``stacklevel``) naming the session
    and how long the server keeps it; then with an exception ``in_flight`` from its block, a
    note on that exception (which goes on, never replaced); after a completed block, nothing
    more when the server is out of reach (UNAVAILABLE, DEADLINE_EXCEEDED), else ``error``
    raised with a note naming the session left open."""
    warn_left_open(session_id, error, stacklevel=stacklevel)
    if in_flight is not None:
        note_close_failed(in_flight, session_id, error)
        return
    if isinstance(error, _LEFT_OPEN):
        return
    error.add_note(left_open(session_id))
    raise error


def _sdk_class(row: reasons.Reason) -> type[WorkplaceEnvError]:
    cls: type[WorkplaceEnvError] = globals()[row.sdk_class]
    assert issubclass(cls, WorkplaceEnvError), row
    return cls


#: The exception class of each reason, and of a status without one (:mod:`.reasons`).
_BY_REASON = {name: _sdk_class(row) for name, row in reasons.REASONS.items() if row.sdk_class}
_BY_CODE = {code: _sdk_class(row) for code, row in reasons.BY_CODE.items()}


@dataclass(frozen=True)
class HintWords:
    """How the users of one surface (the SDK, a command) type what fixes an error, the words
    :func:`fix_hint` puts into its hints: ``target`` names the server to reach, ``tls_ca`` the
    CA of a TLS server, ``client_cert`` a client certificate (mTLS), ``token`` the admin token,
    ``timeout`` what to do about a deadline."""

    target: str
    tls_ca: str
    client_cert: str
    token: str
    timeout: str


#: The SDK's words: arguments of its classes and functions.
SDK_WORDS = HintWords(
    target="check the target the client was made with",
    tls_ca="credentials=tls_credentials(ca_file)",
    client_cert="credentials=tls_credentials(ca_file, cert_file, key_file)",
    token="AdminClient(token=...) or EnvironmentClient(admin_token=...)",
    timeout="raise the client's timeout_s, or check that the server is not overloaded",
)

#: What fixes an error, by ``ErrorInfo`` reason (or by the status code's name when the server
#: sent no reason: a transport failure; ``TLS`` for a failed TLS handshake), with the words of
#: the user's surface (:class:`HintWords`) and ``server``, the server's address.
HINTS: dict[str, str] = {
    reasons.ADMIN_TOKEN_REQUIRED.name: "pass the admin token {server} was started with (its "
    "--admin-token) as {token}",
    reasons.ADMIN_TOKEN_INVALID.name: "{token} must be the --admin-token {server} was started with",
    reasons.ADMIN_DISABLED.name: "restart the server at {server} with --admin-token, then pass "
    "that token as {token} (or, on loopback only, restart it with --admin-open)",
    reasons.CALL_ID_REUSED.name: "a call_id names one call of a session on {server}: resend "
    "its tool name and the identical arguments text (a mapping is sent as "
    "json.dumps(arguments, ensure_ascii=False), so resend the same mapping, or the same text), "
    "or use a new call_id for another call",
    "UNAVAILABLE": "no server answered at {server}: {target} (and check it runs); a server "
    "started with --tls-cert needs {tls_ca}",
    "TLS": "TLS with {server} failed: {tls_ca} must be the CA of the server's --tls-cert, a "
    "server started with --tls-client-ca also needs {client_cert}, and a plaintext server "
    "takes no {tls_ca}",
    "DEADLINE_EXCEEDED": "no answer from {server} in time: {timeout}",
    "UNAUTHENTICATED": "{server} refused this client's credentials: pass the admin token as "
    "{token}",
    "PERMISSION_DENIED": "{server} (or a proxy before it) does not let this client in: a server "
    "started with --tls-client-ca needs {client_cert}",
    reasons.CAPACITY_EXHAUSTED.name: "close the sessions no longer needed, retry once the "
    "RetryInfo delay has passed, or restart {server} with a larger --max-sessions (or "
    "WORKPLACE_ENV_MAX_SESSIONS)",
    reasons.TOO_MANY_RPCS.name: "retry once the RetryInfo delay has passed, send fewer calls at "
    "once, or restart {server} with a larger --max-concurrent-rpcs (or "
    "WORKPLACE_ENV_MAX_CONCURRENT_RPCS)",
    reasons.RESPONSE_TOO_LARGE.name: "the call ran, so do not resend it: ask for less (a narrower "
    "query or fewer rows), or, when the limit of {server} refused the answer, raise its "
    "--max-message-bytes (or WORKPLACE_ENV_MAX_MESSAGE_BYTES)",
    reasons.REQUEST_TOO_LARGE.name: "send a smaller request, or restart {server} with a larger "
    "--max-message-bytes (or WORKPLACE_ENV_MAX_MESSAGE_BYTES)",
    reasons.SESSION_TOO_LARGE.name: "write less through this session (e.g. split the call), or "
    "restart {server} with a larger --max-session-write-bytes (or "
    "WORKPLACE_ENV_MAX_SESSION_WRITE_BYTES)",
    reasons.SESSION_CONFLICT.name: "seed another episode under a new resources_session_id, or "
    "resend the episode_id and task this id is bound to on {server}",
    reasons.SESSION_CLAIMED.name: "seed this episode under a new resources_session_id; the "
    "restored state on {server} belongs to the episode it was restored for",
    reasons.SESSION_CLOSED.name: "an id is not used again once closed: seed the next episode "
    "under a new resources_session_id on {server}",
    reasons.SESSION_LOST.name: "seed the session on {server} (again) before calling it",
    reasons.SESSION_EXPIRED.name: "seed the episode again and call more often than the idle "
    "TTL, or restart {server} with a larger --idle-ttl-s (or WORKPLACE_ENV_IDLE_TTL_S)",
    reasons.SESSION_HEADER_MISMATCH.name: "send {server} the same resources_session_id in the "
    "x-resources-session-id header as in the request, or no such header",
    reasons.EPISODE_MISMATCH.name: "close with the episode_id the session was seeded with on "
    "{server}",
    reasons.SESSION_LIVE.name: "close those sessions on {server} first, or restore the "
    "checkpoint into a server that does not hold them",
    reasons.SANDBOX_MISMATCH.name: "restore into a server started on the sandbox the checkpoint "
    "was saved from (the same --data-dir), not {server}",
    reasons.TABLES_UNAVAILABLE.name: "seed again: nothing was bound on {server}",
    reasons.DRAINING.name: "send new episodes to another server (or replica): {server} is "
    "shutting down",
    reasons.RELEASE_FAILED.name: "close the session on {server} again",
    reasons.REPLAY_DIVERGED.name: "seed the episode again from its start on {server}: the "
    "recovered state is not the lost one",
    reasons.CLIENT_CLOSED.name: "make a new client for {server}",
    reasons.WRONG_EVENT_LOOP.name: "make one client for {server} per event loop, e.g. inside "
    "the coroutine asyncio.run runs (async with AsyncEnvironmentClient(...) as env)",
}
#: Why an error with an SDK class has no hint, by the key :data:`HINTS` would have: nothing a
#: user types fixes it, or its message names the fix already.
NO_HINT: dict[str, str] = {
    reasons.INVALID_REQUEST.name: "its message and violations name each offending field and "
    "what is wrong with it",
    reasons.INVALID_TOOL_ARGUMENTS.name: "its message names the arguments' problem",
    reasons.MALFORMED_REQUEST.name: "its message names what cannot be read",
    "INVALID_ARGUMENT": "its message names what is invalid",
    reasons.INJECTED_FAULT.name: "a test's fault hook; the SDK retries it",
    reasons.EXPORT_FAILED.name: "a failure of the server's, reported with its cause",
    "NOT_FOUND": "another server's status without a reason: nothing says what it lacks",
}
#: Words of gRPC's messages about a failed TLS handshake.
_TLS_WORDS = ("handshake", "ssl", "certificate")


def fix_hint(
    code: grpc.StatusCode,
    reason: str,
    message: str,
    words: HintWords = SDK_WORDS,
    server: str = "the client's target",
) -> str:
    """What a user of the surface of ``words`` changes to fix an error (its status ``code``,
    ``ErrorInfo.reason`` and message) of an RPC to ``server`` (an address, or how the surface
    names the server); "" when nothing the user types fixes it."""
    sent = "" if reason == code.name else reason  # without ErrorInfo: the status's name
    tls = any(word in message.lower() for word in _TLS_WORDS)
    key = "TLS" if not sent and code is grpc.StatusCode.UNAVAILABLE and tls else sent
    key = key or reasons.carried(code, "")
    template = HINTS.get(key)
    if template is None:
        return ""
    return template.format(server=server, **vars(words))


@dataclass
class _Details:
    reason: str = ""
    domain: str = ""
    session_id: str = ""
    violations: list[FieldViolation] = field(default_factory=list)
    retry_after_s: float | None = None
    metadata: dict[str, str] = field(default_factory=dict)


def _details(details: Iterable[any_pb2.Any]) -> _Details:
    out = _Details()
    for detail in details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            out.reason = info.reason
            out.domain = info.domain
            out.session_id = info.metadata.get("resources_session_id", "")
            out.metadata = dict(info.metadata)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            out.violations = [FieldViolation(v.field, v.description) for v in bad.field_violations]
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
            out.retry_after_s = retry.retry_delay.ToNanoseconds() / 1e9
    return out


def _status_details(error: grpc.RpcError) -> Iterable[any_pb2.Any]:
    """The rich status details a failed RPC carries (none when it carries no rich status)."""
    try:
        status = rpc_status.from_call(error)  # type: ignore[arg-type]
    except (ValueError, AttributeError):
        return ()
    return () if status is None else status.details


#: gRPC's text when an answer is over a message limit: this client's receive limit
#: ("CLIENT: Received ...") or the server's send limit ("SERVER: Sent ..."), "(<size> vs.
#: <limit>)". The server's refusal of a request over its limit says "SERVER: Received".
_ANSWER_OVER_LIMIT = re.compile(
    r"(CLIENT: Received|SERVER: Sent) message larger than max \((\d+) vs\. (\d+)\)"
)
#: Whose limit an answer was over, by the side gRPC names.
_WHOSE_LIMIT = {"CLIENT: Received": "this client's", "SERVER: Sent": "the server's"}


def error_class(code: grpc.StatusCode, reason: str) -> type[WorkplaceEnvError]:
    """The SDK exception class for a status ``code`` and ``ErrorInfo.reason`` (the reason
    first; ``reason`` may be empty)."""
    return _BY_REASON.get(reason) or _BY_CODE.get(code, _sdk_class(reasons.UNKNOWN))


def from_rpc_error(error: grpc.RpcError) -> WorkplaceEnvError:
    """The typed SDK exception for a failed RPC (:func:`from_status` of its status)."""
    code: grpc.StatusCode = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    message: str | None = error.details() if hasattr(error, "details") else str(error)
    return from_status(code, message or "", _status_details(error))


def from_status(
    code: grpc.StatusCode, message: str, details: Iterable[any_pb2.Any] = ()
) -> WorkplaceEnvError:
    """The typed SDK exception for a status: its ``code``, ``message`` and rich ``details``
    (``google.rpc.Status.details``: ErrorInfo, BadRequest, RetryInfo). An answer over this
    client's message limit, or over the server's own (gRPC's send limit, e.g. ListTools on a
    server started with a tiny ``--max-message-bytes``), is CapacityError
    ``RESPONSE_TOO_LARGE`` naming the size and whose limit, as the server's refusal of an
    answer over its limit: the RPC ran, only its answer was lost; gRPC's bare
    RESOURCE_EXHAUSTED would read as a request too large."""
    info = _details(details)
    over = _ANSWER_OVER_LIMIT.search(message)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and not info.reason and over:
        side, size, limit = over.groups()
        return CapacityError(
            f"the answer is {size} bytes, over {_WHOSE_LIMIT[side]} message limit of {limit} "
            "bytes; the call ran on the server (a retry with its call_id gets this answer "
            "again)",
            code,
            reason=reasons.RESPONSE_TOO_LARGE.name,
        )
    cls = error_class(code, info.reason)
    return cls(
        message,
        code,
        reason=info.reason,
        session_id=info.session_id,
        violations=tuple(info.violations),
        retry_after_s=info.retry_after_s,
        domain=info.domain,
        metadata=info.metadata,
    )
