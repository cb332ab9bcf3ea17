"""Domain errors: one type per docs/contract.md reason. The gRPC layer maps each to its status code.

Each error carries the CONTRACT ``reason`` (the ``google.rpc.ErrorInfo.reason`` on the wire), the
session it concerns, and a message for people. Nothing here imports gRPC.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

#: The most UTF-8 bytes of one value echoed into an error (a session id, an id or text a
#: request sent): errors travel in gRPC trailers (``grpc-message`` and the
#: ``grpc-status-details-bin`` ``Status``, base64), which a client refuses over 8-16 KiB, so
#: an echo of an over-long value would turn a clear refusal into ``RESOURCE_EXHAUSTED``.
MAX_ECHO_BYTES = 512
#: The most UTF-8 bytes of one value echoed inside a sentence (a header value, a request's
#: path), so the sentence stays readable whatever the client sent.
MAX_INLINE_ECHO_BYTES = 96
#: The most UTF-8 bytes of an error's message, of a violation's field path and description,
#: and of the violations listed (each counted with its framing; the rest counted in one
#: more). With these the whole status stays under 8 KiB whatever the request held.
MAX_ERROR_MESSAGE_BYTES = 512
MAX_FIELD_BYTES = 128
MAX_DESCRIPTION_BYTES = 256
MAX_VIOLATIONS_BYTES = 3072
#: A violation's framing in the ``BadRequest`` message (tags and lengths), in bytes, at most.
_VIOLATION_FRAMING = 8


def clip(text: str, max_bytes: int = MAX_ECHO_BYTES) -> str:
    """``text`` when its UTF-8 form has at most ``max_bytes`` bytes; else its start and its
    end (where a message says why) around a note of the full length, within ``max_bytes``:
    ``aaaa...(20000 characters)...aa``. Cut on characters, never inside one. A lone surrogate
    (an echo of a request's JSON text), which no trailer can carry, is written as its
    ``\\udXXX`` escape."""
    if not text.isascii():
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= max_bytes:
        return text
    note = f"...({len(text)} characters)..."
    room = max(0, max_bytes - len(note))
    head = encoded[: room - room // 3].decode("utf-8", "ignore")
    tail = encoded[len(encoded) - room // 3 :].decode("utf-8", "ignore")
    return head + note + tail


def clip_inline(text: str) -> str:
    """``text`` (a value the client sent: an id, a header, a path) as a sentence echoes it:
    its invisible format characters (Unicode category Cf: bidi overrides such as U+202E,
    zero-width ones) written as ``\\uXXXX`` escapes, so the sentence reads as sent, then
    :func:`clip` to :data:`MAX_INLINE_ECHO_BYTES`."""
    if not text.isascii():
        text = "".join(f"\\u{ord(c):04x}" if unicodedata.category(c) == "Cf" else c for c in text)
    return clip(text, MAX_INLINE_ECHO_BYTES)


def closest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate most like ``word`` (a "did you mean" hint: difflib's similarity of at
    least 0.6), or None. Only the first 200 characters of ``word`` are compared (difflib's
    cost grows with the square of the length; a longer word is like no name of ours)."""
    close = difflib.get_close_matches(word[:200], list(candidates), n=1)
    return close[0] if close else None


@dataclass(frozen=True)
class FieldViolation:
    """One offending request field: its path (e.g. ``episode_id.rollout_id``) and what is wrong."""

    field: str
    description: str


class SessionError(Exception):
    """Base of the domain's errors; ``reason`` is the CONTRACT reason string and ``info`` more
    ``ErrorInfo`` metadata (strings) beside the session id."""

    reason: str = "INTERNAL"
    info: dict[str, str] = {}  # noqa: RUF012 (read-only default; subclasses set their own)

    def __init__(self, message: str, session_id: str = "") -> None:
        # bounded (see MAX_ECHO_BYTES): the message and the id are echoed into the trailers
        message = clip(message, MAX_ERROR_MESSAGE_BYTES)
        super().__init__(message)
        self.message = message
        self.session_id = clip(session_id)


class InvalidRequest(SessionError):
    """A malformed identity, task or request (S5, V5). Carries the field violations, each
    clipped (:func:`clip`), as many as fit in :data:`MAX_VIOLATIONS_BYTES`, and then one
    more (field ``""``) counting the others, so that a request with thousands of bad fields
    is still answered."""

    reason = "INVALID_REQUEST"

    def __init__(self, violations: list[FieldViolation], session_id: str = "") -> None:
        listed: list[FieldViolation] = []
        room = MAX_VIOLATIONS_BYTES
        for v in violations:
            clipped = FieldViolation(
                clip(v.field, MAX_FIELD_BYTES), clip(v.description, MAX_DESCRIPTION_BYTES)
            )
            text = f"{clipped.field}{clipped.description}"
            size = len(text.encode("utf-8", "surrogatepass")) + _VIOLATION_FRAMING
            if size > room:
                left = len(violations) - len(listed)
                listed.append(FieldViolation("", f"and {left} more violations"))
                break
            listed.append(clipped)
            room -= size
        violations = listed
        # a violation of the request as a whole (field "") reads without a field name
        summary = "; ".join(
            f"{v.field}: {v.description}" if v.field else v.description for v in violations
        )
        super().__init__(f"invalid request: {summary}", session_id)
        self.violations = violations


class InvalidToolArguments(SessionError):
    """CallTool ``arguments`` is not the JSON text of an object (T3)."""

    reason = "INVALID_TOOL_ARGUMENTS"


class SessionConflict(SessionError):
    """The id is bound to another episode or task (S3)."""

    reason = "SESSION_CONFLICT"


class SessionClaimed(SessionError):
    """Restored state was claimed by its own binding; another episode may not use it (K5)."""

    reason = "SESSION_CLAIMED"


class SessionLive(SessionError):
    """A restore names ids the server holds live; nothing was installed (K3)."""

    reason = "SESSION_LIVE"


class SandboxMismatch(SessionError):
    """A restore of snapshots exported on another sandbox than this server's; nothing was
    installed (their tables and Verify's replay would read different base tables)."""

    reason = "SANDBOX_MISMATCH"


class SessionClosed(SessionError):
    """The id was closed; a fence refuses seeds (S4) and tool calls (T5)."""

    reason = "SESSION_CLOSED"


class SessionLost(SessionError):
    """The server does not hold the id: never seeded, released, or lost in a restart (T4)."""

    reason = "SESSION_LOST"


class SessionExpired(SessionError):
    """The session was evicted after its idle TTL (X1)."""

    reason = "SESSION_EXPIRED"


class TablesUnavailable(SessionError):
    """Building the session's tables failed; nothing was bound and a retry may succeed (S6)."""

    reason = "TABLES_UNAVAILABLE"


class CapacityExhausted(SessionError):
    """The server holds its maximum of live sessions (S7); retry after ``retry_after_s``."""

    reason = "CAPACITY_EXHAUSTED"

    def __init__(self, message: str, session_id: str = "", retry_after_s: float = 1.0) -> None:
        super().__init__(message, session_id)
        self.retry_after_s = retry_after_s


class ResponseTooLarge(SessionError):
    """An answer larger than the server's message limit (``max_message_bytes``): gRPC could
    not send it, so the RPC is answered RESOURCE_EXHAUSTED with the limit and the size in
    ``ErrorInfo`` metadata (``limit_bytes``, ``size_bytes``). The call itself was applied."""

    reason = "RESPONSE_TOO_LARGE"

    def __init__(self, message: str, session_id: str, size_bytes: int, limit_bytes: int) -> None:
        super().__init__(message, session_id)
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes
        self.info = {"size_bytes": str(size_bytes), "limit_bytes": str(limit_bytes)}


class SessionTooLarge(SessionError):
    """A write-tool call that would take its session over ``max_session_write_bytes`` (the
    UTF-8 bytes of the arguments text of the session's applied write calls):
    RESOURCE_EXHAUSTED with ``ErrorInfo`` metadata ``limit_bytes`` (the bound),
    ``size_bytes`` (the session's total with this call) and ``call_bytes`` (this call's).
    Nothing was applied or recorded; the session still serves reads, verify and close."""

    reason = "SESSION_TOO_LARGE"

    def __init__(
        self, message: str, session_id: str, size_bytes: int, limit_bytes: int, call_bytes: int
    ) -> None:
        super().__init__(message, session_id)
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes
        self.info = {
            "size_bytes": str(size_bytes),
            "limit_bytes": str(limit_bytes),
            "call_bytes": str(call_bytes),
        }


class CallIdReused(SessionError):
    """A ``call_id`` was reused with another tool or other arguments (T7)."""

    reason = "CALL_ID_REUSED"


class EpisodeMismatch(SessionError):
    """A close names another episode than the session's binding (C4)."""

    reason = "EPISODE_MISMATCH"


class ReleaseFailed(SessionError):
    """Releasing a session's tables failed; it is not recorded as closed (C5, INTERNAL)."""

    reason = "RELEASE_FAILED"


class InjectedFault(SessionError):
    """A test-injected transient failure (UNAVAILABLE), e.g. a tool call's lost response.

    The session store raises it only when its hooks say a response is lost (tests install
    :class:`workplace_env.testing.faults.Faults` there); clients see a retryable status.
    """

    reason = "INJECTED_FAULT"


class Draining(SessionError):
    """The server is shutting down and takes no new seeds (X2)."""

    reason = "DRAINING"


class Unauthenticated(SessionError):
    """An admin RPC without a valid bearer token, or with the admin service off (A1).

    ``reason``: ``ADMIN_TOKEN_REQUIRED``, ``ADMIN_TOKEN_INVALID`` or ``ADMIN_DISABLED``.
    """

    reason = "ADMIN_TOKEN_REQUIRED"

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason
