"""The gateway's liveness and readiness routes: ``GET /``, ``GET /health``, ``GET /ready``."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from workplace_env.gateway.routes.direct import DirectRoute
from workplace_env.gateway.state import GatewayStateDep
from workplace_env.gateway.translate import json_response

router = APIRouter(route_class=DirectRoute)


@router.get("/", summary="Health", tags=["health"])
@router.get("/health", summary="Health", tags=["health"])
async def health() -> dict[str, str]:
    """Always ``{"status": "ok"}`` while the gateway serves."""
    return {"status": "ok"}


@router.get("/ready", summary="Readiness", tags=["health"])
async def ready(request: Request, state: GatewayStateDep) -> Response:
    """``200 {"status": "ready"}``; ``503 {"status": "draining"}`` from the first instant
    of shutdown (CONTRACT X2), so balancers stop sending new episodes; over a gRPC
    target, 503 ``{"status": "backend_unavailable" | "backend_not_serving"}`` while the
    gRPC server's health service does not answer SERVING."""
    if state.draining.is_set():
        return json_response({"status": "draining"}, 503, {"retry-after": "1"})
    why = None if state.probe is None else await run_in_threadpool(state.probe)
    if why is not None:
        return json_response({"status": why}, 503, {"retry-after": "1"})
    return json_response({"status": "ready"})
