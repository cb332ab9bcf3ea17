"""The 27 tools as an MCP server (streamable HTTP), each call scoped to one session by a token.

* ``tools/list`` answers the schemas of gRPC ``ListTools``: ``name``, ``description`` and
  ``inputSchema`` = the schema's ``parameters``, verbatim (REFERENCE.md (f): MCP advertises the
  schemas unchanged). It needs no token.
* ``tools/call`` needs a session token (minted by ``POST /seed_session`` in its
  ``x-workplace-session-token`` header, or by ``POST /session_token``), sent as
  ``Authorization: Bearer <token>``, ``x-workplace-session-token: <token>`` or NeMo Gym's
  ``X-NeMo-Gym-Session-Token: <token>`` (the header of the seed's ``resources_tools``, CONTRACT
  H6). It runs gRPC ``CallTool`` for the token's session and answers as NeMo Gym's MCP servers
  do: one text block ``{"output":`` + the gRPC ``output`` bytes + ``}``, and
  ``structuredContent`` ``{"output": <decoded output>}``. Tool failures are outputs
  (``isError`` false), as on the other transports; a tool name not in ``tools/list`` is an
  ``isError`` result naming the available tools (NeMo Gym's text).
* Rejections are JSON-RPC errors and never reach a session: no or invalid token
  (:data:`TOKEN_REQUIRED`), a session the service does not hold (the registry's
  ``JSONRPC_SESSION_LOST``, data ``{"failure_kind": "session_lost", "reason": ...}``), other
  service errors (``JSONRPC_SERVICE_ERROR``); a body that is not JSON gets -32700, JSON that
  is no JSON-RPC message (an array, ``jsonrpc`` not "2.0", a response without its ``id``)
  -32600 "Invalid Request" naming what is wrong (HTTP 400, checked here: the SDK would answer
  -32602 with its validator's dump), a body over the SDK's limit
  (``max_request_body_size``, 4 MiB) HTTP 413 with -32700 before it is read; every answer
  that is not HTTP 2xx (ours and the SDK's: 400, 405, 406, 413, 415, 503) names its registry
  reason in the error's ``data`` (``{"reason": ...}``, :data:`MCP_REFUSALS`; a Content-Type
  that is not JSON is 415, where the SDK would answer a plain-text 400); a request of a
  method this server does not answer (any but ``initialize``, ``ping``, ``tools/list`` and
  ``tools/call``, whatever its params) is -32601 "Method not found" naming it; one whose
  ``params`` its MCP type refuses (``arguments: [1]``, ``name: 5``) is -32602 naming each
  field, checked here before the SDK (whose own -32602 names none); the ``data`` of both is
  the list of ``{loc, msg, type}``.

The transport is stateless with JSON responses: every POST carries its own token, and the
gateway keeps no MCP state between requests.
"""

from __future__ import annotations

import json
import typing
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import McpError
from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from workplace_env import wire
from workplace_env.errors import clip_inline
from workplace_env.gateway.cookies import SessionTokens
from workplace_env.gateway.nemo_protocol import NEMO_TOKEN_HEADER
from workplace_env.gateway.translate import INLINE_BODY_BYTES
from workplace_env_client import EnvironmentClient, WorkplaceEnvError, reasons
from workplace_env_client.errors import too_large_sizes
from workplace_env_client.reasons import JSONRPC_SERVICE_ERROR, JSONRPC_SESSION_LOST

#: JSON-RPC error codes of this server (the implementation-defined range -32000..-32099).
TOKEN_REQUIRED = -32001
#: JSON-RPC's own code for a body that is not a message (not UTF-8 JSON we can carry).
PARSE_ERROR = -32700
#: JSON-RPC's code for a request whose params its method refuses.
INVALID_PARAMS = -32602
#: JSON-RPC's code for a request of a method this server does not answer.
METHOD_NOT_FOUND = -32601
#: JSON-RPC's code for a message that is no valid request (the MCP SDK's for a bad header).
INVALID_REQUEST = -32600

#: The registry row of each HTTP status the endpoint refuses with (ours and the MCP SDK's):
#: its name is the ``reason`` in the JSON-RPC error's ``data``.
MCP_REFUSALS: dict[int, reasons.Reason] = {
    row.http_status: row
    for row in (
        reasons.BODY_UNPARSABLE,
        reasons.METHOD_NOT_ALLOWED,
        reasons.NOT_ACCEPTABLE,
        reasons.REQUEST_TOO_LARGE,
        reasons.UNSUPPORTED_MEDIA_TYPE,
        reasons.DRAINING,
    )
}

#: Header that carries a session token (``Authorization: Bearer`` works too; NeMo Gym's,
#: ``NEMO_TOKEN_HEADER``, as well).
TOKEN_HEADER = "x-workplace-session-token"


def token_from_headers(headers: Any) -> str | None:
    """The session token of a request: ``x-workplace-session-token`` or
    ``X-NeMo-Gym-Session-Token``, else a Bearer token."""
    token = headers.get(TOKEN_HEADER) or headers.get(NEMO_TOKEN_HEADER)
    if token:
        return token.strip()
    scheme, _, credentials = (headers.get("authorization") or "").partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return None


def _envelope_problem(body: bytes) -> tuple[str | None, Any]:
    """Why a POST body cannot be a JSON-RPC message we carry (or None), and the message."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"the body is not UTF-8: {exc}", None
    try:
        return None, wire.loads(text)
    except wire.JsonRefused as exc:
        return (f"body{exc.path}: {exc.why}" if exc.path else f"the body is {exc.why}"), None


#: What each JSON type is called when a body holds it instead of a message object.
_JSON_KINDS = {
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
}


def _message_problem(message: Any) -> str | None:
    """Why parsed JSON ``message`` is no JSON-RPC message the MCP SDK takes, in words naming
    the field (None: it is one): an array (a batch; one message per POST), another non-object,
    ``jsonrpc`` not "2.0", a ``method`` or ``id`` of the wrong type, an object that is neither a
    request or notification (``method``) nor a response (``id`` with ``result`` or
    ``error``)."""
    try:
        types.JSONRPCMessage.model_validate(message)
        return None
    except ValidationError:
        pass
    if isinstance(message, list):
        return "the body is an array (a JSON-RPC batch): send one message object per POST"
    if not isinstance(message, dict):
        kind = "null" if message is None else _JSON_KINDS.get(type(message), "not an object")
        return f"the body is {kind}, not a JSON-RPC message object"
    if message.get("jsonrpc") != "2.0":
        return f'jsonrpc must be "2.0", got {json.dumps(message.get("jsonrpc"))}'
    request_id = message.get("id")
    if "id" in message and (isinstance(request_id, bool) or not isinstance(request_id, int | str)):
        return f"id must be a string or an integer, got {json.dumps(request_id)}"
    if "method" in message:
        if not isinstance(message["method"], str):
            return f"method must be a string, got {json.dumps(message['method'])}"
        if "params" in message and not isinstance(message["params"], dict):
            return f"params must be an object, got {json.dumps(message['params'])[:80]}"
        return "the request's fields do not make a JSON-RPC request or notification"
    if "result" in message or "error" in message:
        return "a response needs an id and exactly one of result (an object) or error"
    return "neither a request (no method) nor a response (no result or error)"


#: The MCP request types a client may send, by method.
_REQUEST_TYPES: dict[str, Any] = {
    typing.get_args(cls.model_fields["method"].annotation)[0]: cls
    for cls in typing.get_args(types.ClientRequest.model_fields["root"].annotation)
}


def _served_methods(server: Server[Any, Request]) -> frozenset[str]:
    """The request methods ``server`` answers: those it has a handler for, and ``initialize``
    (answered by the MCP session itself)."""
    handled = set(server.request_handlers) | {types.InitializeRequest}
    return frozenset(method for method, cls in _REQUEST_TYPES.items() if cls in handled)


def _request_problem(message: Any, served: frozenset[str]) -> JSONResponse | None:
    """A JSON-RPC request this server refuses, answered (HTTP 200, as the SDK answers it) with
    the request's id: a method not in ``served`` -32601 "Method not found" naming it and the
    served ones (whatever its params); params its MCP type refuses -32602 naming each field;
    ``data`` the list of ``{loc, msg, type}``. Else None (the SDK handles it: notifications,
    responses, envelopes it refuses itself)."""
    if not (
        isinstance(message, dict)
        and message.get("jsonrpc") == "2.0"
        and isinstance(message.get("method"), str)
        and isinstance(message.get("id"), int | str)
        and not isinstance(message.get("id"), bool)
    ):
        return None
    method = message["method"]
    if method not in served:
        why = f"unknown method {clip_inline(method)!r} (one of {sorted(served)})"
        errors = [{"loc": ["method"], "msg": why, "type": "method_not_found"}]
        return _rpc_error(message["id"], METHOD_NOT_FOUND, f"Method not found: {why}", errors)
    try:
        _REQUEST_TYPES[method].model_validate(
            {k: message[k] for k in ("method", "params") if k in message}
        )
        return None
    except ValidationError as exc:
        errors = [
            {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]}
            for e in exc.errors(include_url=False, include_input=False, include_context=False)
        ]
    named = "; ".join(".".join(map(str, e["loc"])) + ": " + e["msg"] for e in errors)
    return _rpc_error(message["id"], INVALID_PARAMS, f"Invalid request parameters: {named}", errors)


def _rpc_error(
    request_id: int | str, code: int, message: str, errors: list[dict[str, Any]]
) -> JSONResponse:
    """The JSON-RPC error answer ``code`` to the request ``request_id`` (HTTP 200)."""
    return JSONResponse(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": code, "message": message, "data": errors},
        }
    )


def _refusal(
    status: int, code: int, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    """The HTTP ``status`` answer with the JSON-RPC error ``code``, ``data`` naming the reason
    of :data:`MCP_REFUSALS` for ``status``."""
    data = {"reason": MCP_REFUSALS[status].name}
    error = {"code": code, "message": message, "data": data}
    return JSONResponse(
        {"jsonrpc": "2.0", "id": None, "error": error}, status_code=status, headers=headers
    )


def _parse_error(message: str, status: int = 400) -> JSONResponse:
    """A JSON-RPC parse error (-32700) as an HTTP answer (400 or 413), with its reason."""
    return _refusal(status, PARSE_ERROR, message)


def _with_reason(send: Send) -> Send:
    """``send`` for the MCP SDK's answers: one with a status of :data:`MCP_REFUSALS` (its own
    406, 415, 400) gets that reason in its JSON-RPC error's ``data``; others pass as sent."""
    held: Message | None = None
    body = bytearray()

    async def sending(message: Message) -> None:
        nonlocal held
        if message["type"] == "http.response.start" and message["status"] in MCP_REFUSALS:
            held = message
            return
        if held is None or message["type"] != "http.response.body":
            await send(message)
            return
        body.extend(message.get("body", b""))
        if message.get("more_body", False):
            return
        answer = _reasoned(bytes(body), MCP_REFUSALS[held["status"]].name)
        headers = [(k, v) for k, v in held.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(answer)).encode()))
        await send({**held, "headers": headers})
        await send({"type": "http.response.body", "body": answer, "more_body": False})

    return sending


def _reasoned(body: bytes, reason: str) -> bytes:
    """A JSON-RPC error answer ``body`` with ``reason`` in its error's ``data`` (a ``data``
    object keeps its fields; any other is replaced); another body unchanged."""
    try:
        answer = json.loads(body)
    except ValueError:
        return body
    error = answer.get("error") if isinstance(answer, dict) else None
    if not isinstance(error, dict):
        return body
    data = error.get("data")
    error["data"] = {**data, "reason": reason} if isinstance(data, dict) else {"reason": reason}
    return json.dumps(answer, separators=(",", ":")).encode()


def _service_error(exc: WorkplaceEnvError) -> McpError:
    """A JSON-RPC error (``JSONRPC_SERVICE_ERROR``) with the service's reason in ``data``, and the
    bound and the size of a SESSION_TOO_LARGE refusal (``limit_bytes``, ``size_bytes``)."""
    data: dict[str, Any] = {"reason": exc.reason, **too_large_sizes(exc)}
    return McpError(types.ErrorData(code=JSONRPC_SERVICE_ERROR, message=exc.message, data=data))


def _call_error(exc: WorkplaceEnvError) -> McpError:
    """The JSON-RPC error of a failed ``tools/call``: its code from the error registry
    (:func:`workplace_env_client.reasons.lookup`); a session the service does not hold is
    ``JSONRPC_SESSION_LOST`` with ``{"failure_kind", "reason"}``, any other
    :func:`_service_error`."""
    row = reasons.lookup(exc.code, exc.reason)
    if row.jsonrpc != JSONRPC_SESSION_LOST:
        return _service_error(exc)
    data = {"failure_kind": row.failure_kind, "reason": exc.reason}
    return McpError(types.ErrorData(code=JSONRPC_SESSION_LOST, message=exc.message, data=data))


class McpGateway:
    """The MCP server over one SDK client; an ASGI app for ``<mcp_path>``.

    Run :meth:`lifespan` around serving (the app's lifespan does it); requests outside it get
    HTTP 503.
    """

    def __init__(
        self,
        client: EnvironmentClient,
        tokens: SessionTokens,
        version: str | None = None,
    ) -> None:
        self.client = client
        self.tokens = tokens
        self.server: Server[Any, Request] = Server("workplace-env", version=version)
        # Raw handlers rather than the decorators: the call_tool decorator turns every
        # exception into an isError result, and validates arguments against the schema
        # (the reference does not; its own error texts must come back instead).
        self.server.request_handlers[types.ListToolsRequest] = self._list_tools
        self.server.request_handlers[types.CallToolRequest] = self._call_tool
        #: The request methods answered; any other is -32601 (:func:`_request_problem`).
        self.methods = _served_methods(self.server)
        self._tools: list[types.Tool] | None = None
        self._manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Serve MCP requests inside this context (a fresh session manager each time)."""
        manager = StreamableHTTPSessionManager(self.server, json_response=True, stateless=True)
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = self._manager
        if manager is None:  # outside the lifespan: stopped (shutting down), or never started
            message = "MCP is not running"
            headers = {"retry-after": "1"}
            await _refusal(503, JSONRPC_SERVICE_ERROR, message, headers)(scope, receive, send)
            return
        if scope.get("method") != "POST":
            # Stateless with JSON answers: the server never sends on its own, so there is no
            # stream to open (GET) or session to end (DELETE); an idle open stream per GET
            # would only hold a connection (MCP lets a server answer 405 here).
            message, headers = "POST JSON-RPC messages here", {"allow": "POST"}
            await _refusal(405, JSONRPC_SERVICE_ERROR, message, headers)(scope, receive, send)
            return
        # The MCP SDK answers a Content-Type not starting application/json with a plain-text
        # 400; refused here as its own JSON-RPC 415 refuses the other types it does not take.
        content_type = Headers(scope=scope).get("content-type", "")
        if not content_type.lower().startswith("application/json"):
            message = (
                "Unsupported Media Type: Content-Type must be application/json, "
                f"got {clip_inline(content_type)!r}"
            )
            await _refusal(415, INVALID_REQUEST, message)(scope, receive, send)
            return
        # The envelope is checked here first: the MCP SDK answers some bodies it cannot parse
        # (bytes that are not UTF-8) with HTTP 500, and JSON no wire can carry must not reach
        # a session. Refusals are JSON-RPC parse errors naming the field.
        # The MCP SDK's own body limit (4 MiB), checked before the body is read or parsed: a
        # larger one could not reach MCP, and it parses what it takes on the event loop.
        limit = manager.max_request_body_size
        too_large = _parse_error(f"the body is over the MCP endpoint's limit of {limit} bytes", 413)
        length = Headers(scope=scope).get("content-length", "")
        if length.isdigit() and int(length) > limit:
            await too_large(scope, receive, send)
            return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > limit:
                await too_large(scope, receive, send)
                return
        if len(body) > INLINE_BODY_BYTES:  # seconds to parse: off the event loop
            problem, message = await anyio.to_thread.run_sync(_envelope_problem, bytes(body))
        else:
            problem, message = _envelope_problem(bytes(body))
        if problem is not None:
            await _parse_error(problem)(scope, receive, send)
            return
        problem = _message_problem(message)
        if problem is not None:
            await _refusal(400, INVALID_REQUEST, f"Invalid Request: {problem}")(
                scope, receive, send
            )
            return
        refusal = _request_problem(message, self.methods)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await manager.handle_request(scope, replay, _with_reason(send))

    async def tools(self) -> list[types.Tool]:
        """The tools as MCP advertises them (from gRPC ListTools, fetched once)."""
        if self._tools is None:
            schemas = await anyio.to_thread.run_sync(self.client.list_tools)
            self._tools = [
                types.Tool(
                    name=s["name"], description=s.get("description"), inputSchema=s["parameters"]
                )
                for s in schemas
            ]
        return self._tools

    async def _list_tools(self, request: types.ListToolsRequest) -> types.ServerResult:
        try:
            tools = await self.tools()
        except WorkplaceEnvError as exc:
            raise _service_error(exc) from exc
        return types.ServerResult(types.ListToolsResult(tools=tools))

    def _session_id(self) -> str:
        http_request = self.server.request_context.request
        token = token_from_headers(http_request.headers) if http_request is not None else None
        session_id = self.tokens.session_of(token) if token else None
        if session_id is None:
            raise McpError(
                types.ErrorData(
                    code=TOKEN_REQUIRED,
                    message="tools/call needs a valid session token (header "
                    f"'{NEMO_TOKEN_HEADER}', '{TOKEN_HEADER}' or 'Authorization: Bearer'); "
                    "get one from POST /seed_session or POST /session_token",
                )
            )
        return session_id

    async def _call_tool(self, request: types.CallToolRequest) -> types.ServerResult:
        session_id = self._session_id()
        try:
            names = sorted(t.name for t in await self.tools())
        except WorkplaceEnvError as exc:
            raise _service_error(exc) from exc
        if request.params.name not in names:
            text = f"Unknown tool: {request.params.name!r}. Available tools: {names!r}"
            return types.ServerResult(
                types.CallToolResult(
                    content=[types.TextContent(type="text", text=text)], isError=True
                )
            )
        arguments = json.dumps(request.params.arguments or {}, ensure_ascii=False)
        try:
            output = await anyio.to_thread.run_sync(
                self.client.call_tool_raw, session_id, request.params.name, arguments
            )
        except WorkplaceEnvError as exc:
            raise _call_error(exc) from exc
        return types.ServerResult(
            types.CallToolResult(
                content=[types.TextContent(type="text", text='{"output":' + output + "}")],
                structuredContent={"output": json.loads(output)},
                isError=False,
            )
        )
