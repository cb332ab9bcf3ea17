"""The HTTP gateway: the reference's legacy cookie routes and MCP, as clients of the gRPC
service (CONTRACT "The legacy HTTP path"; never a second implementation of sessions or tools).

* :func:`create_app` builds the FastAPI app over an SDK client;
* :func:`run_gateway` serves it, blocking (``workplace-env gateway``);
* :func:`start_gateway` serves it in a background thread (``workplace-env serve
  --http-address``, tests), returning a :class:`RunningGateway`.
"""

from workplace_env.gateway.app import create_app
from workplace_env.gateway.cookies import SESSION_ID_KEY, CookieCodec, SessionTokens
from workplace_env.gateway.mcp_tools import TOKEN_HEADER
from workplace_env.gateway.serve import (
    RunningGateway,
    local_target,
    parse_address,
    run_gateway,
    start_gateway,
)
from workplace_env.gateway.settings import COOKIE_NAME, SECRET_ENV, GatewaySettings
from workplace_env.gateway.translate import CALL_ID_HEADER

__all__ = [
    "CALL_ID_HEADER",
    "COOKIE_NAME",
    "SECRET_ENV",
    "SESSION_ID_KEY",
    "TOKEN_HEADER",
    "CookieCodec",
    "GatewaySettings",
    "RunningGateway",
    "SessionTokens",
    "create_app",
    "local_target",
    "parse_address",
    "run_gateway",
    "start_gateway",
]
