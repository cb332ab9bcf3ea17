"""Fuzz every HTTP route of the gateway, MCP included: no 5xx, no harm to another
session.

Each example sends one request: a route (the legacy routes, tool routes, unknown paths, MCP),
a body (hostile JSON texts, ill-formed UTF-8, truncated or garbage bytes, now and then a huge
one), odd content types, and a cookie that is absent, garbage, or forged with the signing key
around hostile JSON. Every answer must be under 500 (an MCP answer must not be a JSON-RPC
internal error), and a well-behaved cookie session seeded first must keep its exact state and
export. Budget and the long run: :mod:`tests.fuzz_inputs`.
"""

from __future__ import annotations

import json
from base64 import b64encode
from collections.abc import Iterator
from typing import Any

import httpx
import itsdangerous
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import fuzz_inputs as fz
from tests.helpers import local
from workplace_env.config import Settings
from workplace_env.gateway import GatewaySettings, RunningGateway
from workplace_env.gateway.cookies import SessionTokens
from workplace_env.gateway.settings import COOKIE_NAME
from workplace_env.server.app import RunningServer
from workplace_env.sessions import SessionConfig
from workplace_env_client import AdminClient, EnvironmentClient, reasons

SECRET = "fuzz-http-secret"
SIGNER = itsdangerous.TimestampSigner(SECRET)
TOKENS = SessionTokens(SECRET, 3600)
SEND = {"recipient": "w@b.com", "subject": "well", "body": "behaved"}
MCP_ACCEPT = "application/json, text/event-stream"


#: A store big enough for every fuzzed seed; the admin RPCs open (loopback) to watch a session.
pytestmark = [
    pytest.mark.server(config=SessionConfig(max_sessions=5000), settings=Settings(admin_open=True)),
    pytest.mark.gateway(settings=GatewaySettings(secret_key=SECRET)),
]


class Target:
    """The gRPC server, the gateway over it, and the watched cookie session."""

    def __init__(self, running: RunningServer, sdk: EnvironmentClient, gateway: RunningGateway):
        self.running = running
        self.sdk = sdk
        self.admin = AdminClient(local(running.port), timeout_s=30)
        self.gateway = gateway
        self.http = httpx.Client(base_url=self.gateway.url, timeout=60)
        self.watched = httpx.Client(base_url=self.gateway.url, timeout=60)
        assert self.watched.post("/seed_session", json={"id": "w"}).status_code == 200
        self.watched_id = self.watched.post("/session_token").json()["resources_session_id"]
        assert self.watched.post("/email_send_email", json=SEND).status_code == 200
        self.call_ids: set[str] | None = None
        self.snapshot = self._exported()
        self.call_ids = {record.call_id for record in self.snapshot.call_records}
        self.search = self._search()

    def _exported(self) -> Any:
        snapshots, missing, failures = self.admin.export_sessions([self.watched_id])
        assert (missing, list(failures)) == ([], []), (missing, failures)
        return fz.stable_snapshot(snapshots[0], self.call_ids)

    def _search(self) -> bytes:
        answer = self.watched.post("/email_search_emails", json={"query": "behaved"})
        assert answer.status_code == 200
        return answer.content

    def check_watched(self) -> None:
        assert self._exported() == self.snapshot
        assert self._search() == self.search

    def close(self) -> None:
        self.http.close()
        self.watched.close()
        self.admin.close()


@pytest.fixture(scope="module")
def target(server, sdk, gateway) -> Iterator[Target]:
    t = Target(server, sdk, gateway)
    yield t
    fz.write_report()
    t.check_watched()
    snapshots, _, failures = t.admin.export_sessions()
    assert t.watched_id in {s.resources_session_id for s in snapshots}
    assert t.watched_id not in failures
    t.close()


# -- inputs --------------------------------------------------------------------------------------

#: The gateway's routes, each counted by name (any other path counts as ``/<other>``).
NAMED_ROUTES = [
    "/seed_session",
    "/verify",
    "/close_session",
    "/session_token",
    "/email_send_email",
    "/email_search_emails",
    "/calendar_create_event",
    "/customer_relationship_manager_add_customer",
    "/company_directory_find_email_address",
    "/no_such_tool",
    "/aggregate_metrics",
    "/",
    "/health",
    "/ready",
    "/reverify_mode",
    "/openapi.json",
    "/mcp",
]
routes = st.one_of(
    st.sampled_from(NAMED_ROUTES),
    st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=12).map(
        lambda p: "/" + p.replace("?", "").replace("#", "").lstrip("/")  # "//x" is a host
    ),
)
_json_bodies = fz.json_values.map(fz._dump).map(str.encode)
row_bodies = (
    st.fixed_dictionaries(
        {"id": fz.hostile_text},
        optional={
            "ground_truth": st.one_of(fz.calls, fz.hostile_text, fz.json_values),
            "prompt": fz.json_values,
            "task_id": fz.json_values,
            "episode_id": fz.json_values,
            "resources_session_id": fz.json_values,
            "response": st.one_of(
                fz.json_values, st.builds(lambda c: {"output": fz.response_items(c)}, fz.calls)
            ),
            "responses_create_params": fz.json_values,
        },
    )
    .map(fz._dump)
    .map(str.encode)
)
mcp_bodies = st.builds(
    lambda method, name, arguments, id_: fz._dump(
        {
            "jsonrpc": "2.0",
            "id": id_,
            "method": method,
            "params": {"name": name, "arguments": arguments},
        }
    ).encode(),
    st.sampled_from(["tools/call", "tools/list", "initialize", "nope"]),
    fz.tools,
    fz.json_values,
    st.one_of(st.integers(), fz.hostile_text, st.none()),
)
bodies = st.one_of(
    fz.json_texts.map(fz.surrogate_utf8),  # JSON texts; lone surrogates as ill-formed UTF-8
    _json_bodies,
    row_bodies,
    mcp_bodies,
    fz.garbage,
    st.builds(lambda b, cut: b[: cut % (len(b) + 1)], row_bodies, st.integers(0, 1 << 12)),
    st.sampled_from([b"[" * 2_000_000, b'{"query": "' + b"x" * 3_000_000 + b'"}']),
)
cookies = st.one_of(
    st.none(),
    st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=40),
    fz.json_values.map(lambda v: SIGNER.sign(b64encode(fz._dump(v).encode())).decode()),
    st.builds(
        lambda sid: SIGNER.sign(b64encode(fz._dump({"session_id": sid}).encode())).decode(),
        fz.ids,
    ),
)
# What HTTP/1.1 lets a header value hold (no controls, no edge whitespace), Latin-1 included.
header_text = (
    st.text(
        st.characters(min_codepoint=0x20, max_codepoint=0xFF).filter(
            lambda c: not 0x7F <= ord(c) <= 0x9F
        ),
        max_size=30,
    )
    .map(str.strip)
    .filter(bool)
)
tokens = st.one_of(st.none(), header_text, fz.ids.map(fz.clean).map(TOKENS.mint))
content_types = st.sampled_from(
    ["application/json", "text/plain", "", "application/json; charset=utf-16", "x/y"]
)


def refusal_reason(answer: httpx.Response) -> str:
    """The ``reason`` a refusal names: the body's, or (MCP) its JSON-RPC error's ``data``'s."""
    body = answer.json()
    data = (body.get("error") or {}).get("data") if "error" in body else body
    return str(data.get("reason")) if isinstance(data, dict) else ""


@given(
    route=routes,
    method=st.sampled_from(["POST", "POST", "POST", "GET", "PUT", "DELETE"]),
    body=bodies,
    cookie=cookies,
    content_type=content_types,
    call_id=st.one_of(st.none(), header_text),
    token=tokens,
)
@fz.FUZZ
def test_fuzz_http_routes(target, route, method, body, cookie, content_type, call_id, token):
    headers = {"content-type": content_type}
    if route == "/mcp":
        headers["accept"] = MCP_ACCEPT
    raw_headers: dict[str, Any] = dict(headers)
    if call_id is not None:  # any Latin-1 text, as bytes on the wire
        raw_headers["x-workplace-call-id"] = call_id.encode("latin-1")
    if token is not None:
        raw_headers["x-workplace-session-token"] = token.encode("latin-1", "replace")
    target.http.cookies.clear()
    if cookie is not None:
        target.http.cookies.set(COOKIE_NAME, cookie)
    kind = f"HTTP {route if route in NAMED_ROUTES else '/<other>'}"
    fz.count(kind)
    answer = target.http.request(method, route, content=body, headers=raw_headers)
    fz.seen(kind, answer.status_code)
    assert answer.status_code < 500, (route, answer.status_code, answer.text[:300])
    if answer.status_code >= 400:
        assert reasons.is_registry_name(refusal_reason(answer)), (route, answer.text[:300])
    json_answer = answer.headers.get("content-type", "").startswith("application/json")
    if route == "/mcp" and json_answer and answer.content:  # (a notification gets no body)
        payload = answer.json()
        error = payload.get("error") if isinstance(payload, dict) else None
        assert not error or error.get("code") != -32603, error
    if sum(fz.COUNTS.values()) % 97 == 0:
        target.check_watched()


@given(arguments=fz.json_values, name=fz.tools, sid=fz.ids)
@fz.FUZZ
def test_fuzz_mcp_tool_calls_with_valid_tokens(target, arguments, name, sid):
    """Well-formed MCP calls whose arguments and token ids are hostile."""
    live = target.http.post("/seed_session", json={"id": "m"})  # a session the token names
    assert live.status_code == 200
    minted = TOKENS.mint(fz.clean(sid))
    token = live.headers["x-workplace-session-token"] if sid == "s1" else minted
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    fz.count("MCP tools/call")
    answer = target.http.post(
        "/mcp",
        content=json.dumps(body).encode(),
        headers={
            "accept": MCP_ACCEPT,
            "content-type": "application/json",
            "x-workplace-session-token": token,
        },
    )
    fz.seen("MCP tools/call", answer.status_code)
    assert answer.status_code < 500, answer.text[:300]
    payload = answer.json()
    error = payload.get("error") if isinstance(payload, dict) else None
    if error:
        fz.seen("MCP tools/call JSON-RPC", error.get("code"))
    assert not error or error.get("code") != -32603, error
