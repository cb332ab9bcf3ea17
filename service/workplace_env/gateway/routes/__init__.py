"""The gateway's routes, one module per group, each an ``APIRouter`` of
:class:`~workplace_env.gateway.routes.direct.DirectRoute` routes reaching the app's
:class:`~workplace_env.gateway.state.GatewayState` through a dependency:

* :mod:`~workplace_env.gateway.routes.health`: ``GET /``, ``/health``, ``/ready``;
* :mod:`~workplace_env.gateway.routes.offline`: ``GET /reverify_mode``, ``POST
  /aggregate_metrics``;
* :mod:`~workplace_env.gateway.routes.episodes`: ``POST /seed_session``, ``/verify``,
  ``/close_session``;
* :mod:`~workplace_env.gateway.routes.mcp_access`: ``POST /session_token``, the MCP route;
* :mod:`~workplace_env.gateway.routes.tools`: ``POST /{tool_name}`` (last: it matches any
  other single-segment path for ``POST``, a tool's name only for another method; a path no
  route matches is 404 ``ROUTE_NOT_FOUND``).
"""

from __future__ import annotations

from fastapi import FastAPI

from workplace_env.gateway.routes import episodes, health, mcp_access, offline, tools
from workplace_env.gateway.state import GatewayState


def include_routes(app: FastAPI, state: GatewayState) -> None:
    """Give ``app`` the gateway's routes, in matching order, over ``state`` (stored as
    ``app.state.gateway``, where :func:`~workplace_env.gateway.state.gateway_state` reads it).

    The groups' route objects are appended as they are (every app shares them): FastAPI's
    ``include_router`` would add each group as one branch route, a matching step more per
    request and no paths in ``app.routes``. The episode's routes go first, before FastAPI's
    own (``/openapi.json``, ``/docs``): Starlette tries routes in order, and three of an
    episode's four or five requests are theirs; no other route takes their paths."""
    app.state.gateway = state
    app.router.routes[:0] = episodes.router.routes
    for group in (health, offline, mcp_access):
        app.router.routes.extend(group.router.routes)
    mcp_access.mount_mcp(app, state)
    app.router.routes.extend(tools.router.routes)
