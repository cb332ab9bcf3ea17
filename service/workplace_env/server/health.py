"""The server's ``grpc.health.v1.Health`` service: Check and Watch over the names it serves.

Only the names the server sets (:meth:`Health.set`) are kept; a ``Check`` or ``Watch`` of any
other name keeps nothing (a watcher of an unknown name is answered SERVICE_UNKNOWN and then
waits for its RPC to end, registered nowhere). A name longer than
:data:`MAX_SERVICE_NAME_BYTES` is refused INVALID_ARGUMENT with a ``BadRequest`` on
``service``. How many Watch streams are open at once is the guard's limit
(``max_health_streams``, :mod:`workplace_env.server.guard`).
"""

from __future__ import annotations

import queue
import threading
from functools import partial

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from workplace_env import errors
from workplace_env.server.status import to_status

#: The longest service name (UTF-8 bytes) a Check or Watch may name.
MAX_SERVICE_NAME_BYTES = 1024

_Status = health_pb2.HealthCheckResponse


class Health(health_pb2_grpc.HealthServicer):
    """Statuses of the served names, and their watchers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._statuses: dict[str, int] = {}
        # name -> the update queues of its open Watch streams (served names only)
        self._watchers: dict[str, set[queue.SimpleQueue[int | None]]] = {}
        self._shutting_down = False

    def set(self, service: str, status: int) -> None:
        """Serve ``service`` with ``status`` (a ``HealthCheckResponse.ServingStatus``); its
        watchers get it when it changes. Ignored after :meth:`enter_graceful_shutdown`."""
        with self._lock:
            if not self._shutting_down:
                self._set(service, status)

    def enter_graceful_shutdown(self) -> None:
        """Every served name NOT_SERVING from now on, for good."""
        with self._lock:
            for service in list(self._statuses):
                self._set(service, _Status.NOT_SERVING)
            self._shutting_down = True

    def _set(self, service: str, status: int) -> None:
        changed = self._statuses.get(service) != status
        self._statuses[service] = status
        watchers = self._watchers.setdefault(service, set())
        if changed:
            for updates in watchers:
                updates.put(status)

    def Check(self, request, context):  # type: ignore[no-untyped-def]
        """The status of ``request.service``; NOT_FOUND when it is not served."""
        service = _service(request, "Check", context)
        with self._lock:
            status = self._statuses.get(service)
        if status is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no service named {service!r} is served")
        return _Status(status=status)

    def Watch(self, request, context):  # type: ignore[no-untyped-def]
        """The status of ``request.service`` now (SERVICE_UNKNOWN when not served), then each
        change, until the RPC ends."""
        service = _service(request, "Watch", context)
        updates: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        with self._lock:
            status = self._statuses.get(service, _Status.SERVICE_UNKNOWN)
            watchers = self._watchers.get(service)
            if watchers is not None:
                watchers.add(updates)
        try:
            if not context.add_callback(partial(updates.put, None)):
                return  # the RPC has ended already
            while status is not None:
                yield _Status(status=status)
                status = updates.get()
        finally:
            if watchers is not None:
                with self._lock:
                    watchers.discard(updates)


def _service(
    request: health_pb2.HealthCheckRequest, rpc: str, context: grpc.ServicerContext
) -> str:
    """``request.service``; aborts INVALID_ARGUMENT naming ``service`` when it is too long."""
    size = len(request.service.encode("utf-8"))
    if size > MAX_SERVICE_NAME_BYTES:
        refusal = errors.InvalidRequest(
            [
                errors.FieldViolation(
                    "service",
                    f"is {size} bytes long; a service name has at most "
                    f"{MAX_SERVICE_NAME_BYTES} bytes",
                )
            ]
        )
        context.abort_with_status(to_status(refusal, rpc))
    return request.service
