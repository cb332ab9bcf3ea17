"""The legacy cookie HTTP path of the reference, over the gRPC service (CONTRACT "The legacy
HTTP path").

Every route is a thin client of the gRPC service through an SDK client (over gRPC, or over the
co-hosted servicer in-process: :mod:`workplace_env.server.in_process`): sessions, tools, scoring
and their errors all live in the service; the routes (:mod:`workplace_env.gateway.routes`) only
translate HTTP bodies, cookies and status codes, and this module builds the app around them.
Routes:

=========================  =====================================================================
``POST /seed_session``     body: a dataset row -> ``200 {"mcp": <MCP metadata>}`` (``{}`` when
                           MCP is not served), sets the session cookie, and the
                           ``x-workplace-session-token`` header (an MCP token for the session).
                           A legacy row (scalar ``task_id`` or none) seeds a legacy session
                           (SDK ``seed_legacy``): its id is the cookie's, or a new uuid4; a
                           re-seed on the same cookie rebuilds fresh tables, as the reference
                           does. A typed body is a typed ``SeedSession`` (S1-S8): NeMo Gym's
                           ``ResourcesSeedSessionRequest`` (``task_data`` = the row; H1,
                           :mod:`~workplace_env.gateway.nemo_protocol`), or (names
                           ``resources_session_id``, or carries ``episode_id`` and ``task_id``
                           as objects) ``{resources_session_id, episode_id, task_id, task:
                           <row>}`` (without ``task`` the other fields are the row). It answers
                           ``{resources_session_id, resources_tools}`` (NeMo's MCP metadata)
                           and the cookie then names that id.
``POST /<tool_name>``      body: the arguments object -> ``200 {"output": ...}``, the bytes
                           ``{"output":`` + the gRPC output JSON text + ``}`` (byte-exact to
                           the reference, error texts included).
``POST /verify``           body: the row plus a Responses-API ``response`` -> ``{
                           responses_create_params, response, reward, mask_sample, failure_kind,
                           failure_reason}``; predicted calls are ``response.output``'s
                           ``function_call`` items, the ground truth is the body's
                           ``ground_truth`` (a string or an array of string-valued objects, as
                           the reference types it; absent: the seeded task's). Legacy
                           sessions are released (V2), resends inside the retry window score
                           the same (V3), an unknown session is a masked
                           ``session_lost`` sample (V4); a body with no session cookie at all
                           is scored by replay (H5, offline re-verification).
``POST /close_session``    body: ``{resources_session_id, episode_id}`` (with a cookie, both
                           may be left out: the cookie's session, the legacy placeholder
                           episode; a body naming an id names its episode too) ->
                           ``{"outcome": ...}``;
                           exactly ``{resources_session_id, episode_id}`` (NeMo's typed close)
                           -> ``{"resources_session_id": ...}`` (H2), the outcome in the
                           ``x-workplace-close-outcome`` header.
``POST /aggregate_metrics`` NeMo's ``AggregateMetricsRequest`` -> its ``AggregateMetrics`` (H3).
``POST /session_token``    body: ``{}`` or ``{resources_session_id}`` -> an MCP session token.
``GET /reverify_mode``     ``"stateless"`` (H4).
``GET /``, ``GET /health`` ``{"status": "ok"}`` (these and ``GET /ready`` take ``HEAD``).
=========================  =====================================================================

Errors (JSON bodies with ``failure_kind``; 422s in FastAPI's ``detail`` shape, with ``loc``
naming the offending field, and the service's ``reason``): a Content-Type that is not JSON (or
none; as NeMo Gym's server), body not JSON / not an object, or a malformed typed seed (one
without a row: ``task_data``), close (one naming an id without ``episode_id``) or verify (as
NeMo's types, :mod:`workplace_env.responses`; or over the verify bounds of
:class:`~workplace_env.gateway.settings.GatewaySettings`, checked before anything else in the
body) -> 422; an ``x-resources-session-id`` header
naming another session than the body -> 422 ``SESSION_HEADER_MISMATCH`` (CONTRACT X4); a body
over the limit -> 413 ``REQUEST_TOO_LARGE``; a path served by no route (a fixed route's, a
tool's name, or any single-segment path for ``POST``; a trailing ``/`` is no redirect) -> 404
``ROUTE_NOT_FOUND`` whatever the method, body or Content-Type, a method a route's path does
not take -> 405 ``METHOD_NOT_ALLOWED`` (``Allow`` naming every method its routes take,
``GET, HEAD`` for the health routes); a write call that would take its session over the server's
``max_session_write_bytes`` -> 413 ``SESSION_TOO_LARGE`` (``limit_bytes``, ``size_bytes``;
nothing applied); bytes that
are not text -> 400 ``BODY_UNPARSABLE`` (as NeMo Gym's server); a tool call
without a live session -> 404 ``failure_kind "session_lost"`` (``reason`` SESSION_LOST,
SESSION_CLOSED or SESSION_EXPIRED); a typed seed on a bound or closed id, a reused
``x-workplace-call-id``, a close for another episode -> 409; capacity -> 429 with
``Retry-After``; a tool output over the server's message limit, or over the SDK client's when
the server's is larger -> 502 ``RESPONSE_TOO_LARGE``;
the service unavailable -> 503, its deadline -> 504, anything else it refuses -> 502.
Below the routes (:mod:`workplace_env.gateway.limits`): headers or a body slower than the
timeouts -> 408 ``REQUEST_TIMEOUT``, a connection beyond the limit -> 503
``TOO_MANY_CONNECTIONS``. A body over :data:`~workplace_env.gateway.translate.INLINE_BODY_BYTES`
is parsed, and handed to the service, on a worker thread; aggregations always run on one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from workplace_env.gateway.cookies import CookieCodec, SessionCookieMiddleware
from workplace_env.gateway.routes import include_routes
from workplace_env.gateway.settings import GatewaySettings
from workplace_env.gateway.state import GatewayState, gateway_version
from workplace_env.gateway.translate import (
    HttpProblem,
    row_problem,
    wrong_route_problem,
)
from workplace_env_client import EnvironmentClient, reasons

#: The refusals Starlette makes on its own (no route matched, or its body parser failed), by
#: status: the registry row each is answered with.
STARLETTE_REFUSALS = {
    400: reasons.BODY_UNPARSABLE,
    404: reasons.ROUTE_NOT_FOUND,
    405: reasons.METHOD_NOT_ALLOWED,
}


def create_app(client: EnvironmentClient, settings: GatewaySettings | None = None) -> FastAPI:
    """The gateway app over ``client``, an SDK client (owned by the caller): over gRPC, or
    in-process on the co-hosted server (:func:`~workplace_env.server.in_process.in_process_client`).

    ``settings`` default to :class:`GatewaySettings` (random per-process secret, the
    reference's cookie, MCP at ``/mcp``). Serve it with uvicorn (``lifespan`` on: MCP runs in
    it); see :func:`workplace_env.gateway.serve.start_gateway` and ``run_gateway``. The app's
    :class:`~workplace_env.gateway.state.GatewayState` is ``app.state.gateway``.
    """
    settings = settings or GatewaySettings()
    state = GatewayState.over(client, settings)
    mcp = state.mcp

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if mcp is None:
            yield
            return
        async with mcp.lifespan():
            yield

    app = FastAPI(
        title="workplace-env HTTP gateway",
        version=gateway_version(),
        description=(
            "The reference's legacy cookie HTTP path (NeMo Gym `workplace_assistant`), "
            "byte-compatible, over the gRPC service; plus the 27 tools over MCP at "
            f"`{settings.mcp_path or '(off)'}`. Send JSON bodies; keep the "
            f"`{settings.cookie_name}` cookie between requests."
        ),
        lifespan=lifespan,
        redirect_slashes=False,
    )
    app.add_middleware(
        SessionCookieMiddleware,
        codec=CookieCodec(settings.secret_key, settings.cookie_max_age_s),
        cookie_name=settings.cookie_name,
        https_only=settings.https_only,
    )

    @app.exception_handler(HttpProblem)
    async def _problem_handler(request: Request, exc: HttpProblem) -> Response:
        return exc.response

    @app.exception_handler(StarletteHTTPException)
    async def _starlette_refusal(request: Request, exc: StarletteHTTPException) -> Response:
        row = STARLETTE_REFUSALS.get(exc.status_code)
        if row is None:  # none of Starlette's or FastAPI's own (a route raising one)
            return await http_exception_handler(request, exc)
        if row in (reasons.ROUTE_NOT_FOUND, reasons.METHOD_NOT_ALLOWED):
            return wrong_route_problem(request).response
        return row_problem(row, exc.detail, exc.headers).response

    include_routes(app, state)
    return app
