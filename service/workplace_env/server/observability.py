"""Metrics and logs of the gRPC server: every RPC of the environment service is counted.

Prometheus metrics (prometheus-client, served at ``GET /metrics`` on their own HTTP port by
:func:`start_metrics_server`; any other path there is 404):

=============================================  =========  ==========================================
name                                           type       labels / meaning
=============================================  =========  ==========================================
``workplace_env_rpc_total``                    counter    ``method``, ``code`` (gRPC status name)
``workplace_env_rpc_duration_seconds``         histogram  ``method``; server time of the handler
``workplace_env_errors_total``                 counter    ``method``, ``reason`` (ErrorInfo reason:
                                                          SESSION_CONFLICT, TABLES_UNAVAILABLE, ...)
``workplace_env_sessions_live``                gauge      ``state`` (seeded, verified,
                                                          restored_unclaimed)
``workplace_env_seeds_total``                  counter    successful seeds (new sessions, retries)
``workplace_env_closes_total``                 counter    ``outcome`` (closed, already_closed, ...)
``workplace_env_evictions_total``              counter    sessions evicted after their idle TTL
``workplace_env_rewards_total``                counter    scored verifies
``workplace_env_reward_sum``                   counter    sum of their rewards
``workplace_env_rewards_masked_total``         counter    masked verifies (session lost)
=============================================  =========  ==========================================

Logs are JSON lines on stderr (logger ``workplace_env.rpc``): method, code, duration_ms,
resources_session_id, and the ErrorInfo reason for failures. Failed RPCs log at WARNING, the
others at DEBUG, so INFO (the default level) shows problems only. :func:`configure_logging`
makes every other line of a serving process JSON too (startup, drain, uvicorn, warnings).
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import grpc
from google.rpc import error_details_pb2
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from workplace.env.v1 import environment_pb2 as pb
from workplace_env.server.pipeline import Behaviour, Method, Step

log = logging.getLogger("workplace_env.rpc")

_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0)


#: The states a live session can be in (CONTRACT "Session states"; closed ones are fences).
LIVE_STATES = ("seeded", "verified", "restored_unclaimed")


class Metrics:
    """The server's Prometheus metrics, in their own registry (tests can make many)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.rpcs = Counter(
            "workplace_env_rpc", "RPCs by method and status code.", ["method", "code"], registry=r
        )
        self.duration = Histogram(
            "workplace_env_rpc_duration_seconds",
            "Server time per RPC.",
            ["method"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.errors = Counter(
            "workplace_env_errors",
            "Failed RPCs by ErrorInfo reason.",
            ["method", "reason"],
            registry=r,
        )
        self.live = Gauge(
            "workplace_env_sessions_live", "Live sessions by state.", ["state"], registry=r
        )
        self.seeds = Counter("workplace_env_seeds", "Successful seeds.", registry=r)
        self.closes = Counter("workplace_env_closes", "Closes by outcome.", ["outcome"], registry=r)
        self.evictions = Counter(
            "workplace_env_evictions", "Sessions evicted after the idle TTL.", registry=r
        )
        self.rewards = Counter("workplace_env_rewards", "Scored verifies.", registry=r)
        self.reward_sum = Counter("workplace_env_reward_sum", "Sum of rewards.", registry=r)
        self.masked = Counter("workplace_env_rewards_masked", "Masked verifies.", registry=r)
        self._closes: dict[int, Any] = {}  # CloseOutcome value -> its child of ``closes``

    def track_live(self, counts: Callable[[], dict[str, int]]) -> None:
        """Read the live-session gauge from ``counts()`` (state -> number) at scrape time."""
        for state in LIVE_STATES:
            self.live.labels(state).set_function(lambda s=state: counts().get(s, 0))

    def observe(self, method: str, response: Any) -> None:
        """Domain counters from a successful response."""
        if method == "SeedSession":
            self.seeds.inc()
        elif method == "CloseSession":
            closes = self._closes.get(response.outcome)
            if closes is None:  # made on first use, so the exposition lists seen outcomes only
                outcome = pb.CloseOutcome.Name(response.outcome).removeprefix("CLOSE_OUTCOME_")
                closes = self._closes[response.outcome] = self.closes.labels(outcome.lower())
            closes.inc()
        elif method == "Verify":
            if response.mask_sample:
                self.masked.inc()
            else:
                self.rewards.inc()
                self.reward_sum.inc(response.reward)


def _reason(context: grpc.ServicerContext) -> str:
    """The ErrorInfo reason of the status the handler aborted with, if any."""
    for key, value in context.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            from google.rpc import status_pb2

            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                    info = error_details_pb2.ErrorInfo()
                    detail.Unpack(info)
                    return info.reason
    return ""


class MethodCount:
    """The counting of one method's RPCs (:class:`Metrics` and the ``workplace_env.rpc`` log),
    its label children made once. Used by the gRPC server (:func:`metered`) and by in-process
    calls (:mod:`workplace_env.server.in_process`), so both count and log alike."""

    __slots__ = ("_method", "_metrics", "_ok", "_timer")

    def __init__(self, metrics: Metrics, method: str) -> None:
        self._metrics = metrics
        self._method = method
        self._ok = metrics.rpcs.labels(method, "OK")
        self._timer = metrics.duration.labels(method)

    def succeeded(self, elapsed: float, request: Any, response: Any) -> None:
        """An RPC answered OK in ``elapsed`` seconds: counted, timed, its domain counters
        (:meth:`Metrics.observe`), logged at DEBUG."""
        self._timer.observe(elapsed)
        self._ok.inc()
        self._metrics.observe(self._method, response)
        if log.isEnabledFor(logging.DEBUG):
            _log(logging.DEBUG, self._method, "OK", elapsed, request, "")

    def failed(self, elapsed: float, request: Any, code: str, reason: str) -> None:
        """An RPC failed with status ``code`` (its name) and ErrorInfo ``reason`` (may be
        empty): counted by both, timed, logged at WARNING."""
        self._timer.observe(elapsed)
        self._metrics.rpcs.labels(self._method, code).inc()
        if reason:
            self._metrics.errors.labels(self._method, reason).inc()
        _log(logging.WARNING, self._method, code, elapsed, request, reason)


def metered(metrics: Metrics, service: str) -> Step:
    """Step: each unary RPC of ``service`` (the environment service) counted, timed and logged.

    The counters' children are taken once per method (per RPC, only the timing and the
    counter updates). A failure is counted by its status code and ``ErrorInfo`` reason and
    logged at WARNING; a success counts the domain counters (:meth:`Metrics.observe`) and is
    logged at DEBUG. Other services and streaming methods are left as given.
    """

    def step(method: Method, behaviour: Behaviour) -> Behaviour:
        if method.service != service or method.request_streaming or method.response_streaming:
            return behaviour
        return _counting(behaviour, method.name, metrics)

    return step


def _counting(inner: Behaviour, method: str, metrics: Metrics) -> Behaviour:
    count = MethodCount(metrics, method)

    def counted(request: Any, context: grpc.ServicerContext) -> Any:
        start = time.perf_counter()
        try:
            response = inner(request, context)
        except BaseException:
            code = context.code() or grpc.StatusCode.UNKNOWN
            count.failed(time.perf_counter() - start, request, code.name, _reason(context))
            raise
        count.succeeded(time.perf_counter() - start, request, response)
        return response

    return counted


def _log(level: int, method: str, code: str, elapsed: float, request: Any, reason: str) -> None:
    record = {
        "method": method,
        "code": code,
        "duration_ms": round(elapsed * 1e3, 3),
        "resources_session_id": getattr(request, "resources_session_id", ""),
    }
    if reason:
        record["reason"] = reason
    log.log(level, json.dumps(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message (JSON messages are merged in)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": round(record.created, 6),
            "level": record.levelname,
            "logger": record.name,
        }
        message = record.getMessage()
        try:
            parsed = json.loads(message)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            out.update(parsed)
        else:
            out["message"] = message
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out)


#: The logger of a serving process's lifecycle (the bound addresses, the start of the drain):
#: shown whatever ``--log-level``.
LIFECYCLE = logging.getLogger("workplace_env.lifecycle")


class JsonHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The stderr handler :func:`configure_logging` installs (one :class:`JsonFormatter` line
    per record)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(JsonFormatter())


def configure_logging(level: str = "INFO") -> None:
    """Every log line of the process as JSON on stderr: ``workplace_env``'s at ``level``
    (DEBUG shows every RPC) but :data:`LIFECYCLE`'s at INFO at least, and through the root
    logger every other logger's (uvicorn's, Python's warnings, libraries') at theirs. A plain
    stderr handler already on the root (``logging.basicConfig``) is replaced; others (a test
    runner's capture) are kept."""
    handler = JsonHandler()
    ours = logging.getLogger("workplace_env")
    ours.handlers[:] = [handler]
    ours.setLevel(level.upper())
    ours.propagate = False
    LIFECYCLE.setLevel(logging.INFO)  # whatever the level: scripts read the addresses
    root = logging.getLogger()
    kept = [h for h in root.handlers if type(h) not in (logging.StreamHandler, JsonHandler)]
    root.handlers[:] = [*kept, handler]
    logging.captureWarnings(True)


def log_event(
    logger: logging.Logger, message: str, level: int = logging.INFO, **fields: Any
) -> None:
    """Log ``message`` with ``fields`` as keys of its JSON line (:class:`JsonFormatter`)."""
    logger.log(level, json.dumps({"message": message, **fields}))


#: The one path of the metrics port (any other is 404).
METRICS_PATH = "/metrics"


class _QuietHandler(WSGIRequestHandler):
    """The metrics port's request handler, without a log line per scrape."""

    def log_message(self, format: str, *args: Any) -> None:
        """Log nothing."""


def metrics_app(registry: CollectorRegistry) -> Callable[..., Iterable[bytes]]:
    """A WSGI app serving ``registry`` as Prometheus text at :data:`METRICS_PATH` (GET; the
    exposition's own 405 for another method) and 404 at any other path."""
    exposition = make_wsgi_app(registry)

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == METRICS_PATH:
            return exposition(environ, start_response)  # type: ignore[no-any-return]
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [f"404 Not Found: the metrics are served at {METRICS_PATH}\n".encode()]

    return serve


def start_metrics_server(metrics: Metrics, address: str) -> int:
    """Serve ``metrics`` at ``GET /metrics`` on ``HOST:PORT`` (port 0: a free one; host empty:
    every interface; an IPv6 host may be bracketed) on a daemon thread; return the port."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"
    family = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)[0][0]

    class MetricsServer(ThreadingWSGIServer):
        address_family = family

    server = make_server(
        host, int(port), metrics_app(metrics.registry), MetricsServer, _QuietHandler
    )
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return int(server.server_port)
