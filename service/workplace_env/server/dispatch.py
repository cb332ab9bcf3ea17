"""The environment service's RPCs: composed handlers, chosen per RPC by one interceptor.

:class:`EnvironmentDispatch` is the server's first interceptor. For a method of the
environment service it answers from handlers built once per method at start-up and never
walks the rest of the chain (grpcio runs every interceptor on every RPC). Each
method has two handlers, both counted, timed and logged by
:func:`~workplace_env.server.observability.counting`:

* **admitted**: refuses an undecodable request (``MALFORMED_REQUEST``) and a session header
  that names another session than the body (``SESSION_HEADER_MISMATCH``), then runs the
  servicer. Its behaviour carries the server's :class:`~workplace_env.server.guard.Lane` as
  grpcio's ``experimental_thread_pool``, so it waits there for one of ``workers`` threads;
  its admission slot is given back when the handler returns, before grpcio sends the answer
  (:meth:`~workplace_env.server.guard.Lane.release`), or by the lane if it never ran;
* **refused**, chosen when :class:`~workplace_env.server.guard.Admission` is full when the
  RPC arrives (CONTRACT X3): an undecodable request is still ``MALFORMED_REQUEST``, any other
  is RESOURCE_EXHAUSTED ``TOO_MANY_RPCS`` with a ``RetryInfo``; it runs on the server's pool.

Statuses, error details, metrics and logs are those of the interceptors this replaces for the
environment service (:mod:`~workplace_env.server.guard`, :mod:`~workplace_env.server.affinity`,
:mod:`~workplace_env.server.observability`); other services go down the rest of the chain.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import grpc

from workplace_env.server.affinity import check_session_header
from workplace_env.server.guard import (
    Admission,
    Lane,
    Undecodable,
    refuse_undecodable,
    safe_deserializer,
)
from workplace_env.server.observability import Metrics, counting
from workplace_env.server.status import to_status

Behaviour = Callable[[Any, grpc.ServicerContext], Any]


class EnvironmentDispatch(grpc.ServerInterceptor):
    """Per RPC of the environment service: admit it or not, and answer the prepared handler.

    ``handlers``: the service's method handlers by full method name (``/pkg.Service/Method``),
    as registered on the server.
    """

    def __init__(
        self,
        handlers: Mapping[str, grpc.RpcMethodHandler],
        admission: Admission,
        lane: Lane,
        metrics: Metrics,
    ) -> None:
        self._admission = admission
        # full method -> (admitted handler, refused handler)
        self._handlers = {
            full: _compose(handler, full.rsplit("/", 1)[1], lane, metrics)
            for full, handler in handlers.items()
            if handler.unary_unary is not None
        }

    def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        prepared = self._handlers.get(handler_call_details.method)
        if prepared is None:
            return continuation(handler_call_details)
        if self._admission.try_enter(False) is None:
            return prepared[0]
        return prepared[1]


def _compose(
    handler: grpc.RpcMethodHandler, rpc: str, lane: Lane, metrics: Metrics
) -> tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]:
    inner: Behaviour = handler.unary_unary
    admission = lane.admission

    def admitted(request: Any, context: grpc.ServicerContext) -> Any:
        if request.__class__ is Undecodable:
            refuse_undecodable(request, rpc, context)
        check_session_header(request, rpc, context)
        return inner(request, context)

    def refused(request: Any, context: grpc.ServicerContext) -> Any:
        if request.__class__ is Undecodable:
            refuse_undecodable(request, rpc, context)
        context.abort_with_status(to_status(admission.refusal(), rpc))

    counted = counting(admitted, rpc, metrics)
    release = lane.release

    def run(request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return counted(request, context)
        finally:
            release()  # before grpcio sends the answer (X3; Lane)

    run.experimental_thread_pool = lane  # type: ignore[attr-defined]
    kwargs = {
        "request_deserializer": safe_deserializer(handler.request_deserializer),
        "response_serializer": handler.response_serializer,
    }
    return (
        grpc.unary_unary_rpc_method_handler(run, **kwargs),
        grpc.unary_unary_rpc_method_handler(counting(refused, rpc, metrics), **kwargs),
    )
