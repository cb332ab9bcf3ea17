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
  one still counted). Environment RPCs: :meth:`Lane.release` and the lane's work item
  (:mod:`workplace_env.server.dispatch`). Every other RPC takes its slot in one place,
  :func:`held`, whose block spans the whole handler (a response stream's: every message),
  so every exit gives it back: a refusal of the header check, an error, the end of the
  stream; a stream never read to its end gives it back when the RPC ends.
* **Health and reflection streams** (``Health/Watch``, ``ServerReflectionInfo``): at most
  ``max_health_streams`` at once, beyond that RESOURCE_EXHAUSTED ``TOO_MANY_RPCS``; they are
  admitted even while draining (a watcher must see NOT_SERVING). ``Health/Check`` is never
  limited. The server's thread pool has ``max_concurrent_rpcs + max_health_streams +
  RESERVED_THREADS`` threads, so admitted RPCs and streams can never hold them all: Check,
  refusals and the environment's answers always find one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from typing import Any

import grpc

from workplace_env import errors
from workplace_env.server.status import to_status
from workplace_env_client import reasons

#: Threads beyond the admission limit: health checks, reflection and refusals always get one.
RESERVED_THREADS = 4
#: ``ErrorInfo.reason`` of an RPC refused by the concurrency limit (X3).
TOO_MANY_RPCS = reasons.TOO_MANY_RPCS.name
#: ``ErrorInfo.reason`` of a request that is not a valid message of its type.
MALFORMED_REQUEST = reasons.MALFORMED_REQUEST.name

#: Health and reflection streams open at once by default (``max_health_streams``).
MAX_HEALTH_STREAMS = 64

_HEALTH_PREFIXES = ("/grpc.health.", "/grpc.reflection.")


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

    def __init__(
        self,
        max_rpcs: int,
        max_admin_rpcs: int,
        retry_after_s: float = 1.0,
        max_health_streams: int = MAX_HEALTH_STREAMS,
    ) -> None:
        self.max_rpcs = max_rpcs
        self.max_admin_rpcs = max_admin_rpcs
        self.max_health_streams = max_health_streams
        self.retry_after_s = retry_after_s
        self._lock = threading.Condition()  # notified when a slot is given back
        self._rpcs = 0
        self._admin = 0
        self._health_streams = 0
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

    def leave(self, admin: bool) -> None:
        """Release the slot of an RPC admitted by :meth:`try_enter`."""
        with self._lock:
            self._rpcs -= 1
            self._admin -= admin
            self._lock.notify_all()

    def in_flight(self) -> int:
        """Admitted RPCs running or waiting now."""
        return self._rpcs

    def try_enter_health_stream(self) -> TooManyRpcs | None:
        """Admit one health or reflection stream (None), or return the refusal: the server
        holds ``max_health_streams`` of them. Not closed by a drain."""
        with self._lock:
            if self._health_streams < self.max_health_streams:
                self._health_streams += 1
                return None
        return self._refusal(f"{self.max_health_streams} open health and reflection streams")

    def leave_health_stream(self) -> None:
        """Release the slot of a stream admitted by :meth:`try_enter_health_stream`."""
        with self._lock:
            self._health_streams -= 1
            self._lock.notify_all()

    def health_streams(self) -> int:
        """Health and reflection streams open now."""
        return self._health_streams

    def wait_idle(self, timeout_s: float) -> bool:
        """Whether every slot (RPCs and health streams) is free within ``timeout_s`` seconds:
        waits for the slots of RPCs that end on their own (a cancelled stream's)."""
        with self._lock:
            return self._lock.wait_for(
                lambda: not self._rpcs and not self._health_streams, timeout_s
            )


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


@contextmanager
def held(
    enter: Callable[[], Exception | None],
    leave: Callable[[], None],
    rpc: str,
    context: grpc.ServicerContext,
) -> Iterator[None]:
    """One admission slot for the block: ``enter()`` takes it or returns the refusal, which
    aborts ``rpc`` (its status); ``leave()`` gives it back exactly once, when the block exits,
    however it exits, or when the RPC ends first (a response stream abandoned unread)."""
    refusal = enter()
    if refusal is not None:
        context.abort_with_status(to_status(refusal, rpc))
    once = threading.Lock()

    def release() -> None:
        if once.acquire(blocking=False):  # the block's end and the RPC's end may race
            leave()

    try:
        if not context.add_callback(release):  # the RPC has ended already
            release()
        yield
    finally:
        release()


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

    def _slots(
        self, method: str, streaming: bool
    ) -> tuple[Callable[[], Exception | None], Callable[[], None]] | None:
        """How ``method``'s RPCs take and give back a slot, or None when they need none."""
        admission = self.admission
        if not method.startswith(_HEALTH_PREFIXES):
            admin = method.startswith(self._admin_prefix)
            return partial(admission.try_enter, admin), partial(admission.leave, admin)
        if streaming:
            return admission.try_enter_health_stream, admission.leave_health_stream
        return None  # Health/Check: always answered

    def _guard(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        rpc = method.rsplit("/", 1)[-1]
        slots = self._slots(method, handler.request_streaming or handler.response_streaming)
        kwargs = {
            "request_deserializer": safe_deserializer(handler.request_deserializer),
            "response_serializer": handler.response_serializer,
        }

        def slot(context: grpc.ServicerContext) -> AbstractContextManager[None]:
            return nullcontext() if slots is None else held(*slots, rpc, context)

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
                with slot(context):
                    return inner_uu(request, context)

            return grpc.unary_unary_rpc_method_handler(unary_unary, **kwargs)
        if handler.unary_stream is not None:
            inner_us = handler.unary_stream

            def unary_stream(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
                if isinstance(request, Undecodable):
                    refuse_undecodable(request, rpc, context)
                with slot(context):
                    yield from inner_us(request, context)

            return grpc.unary_stream_rpc_method_handler(unary_stream, **kwargs)
        if handler.stream_unary is not None:
            inner_su = handler.stream_unary

            def stream_unary(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
                with slot(context):
                    return inner_su(checked(requests, context), context)

            return grpc.stream_unary_rpc_method_handler(stream_unary, **kwargs)
        inner_ss = handler.stream_stream

        def stream_stream(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
            with slot(context):
                yield from inner_ss(checked(requests, context), context)

        return grpc.stream_stream_rpc_method_handler(stream_stream, **kwargs)
