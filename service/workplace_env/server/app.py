"""Server wiring: the environment service plus the standard health and reflection services.

:func:`build_server` makes a ready, unstarted ``grpc.Server``; :class:`RunningServer` starts it,
and drains it on shutdown (CONTRACT X2: health NOT_SERVING first, new seeds UNAVAILABLE,
in-flight calls finish within the grace period).
"""

from __future__ import annotations

import dataclasses
import threading
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from workplace.env.v1 import admin_pb2_grpc as admin_grpc
from workplace.env.v1 import environment_pb2 as pb
from workplace.env.v1 import environment_pb2_grpc as pb_grpc
from workplace_env.addresses import BindError, bind_failure, check_free
from workplace_env.config import Settings
from workplace_env.server.admin import ADMIN_SERVICE_NAME, AdminServicer, AdminToken
from workplace_env.server.affinity import session_header_guard
from workplace_env.server.guard import RESERVED_THREADS, Admission, Admit, Lane, decode_guard
from workplace_env.server.health import Health
from workplace_env.server.observability import Metrics, metered, start_metrics_server
from workplace_env.server.pipeline import Pipeline
from workplace_env.server.servicer import EnvironmentServicer
from workplace_env.sessions import SessionStore
from workplace_env_client.client import KEEPALIVE_TIME_MS, KEEPALIVE_TIMEOUT_MS

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["EnvironmentService"].full_name


def server_options(max_message_bytes: int = Settings.max_message_bytes) -> list[tuple[str, int]]:
    """Channel options of the server: message size limits (bytes) and keepalive.

    The keepalive policy admits the SDK's pings (``KEEPALIVE_TIME_MS``), so an idle client
    channel is never closed for pinging too often.
    """
    return [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.so_reuseport", 0),
        ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
        ("grpc.http2.min_ping_interval_without_data_ms", KEEPALIVE_TIME_MS // 2),
        ("grpc.keepalive_permit_without_calls", 1),
    ]


@dataclass(kw_only=True)
class RunningServer:
    """A started server: its bound ``port``, the store, the health servicer, and the settings
    it serves with (a co-hosted gateway's servicer applies the same verify bounds)."""

    server: grpc.Server
    port: int
    store: SessionStore
    health: Health
    metrics: Metrics
    settings: Settings
    metrics_port: int | None = None
    _evictor: threading.Thread | None = None
    _stop: threading.Event | None = None
    _lane: Lane | None = None
    admission: Admission | None = None
    #: Its services' handlers wrapped in the server's steps, for in-process calls.
    pipeline: Pipeline | None = None

    def start_draining(self) -> None:
        """X2 from now on: health NOT_SERVING, new seeds UNAVAILABLE; everything else serves."""
        self.health.enter_graceful_shutdown()
        self.store.start_draining()

    def refuse_new_rpcs(self) -> None:
        """X2's last step before the listener closes: new environment and admin RPCs are
        answered UNAVAILABLE ``DRAINING`` (health and reflection still answer)."""
        if self.admission is not None:
            self.admission.close()

    def rpcs_in_flight(self) -> int:
        """Environment and admin RPCs admitted and not finished."""
        return 0 if self.admission is None else self.admission.in_flight()

    def stop(self, grace_s: float = 5.0) -> None:
        """Drain (X2) and stop: NOT_SERVING, refuse new seeds, let in-flight calls finish."""
        self.start_draining()
        if self._stop is not None:
            self._stop.set()
        self.server.stop(grace_s).wait()
        if self._lane is not None:
            self._lane.shutdown(wait=False)

    def wait(self) -> None:
        """Block until the server terminates."""
        self.server.wait_for_termination()


def build_server(
    store: SessionStore, metrics: Metrics, settings: Settings
) -> tuple[grpc.Server, Health, Lane, Pipeline]:
    """An unstarted server with the environment, admin, health and reflection services.

    Admin RPCs need ``authorization: Bearer <admin_token>`` metadata; without a token they are
    off unless ``admin_open`` (CONTRACT A1). At most ``max_concurrent_rpcs`` RPCs (of them
    ``max_admin_rpcs`` admin RPCs) are admitted at once, ``workers`` of them running;
    health Check always answers, and at most ``max_health_streams`` health Watch and
    reflection streams are open at once (X3, :mod:`workplace_env.server.guard`). A verify
    replays at most ``max_verify_calls`` calls per side and takes a response output of at most
    ``max_verify_output_items`` entries (0: no bound). A request
    whose ``x-resources-session-id`` header names another session than its body is refused
    (INVALID_ARGUMENT SESSION_HEADER_MISMATCH), inside the metrics so it is counted.
    Every method of every service is wrapped once, here, in the steps of one
    :class:`~workplace_env.server.pipeline.Pipeline` (returned: its handlers serve in-process
    calls through the same steps); the environment's RPCs run on the returned :class:`Lane`
    (shut it down after the server stops; its ``admission`` counts the RPCs in flight).
    """
    admission = Admission(
        settings.max_concurrent_rpcs,
        settings.max_admin_rpcs,
        max_health_streams=settings.max_health_streams,
    )
    pool = futures.ThreadPoolExecutor(
        max_workers=admission.max_rpcs + admission.max_health_streams + RESERVED_THREADS,
        thread_name_prefix="rpc",
    )
    lane = Lane(admission, settings.workers, overflow=pool)
    server = grpc.server(pool, options=server_options(settings.max_message_bytes))
    # The order of the steps, first outermost (each step's rule: its module).
    steps = [
        AdminToken(settings.admin_token, open_admin=settings.admin_open),
        metered(metrics, SERVICE_NAME),
        decode_guard,
        Admit(admission, lane, ADMIN_SERVICE_NAME),
        session_header_guard,
    ]
    pipeline = Pipeline(steps, server)
    pb_grpc.add_EnvironmentServiceServicer_to_server(EnvironmentServicer(store, settings), pipeline)
    admin_grpc.add_EnvironmentAdminServiceServicer_to_server(
        AdminServicer(store, settings), pipeline
    )
    health_servicer = Health()
    for name in ("", SERVICE_NAME):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, pipeline)
    reflection.enable_server_reflection(
        (SERVICE_NAME, ADMIN_SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), pipeline
    )
    return server, health_servicer, lane, pipeline


def server_credentials(settings: Settings) -> grpc.ServerCredentials | None:
    """TLS credentials from the settings' PEM files (mTLS when a client CA is set), or None.

    Raises OSError when a file cannot be read.
    """
    if not settings.tls_cert or not settings.tls_key:
        return None
    key = Path(settings.tls_key).read_bytes()
    chain = Path(settings.tls_cert).read_bytes()
    client_ca = Path(settings.tls_client_ca).read_bytes() if settings.tls_client_ca else None
    return grpc.ssl_server_credentials(
        [(key, chain)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


def start_server(
    store: SessionStore,
    address: str | None = None,
    *,
    settings: Settings | None = None,
    metrics: Metrics | None = None,
    max_workers: int | None = None,
    evict_interval_s: float | None = None,
) -> RunningServer:
    """Build, bind and start a server; mark it SERVING.

    ``address`` (default: the settings' address; port 0 picks a free one), ``max_workers``
    and ``evict_interval_s`` override the settings. With TLS settings the port is a TLS port;
    with ``metrics_address`` Prometheus metrics are served there. A daemon thread evicts idle
    sessions every ``evict_interval_s`` seconds (CONTRACT X1). Raises
    :class:`~workplace_env.addresses.BindError` (a RuntimeError) naming the address and the
    OS's reason when the address or the metrics address cannot be bound (nothing left
    serving), OSError when a TLS file cannot be read.
    """
    settings = settings or Settings()
    address = address or settings.address
    check_free(address)  # gRPC's own refusal would be a raw line of its log on stderr
    settings = dataclasses.replace(
        settings,
        workers=max_workers or settings.workers,
        evict_interval_s=evict_interval_s or settings.evict_interval_s,
    )
    evict_every = settings.evict_interval_s
    metrics = metrics or Metrics()
    metrics.track_live(store.state_counts)
    store.on_evicted = metrics.evictions.inc  # the periodic sweep's and a full store's
    server, health_servicer, lane, pipeline = build_server(store, metrics, settings)
    credentials = server_credentials(settings)
    try:
        if credentials is None:
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, credentials)
    except RuntimeError as exc:  # gRPC's "Failed to bind ...", its reason only in its log
        raise bind_failure(address, exc) from exc
    if port == 0:
        raise bind_failure(address, RuntimeError(f"cannot bind {address}"))
    server.start()
    metrics_port = None
    if settings.metrics_address:
        try:
            metrics_port = start_metrics_server(metrics, settings.metrics_address)
        except OSError as exc:
            server.stop(None)
            raise BindError(settings.metrics_address, exc) from exc
    stop = threading.Event()

    def evict_loop() -> None:
        while not stop.wait(evict_every):
            store.evict_idle()

    evictor = threading.Thread(target=evict_loop, name="evictor", daemon=True)
    evictor.start()
    return RunningServer(
        server=server,
        port=port,
        store=store,
        health=health_servicer,
        metrics=metrics,
        settings=settings,
        metrics_port=metrics_port,
        _evictor=evictor,
        _stop=stop,
        _lane=lane,
        admission=lane.admission,
        pipeline=pipeline,
    )
