"""The gateway's MCP access: ``POST /session_token`` (an MCP token for the cookie's session)
and the MCP server's own route at ``settings.mcp_path``."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response
from starlette.routing import Route

from workplace_env.gateway.docs import body_doc, problem
from workplace_env.gateway.mcp_tools import TOKEN_HEADER
from workplace_env.gateway.routes.direct import DirectRoute
from workplace_env.gateway.state import GatewayState, GatewayStateDep
from workplace_env.gateway.translate import (
    cookie_session,
    invalid,
    json_response,
    no_session_detail,
    object_body,
    read_body,
    refuse_header_mismatch,
    row_problem,
)
from workplace_env_client import reasons

router = APIRouter(route_class=DirectRoute)


@router.post(
    "/session_token",
    summary="Mint an MCP session token",
    tags=["mcp"],
    openapi_extra=body_doc(
        "`{}` (or `{resources_session_id}` naming the same session) for the session of the "
        "request's cookie; the id alone grants nothing.",
        {"cookie": {}, "named": {"resources_session_id": "s1"}},
    ),
    responses={
        403: problem("The id is not the cookie's session."),
        404: problem("No session cookie."),
        422: problem("Malformed body."),
    },
)
async def session_token(request: Request, state: GatewayStateDep) -> Response:
    raw = await read_body(request)
    body = await object_body(request) if raw.strip() else {}
    # Only the cookie's session: knowing a cookie session's id is no credential.
    sid = cookie_session(request)
    named = body.get("resources_session_id", sid)
    if named is not None and (not isinstance(named, str) or not named):
        raise invalid([(("resources_session_id",), "must be a non-empty string")])
    refuse_header_mismatch(request, body.get("resources_session_id"))  # X4
    if sid is None:
        detail = (
            f"{no_session_detail(request)}; a token is minted for the cookie's session (a "
            "typed POST /seed_session, retried as is, sets the cookie)"
        )
        return row_problem(reasons.SESSION_LOST, detail).response
    if named != sid:
        detail = "resources_session_id is not the session of this request's cookie"
        return row_problem(reasons.SESSION_COOKIE_REQUIRED, detail).response
    token = state.tokens.mint(sid)
    return json_response(
        {
            "resources_session_id": sid,
            "token": token,
            "token_type": "bearer",
            "expires_in": state.tokens.max_age_s,
        },
        headers={TOKEN_HEADER: token},
    )


def mount_mcp(app: FastAPI, state: GatewayState) -> None:
    """Append the route of ``state.mcp`` at ``state.settings.mcp_path`` to ``app`` (out of the
    OpenAPI document); nothing when MCP is off. Call it before the tool route, which would
    also match ``POST <mcp_path>``."""
    if state.mcp is not None:
        mcp_route = Route(state.settings.mcp_path, endpoint=state.mcp, include_in_schema=False)
        app.router.routes.append(mcp_route)
