"""The gateway's MCP endpoint, driven by the ``mcp`` SDK's own client (streamable HTTP +
ClientSession): tools/list is gRPC ListTools, tools/call is gRPC CallTool on the token's
session, and anything without a valid token or envelope is an MCP error that reaches no session.
Runs on the embedded default sandbox (the goldens over MCP are in
tests/gateway/test_gateway_congruence.py).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from starlette.testclient import TestClient

from tests.helpers import http_total_emails
from workplace_env.gateway import (
    TOKEN_HEADER,
    GatewaySettings,
    RunningGateway,
    SessionTokens,
    start_gateway,
)
from workplace_env.gateway.mcp_tools import TOKEN_REQUIRED, McpGateway
from workplace_env_client import EnvironmentClient, reasons
from workplace_env_client.reasons import JSONRPC_SERVICE_ERROR, JSONRPC_SESSION_LOST

SEND = {"recipient": "someone@example.com", "subject": "Mcp hello", "body": "hi"}
SEARCH = {"query": "Mcp hello", "page_size": 50}
ROW = {"id": "mcp-task", "ground_truth": []}


pytestmark = pytest.mark.gateway(settings=GatewaySettings(secret_key="mcp-test"))


def mcp_run(
    gateway: RunningGateway,
    headers: dict[str, str],
    body: Callable[[ClientSession], Awaitable[Any]],
) -> Any:
    """Open an MCP client session on the gateway with ``headers`` and run ``body`` in it.

    Raises the McpError of a rejected request."""

    async def main() -> Any:
        async with (
            httpx.AsyncClient(headers=headers, timeout=30) as client,
            streamable_http_client(f"{gateway.url}/mcp", http_client=client) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            try:
                return await body(session)
            except McpError as exc:  # raised below, outside the SDK's task groups
                return exc

    result = anyio.run(main)
    if isinstance(result, McpError):
        raise result
    return result


@pytest.fixture
def agent(gateway) -> Iterator[tuple[httpx.Client, str]]:
    """An HTTP agent with a seeded legacy session, and the MCP token of that session."""
    with httpx.Client(base_url=gateway.url, timeout=30) as client:
        response = client.post("/seed_session", json=ROW)
        assert response.status_code == 200
        yield client, response.headers[TOKEN_HEADER]


def sent_count(client: httpx.Client) -> int:
    return http_total_emails(client, SEARCH)


def test_tools_list_is_list_tools(gateway, sdk):
    listed = mcp_run(gateway, {}, lambda s: s.list_tools())
    schemas = sdk.list_tools()
    assert len(listed.tools) == len(schemas) == 27
    for tool, schema in zip(listed.tools, schemas, strict=True):
        assert tool.name == schema["name"]
        assert tool.description == schema["description"]
        assert tool.inputSchema == schema["parameters"]
        assert tool.outputSchema is None


@pytest.mark.parametrize("scheme", ["bearer", "header"])
def test_tools_call_runs_on_the_tokens_session(gateway, agent, sdk, scheme):
    http, token = agent
    headers = {"authorization": f"Bearer {token}"} if scheme == "bearer" else {TOKEN_HEADER: token}

    async def calls(session: ClientSession) -> list[Any]:
        sent = await session.call_tool("email_send_email", SEND)
        found = await session.call_tool("email_search_emails", SEARCH)
        return [sent, found]

    sent, found = mcp_run(gateway, headers, calls)
    # H6: NeMo's result shape, text {"output": X} plus structuredContent
    assert not sent.isError
    assert [c.text for c in sent.content] == ['{"output":"Email sent successfully."}']
    assert sent.structuredContent == {"output": "Email sent successfully."}
    assert found.structuredContent["output"]["pagination"]["total_emails"] == 1
    # the same session as the cookie's: HTTP sees the MCP write, and the same bytes
    assert sent_count(http) == 1
    body = http.post("/email_search_emails", json=SEARCH).content
    assert body == found.content[0].text.encode()


def test_tool_errors_are_the_reference_texts(gateway, agent):
    http, token = agent

    async def calls(session: ClientSession) -> list[Any]:
        return [
            await session.call_tool("no_such_tool", {}),
            await session.call_tool("email_send_email", {"recipient": 5, "locatoin": None}),
            await session.call_tool("calendar_create_event", {"location": "x"}),
        ]

    results = mcp_run(gateway, {TOKEN_HEADER: token}, calls)
    http_bodies = [
        http.post("/no_such_tool", json={}).content,
        http.post("/email_send_email", json={"recipient": 5, "locatoin": None}).content,
        http.post("/calendar_create_event", json={"location": "x"}).content,
    ]
    # H6: a tool MCP does not list is an isError result, as NeMo's MCP servers answer it
    unknown = results[0]
    assert unknown.isError and unknown.content[0].text.startswith(
        "Unknown tool: 'no_such_tool'. Available tools: ['analytics_create_plot', "
    )
    assert json.loads(http_bodies[0]) == {
        "output": "Error executing tool 'no_such_tool': 'no_such_tool'"
    }
    for result, body in zip(results[1:], http_bodies[1:], strict=True):
        assert not result.isError  # the reference's texts are outputs, not protocol errors
        assert body == result.content[0].text.encode()


def test_token_for_a_grpc_typed_session(gateway, sdk):
    sid = f"grpc-{uuid.uuid4().hex}"
    sdk.seed(sid, ("rollout-mcp", 0), ("mcp", "t"), ROW)
    with httpx.Client(base_url=gateway.url) as http:
        # The id alone mints nothing; a typed seed retried as is (S2) sets the cookie.
        typed = {
            "resources_session_id": sid,
            "episode_id": {"rollout_id": "rollout-mcp", "attempt": 0},
            "task_id": {"taskset": "mcp", "task_id": "t"},
            "task": ROW,
        }
        assert http.post("/seed_session", json=typed).status_code == 200
        token = http.post("/session_token", json={"resources_session_id": sid}).json()["token"]
    result = mcp_run(
        gateway,
        {"authorization": f"Bearer {token}"},
        lambda s: s.call_tool("email_send_email", SEND),
    )
    assert result.content[0].text == '{"output":"Email sent successfully."}'
    out = json.loads(sdk.call_tool_raw(sid, "email_search_emails", SEARCH))
    assert out["pagination"]["total_emails"] == 1


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {TOKEN_HEADER: "garbage"},
        {"authorization": "Bearer nope.nope.nope"},
        {"authorization": "Basic eA=="},
    ],
    ids=["none", "garbage", "bad_bearer", "basic"],
)
def test_tools_call_without_a_valid_token_is_an_mcp_error_and_reaches_no_session(
    gateway, agent, headers
):
    http, _ = agent
    with pytest.raises(McpError) as err:
        mcp_run(gateway, headers, lambda s: s.call_tool("email_send_email", SEND))
    assert err.value.error.code == TOKEN_REQUIRED
    for header in ("X-NeMo-Gym-Session-Token", TOKEN_HEADER, "Authorization: Bearer"):
        assert header in err.value.error.message  # every way the seed hands a token out
    assert sent_count(http) == 0


def test_token_of_another_secret_is_rejected(gateway, sdk):
    other = start_gateway(client=sdk)  # a random secret
    try:
        with httpx.Client(base_url=other.url) as http:
            token = http.post("/seed_session", json=ROW).headers[TOKEN_HEADER]
    finally:
        other.stop()
    with pytest.raises(McpError) as err:
        mcp_run(gateway, {TOKEN_HEADER: token}, lambda s: s.call_tool("email_send_email", SEND))
    assert err.value.error.code == TOKEN_REQUIRED


def test_token_of_a_released_session_is_session_lost(gateway, agent):
    http, token = agent
    verified = http.post("/verify", json={"ground_truth": [], "response": {"output": []}})
    assert verified.json()["reward"] == 1.0  # a legacy verify releases the session
    with pytest.raises(McpError) as err:
        mcp_run(gateway, {TOKEN_HEADER: token}, lambda s: s.call_tool("email_send_email", SEND))
    assert err.value.error.code == JSONRPC_SESSION_LOST
    assert err.value.error.data["failure_kind"] == "session_lost"


CALL_PREFIX = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", '
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.mark.parametrize(
    "body,code",
    [
        (b"{not json", -32700),
        (CALL_PREFIX + b'"params": {"name": "email_send_email", "arguments": [1]}}', -32602),
        (CALL_PREFIX + b'"params": {"arguments": {}}}', -32602),
        (CALL_PREFIX[:-2] + b"}", -32602),
    ],
    ids=["not_json", "arguments_not_object", "no_name", "no_params"],
)
def test_malformed_envelope_is_an_mcp_error_and_reaches_no_session(gateway, agent, body, code):
    http, token = agent
    response = http.post("/mcp", content=body, headers={**MCP_HEADERS, TOKEN_HEADER: token})
    error = response.json()["error"]
    assert error["code"] == code, response.text
    assert sent_count(http) == 0


@pytest.mark.parametrize(
    "params,named",
    [
        ({"name": "email_send_email", "arguments": [1]}, [["params", "arguments"]]),
        ({"name": 5, "arguments": {}}, [["params", "name"]]),
        ({"name": 5, "arguments": "x"}, [["params", "name"], ["params", "arguments"]]),
        ({"arguments": {}}, [["params", "name"]]),
        (None, [["params"]]),
    ],
    ids=["arguments_a_list", "name_a_number", "both", "no_name", "no_params"],
)
def test_invalid_params_name_the_field(gateway, agent, params, named):
    """-32602 says which field is wrong (the MCP SDK's own answer names none), before any
    session is reached; the request's id is kept."""
    http, token = agent
    message: dict = {"jsonrpc": "2.0", "id": "r-9", "method": "tools/call"}
    if params is not None:
        message["params"] = params
    response = http.post("/mcp", json=message, headers={**MCP_HEADERS, TOKEN_HEADER: token})
    assert response.status_code == 200
    answer = response.json()
    assert answer["id"] == "r-9"
    error = answer["error"]
    assert error["code"] == -32602
    assert [e["loc"] for e in error["data"]] == named
    for loc in named:
        assert ".".join(loc) + ": " in error["message"]
    assert sent_count(http) == 0


@pytest.fixture(scope="module")
def other_mcp_path(sdk) -> Iterator[str]:
    """The MCP endpoint of a second gateway, mounted at another ``mcp_path``."""
    settings = GatewaySettings(secret_key="mcp-test", mcp_path="/agent/mcp")
    running = start_gateway(client=sdk, settings=settings)
    try:
        yield f"{running.url}/agent/mcp"
    finally:
        running.stop()


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/nope", {}),
        ("", None),
        ("TOOLS/LIST", None),
        ("prompts/list", None),  # an MCP method this server has no handler for
        ("resources/read", None),  # ... whose params would be refused too: unknown comes first
        ("completion/complete", {"bad": 1}),
    ],
    ids=["made_up", "empty", "wrong_case", "prompts_list", "resources_read", "completion"],
)
@pytest.mark.parametrize("route", ["mcp", "other_path", "with_token"])
def test_an_unknown_method_is_method_not_found_naming_it(
    gateway, agent, other_mcp_path, route, method, params
):
    """JSON-RPC 2.0's -32601 for every method this server does not answer, on every MCP route,
    with or without a token, the request's id kept and no session reached."""
    http, token = agent
    url = other_mcp_path if route == "other_path" else f"{gateway.url}/mcp"
    headers = {**MCP_HEADERS, **({TOKEN_HEADER: token} if route == "with_token" else {})}
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": "m-7", "method": method}
    if params is not None:
        message["params"] = params
    response = httpx.post(url, json=message, headers=headers)
    assert response.status_code == 200
    answer = response.json()
    assert answer["id"] == "m-7"
    error = answer["error"]
    assert error["code"] == -32601, error
    assert error["message"].startswith(f"Method not found: unknown method {method!r}")
    assert [e["loc"] for e in error["data"]] == [["method"]]
    assert sent_count(http) == 0


def test_the_served_methods_still_answer_on_both_routes(other_mcp_path, gateway):
    """``initialize``, ``ping`` and ``tools/list`` are no unknown methods."""
    for url in (other_mcp_path, f"{gateway.url}/mcp"):
        for method in ("ping", "tools/list"):
            message = {"jsonrpc": "2.0", "id": 1, "method": method}
            answer = httpx.post(url, json=message, headers=MCP_HEADERS).json()
            assert "error" not in answer and "result" in answer, answer
    tools = mcp_run(gateway, {}, lambda session: session.list_tools())  # initialize first
    assert len(tools.tools) == 27


def test_service_unreachable_is_an_mcp_error():
    settings = GatewaySettings(secret_key="dead")
    with EnvironmentClient("127.0.0.1:1", timeout_s=5, max_attempts=1) as dead:
        gw = start_gateway(client=dead, settings=settings)
        try:
            with pytest.raises(McpError) as listed:
                mcp_run(gw, {}, lambda s: s.list_tools())
            assert listed.value.error.code == JSONRPC_SERVICE_ERROR
            token = SessionTokens("dead", settings.token_max_age_s).mint("s1")
            with pytest.raises(McpError) as called:
                mcp_run(gw, {TOKEN_HEADER: token}, lambda s: s.call_tool("email_send_email", SEND))
            assert called.value.error.code == JSONRPC_SERVICE_ERROR
            assert called.value.error.data["reason"] == "UNAVAILABLE"
        finally:
            gw.stop()


@pytest.mark.parametrize("chunked", [False, True], ids=["content_length", "chunked"])
def test_a_body_over_the_sdks_limit_is_refused_before_it_is_parsed(gateway, agent, chunked):
    """Over the MCP SDK's 4 MiB (which it would parse on the event loop, then refuse): 413
    with a JSON-RPC parse error naming the limit, and no session reached."""
    http, token = agent
    body = CALL_PREFIX + b'"params": {"name": "email_search_emails", "arguments": {"query": "'
    body += b"x" * (4 * 1024 * 1024) + b'"}}}'
    content: Any = iter([body[: len(body) // 2], body[len(body) // 2 :]]) if chunked else body
    response = http.post("/mcp", content=content, headers={**MCP_HEADERS, TOKEN_HEADER: token})
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert error["code"] == -32700
    assert (
        error["message"] == f"the body is over the MCP endpoint's limit of {4 * 1024 * 1024} bytes"
    )
    assert sent_count(http) == 0


PING = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
#: Requests the MCP endpoint refuses with an HTTP status that is not 2xx, as (method, headers,
#: body, status, JSON-RPC code): ours and the MCP SDK's own (406, an envelope it refuses).
MCP_REFUSED = [
    ("GET", {"accept": "application/json"}, None, 405, JSONRPC_SERVICE_ERROR),
    ("DELETE", {}, None, 405, JSONRPC_SERVICE_ERROR),
    ("POST", MCP_HEADERS, b"\xff\xfe{", 400, -32700),
    ("POST", MCP_HEADERS, b"{not json", 400, -32700),
    ("POST", MCP_HEADERS, b"x" * (4 * 1024 * 1024 + 1), 413, -32700),
    ("POST", MCP_HEADERS, b'{"jsonrpc": "2.0"}', 400, -32600),
    ("POST", MCP_HEADERS, b"[1]", 400, -32600),
    ("POST", {**MCP_HEADERS, "accept": "text/html"}, PING, 406, -32600),
    ("POST", {**MCP_HEADERS, "content-type": "text/plain"}, PING, 415, -32600),
    ("POST", {"accept": "application/json"}, PING, 415, -32600),
    ("POST", {**MCP_HEADERS, "content-type": "application/jsonx"}, PING, 415, -32600),
]


def _assert_registry_refusal(response: httpx.Response, status: int, code: int) -> None:
    """``response`` is HTTP ``status`` with the JSON-RPC error ``code``, whose ``data`` names a
    registry reason declared for that status."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    row = reasons.REASONS[error["data"]["reason"]]
    assert row.http_status == status


@pytest.mark.parametrize(("method", "headers", "body", "status", "code"), MCP_REFUSED)
def test_every_mcp_refusal_names_its_registry_reason(
    gateway, agent, method, headers, body, status, code
):
    http, token = agent
    response = http.request(method, "/mcp", content=body, headers={**headers, TOKEN_HEADER: token})
    _assert_registry_refusal(response, status, code)
    if status == 405:
        assert response.headers["allow"] == "POST"
    assert sent_count(http) == 0


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (b"[1]", "array"),
        (b"[" + PING + b"]", "array"),
        (b"1", "a number"),
        (b"null", "null"),
        (b'"ping"', "a string"),
        (b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}', "jsonrpc"),
        (b'{"jsonrpc": "2.0", "id": [1], "method": 5}', "id"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": 5}', "method"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}', "params"),
        (b'{"jsonrpc": "2.0", "id": 1}', "neither a request"),
        (b'{"jsonrpc": "2.0", "result": {}}', "a response needs an id"),
    ],
)
def test_json_that_is_no_jsonrpc_message_is_an_invalid_request_naming_why(agent, body, named):
    http, token = agent
    headers = {**MCP_HEADERS, TOKEN_HEADER: token}
    response = http.post("/mcp", content=body, headers=headers)
    _assert_registry_refusal(response, 400, -32600)
    message = response.json()["error"]["message"]
    assert message.startswith("Invalid Request: ") and named in message, message
    assert "validation error" not in message.lower() and "pydantic" not in message, message
    assert sent_count(http) == 0


def test_mcp_outside_its_lifespan_is_503_naming_its_reason(sdk):
    """Before the gateway's lifespan starts its MCP server (or after it stopped)."""
    mcp = McpGateway(sdk, SessionTokens("not-running", 60))
    response = TestClient(mcp).post("/", content=PING, headers=MCP_HEADERS)  # no lifespan
    _assert_registry_refusal(response, 503, JSONRPC_SERVICE_ERROR)
    assert response.headers["retry-after"] == "1"
