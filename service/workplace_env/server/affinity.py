"""The session header check of the gRPC server (CONTRACT X4): a routed request names that session.

The rule is :mod:`workplace_env.session_header`'s; here it reads the header values from the
call's metadata and the ids from the request message (``resources_session_id`` of the
environment RPCs and of RetireSession, each id of an ExportSessions, the id of each snapshot of
a RestoreSessions stream), and answers a mismatch with INVALID_ARGUMENT, ``ErrorInfo.reason``
``SESSION_HEADER_MISMATCH`` plus a ``BadRequest`` on ``resources_session_id``, before the
handler runs. A request without the header (direct clients, grpcurl) costs one metadata scan.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import grpc

from workplace_env import session_header
from workplace_env.server.status import to_status

# Re-exported: the gRPC side's names for the rule's header and reason.
SESSION_HEADER = session_header.SESSION_HEADER
REASON = session_header.REASON


def _headers(metadata: Sequence[Any] | None) -> list[str]:
    """Every value of the session header in ``metadata`` (a repeated header: each of them)."""
    return [
        value if isinstance(value, str) else value.decode("ascii", "replace")
        for key, value in metadata or ()
        if key == SESSION_HEADER
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


def check_session_header(request: Any, rpc: str, context: grpc.ServicerContext) -> None:
    """Abort ``rpc`` with the status of :class:`~workplace_env.session_header.SessionHeaderMismatch`
    (INVALID_ARGUMENT) when a value of the header names another session than ``request``."""
    headers = _headers(context.invocation_metadata())
    if not headers:
        return
    try:
        session_header.check_session_header(headers, _named_ids(request))
    except session_header.SessionHeaderMismatch as mismatch:
        context.abort_with_status(to_status(mismatch, rpc))


def _checked(handler: grpc.RpcMethodHandler, rpc: str) -> grpc.RpcMethodHandler:
    """``handler`` with the check before it runs (streamed requests: before each message)."""
    kwargs = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        inner_uu = handler.unary_unary

        def unary_unary(request: Any, context: grpc.ServicerContext) -> Any:
            check_session_header(request, rpc, context)
            return inner_uu(request, context)

        return grpc.unary_unary_rpc_method_handler(unary_unary, **kwargs)
    if handler.unary_stream is not None:
        inner_us = handler.unary_stream

        def unary_stream(request: Any, context: grpc.ServicerContext) -> Any:
            check_session_header(request, rpc, context)
            return inner_us(request, context)

        return grpc.unary_stream_rpc_method_handler(unary_stream, **kwargs)
    if handler.stream_unary is not None:
        inner_su = handler.stream_unary

        def each(requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
            for request in requests:
                check_session_header(request, rpc, context)
                yield request

        def stream_unary(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
            return inner_su(each(requests, context), context)

        return grpc.stream_unary_rpc_method_handler(stream_unary, **kwargs)
    return handler  # streaming both ways (reflection): names no session


class SessionHeaderInterceptor(grpc.ServerInterceptor):
    """Refuses requests whose session header and body disagree (see the module docstring).

    Requests without the header get the handler as is; the checking handler of each method is
    built once and reads the header from the call's context, so a checked call costs a
    metadata scan and one comparison per named id.
    """

    def __init__(self) -> None:
        # id(handler) -> (handler, its checking twin); the handler is kept so the id stays its.
        self._checked: dict[int, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        handler = continuation(handler_call_details)
        if handler is None or not _headers(handler_call_details.invocation_metadata):
            return handler
        known = self._checked.get(id(handler))
        if known is None or known[0] is not handler:
            rpc = handler_call_details.method.rsplit("/", 1)[-1]
            known = self._checked[id(handler)] = (handler, _checked(handler, rpc))
        return known[1]
