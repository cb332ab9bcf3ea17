"""The gateway's liveness and readiness routes: ``GET /``, ``GET /health``, ``GET /ready``,
each also for ``HEAD`` (the same status and headers, no body: what load balancers probe)."""

from __future__ import annotations

import grpc
from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from workplace_env.gateway.routes.direct import DirectRoute
from workplace_env.gateway.state import GatewayStateDep
from workplace_env.gateway.translate import json_response
from workplace_env_client import reasons

router = APIRouter(route_class=DirectRoute)


@router.head("/", include_in_schema=False)
@router.head("/health", include_in_schema=False)
@router.get("/", summary="Health", tags=["health"])
@router.get("/health", summary="Health", tags=["health"])
async def health() -> dict[str, str]:
    """Always ``{"status": "ok"}`` while the gateway serves."""
    return {"status": "ok"}


@router.head("/ready", include_in_schema=False)
@router.get("/ready", summary="Readiness", tags=["health"])
async def ready(request: Request, state: GatewayStateDep) -> Response:
    """``200 {"status": "ready"}``; ``503 {"status": "draining"}`` (reason DRAINING) from
    the first instant of shutdown (CONTRACT X2), so balancers stop sending new episodes; over
    a gRPC target, 503 ``{"status": "backend_unavailable" | "backend_not_serving"}`` (reason
    UNAVAILABLE) while the gRPC server's health service does not answer SERVING. A 503 also
    carries ``failure_kind`` and ``reason``, as every refusal of the gateway."""
    if state.draining.is_set():
        return _not_ready("draining", reasons.DRAINING)
    why = None if state.probe is None else await run_in_threadpool(state.probe)
    if why is not None:
        return _not_ready(why, reasons.BY_CODE[grpc.StatusCode.UNAVAILABLE])
    return json_response({"status": "ready"})


def _not_ready(status: str, row: reasons.Reason) -> Response:
    """503 ``{status, failure_kind, reason}`` (+ Retry-After): ``row``'s kind and reason."""
    reason = reasons.carried(row.code or grpc.StatusCode.UNAVAILABLE, row.name)
    body = {"status": status, "failure_kind": row.failure_kind, "reason": reason}
    return json_response(body, row.http_status, {"retry-after": "1"})
