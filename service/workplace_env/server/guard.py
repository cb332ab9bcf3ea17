"""What reaches the servicers: decodable requests, within the concurrency limit (CONTRACT X3).

Two steps of the server's :class:`~workplace_env.server.pipeline.Pipeline`:

* :func:`decode_guard`: a message that is not a valid protobuf of the method's request type
  (garbage bytes, a string field that is not UTF-8) is answered INVALID_ARGUMENT, reason
  ``MALFORMED_REQUEST``, with a ``BadRequest``; gRPC's own answer would be INTERNAL.
* :class:`Admit`: at most ``max_concurrent_rpcs`` RPCs of the environment and admin services
  run or wait at once, and at most ``max_admin_rpcs`` of them are admin RPCs (export and
  restore streams hold their slot until the stream ends). Beyond either limit an RPC is
  answered at once with RESOURCE_EXHAUSTED, reason ``TOO_MANY_RPCS``, and a ``RetryInfo``.
  Unary RPCs outside the admin, health and reflection services (the environment's) are
  admitted by the :class:`Lane` when grpcio hands it the RPC on arrival, and then wait in its
  queue for one of its ``workers`` threads (more only add GIL contention; docs/benchmarks.md);
  a refused one runs on the server's pool, where the step answers it.
* **Release.** An admitted RPC gives its slot back once, before its answer can reach the
  client (a client that has its answer and sends the next RPC at once must not find the last
  one still counted). Lane RPCs: :meth:`Lane.release` when the behaviour returns, and the
  lane's work item for one that never ran. Every other RPC takes its slot in one place,
  :func:`held`, whose block spans the whole behaviour (a response stream's: every message),
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
from contextlib import contextmanager
from functools import partial
from typing import Any

import grpc

from workplace_env import errors
from workplace_env.server.pipeline import Behaviour, Method, Undecodable, each_request, within
from workplace_env.server.status import to_status
from workplace_env_client import reasons

#: Threads beyond the admission limit: health checks, reflection and refusals always get one.
RESERVED_THREADS = 4

#: Health and reflection streams open at once by default (``max_health_streams``).
MAX_HEALTH_STREAMS = 64

_HEALTH_PREFIXES = ("/grpc.health.", "/grpc.reflection.")


class TooManyRpcs(errors.CapacityExhausted):
    """X3: the server runs its maximum of concurrent RPCs (RESOURCE_EXHAUSTED + RetryInfo)."""

    reason = reasons.TOO_MANY_RPCS.name


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
    """The ``workers`` threads that run admitted lane RPCs (:class:`Admit`), in arrival order.

    grpcio submits an RPC here, on arrival, when its behaviour carries this lane as
    ``experimental_thread_pool``. The lane takes a (non-admin) admission slot for it then: an
    admitted RPC waits in the queue, and its work item gives the slot back exactly once,
    however it ends; a refused one runs at once on ``overflow`` (the server's pool), where
    :meth:`run_admitted`'s behaviour answers why. That behaviour gives the slot back when the
    handler returns, before grpcio sends the answer, so a client holding an answer never finds
    that RPC still counted (X3: it is no longer concurrent); the work item's end releases what
    the handler did not (the handler may never run: a call cancelled before its request
    arrived). Waiting RPCs hold no thread, so only ``workers`` threads contend for the GIL.
    """

    def __init__(self, admission: Admission, workers: int, overflow: futures.Executor) -> None:
        super().__init__(max_workers=workers, thread_name_prefix="env-rpc")
        self.admission = admission
        self._overflow = overflow
        # per thread: whether the lane RPC it runs still holds its slot (``slot``), or the
        # refusal of the refused lane RPC it runs (``refused``)
        self._here = threading.local()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> futures.Future[Any]:
        refusal = self.admission.try_enter(False)
        if refusal is not None:
            return self._overflow.submit(self._run_refused, refusal, fn, args, kwargs)
        try:
            return super().submit(self._run_then_release, fn, args, kwargs)
        except BaseException:  # shut down: the RPC will not run
            self.admission.leave(False)
            raise

    def run_admitted(self, rpc: str, behaviour: Behaviour) -> Behaviour:
        """``behaviour`` of the unary ``rpc`` to run on this lane: answers the refusal of an RPC
        the lane did not admit, and gives the slot back when it returns. Called directly (an
        in-process call, not submitted here) it runs unlimited."""
        here, leave = self._here, self.admission.leave

        def admitted(request: Any, context: grpc.ServicerContext) -> Any:
            refused = getattr(here, "refused", None)
            if refused is not None:
                context.abort_with_status(to_status(refused, rpc))
            try:
                return behaviour(request, context)
            finally:
                if getattr(here, "slot", False):  # before grpcio sends the answer (X3)
                    here.slot = False
                    leave(False)

        admitted.experimental_thread_pool = self  # type: ignore[attr-defined]
        return admitted

    def release(self) -> None:
        """Give back the slot of the RPC running on this lane thread, if it still holds it."""
        here = self._here
        if getattr(here, "slot", False):
            here.slot = False
            self.admission.leave(False)

    def _run_then_release(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        here = self._here
        here.refused, here.slot = None, True  # both set: a lookup that finds is the cheap one
        try:
            return fn(*args, **kwargs)
        finally:
            self.release()

    def _run_refused(
        self,
        refusal: Exception,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        here = self._here
        here.refused, here.slot = refusal, False
        try:
            return fn(*args, **kwargs)
        finally:
            here.refused = None


def refuse_undecodable(request: Any, rpc: str, context: grpc.ServicerContext) -> None:
    """Abort ``rpc`` with INVALID_ARGUMENT ``MALFORMED_REQUEST`` when ``request`` did not parse
    (:class:`~workplace_env.server.pipeline.Undecodable`)."""
    if request.__class__ is not Undecodable:
        return
    error = errors.InvalidRequest(
        [errors.FieldViolation("", f"not a valid request message: {request.why}")]
    )
    error.reason = reasons.MALFORMED_REQUEST.name
    context.abort_with_status(to_status(error, rpc))


def decode_guard(method: Method, behaviour: Behaviour) -> Behaviour:
    """Step: refuse a request (each message of a request stream) that did not parse:
    INVALID_ARGUMENT ``MALFORMED_REQUEST`` with a ``BadRequest``."""
    if method.request_streaming:
        return each_request(method, behaviour, refuse_undecodable)
    rpc = method.name

    def unary(request: Any, context: grpc.ServicerContext) -> Any:
        if request.__class__ is Undecodable:  # the check inline: it runs on every RPC
            refuse_undecodable(request, rpc, context)
        return behaviour(request, context)

    return unary


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


class Admit:
    """Step: the admission of the module docstring. Methods of ``admin_service`` take an admin
    slot, health Watch and reflection streams a stream slot, health Check none; other unary
    methods run on ``lane`` (admitted on arrival), other streaming methods take a slot."""

    def __init__(self, admission: Admission, lane: Lane, admin_service: str) -> None:
        self.admission = admission
        self.lane = lane
        self._admin_service = admin_service

    def __call__(self, method: Method, behaviour: Behaviour) -> Behaviour:
        admission, rpc = self.admission, method.name
        streaming = method.request_streaming or method.response_streaming
        if method.full.startswith(_HEALTH_PREFIXES):
            if not streaming:
                return behaviour  # Health/Check: always answered
            enter, leave = admission.try_enter_health_stream, admission.leave_health_stream
        elif method.service == self._admin_service or streaming:
            admin = method.service == self._admin_service
            enter, leave = partial(admission.try_enter, admin), partial(admission.leave, admin)
        else:
            return self.lane.run_admitted(rpc, behaviour)
        return within(method, behaviour, lambda context: held(enter, leave, rpc, context))
