"""The server's RPC pipeline: every method's behaviour wrapped once, at start-up, in ordered steps.

A :class:`Pipeline` stands in for the ``grpc.Server`` when a servicer is registered (the
generated ``add_*Servicer_to_server`` functions, grpcio-health-checking's, grpcio-reflection's):
it wraps each method handler in its steps, the first step outermost, and registers the wrapped
handler on the server. Nothing is looked up per RPC; a step that does not apply to a method
returns the behaviour it was given, so that method pays nothing for it.

A **step** is a plain callable ``step(method, behaviour) -> behaviour``: :class:`Method` says
which RPC and arity it wraps; a behaviour is grpcio's ``(request, context) -> response`` (a
request stream is an iterator of requests, a response stream an iterator of responses). The
steps live beside their rules (:mod:`~workplace_env.server.guard`,
:mod:`~workplace_env.server.affinity`, :mod:`~workplace_env.server.admin`,
:mod:`~workplace_env.server.observability`); their order is listed once, in
:func:`~workplace_env.server.app.build_server`.

Requests are parsed leniently: bytes that are not a message of the method's request type reach
the steps as :class:`Undecodable` (grpcio would answer INTERNAL with no detail); the decode
guard step refuses them. A behaviour carrying grpcio's ``experimental_thread_pool`` keeps that
pool through every step wrapped around it (:class:`~workplace_env.server.guard.Lane`).

:meth:`Pipeline.service` hands out the wrapped handlers of a service, so a caller in the same
process runs a method through the same steps as a gRPC client does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import grpc

#: grpcio's behaviour of a method: ``(request or request iterator, context) -> response or
#: response iterator``.
Behaviour = Callable[[Any, grpc.ServicerContext], Any]


@dataclass(frozen=True, slots=True)
class Method:
    """One registered RPC: its service's full name, its name, and its arity."""

    service: str
    name: str
    request_streaming: bool = False
    response_streaming: bool = False

    @property
    def full(self) -> str:
        """grpcio's method path, ``/package.Service/Name``."""
        return f"/{self.service}/{self.name}"


#: A step of the pipeline: the behaviour of ``method`` wrapped in one rule, or as given.
Step = Callable[[Method, Behaviour], Behaviour]


class Undecodable:
    """Stands in for a request whose bytes did not parse; ``why`` is the parser's error."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


def lenient(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """``deserializer`` answering :class:`Undecodable` instead of raising on bad bytes."""
    if deserializer is None:
        return None

    def parse(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as exc:  # any parse failure of the generated message class
            return Undecodable(f"{type(exc).__name__}: {exc}")

    return parse


def each_request(
    method: Method, behaviour: Behaviour, check: Callable[[Any, str, grpc.ServicerContext], None]
) -> Behaviour:
    """``behaviour`` with ``check(request, method.name, context)`` before it runs, or, for a
    request stream, on each message as the behaviour reads it (``check`` aborts the RPC to
    refuse one)."""
    rpc = method.name
    if not method.request_streaming:

        def unary(request: Any, context: grpc.ServicerContext) -> Any:
            check(request, rpc, context)
            return behaviour(request, context)

        return unary

    def checked(requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
        for request in requests:
            check(request, rpc, context)
            yield request

    def streamed(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
        return behaviour(checked(requests, context), context)

    return streamed


def within(
    method: Method,
    behaviour: Behaviour,
    block: Callable[[grpc.ServicerContext], AbstractContextManager[Any]],
) -> Behaviour:
    """``behaviour`` inside ``block(context)``: until it returns, or, for a response stream,
    until its last message has been taken (or the stream is dropped)."""
    if method.response_streaming:

        def streamed(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            with block(context):
                yield from behaviour(request, context)

        return streamed

    def unary(request: Any, context: grpc.ServicerContext) -> Any:
        with block(context):
            return behaviour(request, context)

    return unary


_MAKE = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


class Pipeline:
    """Registers services on ``server`` (None: nowhere, for in-process use only) with every
    method's behaviour wrapped in ``steps``, the first outermost.

    Pass it where a registration function expects the server. A service's handlers come by
    name (``add_registered_method_handlers``); the generic handler a generated function also
    passes (``add_generic_rpc_handlers``) holds the same handlers unwrapped and is dropped.
    """

    def __init__(self, steps: Sequence[Step], server: grpc.Server | None = None) -> None:
        self.steps = tuple(steps)
        self._server = server
        # service -> method name -> its wrapped handler
        self._services: dict[str, dict[str, grpc.RpcMethodHandler]] = {}

    def add_generic_rpc_handlers(self, generic_rpc_handlers: object) -> None:
        """Drop them: the same handlers come by name, and unwrapped they would skip the steps."""

    def add_registered_method_handlers(
        self, service_name: str, method_handlers: Mapping[str, grpc.RpcMethodHandler]
    ) -> None:
        """Wrap each of ``service_name``'s handlers in the steps and register them on the server
        (by name, and as a generic handler as the generated code does)."""
        wrapped = {
            name: self._wrap(service_name, name, handler)
            for name, handler in method_handlers.items()
        }
        self._services.setdefault(service_name, {}).update(wrapped)
        if self._server is not None:
            self._server.add_generic_rpc_handlers(
                (grpc.method_handlers_generic_handler(service_name, wrapped),)
            )
            self._server.add_registered_method_handlers(service_name, wrapped)

    def service(self, service_name: str) -> Mapping[str, grpc.RpcMethodHandler]:
        """The wrapped handlers of a registered service by method name (``KeyError`` when it was
        not registered). A caller in this process invokes ``handler.unary_unary(request,
        context)`` with a message and a context of its own; the steps read the context's
        ``invocation_metadata()`` and answer a refusal by ``abort_with_status``."""
        return self._services[service_name]

    def _wrap(self, service: str, name: str, handler: grpc.RpcMethodHandler) -> Any:
        arity = (handler.request_streaming, handler.response_streaming)
        method = Method(service, name, *arity)
        behaviour: Behaviour = (
            handler.unary_unary or handler.unary_stream or handler.stream_unary
        ) or handler.stream_stream
        pool = getattr(behaviour, "experimental_thread_pool", None)
        for step in reversed(self.steps):
            behaviour = step(method, behaviour)
            pool = getattr(behaviour, "experimental_thread_pool", pool)
        if pool is not None and getattr(behaviour, "experimental_thread_pool", None) is not pool:
            behaviour.experimental_thread_pool = pool  # type: ignore[attr-defined]
        return _MAKE[arity](
            behaviour,
            request_deserializer=lenient(handler.request_deserializer),
            response_serializer=handler.response_serializer,
        )
