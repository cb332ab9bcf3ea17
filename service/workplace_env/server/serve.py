"""Running the gRPC server as a process: ``workplace-env serve`` until a stop signal, the drain
that follows it (CONTRACT X2), and the in-process server ``run`` and ``demo`` play against.

Like :mod:`workplace_env.gateway.serve` for the HTTP gateway: the wiring of one server is
:mod:`workplace_env.server.app`; this module owns the process around it (signals, what is
printed, the co-hosted gateway, shutdown order).
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from workplace_env.addresses import BindError
from workplace_env.config import ADMIN_TOKEN_ENV, Settings
from workplace_env.plurals import counted
from workplace_env.sandbox.load import describe_sandbox, load_sandbox
from workplace_env.sandbox.tables import TablesUnavailableError
from workplace_env.server.app import RunningServer, start_server
from workplace_env.server.observability import LIFECYCLE, configure_logging, log_event
from workplace_env.sessions import SessionStore
from workplace_env.terminal import CommandError
from workplace_env_client import EnvironmentClient

if TYPE_CHECKING:  # the gateway (FastAPI, uvicorn) loads only when a command needs it
    from workplace_env.gateway.serve import RunningGateway

#: The admin token of the in-process server of ``run`` and ``demo`` (made per process): the
#: ``tables_after`` comparisons read the sessions through the admin export, which is off without
#: a token (A1).
LOCAL_ADMIN_TOKEN = secrets.token_urlsafe(24)


def serve_until_signalled(settings: Settings) -> None:
    """Serve the environment (and, with ``http_address``, the co-hosted HTTP gateway) until
    SIGTERM or SIGINT, then drain and stop (:func:`drain_and_stop`).

    Every line on stderr is JSON (:func:`configure_logging`): first the bound addresses, as
    messages ``workplace-env serving on HOST:PORT``, the sandbox (``sandbox: ...``,
    :func:`~workplace_env.sandbox.load.describe_sandbox`), then ``HTTP gateway on URL`` and
    ``metrics on HOST:PORT`` when served, each address with its ``port`` (and ``address`` or
    ``url``) as fields; tests and scripts read the port from the first line. Raises
    :class:`CommandError` (exit 2) when the sandbox cannot be loaded or an address cannot be
    bound.
    """
    configure_logging(settings.log_level)
    try:
        store = SessionStore(load_sandbox(settings.data_dir), settings.session_config())
        server = start_server(store, settings=settings)
    except BindError as exc:
        flag = "--metrics-address" if exc.address == settings.metrics_address else "--address"
        raise CommandError(f"cannot start: {exc}; choose another {flag}") from exc
    except (RuntimeError, TablesUnavailableError, OSError) as exc:
        raise CommandError("cannot start:", exc) from exc
    # A handler runs in the main thread wherever it was interrupted, possibly inside a lock it
    # would take (two signals at once: NeMo's SIGINT and its parent-death SIGTERM), so it takes
    # none: it counts, the wakeup socket wakes the main thread, and only the second signal sets
    # ``hurry`` (whose lock the main thread never holds).
    received: list[int] = []
    hurry = threading.Event()
    wake, woken = socket.socketpair()
    wake.setblocking(False)

    def on_signal(signum: int, frame: object) -> None:
        received.append(signum)
        if len(received) == 2:
            hurry.set()  # a second signal: stop waiting for the admitted episodes

    previous_wakeup = signal.set_wakeup_fd(wake.fileno(), warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    gateway = None
    if settings.http_address:
        from workplace_env.gateway import start_gateway
        from workplace_env.gateway.settings import GatewaySettings
        from workplace_env.server.in_process import in_process_client

        try:
            gateway = start_gateway(
                None,
                settings.http_address,
                GatewaySettings.of(settings),
                # co-hosted: the gateway calls this server's servicer in-process
                client=in_process_client(server, settings.max_message_bytes),
                grace_s=settings.grace_s,
            )
        except BindError as exc:
            server.stop(grace_s=0)
            raise CommandError(
                f"cannot start the HTTP gateway: {exc}; choose another --http-address"
            ) from exc
        except RuntimeError as exc:
            server.stop(grace_s=0)
            raise CommandError("cannot start the HTTP gateway:", exc) from exc
    host = settings.address.rsplit(":", 1)[0]
    address = f"{host}:{server.port}"
    log_event(LIFECYCLE, f"workplace-env serving on {address}", address=address, port=server.port)
    sandbox = describe_sandbox(store.base)
    log_event(LIFECYCLE, f"sandbox: {sandbox}", sandbox=sandbox)
    if gateway is not None:
        log_event(LIFECYCLE, f"HTTP gateway on {gateway.url}", url=gateway.url, port=gateway.port)
    if server.metrics_port:
        metrics = f"{settings.metrics_address.rsplit(':', 1)[0]}:{server.metrics_port}"
        log_event(LIFECYCLE, f"metrics on {metrics}", address=metrics, port=server.metrics_port)
    checkpoints = settings.admin_open or bool(settings.admin_token)
    if gateway is not None and checkpoints and not settings.cookie_secret:
        _log.warning(
            "checkpoints are on (admin RPCs) but the cookie secret is random per process: "
            "cookie sessions restored into another process are orphaned (their cookies do not "
            "verify there); set --cookie-secret"
        )
    try:
        while not received:
            woken.recv(64)  # a signal's byte (its handler has run by then)
    finally:
        signal.set_wakeup_fd(previous_wakeup)
        wake.close()
        woken.close()
    LIFECYCLE.info("draining ...")
    drain_and_stop(server, gateway, settings.grace_s, settings.drain_delay_s, hurry)


_log = logging.getLogger("workplace_env.server")

#: Seconds calls already running get to finish once the drain stops admitting RPCs (tool calls,
#: verifies and closes take milliseconds; a checkpoint stream of many sessions, seconds).
FINISH_S = 5.0
#: How often the drain looks whether every admitted episode has closed (seconds).
_POLL_S = 0.05
#: Session states of an episode still running: its calls must keep being served (X2).
_OPEN_STATES = ("seeded", "verified")


def drain_and_stop(
    server: RunningServer,
    gateway: RunningGateway | None,
    grace_s: float,
    hold_s: float = 0.0,
    hurry: threading.Event | None = None,
) -> None:
    """Shut a server (and its co-hosted gateway) down (CONTRACT X2: in-flight calls finish;
    nothing admitted is lost).

    1. From the first instant both transports report not-ready and refuse new seeds (gRPC
       UNAVAILABLE ``DRAINING`` with ErrorInfo, HTTP 503 + Retry-After) and keep serving
       everything else: for ``hold_s`` seconds (``--drain-delay-s``, until a proxy's health
       checks have taken this replica out), then until every admitted episode has closed, at
       most ``grace_s`` more (``--grace-s``; ``hurry``, set by a second signal, ends the wait).
    2. Every new RPC is answered UNAVAILABLE ``DRAINING`` (retryable, explained) and the gateway
       stops accepting connections; the calls already running finish (within
       :data:`FINISH_S`); only then does the gRPC listener close. Closing it with calls still
       queued would end them CANCELLED, which leaves a client unsure whether a seed or close
       applied.
    """
    if gateway is not None:
        gateway.start_draining()
    server.start_draining()
    if hold_s > 0:
        time.sleep(hold_s)
    deadline = time.monotonic() + grace_s
    hurry = hurry or threading.Event()
    while time.monotonic() < deadline and _open_episodes(server) and not hurry.is_set():
        time.sleep(_POLL_S)
    left = _open_episodes(server)
    server.refuse_new_rpcs()
    _log.info("drain: %s still open; refusing every new RPC", counted(left, "episode"))
    if gateway is not None:
        gateway.stop(timeout_s=FINISH_S)
    finish_by = time.monotonic() + FINISH_S
    while time.monotonic() < finish_by and server.rpcs_in_flight():
        time.sleep(_POLL_S)
    _log.info("drain: %d RPCs still running; closing the listener", server.rpcs_in_flight())
    server.stop(grace_s=max(0.0, finish_by - time.monotonic()))
    _log.info("drain: stopped")


def _open_episodes(server: RunningServer) -> int:
    """Live sessions whose episode has not closed (restored, unclaimed ones are not running)."""
    counts = server.store.state_counts()
    return sum(counts.get(state, 0) for state in _OPEN_STATES)


def load_store(data_dir: Path | None) -> SessionStore:
    """A session store over the sandbox of ``data_dir`` (None: the embedded one). Raises
    :class:`CommandError` (exit 2) when its tables cannot be loaded."""
    try:
        return SessionStore(load_sandbox(data_dir))
    except TablesUnavailableError as exc:
        raise CommandError("cannot load the sandbox:", exc) from exc


@contextmanager
def local_server(data_dir: Path | None) -> Iterator[RunningServer]:
    """A server on a free loopback port for the duration, admin RPCs behind
    :data:`LOCAL_ADMIN_TOKEN`; its per-RPC warnings are quiet."""
    # Refusals are part of some files (e.g. bodies the reference answered with 422): the
    # run's own table reports mismatches, so the server's per-RPC warnings stay quiet.
    logging.getLogger("workplace_env.rpc").setLevel(logging.ERROR)
    settings = Settings(admin_token=LOCAL_ADMIN_TOKEN)
    server = start_server(load_store(data_dir), "127.0.0.1:0", settings=settings)
    try:
        yield server
    finally:
        server.stop(grace_s=1.0)


@contextmanager
def connect(
    target: str | None,
    data_dir: Path | None,
    token: str | None = None,
    credentials: grpc.ChannelCredentials | None = None,
) -> Iterator[tuple[EnvironmentClient, str | None]]:
    """A client of the server at ``target`` (``HOST:PORT``; over TLS with ``credentials``), or,
    when it is None, of a :func:`local_server` over ``data_dir``; with the admin token to use on
    it (for a target: ``token``, else ``$WORKPLACE_ENV_ADMIN_TOKEN``, else None)."""
    if target is not None:
        with EnvironmentClient(target, credentials=credentials) as client:
            yield client, token or os.environ.get(ADMIN_TOKEN_ENV)
        return
    with local_server(data_dir) as server, EnvironmentClient(f"127.0.0.1:{server.port}") as client:
        yield client, LOCAL_ADMIN_TOKEN
