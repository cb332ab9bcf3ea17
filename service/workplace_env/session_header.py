"""CONTRACT X4, the one place of the rule: a request carrying the session header names that session.

Clients and proxies route every request of a session to one server by hashing the header
``x-resources-session-id``; the body stays the authority on which session a request is
about. A request whose header names another session than its body would run on a server chosen
for that other session, so it is refused before anything runs.

The rule: when the header is present, every session id the request names must equal every value
of the header (a header sent more than once: a proxy may route by either value). A request
without the header, or naming no session, passes.

No transport here. The gRPC server (:mod:`workplace_env.server.affinity`: INVALID_ARGUMENT with
``ErrorInfo`` + ``BadRequest``) and the HTTP gateway (:mod:`workplace_env.gateway.translate`:
422 with ``reason`` and ``loc``) read the header values and the named ids from their own
request, call :func:`check_ids_against_header`, and answer its :class:`SessionHeaderMismatch`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from workplace_env import errors

#: The header clients and proxies hash to pick a server (the SDK's ``SESSION_HEADER``).
SESSION_HEADER = "x-resources-session-id"
#: ``ErrorInfo.reason`` (HTTP: ``reason``) of a request whose header and body disagree.
REASON = "SESSION_HEADER_MISMATCH"


class SessionHeaderMismatch(errors.InvalidRequest):
    """The header names ``header`` but the request names ``session_id`` (X4): an invalid request
    (one violation on ``resources_session_id``) with its own reason."""

    reason = REASON

    def __init__(self, header: str, session_id: str) -> None:
        super().__init__(
            [
                errors.FieldViolation(
                    "resources_session_id",
                    f"is {errors.clip_inline(session_id)!r} but the {SESSION_HEADER} header is "
                    f"{errors.clip_inline(header)!r}",
                )
            ],
            session_id,
        )
        self.header = header


def check_ids_against_header(headers: Sequence[str], session_ids: Iterable[str]) -> None:
    """Raise :class:`SessionHeaderMismatch` for the first of ``session_ids`` (the ids the request
    names, in order) that differs from a value of ``headers`` (every value the header was sent
    with, in order; empty: the header is absent and nothing is checked)."""
    if not headers:
        return
    for sid in session_ids:
        for header in headers:
            if sid != header:
                raise SessionHeaderMismatch(header, sid)
