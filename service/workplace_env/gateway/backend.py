"""How the gateway reaches the environment: one interface, two implementations.

:class:`Backend` is the SDK's surface the routes use (``seed``, ``seed_legacy``,
``call_tool_raw``, ``verify``, ``close_session``, ``list_tools``), with the SDK's arguments,
answers and typed errors (:class:`~workplace_env_client.WorkplaceEnvError` subclasses), so the
HTTP status mapping (:func:`workplace_env.gateway.translate.service_error`) is one place for
both:

* :class:`RemoteBackend`: an :class:`~workplace_env_client.EnvironmentClient` over gRPC
  (``workplace-env gateway``, a separate process). Its calls block on the network, so the
  gateway runs them on a worker thread (``blocking`` is True).
* :class:`InProcessBackend`: the co-hosted server's own
  :class:`~workplace_env.server.servicer.EnvironmentServicer` (``workplace-env serve
  --http-address``), called with the request messages the SDK builds (its shared builders in
  ``workplace_env_client.messages``) and no transport. Domain errors come back as the same rich
  status a remote call carries, decoded by the SDK's own ``from_rpc_error``; a request larger
  than the server's message limit is refused as gRPC refuses it (RESOURCE_EXHAUSTED, no
  reason); the RPC metrics count these calls as gRPC calls (by code, and a failure also by its
  ErrorInfo reason). The work is sub-millisecond, so the gateway runs it on its event loop
  (``blocking`` is False).

:func:`backend_for`, called once by ``create_app``, turns what the gateway was given into a
backend: an SDK client becomes a :class:`RemoteBackend`, a backend is used as it is (the
co-hosted ``serve`` passes its :class:`InProcessBackend`). Both subclass :class:`Backend`.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from workplace.env.v1 import environment_pb2 as pb
from workplace_env.responses import CheckedJson
from workplace_env_client import EnvironmentClient, WorkplaceEnvError
from workplace_env_client.errors import from_rpc_error
from workplace_env_client.messages import (
    CallLike,
    EpisodeLike,
    TaskLike,
    VerifyResult,
    arguments_text,
    close_answer,
    close_request,
    legacy_seed_request,
    seed_request,
    tools_answer,
    verify_answer,
    verify_request,
)

if TYPE_CHECKING:
    from workplace_env.server.app import RunningServer


class Backend(Protocol):
    """The environment as the gateway's routes see it (the SDK's methods and errors)."""

    #: True when calls block on I/O (the gateway then runs them on a worker thread).
    blocking: bool

    def seed(
        self, session_id: str, episode: EpisodeLike, task_id: tuple[str, str], task: TaskLike
    ) -> Any: ...

    def seed_legacy(self, session_id: str, task: TaskLike) -> Any: ...

    def call_tool_raw(
        self,
        session_id: str,
        name: str,
        arguments: str | Mapping[str, Any] | None = None,
        call_id: str = "",
    ) -> str: ...

    def verify(
        self,
        session_id: str,
        function_calls: Iterable[CallLike] | None = None,
        *,
        response_output: Sequence[Any] | str | None = None,
        ground_truth: Iterable[CallLike] | None = None,
        ground_truth_json: str | None = None,
    ) -> VerifyResult: ...

    def close_session(self, session_id: str, episode: EpisodeLike) -> str: ...

    def list_tools(self) -> list[dict[str, Any]]: ...

    def not_ready(self) -> str | None:
        """Why the environment cannot take episodes now (``/ready``'s 503 status), or None."""
        ...


#: How long ``/ready`` waits for the gRPC health answer, and how long that answer is reused.
READY_DEADLINE_S = 0.5
READY_CACHE_S = 1.0


class RemoteBackend(Backend):
    """The environment over gRPC, through an SDK client (owned by the caller).

    Readiness (:meth:`not_ready`) is the server's own gRPC health service: SERVING within
    :data:`READY_DEADLINE_S`, the answer cached :data:`READY_CACHE_S` so a balancer's probes
    do not each cost an RPC.
    """

    blocking = True

    def __init__(self, client: EnvironmentClient) -> None:
        self.client = client
        self._health = health_pb2_grpc.HealthStub(client.channel)
        self._ready_lock = threading.Lock()
        self._ready_at = -float("inf")
        self._ready: str | None = None
        self.seed = client.seed
        self.seed_legacy = client.seed_legacy
        self.call_tool_raw = client.call_tool_raw
        self.verify = client.verify
        self.close_session = client.close_session
        self.list_tools = client.list_tools

    def not_ready(self) -> str | None:
        """None when the server's health service answers SERVING; else ``"backend_unavailable"``
        (no answer in time) or ``"backend_not_serving"`` (it answered, e.g. draining: X2).
        Blocking (one health RPC at most per :data:`READY_CACHE_S`)."""
        with self._ready_lock:
            now = time.monotonic()
            if now - self._ready_at < READY_CACHE_S:
                return self._ready
            try:
                answer = self._health.Check(
                    health_pb2.HealthCheckRequest(service=""), timeout=READY_DEADLINE_S
                )
            except grpc.RpcError:
                self._ready = "backend_unavailable"
            else:
                serving = answer.status == health_pb2.HealthCheckResponse.SERVING
                self._ready = None if serving else "backend_not_serving"
            self._ready_at = time.monotonic()
            return self._ready


class _Aborted(Exception):
    """The servicer aborted the call with ``status`` (a ``grpc.Status``)."""

    def __init__(self, status: grpc.Status) -> None:
        super().__init__(status.code)
        self.status = status


class _Context:
    """The part of ``grpc.ServicerContext`` the servicer uses: aborting with a status."""

    __slots__ = ()

    def abort_with_status(self, status: grpc.Status) -> None:
        raise _Aborted(status)


class _StatusError(grpc.RpcError):
    """A status as the failed call the SDK's ``from_rpc_error`` decodes."""

    def __init__(self, code: grpc.StatusCode, details: str, trailing: Any = ()) -> None:
        super().__init__(details)
        self._code, self._details, self._trailing = code, details, trailing

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> Any:
        return self._trailing


_CONTEXT = _Context()


class InProcessBackend(Backend):
    """The co-hosted server's servicer, called directly (see the module docstring).

    ``servicer``: the :class:`~workplace_env.server.servicer.EnvironmentServicer` of the
    server; ``metrics``: its :class:`~workplace_env.server.observability.Metrics` (None: not
    counted); ``max_message_bytes``: the server's receive limit.
    """

    blocking = False

    def __init__(
        self, servicer: Any, metrics: Any = None, max_message_bytes: int | None = None
    ) -> None:
        self.servicer = servicer
        self.metrics = metrics
        self.max_message_bytes = max_message_bytes
        self._handlers = {
            name: getattr(servicer, name)
            for name in ("SeedSession", "CallTool", "Verify", "CloseSession", "ListTools")
        }
        self._counters: dict[tuple[str, str], Any] = {}
        self._timers: dict[str, Any] = {}

    @classmethod
    def of_server(
        cls, server: RunningServer, max_message_bytes: int | None = None
    ) -> InProcessBackend:
        """The backend of a running server (its store, metrics and settings);
        ``max_message_bytes`` overrides the settings' limit."""
        from workplace_env.server.servicer import EnvironmentServicer

        settings = server.settings
        if max_message_bytes is not None:
            settings = dataclasses.replace(settings, max_message_bytes=max_message_bytes)
        # the servicer refuses an output over the limit as over gRPC (RESPONSE_TOO_LARGE)
        return cls(
            EnvironmentServicer(server.store, settings), server.metrics, settings.max_message_bytes
        )

    def not_ready(self) -> str | None:
        """Always None: the co-hosted gateway's ``/ready`` follows the server's own draining
        state (set on the app by :mod:`workplace_env.gateway.serve`)."""
        return None

    def _invoke(self, method: str, request: Any, **options: Any) -> Any:
        if self.max_message_bytes is not None:
            size = request.ByteSize()
            if size > self.max_message_bytes:
                raise from_rpc_error(
                    _StatusError(
                        grpc.StatusCode.RESOURCE_EXHAUSTED,
                        f"Received message larger than max ({size} vs. {self.max_message_bytes})",
                    )
                )
        start = time.perf_counter()
        try:
            response = self._handlers[method](request, _CONTEXT, **options)
        except _Aborted as exc:
            status = exc.status
            error = from_rpc_error(
                _StatusError(status.code, status.details, status.trailing_metadata)
            )
            self._count(method, status.code.name, start, reason=error.reason)
            raise error from None
        except Exception as exc:  # a bug: INTERNAL, as grpc answers an unhandled exception
            self._count(method, "UNKNOWN", start)
            raise WorkplaceEnvError(
                f"Exception calling application: {exc}", grpc.StatusCode.UNKNOWN
            ) from exc
        self._count(method, "OK", start, response)
        return response

    def _count(
        self, method: str, code: str, start: float, response: Any = None, reason: str = ""
    ) -> None:
        """Count the call as the gRPC server counts an RPC (its code; a failure also by its
        ``ErrorInfo`` reason, as :func:`~workplace_env.server.observability.counting` does)."""
        metrics = self.metrics
        if metrics is None:
            return
        elapsed = time.perf_counter() - start
        counter = self._counters.get((method, code))
        if counter is None:
            counter = self._counters[(method, code)] = metrics.rpcs.labels(method, code)
        timer = self._timers.get(method)
        if timer is None:
            timer = self._timers[method] = metrics.duration.labels(method)
        counter.inc()
        timer.observe(elapsed)
        if reason:
            metrics.errors.labels(method, reason).inc()
        if response is not None:
            metrics.observe(method, response)

    def seed(
        self, session_id: str, episode: EpisodeLike, task_id: tuple[str, str], task: TaskLike
    ) -> pb.SeedSessionResponse:
        """``EnvironmentClient.seed``."""
        return self._invoke("SeedSession", seed_request(session_id, episode, task_id, task))

    def seed_legacy(self, session_id: str, task: TaskLike) -> pb.SeedSessionResponse:
        """``EnvironmentClient.seed_legacy``."""
        return self._invoke("SeedSession", legacy_seed_request(session_id, task))

    def call_tool_raw(
        self,
        session_id: str,
        name: str,
        arguments: str | Mapping[str, Any] | None = None,
        call_id: str = "",
    ) -> str:
        """``EnvironmentClient.call_tool_raw``; without a ``call_id`` none is recorded (nothing
        in-process can be retried, so no idempotency key is needed)."""
        text = arguments if isinstance(arguments, str) else arguments_text(arguments)
        request = pb.CallToolRequest(
            resources_session_id=session_id, tool_name=name, arguments=text, call_id=call_id
        )
        response: pb.CallToolResponse = self._invoke("CallTool", request)
        return response.output

    def verify(
        self,
        session_id: str,
        function_calls: Iterable[CallLike] | None = None,
        *,
        response_output: Sequence[Any] | str | None = None,
        ground_truth: Iterable[CallLike] | None = None,
        ground_truth_json: str | None = None,
    ) -> VerifyResult:
        """``EnvironmentClient.verify``. JSON inputs given as
        :class:`~workplace_env.responses.CheckedJson` (the gateway's, checked at its edge) are
        not checked again by the servicer; any other is checked as over gRPC."""
        request = verify_request(
            session_id, function_calls, response_output, ground_truth, ground_truth_json
        )
        checked = all(
            isinstance(text, CheckedJson)
            for text in (response_output, ground_truth_json)
            if text is not None
        )
        return verify_answer(self._invoke("Verify", request, checked=checked))

    def close_session(self, session_id: str, episode: EpisodeLike) -> str:
        """``EnvironmentClient.close_session``."""
        return close_answer(self._invoke("CloseSession", close_request(session_id, episode)))

    def list_tools(self) -> list[dict[str, Any]]:
        """``EnvironmentClient.list_tools``."""
        return tools_answer(self._invoke("ListTools", pb.ListToolsRequest()))


def backend_for(target: EnvironmentClient | Backend) -> Backend:
    """The backend of ``target``: an SDK client becomes a :class:`RemoteBackend`, a backend is
    itself."""
    if isinstance(target, EnvironmentClient):
        return RemoteBackend(target)
    return target
