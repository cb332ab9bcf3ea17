"""The gateway's route groups, each imported alone and served on a bare FastAPI app over a
state of the test's making (a stub client, or the in-process client of a test server)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import grpc
import pytest
from fastapi import FastAPI, Request, routing
from fastapi.responses import Response
from fastapi.testclient import TestClient

from workplace_env.gateway.cookies import (
    SESSION_ID_KEY,
    CookieCodec,
    SessionCookieMiddleware,
    SessionTokens,
)
from workplace_env.gateway.routes import episodes, health, offline, tools
from workplace_env.gateway.routes.direct import DirectRoute
from workplace_env.gateway.settings import GatewaySettings
from workplace_env.gateway.state import GatewayState
from workplace_env.gateway.translate import CALL_ID_HEADER, HttpProblem
from workplace_env.server.in_process import in_process_client
from workplace_env_client import reasons

SECRET = "routes-test-secret"
SETTINGS = GatewaySettings(secret_key=SECRET, mcp_path="")
CODEC = CookieCodec(SECRET, SETTINGS.cookie_max_age_s)


class StubClient:
    """An SDK client stand-in: answers every tool call with ``output``, records the calls."""

    def __init__(self, output: str = '"stubbed"') -> None:
        self.transport = SimpleNamespace(blocking=False)
        self.output = output
        self.calls: list[tuple[str, str, str, str]] = []

    def call_tool_raw(self, sid: str, tool: str, arguments: str, call_id: str) -> str:
        self.calls.append((sid, tool, arguments, call_id))
        return self.output


def bare_app(state: GatewayState, *routers: Any) -> FastAPI:
    """A FastAPI app with the gateway's cookie and problem handling, ``routers`` included the
    ordinary FastAPI way, and ``state`` as its gateway state."""
    app = FastAPI()
    app.add_middleware(SessionCookieMiddleware, codec=CODEC, cookie_name=state.settings.cookie_name)

    @app.exception_handler(HttpProblem)
    async def _problem(request: Request, exc: HttpProblem) -> Response:
        return exc.response

    for router in routers:
        app.include_router(router)
    app.state.gateway = state
    return app


def stub_state(client: Any, **fields: Any) -> GatewayState:
    return GatewayState(client, SETTINGS, SessionTokens(SECRET, 60), **fields)


def cookie_for(sid: str) -> dict[str, str]:
    return {SETTINGS.cookie_name: CODEC.encode({SESSION_ID_KEY: sid})}


def test_the_tool_router_alone_calls_its_state_s_client():
    client = StubClient('{"ok": [1, 2]}')
    with TestClient(bare_app(stub_state(client), tools.router)) as http:
        http.cookies.update(cookie_for("s-9"))
        answer = http.post(
            "/email_delete_email",
            content=b'{"email_id": "7"}',
            headers={CALL_ID_HEADER: "c1", "content-type": "application/json"},
        )
    assert answer.status_code == 200
    assert answer.content == b'{"output":{"ok": [1, 2]}}'
    assert client.calls == [("s-9", "email_delete_email", '{"email_id": "7"}', "c1")]


def test_the_tool_router_alone_refuses_a_call_without_a_session():
    client = StubClient()
    with TestClient(bare_app(stub_state(client), tools.router)) as http:
        answer = http.post("/email_delete_email", json={"email_id": "7"})
    assert answer.status_code == 404
    assert answer.json()["failure_kind"] == "session_lost"
    assert client.calls == []


def test_each_app_s_routes_reach_their_own_state():
    """Two apps sharing the router's route objects answer from their own states."""
    first, second = StubClient('"first"'), StubClient('"second"')
    apps = [bare_app(stub_state(c), tools.router) for c in (first, second)]
    for app, text in zip(apps, (b'"first"', b'"second"'), strict=True):
        with TestClient(app, cookies=cookie_for("s")) as http:
            assert http.post("/a_tool", json={}).content == b'{"output":' + text + b"}"
    assert len(first.calls) == len(second.calls) == 1


@pytest.mark.parametrize(
    "probe,draining,status,body",
    [
        (None, False, 200, {"status": "ready"}),
        (lambda: None, False, 200, {"status": "ready"}),
        (lambda: "backend_unavailable", False, 503, {"status": "backend_unavailable"}),
        (lambda: "backend_not_serving", False, 503, {"status": "backend_not_serving"}),
        (lambda: None, True, 503, {"status": "draining"}),
    ],
)
def test_the_health_router_alone_answers_readiness_from_its_state(probe, draining, status, body):
    state = stub_state(StubClient(), probe=probe)
    if draining:
        state.draining.set()
    with TestClient(bare_app(state, health.router)) as http:
        answer = http.get("/ready")
        said = answer.json()
        assert (answer.status_code, said["status"]) == (status, body["status"])
        if status != 200:  # a registry reason declared for the status, and its kind
            name = said["reason"]
            row = reasons.REASONS.get(name) or reasons.BY_CODE[grpc.StatusCode[name]]
            assert (row.http_status, row.failure_kind) == (503, said["failure_kind"])
        else:
            assert said == body
        assert http.get("/health").json() == http.get("/").json() == {"status": "ok"}


def test_the_offline_router_needs_no_state():
    app = FastAPI()
    app.include_router(offline.router)
    with TestClient(app) as http:
        assert http.get("/reverify_mode").json() == "stateless"
        rows = [{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0}]
        answer = http.post("/aggregate_metrics", json={"verify_responses": rows})
    assert answer.status_code == 200
    assert answer.json()["agent_metrics"]["mean/reward"] == 1.0


def test_every_group_s_routes_are_direct_routes():
    for group in (health, offline, episodes, tools):
        assert group.router.routes
        assert all(isinstance(r, DirectRoute) for r in group.router.routes)


@pytest.fixture
def in_process(server) -> Iterator[GatewayState]:
    with in_process_client(server) as client:
        yield GatewayState.over(client, SETTINGS)


def test_the_episode_and_tool_routers_alone_play_an_episode_in_process(in_process):
    send = {"recipient": "someone@example.com", "subject": "Routes hello", "body": "hi"}
    call = {"name": "email_send_email", "arguments": json.dumps(send)}
    row = {"id": "routes-1", "environment_name": "workplace_assistant", "ground_truth": [call]}
    app = bare_app(in_process, episodes.router, tools.router)
    with TestClient(app) as http:
        seeded = http.post("/seed_session", json=row)
        assert (seeded.status_code, seeded.json()) == (200, {})
        assert http.post("/email_send_email", json=send).status_code == 200
        output = [{"type": "function_call", "call_id": "c1", **call}]
        verified = http.post("/verify", json={**row, "response": {"output": output}})
        assert (verified.status_code, verified.json()["reward"]) == (200, 1.0)
        closed = http.post("/close_session", json={})
    assert closed.json() == {"outcome": "CLOSED"}


def test_the_hot_routes_solve_no_dependencies_per_request(monkeypatch):
    """The state dependency is called directly (DirectRoute), never through FastAPI's solver."""
    solved: list[str] = []
    real = routing.solve_dependencies

    async def counting(*args: Any, **kwargs: Any) -> Any:
        solved.append(kwargs["request"].url.path)
        return await real(*args, **kwargs)

    monkeypatch.setattr(routing, "solve_dependencies", counting)
    app = bare_app(stub_state(StubClient()), health.router, episodes.router, tools.router)
    with TestClient(app, cookies=cookie_for("s")) as http:
        assert http.get("/ready").status_code == 200
        assert http.post("/a_tool", json={}).status_code == 200
        assert http.post("/verify", json={"response": {"output": [1]}}).status_code == 422
        assert http.get("/health").status_code == 200  # FastAPI serializes its dict
    assert solved == ["/health"]
