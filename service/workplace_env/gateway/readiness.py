"""The gateway's ``/ready``: whether the gRPC server behind it takes episodes.

A gateway over a gRPC target asks the server's own health service
(:class:`HealthProbe`); the co-hosted gateway (an in-process client) has no probe, its
``/ready`` follows the server's draining state (set on the app by
:mod:`workplace_env.gateway.serve`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from workplace_env.interrupts import NO_ANSWER_CODES
from workplace_env_client import EnvironmentClient

#: How long ``/ready`` waits for the gRPC health answer, and how long that answer is reused.
READY_DEADLINE_S = 0.5
READY_CACHE_S = 1.0


class HealthProbe:
    """The gRPC health of the server on ``channel``: SERVING within :data:`READY_DEADLINE_S`,
    the answer cached :data:`READY_CACHE_S` so a balancer's probes do not each cost an RPC."""

    def __init__(self, channel: grpc.Channel) -> None:
        self._health = health_pb2_grpc.HealthStub(channel)
        self._lock = threading.Lock()
        self._at = -float("inf")
        self._answer: str | None = None

    def __call__(self) -> str | None:
        """None when the server answers SERVING; else ``"backend_unavailable"`` (no answer in
        time) or ``"backend_not_serving"`` (it answered, e.g. draining: X2). Blocking (one
        health RPC at most per :data:`READY_CACHE_S`)."""
        with self._lock:
            if time.monotonic() - self._at < READY_CACHE_S:
                return self._answer
            try:
                answer = self._health.Check(
                    health_pb2.HealthCheckRequest(service=""), timeout=READY_DEADLINE_S
                )
            except grpc.RpcError:
                self._answer = "backend_unavailable"
            else:
                serving = answer.status == health_pb2.HealthCheckResponse.SERVING
                self._answer = None if serving else "backend_not_serving"
            self._at = time.monotonic()
            return self._answer


def health_probe(client: EnvironmentClient) -> HealthProbe | None:
    """The probe of ``client``'s server: None for a client without a gRPC channel (in-process)."""
    return None if client.channel is None else HealthProbe(client.channel)


#: How long the start-up check of the gRPC server behind a gateway waits for its answer.
STARTUP_CHECK_S = 5.0


def check_backend_soon(channel: grpc.Channel, on_silent: Callable[[str], None]) -> None:
    """Ask the gRPC server on ``channel`` for its health once, without waiting: when it does
    not answer within :data:`STARTUP_CHECK_S` (UNAVAILABLE, DEADLINE_EXCEEDED), call
    ``on_silent`` with the code and details (on a gRPC thread). Any answer (NOT_SERVING
    included) means a server is there: nothing is called."""
    call = health_pb2_grpc.HealthStub(channel).Check.future(
        health_pb2.HealthCheckRequest(service=""), timeout=STARTUP_CHECK_S
    )

    def done(finished: grpc.Future) -> None:
        error = finished.exception()
        if isinstance(error, grpc.RpcError) and error.code() in NO_ANSWER_CODES:  # type: ignore[attr-defined]
            on_silent(f"{error.code().name}: {error.details()}")  # type: ignore[attr-defined]

    call.add_done_callback(done)
