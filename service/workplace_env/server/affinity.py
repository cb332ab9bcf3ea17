"""The session header check of the gRPC server (CONTRACT X4): a routed request names that session.

The rule is :mod:`workplace_env.session_header`'s; here it reads the header values from the
call's metadata and the ids from the request message (``resources_session_id`` of the
environment RPCs and of RetireSession, each id of an ExportSessions, the id of each snapshot of
a RestoreSessions stream), and answers a mismatch with INVALID_ARGUMENT, ``ErrorInfo.reason``
``SESSION_HEADER_MISMATCH`` plus a ``BadRequest`` on ``resources_session_id``, before the
handler runs (the :func:`session_header_guard` step of the server's pipeline). A request without
the header (direct clients, grpcurl) costs one metadata scan.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import grpc

from workplace_env import session_header
from workplace_env.server.pipeline import Behaviour, Method, each_request
from workplace_env.server.status import to_status


def _headers(metadata: Sequence[Any] | None) -> list[str]:
    """Every value of the session header in ``metadata`` (a repeated header: each of them)."""
    return [
        value if isinstance(value, str) else value.decode("ascii", "replace")
        for key, value in metadata or ()
        if key == session_header.SESSION_HEADER
    ]


def _named_ids(request: Any) -> Iterable[str]:
    """The session ids a request message names (none for e.g. ListTools)."""
    sid = getattr(request, "resources_session_id", None)
    if sid is not None:
        return (sid,)
    ids = getattr(request, "resources_session_ids", None)
    if ids is not None:
        return ids
    snapshots = getattr(request, "snapshots", None)
    if snapshots is not None:
        return [s.resources_session_id for s in snapshots]
    return ()


def abort_on_header_mismatch(request: Any, rpc: str, context: grpc.ServicerContext) -> None:
    """Abort ``rpc`` with the status of :class:`~workplace_env.session_header.SessionHeaderMismatch`
    (INVALID_ARGUMENT) when a value of the header names another session than ``request``."""
    headers = _headers(context.invocation_metadata())
    if not headers:
        return
    try:
        session_header.check_ids_against_header(headers, _named_ids(request))
    except session_header.SessionHeaderMismatch as mismatch:
        context.abort_with_status(to_status(mismatch, rpc))


def session_header_guard(method: Method, behaviour: Behaviour) -> Behaviour:
    """Step: :func:`abort_on_header_mismatch` before the behaviour runs (a request stream: on each
    message); methods streaming both ways (reflection) name no session and are left as given.
    Without the header a request costs one metadata scan."""
    if method.request_streaming and method.response_streaming:
        return behaviour
    return each_request(method, behaviour, abort_on_header_mismatch)
