"""Server wiring: the environment service plus the standard health and reflection services.

:func:`build_server` makes a ready, unstarted ``grpc.Server``; :class:`RunningServer` starts it,
and drains it on shutdown (CONTRACT X2: health NOT_SERVING first, new seeds UNAVAILABLE,
in-flight calls finish within the grace period).
"""

from __future__ import annotations

import threading
from concurrent import futures
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from workplace.env.v1 import environment_pb2 as pb
from workplace.env.v1 import environment_pb2_grpc as pb_grpc
from workplace_env.server.observability import Metrics, ObservabilityInterceptor
from workplace_env.server.servicer import EnvironmentServicer
from workplace_env.sessions import SessionStore

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["EnvironmentService"].full_name

#: Channel options shared by the server and the SDK (message sizes in bytes).
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
]


@dataclass
class RunningServer:
    """A started server: its bound ``port``, the store, and the health servicer."""

    server: grpc.Server
    port: int
    store: SessionStore
    health: health.HealthServicer
    metrics: Metrics
    _evictor: threading.Thread | None = None
    _stop: threading.Event | None = None

    def stop(self, grace_s: float = 5.0) -> None:
        """Drain (X2) and stop: NOT_SERVING, refuse new seeds, let in-flight calls finish."""
        self.health.enter_graceful_shutdown()
        self.store.start_draining()
        if self._stop is not None:
            self._stop.set()
        self.server.stop(grace_s).wait()

    def wait(self) -> None:
        """Block until the server terminates."""
        self.server.wait_for_termination()


def build_server(
    store: SessionStore, metrics: Metrics, max_workers: int = 16
) -> tuple[grpc.Server, health.HealthServicer]:
    """An unstarted server with the environment, health and reflection services registered."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="rpc"),
        options=SERVER_OPTIONS,
        interceptors=[ObservabilityInterceptor(metrics, f"/{SERVICE_NAME}/")],
    )
    pb_grpc.add_EnvironmentServiceServicer_to_server(EnvironmentServicer(store), server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    return server, health_servicer


def start_server(
    store: SessionStore,
    address: str = "127.0.0.1:0",
    max_workers: int = 16,
    evict_interval_s: float = 30.0,
    metrics: Metrics | None = None,
) -> RunningServer:
    """Build, bind ``address`` (port 0 picks a free one) and start a server; mark it SERVING.

    A daemon thread evicts idle sessions every ``evict_interval_s`` seconds (CONTRACT X1).
    Raises RuntimeError when the address cannot be bound.
    """
    metrics = metrics or Metrics()
    metrics.track_live(store.state_counts)
    server, health_servicer = build_server(store, metrics, max_workers=max_workers)
    port = server.add_insecure_port(address)
    if port == 0:
        raise RuntimeError(f"cannot bind {address}")
    server.start()
    for name in ("", SERVICE_NAME):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    stop = threading.Event()

    def evict_loop() -> None:
        while not stop.wait(evict_interval_s):
            metrics.evictions.inc(store.evict_idle())

    evictor = threading.Thread(target=evict_loop, name="evictor", daemon=True)
    evictor.start()
    return RunningServer(server, port, store, health_servicer, metrics, evictor, stop)
