"""The gateway's tool route: ``POST /{tool_name}``, one tool call of the cookie's session."""

from __future__ import annotations

import grpc
from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.routing import Match
from starlette.types import Scope

from workplace_env.gateway.docs import body_doc, problem
from workplace_env.gateway.routes.direct import DirectRoute
from workplace_env.gateway.state import GatewayStateDep
from workplace_env.gateway.translate import (
    CALL_ID_HEADER,
    HeaderName,
    body_text,
    cookie_session,
    invalid,
    is_large,
    no_session_detail,
    object_body,
    service_error,
    wrong_route_problem,
)
from workplace_env.sandbox.tools import TOOLS
from workplace_env_client import SessionLostError, reasons

#: A tool call's ``call_id`` arrives as a request header.
_CALL_SENT_AS = {"call_id": HeaderName(CALL_ID_HEADER)}


class ToolRoute(DirectRoute):
    """The tool route: any single-segment path for ``POST`` (a name that is no tool is told
    by the endpoint), only a tool's name for another method (405, ``Allow: POST``); any
    other path and method is no match, so the router answers 404 ``ROUTE_NOT_FOUND``."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match is Match.PARTIAL and child["path_params"]["tool_name"] not in TOOLS:
            return Match.NONE, {}
        return match, child


router = APIRouter(route_class=ToolRoute)


@router.post(
    "/{tool_name}",
    summary="Call a tool",
    tags=["tools"],
    openapi_extra=body_doc(
        "The tool's arguments (null values are dropped). Optional header "
        f"`{CALL_ID_HEADER}`: an idempotency key.",
        {"email_search_emails": {"query": "budget", "page": 1}},
    ),
    responses={
        200: {
            "description": '`{"output": ...}`: the tool\'s return value, or the '
            "reference's error text for an unknown tool or bad arguments.",
        },
        404: problem(
            "No live session (`failure_kind` `session_lost`, the detail saying why: no "
            "cookie, an expired one, or one this gateway cannot read); without one, a name "
            "that is no tool is told as an unknown route."
        ),
        409: problem(
            "The call id was used for another call: the tool name or the arguments text "
            "differ (a retry must resend the identical text)."
        ),
        413: problem(
            "A write that would take the session over the server's "
            "`max_session_write_bytes` (`session_too_large`, with `limit_bytes` and "
            "`size_bytes`; nothing applied)."
        ),
        422: problem("The body is not a JSON object."),
    },
)
async def call_tool(tool_name: str, request: Request, state: GatewayStateDep) -> Response:
    sid = cookie_session(request)
    if sid is None and tool_name not in TOOLS:  # no route: decided before the body is read
        return wrong_route_problem(request).response
    text = await body_text(request)
    if sid is None:
        # a bad body is 422 before a missing session is 404 (NaN runs, as on the service)
        await object_body(request, constants=True)
        raise service_error(
            SessionLostError(
                no_session_detail(request),
                grpc.StatusCode.NOT_FOUND,
                reason=reasons.SESSION_LOST.name,
            )
        )
    call_ids = request.headers.getlist(CALL_ID_HEADER)
    if len(set(call_ids)) > 1:  # which one keys the call is a guess: refused, as X4's
        raise invalid(
            [((HeaderName(CALL_ID_HEADER),), "sent more than once with different values")]
        )
    call_id = call_ids[0] if call_ids else ""
    output = await state.service_call(
        state.client.call_tool_raw,
        sid,
        tool_name,
        text,
        call_id,
        sent_as=_CALL_SENT_AS,
        off_loop=is_large(request),
    )
    return Response(b'{"output":' + output.encode("utf-8") + b"}", media_type="application/json")
