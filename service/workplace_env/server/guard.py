"""What reaches the servicers: decodable requests, within the concurrency limit (CONTRACT X3).

:class:`GuardInterceptor` wraps every method handler:

* **Undecodable requests.** A message that is not a valid protobuf of the method's request type
  (garbage bytes, a string field that is not UTF-8) is answered INVALID_ARGUMENT, reason
  ``MALFORMED_REQUEST``, with a ``BadRequest``; gRPC's own answer would be INTERNAL.
* **Admission.** At most ``max_concurrent_rpcs`` RPCs of the environment and admin services run
  or wait at once, and at most ``max_admin_rpcs`` of them are admin RPCs (export and restore
  streams hold their slot until the stream ends). Beyond either limit an RPC is answered at once
  with RESOURCE_EXHAUSTED, reason ``TOO_MANY_RPCS``, and a ``RetryInfo``. Environment RPCs are
  admitted when they arrive and then wait in the queue of a :class:`Lane`, whose ``workers``
  threads run them (more only add GIL contention; docs/benchmarks.md).
* **Release.** An admitted RPC gives its slot back once, before its answer can reach the
  client (a client that has its answer and sends the next RPC at once must not find the last
  one still counted): a unary handler's slot when it returns or raises (environment RPCs:
  :meth:`Lane.release`, :mod:`workplace_env.server.dispatch`), a response stream's when its
  iterator ends, and, should that never happen (a stream never read), when the RPC ends.
* Health and reflection are never limited: the server's thread pool has
  ``max_concurrent_rpcs + RESERVED_THREADS`` threads, so admitted RPCs can never hold them all.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc

from workplace_env import errors
from workplace_env.server.status import to_status

#: Threads beyond the admission limit: health checks, reflection and refusals always get one.
RESERVED_THREADS = 4
#: ``ErrorInfo.reason`` of an RPC refused by the concurrency limit (X3).
TOO_MANY_RPCS = "TOO_MANY_RPCS"
#: ``ErrorInfo.reason`` of a request that is not a valid message of its type.
MALFORMED_REQUEST = "MALFORMED_REQUEST"

_UNLIMITED_PREFIXES = ("/grpc.health.", "/grpc.reflection.")


class Undecodable:
    """Stands in for a request whose bytes did not parse."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


class TooManyRpcs(errors.CapacityExhausted):
    """X3: the server runs its maximum of concurrent RPCs (RESOURCE_EXHAUSTED + RetryInfo)."""

    reason = TOO_MANY_RPCS


class Admission:
    """Counts admitted RPCs against the limits."""

    def __init__(self, max_rpcs: int, max_admin_rpcs: int, retry_after_s: float = 1.0) -> None:
        self.max_rpcs = max_rpcs
        self.max_admin_rpcs = max_admin_rpcs
        self.retry_after_s = retry_after_s
        self._lock = threading.Lock()
        self._rpcs = 0
        self._admin = 0
        self._closed = False

    def close(self) -> None:
        """Admit nothing from now on (the last step of a drain, X2): every RPC is answered
        UNAVAILABLE ``DRAINING``, a status a client can act on (retry elsewhere), instead of
        being cancelled when the listener closes."""
        with self._lock:
            self._closed = True

    def try_enter(self, admin: bool) -> TooManyRpcs | errors.Draining | None:
        """Admit one RPC (None), or return the refusal: a limit is reached (X3), or the server
        admits nothing any more (:meth:`close`, X2)."""
        with self._lock:
            if self._closed:
                return self._draining()
            if self._rpcs >= self.max_rpcs:
                limit = f"{self.max_rpcs} concurrent RPCs"
            elif admin and self._admin >= self.max_admin_rpcs:
                limit = f"{self.max_admin_rpcs} concurrent admin RPCs"
            else:
                self._rpcs += 1
                self._admin += admin
                return None
        return self._refusal(limit)

    def refusal(self) -> TooManyRpcs | errors.Draining:
        """The refusal of a non-admin RPC that :meth:`try_enter` did not admit: draining once
        closed, else ``max_rpcs`` are admitted."""
        if self._closed:
            return self._draining()
        return self._refusal(f"{self.max_rpcs} concurrent RPCs")

    @staticmethod
    def _draining() -> errors.Draining:
        return errors.Draining("the server is stopping; retry on another replica")

    def _refusal(self, limit: str) -> TooManyRpcs:
        return TooManyRpcs(
            f"the server runs its maximum of {limit}; retry later",
            retry_after_s=self.retry_after_s,
        )

    def enter(self, admin: bool) -> None:
        """Admit one RPC or raise its refusal (:class:`TooManyRpcs`, or Draining once closed)."""
        refusal = self.try_enter(admin)
        if refusal is not None:
            raise refusal

    def leave(self, admin: bool) -> None:
        """Release the slot of an RPC admitted by :meth:`enter`."""
        with self._lock:
            self._rpcs -= 1
            self._admin -= admin

    def in_flight(self) -> int:
        """Admitted RPCs running or waiting now."""
        return self._rpcs


class Lane(futures.ThreadPoolExecutor):
    """The ``workers`` threads that run admitted environment RPCs, in arrival order.

    grpcio submits an RPC here when its behaviour carries this lane as
    ``experimental_thread_pool``; each work item gives back exactly one (non-admin) admission
    slot, however it ends. The behaviour calls :meth:`release` when the handler returns, before
    grpcio sends the answer, so a client holding an answer never finds that RPC still counted
    (X3: it is no longer concurrent); the work item's end releases what the handler did not
    (the handler may never run: a call cancelled before its request arrived). Waiting RPCs
    hold no thread, so only ``workers`` threads contend for the GIL.
    """

    def __init__(self, admission: Admission, workers: int) -> None:
        super().__init__(max_workers=workers, thread_name_prefix="env-rpc")
        self.admission = admission
        # per lane thread: whether the RPC it runs still holds its slot
        self._holds = threading.local()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> futures.Future[Any]:
        try:
            return super().submit(self._run_then_release, fn, args, kwargs)
        except BaseException:  # shut down: the RPC will not run
            self.admission.leave(False)
            raise

    def release(self) -> None:
        """Give back the slot of the RPC running on this lane thread, if it still holds it."""
        holds = self._holds
        if getattr(holds, "slot", False):
            holds.slot = False
            self.admission.leave(False)

    def _run_then_release(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        self._holds.slot = True
        try:
            return fn(*args, **kwargs)
        finally:
            self.release()


def safe_deserializer(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """``deserializer`` answering :class:`Undecodable` instead of raising on bad bytes."""
    if deserializer is None:
        return None

    def parse(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as exc:  # any parse failure of the generated message class
            return Undecodable(f"{type(exc).__name__}: {exc}")

    return parse


def refuse_undecodable(request: Undecodable, rpc: str, context: grpc.ServicerContext) -> None:
    """Abort with INVALID_ARGUMENT ``MALFORMED_REQUEST`` for a request that did not parse."""
    error = errors.InvalidRequest(
        [errors.FieldViolation("", f"not a valid request message: {request.why}")]
    )
    error.reason = MALFORMED_REQUEST
    context.abort_with_status(to_status(error, rpc))


class GuardInterceptor(grpc.ServerInterceptor):
    """Applies the module's rules to every handler (see the module docstring)."""

    def __init__(self, admission: Admission, admin_prefix: str) -> None:
        self.admission = admission
        self._admin_prefix = admin_prefix
        # id(handler) -> (handler, its guarded twin), built once per method
        self._guarded: dict[int, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        known = self._guarded.get(id(handler))
        if known is None or known[0] is not handler:
            method = handler_call_details.method
            known = self._guarded[id(handler)] = (handler, self._guard(handler, method))
        return known[1]

    def _guard(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        rpc = method.rsplit("/", 1)[-1]
        limited = not method.startswith(_UNLIMITED_PREFIXES)
        admin = method.startswith(self._admin_prefix)
        admission = self.admission
        kwargs = {
            "request_deserializer": safe_deserializer(handler.request_deserializer),
            "response_serializer": handler.response_serializer,
        }

        def admit(context: grpc.ServicerContext) -> None:
            if limited:
                try:
                    admission.enter(admin)
                except (TooManyRpcs, errors.Draining) as exc:
                    context.abort_with_status(to_status(exc, rpc))

        def done() -> None:
            if limited:
                admission.leave(admin)

        def checked(requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
            for request in requests:
                if isinstance(request, Undecodable):
                    refuse_undecodable(request, rpc, context)
                yield request

        if handler.unary_unary is not None:
            inner_uu = handler.unary_unary

            def unary_unary(request: Any, context: grpc.ServicerContext) -> Any:
                if isinstance(request, Undecodable):
                    refuse_undecodable(request, rpc, context)
                admit(context)
                try:
                    return inner_uu(request, context)
                finally:
                    done()

            return grpc.unary_unary_rpc_method_handler(unary_unary, **kwargs)
        if handler.unary_stream is not None:
            inner_us = handler.unary_stream

            def unary_stream(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
                if isinstance(request, Undecodable):
                    refuse_undecodable(request, rpc, context)
                admit(context)
                return _released_at_end(inner_us(request, context), context, done)

            return grpc.unary_stream_rpc_method_handler(unary_stream, **kwargs)
        if handler.stream_unary is not None:
            inner_su = handler.stream_unary

            def stream_unary(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
                admit(context)
                try:
                    return inner_su(checked(requests, context), context)
                finally:
                    done()

            return grpc.stream_unary_rpc_method_handler(stream_unary, **kwargs)
        inner_ss = handler.stream_stream

        def stream_stream(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
            admit(context)
            return _released_at_end(inner_ss(checked(requests, context), context), context, done)

        return grpc.stream_stream_rpc_method_handler(stream_stream, **kwargs)


def _released_at_end(
    responses: Iterator[Any], context: grpc.ServicerContext, done: Callable[[], None]
) -> Iterator[Any]:
    """``responses``, calling ``done`` exactly once: when the iterator ends or fails (grpcio
    sends the status only after that), or when the RPC ends if the stream is never read."""
    once = threading.Lock()

    def done_once() -> None:
        if once.acquire(blocking=False):  # the stream's end and the RPC's end may race
            done()

    if not context.add_callback(done_once):
        done_once()
    return _then(responses, done_once)


def _then(responses: Iterator[Any], done: Callable[[], None]) -> Iterator[Any]:
    try:
        yield from responses
    finally:
        done()
