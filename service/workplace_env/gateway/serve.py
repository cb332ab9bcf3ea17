"""Running the gateway: blocking (``workplace-env gateway``: :func:`run_gateway`,
:func:`serve_gateway_until_signalled`) or in a background thread next to the gRPC server
(``workplace-env serve --http-address``: :func:`start_gateway`).

Both bind the HTTP socket themselves before serving, so a bad address fails at once (like
``start_server``), port 0 picks a free port, and the bound port is known before the first
request.
"""

from __future__ import annotations

import functools
import logging
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import uvicorn

from workplace_env.addresses import BindError, bind_socket, parse_address
from workplace_env.config import Settings, client_credentials
from workplace_env.gateway.app import create_app
from workplace_env.gateway.limits import (
    LimitedHttpProtocol,
    Limits,
    connection_limit,
    open_file_limit,
)
from workplace_env.gateway.readiness import check_backend_soon
from workplace_env.gateway.settings import GatewaySettings
from workplace_env.interrupts import program
from workplace_env.server.observability import LIFECYCLE, configure_logging, log_event
from workplace_env.terminal import CommandError
from workplace_env_client import EnvironmentClient

_WILDCARD_HOSTS = {"", "0.0.0.0", "::", "[::]"}
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _ignore(signum: int, frame: object) -> None:
    """A stop signal after uvicorn has drained: nothing left to do."""


def local_target(address: str, port: int) -> str:
    """The gRPC target for reaching a server bound to ``address`` on ``port`` from this host
    (a wildcard host becomes the loopback address)."""
    host, _ = parse_address(address)
    if host in _WILDCARD_HOSTS:
        host = "127.0.0.1"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class _DrainingServer(uvicorn.Server):
    """uvicorn's server that marks the app draining (readiness 503, seeds 503) the moment a
    stop signal arrives, before uvicorn stops accepting (CONTRACT X2)."""

    def handle_exit(self, sig: int, frame: object) -> None:
        mark_draining(self.config.app)
        super().handle_exit(sig, frame)  # type: ignore[arg-type]


def mark_draining(app: object) -> None:
    """Put a gateway app (from ``create_app``) into draining (CONTRACT X2)."""
    state = getattr(getattr(app, "state", None), "gateway", None)
    if state is not None:
        state.draining.set()


#: The listen backlog at most (uvicorn's default); never more than the connection limit.
_BACKLOG = 2048


def limits_of(settings: GatewaySettings) -> Limits:
    """The connection limit (:func:`~workplace_env.gateway.limits.connection_limit`, against
    this process's open-file limit) and the timeouts of ``settings``. Raises RuntimeError
    naming the setting when the limit cannot be kept."""
    try:
        most = connection_limit(settings.max_connections, open_file_limit())
    except ValueError as exc:
        raise RuntimeError(str(exc)) from exc
    return Limits(most, settings.header_timeout_s, settings.body_timeout_s)


def _config(app: object, limits: Limits, log_level: str, grace_s: float) -> uvicorn.Config:
    return uvicorn.Config(
        app,  # type: ignore[arg-type]
        http=functools.partial(LimitedHttpProtocol, limits=limits),  # type: ignore[arg-type]
        backlog=min(_BACKLOG, limits.max_connections),
        lifespan="on",
        log_level=log_level,
        log_config=None,  # uvicorn's records go to the process's handlers (JSON when serving)
        access_log=False,
        timeout_graceful_shutdown=max(1, round(grace_s)),
    )


@dataclass
class RunningGateway:
    """A gateway serving in a background thread: its ``host``, bound ``port`` and ``url``;
    ``client`` is its SDK client."""

    server: uvicorn.Server
    thread: threading.Thread
    host: str
    port: int
    client: EnvironmentClient
    _own_client: bool = field(default=False, repr=False)

    @property
    def url(self) -> str:
        """``http://host:port`` (a wildcard host shown as the loopback address)."""
        host = "127.0.0.1" if self.host in _WILDCARD_HOSTS else self.host
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    def start_draining(self) -> None:
        """X2 from now on: ``GET /ready`` answers 503 and seeds 503 + Retry-After; every other
        request is still served."""
        mark_draining(self.server.config.app)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Drain, stop accepting, let in-flight requests finish (bounded by ``timeout_s``), join
        the thread, and close the SDK client if the gateway created it."""
        self.start_draining()
        self.server.should_exit = True
        self.thread.join(timeout_s)
        if self.thread.is_alive():
            self.server.force_exit = True
            self.thread.join(timeout_s)
        if self._own_client:
            self.client.close()


def start_gateway(
    grpc_target: str | None = None,
    address: str = "127.0.0.1:0",
    settings: GatewaySettings | None = None,
    *,
    client: EnvironmentClient | None = None,
    log_level: str = "warning",
    grace_s: float = 5.0,
    startup_timeout_s: float = 30.0,
    rpc_timeout_s: float = 30.0,
) -> RunningGateway:
    """Serve the gateway on ``address`` in a daemon thread; return once it accepts requests.

    Pass the service's ``grpc_target`` (``HOST:PORT``; see :func:`local_target`) or a
    ``client`` (then the caller closes it; the co-hosted server's is in-process:
    :func:`~workplace_env.server.in_process.in_process_client`). ``rpc_timeout_s`` is the deadline
    of each RPC of a client created here. Raises RuntimeError when the address cannot be bound,
    the connection limit cannot be kept (:func:`limits_of`) or the app does not start within
    ``startup_timeout_s`` seconds.
    """
    if (grpc_target is None) == (client is None):
        raise ValueError("pass exactly one of grpc_target or client")
    settings = settings or GatewaySettings()
    limits = limits_of(settings)
    sock = bind_socket(address, min(_BACKLOG, limits.max_connections))
    own = grpc_target is not None
    sdk = client or EnvironmentClient(grpc_target, timeout_s=rpc_timeout_s, retry_refusals=False)
    app = create_app(sdk, settings)
    server = _DrainingServer(_config(app, limits, log_level, grace_s))
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="http-gateway", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:  # uvicorn sets it once the lifespan ran and it accepts
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            thread.join(5.0)
            sock.close()
            if own:
                sdk.close()
            raise RuntimeError(f"the HTTP gateway did not start on {address}")
        thread.join(0.01)
    host, port = sock.getsockname()[:2]
    return RunningGateway(server, thread, str(host), int(port), sdk, own)


def run_gateway(
    grpc_target: str | None = None,
    address: str = "127.0.0.1:8000",
    settings: GatewaySettings | None = None,
    *,
    client: EnvironmentClient | None = None,
    log_level: str = "info",
    grace_s: float = 5.0,
    rpc_timeout_s: float = 30.0,
    on_listening: Callable[[str], None] | None = None,
) -> None:
    """Serve the gateway on ``address`` until SIGTERM or SIGINT, then return (in-flight
    requests get ``grace_s`` seconds). Blocking; call it from the main thread, where signals
    are delivered.

    Pass the service's ``grpc_target`` (an insecure channel, RPC deadline ``rpc_timeout_s``) or
    a connected ``client`` (e.g. over TLS; the caller closes it). ``on_listening`` is called
    with the URL once the socket is bound (default: print it to stderr). Raises RuntimeError
    when the address cannot be bound or the connection limit cannot be kept (:func:`limits_of`).
    """
    if (grpc_target is None) == (client is None):
        raise ValueError("pass exactly one of grpc_target or client")
    settings = settings or GatewaySettings()
    limits = limits_of(settings)
    sock = bind_socket(address, min(_BACKLOG, limits.max_connections))
    host, port = sock.getsockname()[:2]
    shown = "127.0.0.1" if host in _WILDCARD_HOSTS else host
    url = f"http://[{shown}]:{port}" if ":" in str(shown) else f"http://{shown}:{port}"
    own = client is None
    sdk = client or EnvironmentClient(grpc_target, timeout_s=rpc_timeout_s, retry_refusals=False)
    server = _DrainingServer(_config(create_app(sdk, settings), limits, log_level, grace_s))
    (on_listening or (lambda u: print(f"workplace-env gateway on {u}", file=sys.stderr)))(url)
    # uvicorn handles SIGTERM/SIGINT while it serves, then re-raises them to the handlers it
    # found; these no-op ones make the drained gateway return instead of dying by signal.
    previous = {sig: signal.signal(sig, _ignore) for sig in _STOP_SIGNALS}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()
        if own:
            sdk.close()


def _listening(
    url: str, shown: str, grpc_target: str, tls: bool, client: EnvironmentClient
) -> None:
    """Log ``HTTP gateway on URL -> TARGET``, then check the gRPC server behind it in the
    background: one warning naming its address and how to start it when it does not answer."""
    log_event(
        LIFECYCLE, f"HTTP gateway on {url} {shown}", url=url, grpc_target=grpc_target, tls=tls
    )

    def silent(why: str) -> None:
        log_event(
            LIFECYCLE,
            f"the gRPC server at {grpc_target} does not answer ({why}): start it with "
            f"`{shlex.join([program(), 'serve', '--address', grpc_target])}`, or point "
            "--grpc-target at the "
            "address it serves on; until it answers, /ready is 503 backend_unavailable and "
            "episodes fail",
            logging.WARNING,
            grpc_target=grpc_target,
        )

    if client.channel is not None:
        check_backend_soon(client.channel, silent)


def serve_gateway_until_signalled(grpc_target: str, address: str, settings: Settings) -> None:
    """``workplace-env gateway``: serve the gateway on ``address`` in front of the gRPC server
    at ``grpc_target`` until SIGTERM or SIGINT (:func:`run_gateway`), with the server settings'
    cookie secret, MCP path, log level and grace period. The gRPC channel is TLS when
    ``tls_ca`` (the CA bundle trusted for the server) or ``tls_client_cert``/``tls_client_key``
    (this gateway's certificate, for a server requiring one: mTLS) is set, else plaintext.
    Logs (JSON, as every line it writes) ``HTTP gateway on URL -> TARGET`` once bound; raises
    :class:`~workplace_env.terminal.CommandError` (exit 2) when the address cannot be bound or
    a TLS file cannot be read."""
    configure_logging(settings.log_level)
    try:
        credentials = client_credentials(settings)
    except (OSError, ValueError) as exc:
        raise CommandError("cannot read the gateway's TLS files:", exc) from exc
    tls = credentials is not None
    shown = f"-> {grpc_target}" + (" (TLS)" if tls else "")
    client = EnvironmentClient(grpc_target, credentials=credentials, retry_refusals=False)
    try:
        run_gateway(
            None,
            address,
            GatewaySettings.of(settings),
            client=client,
            grace_s=settings.grace_s,
            on_listening=lambda url: _listening(url, shown, grpc_target, tls, client),
        )
    except BindError as exc:
        raise CommandError(
            f"cannot start the HTTP gateway: {exc}; choose another --address"
        ) from exc
    except RuntimeError as exc:
        raise CommandError("cannot start the HTTP gateway:", exc) from exc
    finally:
        client.close()
