"""The HTTP gateway (CONTRACT "The legacy HTTP path"): every route and status case, over a real
socket (uvicorn in a thread) with a real HTTP client holding a cookie jar, the way the
reference's agent talks to it. The gRPC server behind it runs on the embedded default sandbox,
so nothing here needs ../shared (the goldens run in tests/gateway/test_gateway_congruence.py).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import uuid
from base64 import b64decode, b64encode
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import itsdangerous
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from tests.helpers import GATEWAY_BACKENDS, RefusingStandIn, gateway_on, http_total_emails
from workplace_env import responses
from workplace_env.config import GATEWAY_ROUTES, ConfigError, Settings, load_settings
from workplace_env.gateway import (
    CALL_ID_HEADER,
    COOKIE_NAME,
    SECRET_ENV,
    TOKEN_HEADER,
    CookieCodec,
    GatewaySettings,
    SessionTokens,
    parse_address,
    start_gateway,
)
from workplace_env.gateway import app as gateway_app
from workplace_env.gateway.readiness import health_probe
from workplace_env.gateway.routes import episodes as episode_routes
from workplace_env.gateway.routes.episodes import CLOSE_OUTCOME_HEADER
from workplace_env.gateway.serve import local_target
from workplace_env.server import servicer
from workplace_env.server.in_process import in_process_client
from workplace_env.sessions import SessionConfig
from workplace_env_client import (
    EnvironmentClient,
    EpisodeMismatchError,
    InvalidRequestError,
    reasons,
)
from workplace_env_client.id_bounds import id_length_problem

#: The body's media type, for the posts whose body is what is tested (not its type).
JSON_CT = {"content-type": "application/json"}

SECRET = "gateway-test-secret"
SETTINGS = GatewaySettings(secret_key=SECRET)
CODEC = CookieCodec(SECRET, SETTINGS.cookie_max_age_s)
COOKIE_RE = re.compile(rf"^{COOKIE_NAME}=([^;]+); path=/; Max-Age=1209600; httponly; samesite=lax$")
SEND = {"recipient": "someone@example.com", "subject": "Gateway hello", "body": "hi"}
SEND_CALL = {"name": "email_send_email", "arguments": json.dumps(SEND)}
SEARCH = {"query": "Gateway hello", "page_size": 50}
ROW = {
    "id": "gw-task-1",
    "category": "workplace_assistant_email",
    "environment_name": "workplace_assistant",
    "task_id": None,
    "ground_truth": [SEND_CALL],
}


pytestmark = [
    pytest.mark.server(config=SessionConfig(retry_window_s=3600.0)),
    pytest.mark.gateway(backends=GATEWAY_BACKENDS, settings=SETTINGS),
]


@pytest.fixture
def other_http(gateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway.url, timeout=30) as client:
        yield client


def cookie_sid(response: httpx.Response) -> str:
    """The session id in a response's Set-Cookie (asserting the reference's cookie shape)."""
    match = COOKIE_RE.match(response.headers["set-cookie"])
    assert match, response.headers.get("set-cookie")
    return CODEC.decode(match.group(1))["session_id"]


def seed(client: httpx.Client, row: dict | None = None) -> str:
    response = client.post("/seed_session", json=ROW if row is None else row)
    assert response.status_code == 200, response.text
    assert legacy_seed_answer(response) == {"mcp"}
    return cookie_sid(response)


def legacy_seed_answer(response: httpx.Response) -> set[str]:
    """The keys of a legacy seed's answer, checking its MCP metadata (NeMo's
    ``MCPServerMetadata`` under ``"mcp"``, as its servers with MCP exposure answer) names the
    session's token."""
    body = response.json()
    if "mcp" in body:
        assert body["mcp"] == {
            "server_name": "workplace_assistant",
            "url_path": "/mcp",
            "transport": "http",
            "headers": {"X-NeMo-Gym-Session-Token": response.headers[TOKEN_HEADER]},
        }
    return set(body)


def sent_count(client: httpx.Client) -> int:
    return http_total_emails(client, SEARCH)


def response_of(calls: list[dict]) -> dict:
    """A Responses-API response whose output interleaves calls, their outputs and a message."""
    items: list[dict] = [{"type": "reasoning", "id": "rs_1", "summary": []}]
    for i, call in enumerate(calls):
        items.append({"type": "function_call", "call_id": f"call_{i}", "id": f"fc_{i}", **call})
        items.append({"type": "function_call_output", "call_id": f"call_{i}", "output": "x"})
    items.append({"type": "message", "role": "assistant", "content": [], "id": "msg_1"})
    return {"id": "resp_1", "object": "response", "output": items}


def verify_body(calls: list[dict], **extra) -> dict:
    return {
        **ROW,
        "responses_create_params": {"input": [{"role": "user", "content": "send it"}]},
        "response": response_of(calls),
        **extra,
    }


# -- health, docs ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/health"])
def test_health_routes_answer_ok(http, path):
    response = http.get(path)
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_remote_gateway_ready_follows_the_grpc_server_health(make_server):
    server = make_server().running
    gw = start_gateway(grpc_target=local_target("127.0.0.1:0", server.port), settings=SETTINGS)
    try:
        with httpx.Client(base_url=gw.url, timeout=10) as client:
            assert client.get("/ready").json() == {"status": "ready"}
            server.stop(grace_s=0.5)
            deadline = time.monotonic() + 15  # the cached answer lasts about a second
            while (ready := client.get("/ready")).status_code == 200:
                assert time.monotonic() < deadline, "/ready still 200 with the server stopped"
                time.sleep(0.05)  # poll interval of a bounded wait, not synchronisation
            assert ready.status_code == 503 and ready.headers["retry-after"] == "1"
            assert ready.json()["status"] in ("backend_unavailable", "backend_not_serving")
            assert client.get("/health").json() == {"status": "ok"}  # liveness: it serves
    finally:
        gw.stop()


def test_remote_readiness_is_cached_between_probes(sdk):
    probe = health_probe(sdk)
    checks = []
    real = probe._health.Check
    probe._health.Check = lambda *a, **kw: checks.append(1) or real(*a, **kw)
    assert [probe() for _ in range(5)] == [None] * 5
    assert len(checks) == 1  # one health RPC for a burst of probes


def test_reverify_mode_is_stateless(http):
    response = http.get("/reverify_mode")
    assert response.status_code == 200 and response.json() == "stateless"


def test_openapi_documents_every_route(http):
    spec = http.get("/openapi.json").json()
    assert {"/seed_session", "/verify", "/close_session", "/session_token", "/{tool_name}"} <= set(
        spec["paths"]
    )
    assert "requestBody" in spec["paths"]["/seed_session"]["post"]
    assert http.get("/docs").status_code == 200


# -- seed and the cookie ---------------------------------------------------------------------


def test_legacy_seed_answers_mcp_metadata_and_reference_cookie(http):
    response = http.post("/seed_session", json=ROW)
    assert response.status_code == 200 and legacy_seed_answer(response) == {"mcp"}
    sid = cookie_sid(response)
    assert uuid.UUID(sid).version == 4


def test_cookie_value_is_starlette_session_format(http):
    value = COOKIE_RE.match(http.post("/seed_session", json=ROW).headers["set-cookie"]).group(1)
    data = itsdangerous.TimestampSigner(SECRET).unsign(value.encode())
    assert list(json.loads(b64decode(data))) == ["session_id"]


def test_cookie_is_resent_on_every_response(http):
    sid = seed(http)
    for response in (
        http.post("/company_directory_find_email_address", json={"name": "a"}),
        http.get("/health"),
        http.post("/email_search_emails", content=b"[1]", headers=JSON_CT),  # a 422
    ):
        assert cookie_sid(response) == sid


def test_no_cookie_before_a_seed(http):
    assert "set-cookie" not in http.get("/health").headers


def test_cookies_are_interchangeable_with_starlette_session_middleware(http, sdk):
    """With the same secret, a cookie the reference's web stack (Starlette's SessionMiddleware)
    issued names the same session here, and ours reads there: drop-in compatibility."""

    async def issue(request: Request) -> PlainTextResponse:
        request.session["session_id"] = request.path_params["sid"]
        return PlainTextResponse("ok")

    async def show(request: Request) -> PlainTextResponse:
        return PlainTextResponse(request.session.get("session_id", ""))

    reference_like = Starlette(
        routes=[Route("/issue/{sid}", issue, methods=["POST"]), Route("/show", show)],
        middleware=[Middleware(SessionMiddleware, secret_key=SECRET, session_cookie=COOKIE_NAME)],
    )
    sid = f"compat-{uuid.uuid4().hex}"
    sdk.seed_legacy(sid, {"id": "compat"})

    async def reference(method: str, path: str, cookie: str | None = None) -> httpx.Response:
        transport = httpx.ASGITransport(app=reference_like)
        cookies = {COOKIE_NAME: cookie} if cookie else None
        async with httpx.AsyncClient(
            transport=transport, base_url="http://ref", cookies=cookies
        ) as client:
            return await client.request(method, path)

    issued = anyio.run(reference, "POST", f"/issue/{sid}")
    http.cookies.set(COOKIE_NAME, issued.cookies[COOKIE_NAME])
    response = http.post("/company_directory_find_email_address", json={"name": "a"})
    assert response.status_code == 200
    expected = sdk.call_tool_raw(sid, "company_directory_find_email_address", {"name": "a"})
    assert response.content == b'{"output":' + expected.encode() + b"}"

    ours = COOKIE_RE.match(response.headers["set-cookie"]).group(1)
    assert anyio.run(reference, "GET", "/show", ours).text == sid


def test_forged_cookie_names_no_session(http, sdk):
    sid = f"forged-{uuid.uuid4().hex}"
    sdk.seed_legacy(sid, {"id": "forged"})
    forged = itsdangerous.TimestampSigner("not-the-secret").sign(
        b64encode(json.dumps({"session_id": sid}).encode())
    )
    http.cookies.set(COOKIE_NAME, forged.decode())
    response = http.post("/company_directory_find_email_address", json={"name": "a"})
    assert response.status_code == 404 and response.json()["failure_kind"] == "session_lost"


def test_default_secret_is_random_per_process():
    assert GatewaySettings().secret_key != GatewaySettings().secret_key
    assert GatewaySettings().cookie_name == COOKIE_NAME


def test_gateway_with_default_settings_refuses_cookies_of_another_secret(sdk):
    gw = start_gateway(client=sdk)  # random secret
    try:
        with httpx.Client(base_url=gw.url) as client:
            sid = f"other-{uuid.uuid4().hex}"
            sdk.seed_legacy(sid, {"id": "x"})
            client.cookies.set(COOKIE_NAME, CODEC.encode({"session_id": sid}))
            response = client.post("/company_directory_find_email_address", json={"name": "a"})
            assert response.status_code == 404
            seeded = client.post("/seed_session", json=ROW)
            assert seeded.status_code == 200 and COOKIE_NAME in seeded.headers["set-cookie"]
            assert client.post("/company_directory_find_email_address", json={}).status_code == 200
    finally:
        gw.stop()


def test_legacy_reseed_on_same_cookie_rebuilds_fresh_tables(http):
    sid = seed(http)
    http.post("/email_send_email", json=SEND)
    assert sent_count(http) == 1
    assert seed(http) == sid  # same cookie, same session ...
    assert sent_count(http) == 0  # ... fresh tables, as the reference does


def test_two_cookies_never_see_each_others_state(http, other_http):
    a, b = seed(http), seed(other_http)
    assert a != b
    http.post("/email_send_email", json=SEND)
    assert sent_count(http) == 1
    assert sent_count(other_http) == 0
    other_http.post("/email_send_email", json=SEND)
    other_http.post("/email_send_email", json=SEND)
    assert (sent_count(http), sent_count(other_http)) == (1, 2)


@pytest.mark.parametrize(
    "row",
    [
        {"id": "t", "task_id": "scalar-task"},
        {"id": "t", "task_id": 7, "episode_id": {"rollout_id": "r"}},
        {"id": "t", "task_id": {"taskset": "a", "task_id": "b"}},  # no episode object
        {},
        {"environment_name": "another_env", "ground_truth": [{"name": "x", "arguments": "{"}]},
        {"ground_truth": "not a list"},
        {"ground_truth": [1, 2, 3]},
    ],
    ids=[
        "scalar_task_id",
        "scalar_task_id_with_episode",
        "task_id_only",
        "empty",
        "foreign",
        "gt_string",
        "gt_junk",
    ],
)
def test_any_row_without_typed_identity_is_a_legacy_seed(http, row):
    seed(http, row)
    assert http.post("/email_send_email", json=SEND).json() == {
        "output": "Email sent successfully."
    }


@pytest.mark.parametrize("body", [b"[]", b"5", b'"row"', b"null", b"{", b""])
def test_seed_body_not_a_json_object_is_422(http, body):
    response = http.post("/seed_session", content=body, headers=JSON_CT)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body"]
    assert "set-cookie" not in response.headers


@pytest.mark.parametrize("body", [b"\xff\xfe\xfa", b'{"query": "\xff"}'])
@pytest.mark.parametrize(
    "path", ["/seed_session", "/email_search_emails", "/verify", "/close_session"]
)
def test_a_body_that_is_not_text_is_400_as_nemo_gym_answers(http, body, path):
    """Observed on NeMo Gym 0.7.0's workplace_assistant server: bytes that do not decode are
    400 ``There was an error parsing the body`` on every JSON route (a BOM-marked UTF-8 or
    UTF-16 body decodes and is read)."""
    seed(http)
    response = http.post(path, content=body, headers=JSON_CT)
    assert response.status_code == 400, response.text
    assert response.json()["detail"] == "There was an error parsing the body"
    assert sent_count(http) == 0
    utf16 = json.dumps({"query": "x"}).encode("utf-16")
    assert http.post("/email_search_emails", content=utf16, headers=JSON_CT).status_code == 200


#: Requests each answered with a 4xx, as (method, path, headers, body, reason); the 400, 404
#: and 405 are Starlette's own refusals, which carried no ``reason``.
REFUSED_REQUESTS = [
    ("POST", "/seed_session", JSON_CT, b"\xff\xfe\xfa", "BODY_UNPARSABLE"),
    ("POST", "/verify", JSON_CT, b'{"a": "\xff"}', "BODY_UNPARSABLE"),
    ("GET", "/no/such/path", {}, None, "ROUTE_NOT_FOUND"),
    ("POST", "/a/tool/path", JSON_CT, b"{}", "ROUTE_NOT_FOUND"),
    ("GET", "/seed_session", {}, None, "METHOD_NOT_ALLOWED"),
    ("PUT", "/email_search_emails", JSON_CT, b"{}", "METHOD_NOT_ALLOWED"),
    ("DELETE", "/verify", {}, None, "METHOD_NOT_ALLOWED"),
    ("POST", "/health", JSON_CT, b"{}", "METHOD_NOT_ALLOWED"),  # a fixed GET route's path
    ("PATCH", "/health", JSON_CT, b"{}", "METHOD_NOT_ALLOWED"),
    ("POST", "/seed_session", JSON_CT, b"{", "INVALID_REQUEST"),
    ("POST", "/seed_session", {"content-type": "text/plain"}, b"{}", "INVALID_REQUEST"),
    ("POST", "/seed_session", {}, b"{}", "INVALID_REQUEST"),
]


@pytest.mark.parametrize(("method", "path", "headers", "body", "reason"), REFUSED_REQUESTS)
def test_every_refusal_carries_the_error_body_and_its_registry_reason(
    http, method, path, headers, body, reason
):
    response = http.request(method, path, headers=headers, content=body)
    row = reasons.REASONS[reason]
    assert response.status_code == row.http_status, response.text
    answer = response.json()
    assert (answer["reason"], answer["failure_kind"]) == (reason, row.failure_kind)
    assert answer["detail"]
    if response.status_code == 405:
        assert "POST" in response.headers["allow"] or "GET" in response.headers["allow"]


# -- typed seeds -----------------------------------------------------------------------------


def typed(sid: str, **over) -> dict:
    body = {
        "resources_session_id": sid,
        "episode_id": {"rollout_id": f"r-{sid}", "attempt": 0},
        "task_id": {"taskset": "gw", "task_id": "t1"},
        "task": ROW,
    }
    body.update(over)
    return body


def test_typed_seed_binds_the_id_and_the_cookie_carries_it(http, sdk):
    sid = f"typed-{uuid.uuid4().hex}"
    response = http.post("/seed_session", json=typed(sid))
    assert response.status_code == 200 and response.json()["resources_session_id"] == sid
    assert cookie_sid(response) == sid
    http.post("/email_send_email", json=SEND)
    # the same session over gRPC: the HTTP call mutated it
    out = json.loads(sdk.call_tool_raw(sid, "email_search_emails", SEARCH))
    assert out["pagination"]["total_emails"] == 1
    # S2: an identical retry is OK and keeps the mutation
    assert http.post("/seed_session", json=typed(sid)).status_code == 200
    assert sent_count(http) == 1


def test_typed_seed_without_task_takes_the_body_as_row(http):
    sid = f"typed-{uuid.uuid4().hex}"
    body = {**ROW, **typed(sid)}
    del body["task"]
    assert http.post("/seed_session", json=body).status_code == 200
    result = http.post("/verify", json=verify_body([]) | {"ground_truth": ROW["ground_truth"]})
    assert result.json()["reward"] == 0.0  # the ground truth sends, the empty prediction not


def test_typed_seed_on_another_episode_is_409_conflict(http):
    sid = f"typed-{uuid.uuid4().hex}"
    assert http.post("/seed_session", json=typed(sid)).status_code == 200
    http.post("/email_send_email", json=SEND)
    clash = http.post(
        "/seed_session", json=typed(sid, episode_id={"rollout_id": "someone-else", "attempt": 0})
    )
    assert clash.status_code == 409 and clash.json()["failure_kind"] == "session_conflict"
    assert sent_count(http) == 1  # unchanged


@pytest.mark.parametrize(
    "attempt,bound",
    [("1", 1), (" 2 ", 2), ("1_0", 10), ("3.0", 3), (1.0, 1), (True, 1), (False, 0), ("-0", 0)],
)
@pytest.mark.parametrize("form", ["task", "task_data"])
def test_typed_seed_coerces_the_attempt_as_nemos_episode_id(http, sdk, attempt, bound, form):
    """NeMo's ``EpisodeId.attempt`` is a pydantic int (lax): ``"1"``, ``1.0`` and ``true``
    were 422 here. The session is bound to the coerced attempt, on both typed seeds, and a
    close names it either way."""
    sid = f"typed-{uuid.uuid4().hex}"
    body = typed(sid, episode_id={"rollout_id": "r1", "attempt": attempt})
    if form == "task_data":
        body["task_data"] = body.pop("task")
    assert http.post("/seed_session", json=body).status_code == 200
    with pytest.raises(EpisodeMismatchError):  # bound to exactly the coerced attempt
        sdk.close_session(sid, ("r1", bound + 1))
    close = {"resources_session_id": sid, "episode_id": {"rollout_id": "r1", "attempt": attempt}}
    assert http.post("/close_session", json=close).headers[CLOSE_OUTCOME_HEADER] == "CLOSED"


def test_a_rollout_id_past_the_id_bound_is_422_on_seed_and_close(http):
    """The service's 256-character bound of ``rollout_id`` (as of ``resources_session_id``),
    named as the body's field on both routes that carry an episode; nothing bound or fenced."""
    sid = f"typed-{uuid.uuid4().hex}"
    episode = {"rollout_id": "r" * 257, "attempt": 0}
    seed = http.post("/seed_session", json=typed(sid, episode_id=episode))
    close = http.post("/close_session", json={"resources_session_id": sid, "episode_id": episode})
    for answer in (seed, close):
        assert answer.status_code == 422, answer.text
        [detail] = answer.json()["detail"]
        assert detail["loc"] == ["body", "episode_id", "rollout_id"]
        assert id_length_problem(episode["rollout_id"]) in detail["msg"]
    assert http.post("/seed_session", json=typed(sid)).status_code == 200


def test_reserved_attempt_suffix_is_refused_on_http_and_taken_over_grpc(http, sdk):
    """NeMo's ``EpisodeId`` reserves a rollout id ending ``-a<N>`` (N >= 1), so its typed
    seed and close refuse one (422 naming it, nothing bound or fenced); ``-a0`` and ``-a01``
    are not reserved. CONTRACT's pattern (the gRPC API) does not reserve it: gRPC takes it."""
    sid = f"typed-{uuid.uuid4().hex}"
    for rollout_id in ("r-a1", "r-a10"):
        seed = http.post("/seed_session", json=typed(sid, episode_id={"rollout_id": rollout_id}))
        close = http.post(
            "/close_session",
            json={"resources_session_id": sid, "episode_id": {"rollout_id": rollout_id}},
        )
        for answer in (seed, close):
            assert answer.status_code == 422
            assert [d["loc"] for d in answer.json()["detail"]] == [
                ["body", "episode_id", "rollout_id"]
            ]
            assert "reserved attempt suffix" in answer.json()["detail"][0]["msg"]
    for rollout_id in ("r-a0", "r-a01", "r-a1x"):
        episode = {"rollout_id": rollout_id, "attempt": 0}
        other = f"{sid}-{rollout_id}"
        assert http.post("/seed_session", json=typed(other, episode_id=episode)).status_code == 200
    grpc_sid = f"grpc-{uuid.uuid4().hex}"
    sdk.seed(grpc_sid, ("r-a1", 0), ("gw", "t1"), ROW)
    assert sdk.close_session(grpc_sid, ("r-a1", 0)) == "CLOSED"


def test_typed_seed_of_a_closed_id_is_409_closed(http):
    sid = f"typed-{uuid.uuid4().hex}"
    http.post("/seed_session", json=typed(sid))
    close = http.post(
        "/close_session",
        json={"resources_session_id": sid, "episode_id": {"rollout_id": f"r-{sid}"}},
    )
    assert close.json() == {"resources_session_id": sid}
    assert close.headers["x-workplace-close-outcome"] == "CLOSED"
    again = http.post("/seed_session", json=typed(sid))
    assert again.status_code == 409 and again.json()["failure_kind"] == "session_closed"


@pytest.mark.parametrize(
    "over,loc",
    [
        ({"resources_session_id": 5}, ["body", "resources_session_id"]),
        ({"resources_session_id": "bad id with spaces"}, ["body", "resources_session_id"]),
        ({"episode_id": None}, ["body", "episode_id"]),
        ({"episode_id": {"rollout_id": "-starts-with-dash"}}, ["body", "episode_id", "rollout_id"]),
        # the service's bound, as for resources_session_id (256 characters)
        ({"episode_id": {"rollout_id": "r" * 257}}, ["body", "episode_id", "rollout_id"]),
        ({"episode_id": {"rollout_id": "r", "attempt": -1}}, ["body", "episode_id", "attempt"]),
        ({"episode_id": {"rollout_id": "r", "attempt": "x"}}, ["body", "episode_id", "attempt"]),
        # NeMo's EpisodeId refuses what pydantic cannot take as an int >= 0 without loss
        ({"episode_id": {"rollout_id": "r", "attempt": 1.5}}, ["body", "episode_id", "attempt"]),
        ({"episode_id": {"rollout_id": "r", "attempt": "1.5"}}, ["body", "episode_id", "attempt"]),
        ({"episode_id": {"rollout_id": "r", "attempt": None}}, ["body", "episode_id", "attempt"]),
        ({"episode_id": {"rollout_id": "r", "attempt": [0]}}, ["body", "episode_id", "attempt"]),
        # ... and a rollout id with its reserved attempt suffix -a<N> (N >= 1)
        ({"episode_id": {"rollout_id": "r-a1"}}, ["body", "episode_id", "rollout_id"]),
        ({"episode_id": {"rollout_id": "x-a0-a12"}}, ["body", "episode_id", "rollout_id"]),
        # the service's int32 bound (NeMo's model takes more; it cannot be carried)
        ({"episode_id": {"rollout_id": "r", "attempt": 2**31}}, ["body", "episode_id", "attempt"]),
        ({"task_id": "scalar"}, ["body", "task_id"]),
        ({"task_id": {"taskset": "", "task_id": "t"}}, ["body", "task_id", "taskset"]),
        ({"task": [1]}, ["body", "task"]),
        ({"task": {"ground_truth": [5]}}, ["body", "task", "ground_truth", 0]),
        (
            {"task": {"ground_truth": [{"name": "x", "arguments": "{"}]}},
            ["body", "task", "ground_truth", 0, "arguments"],
        ),
        ({"task": {"environment_name": "other"}}, ["body", "task", "environment_name"]),
    ],
)
def test_malformed_typed_seed_is_422_naming_the_field_and_binds_nothing(http, over, loc):
    sid = f"typed-{uuid.uuid4().hex}"
    body = typed(sid, **over)
    response = http.post("/seed_session", json=body)
    assert response.status_code == 422, response.text
    assert loc in [d["loc"] for d in response.json()["detail"]]
    assert "set-cookie" not in response.headers
    # S5: no binding and no fence: a valid seed of the same id (when the id is valid) succeeds
    if isinstance(body["resources_session_id"], str) and " " not in body["resources_session_id"]:
        assert http.post("/seed_session", json=typed(sid)).status_code == 200


# -- tool calls ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,body",
    [
        ("company_directory_find_email_address", b'{"name": "a"}'),
        ("email_search_emails", b'{"query": "Update", "page": 2, "page_size": 3}'),
        (
            "email_send_email",
            '{"recipient": "x@y.com", "subject": "Grüße ☃", "body": "é"}'.encode(),
        ),
        ("email_send_email", b'{"recipient": "x@y.com", "subject": "\\u00e9", "body": "b"}'),
        ("email_send_email", b'{"recipient": "x@y.com", "subject": null, "body": "b"}'),
        ("no_such_tool", b"{}"),
        ("email_send_email", b'{"recipient": "x@y.com", "locatoin": 1}'),
        (
            "calendar_create_event",
            b'{"event_name": 5, "participant_email": [], "event_start": {}, "duration": 1.5}',
        ),
        ("email_search_emails", b'{"query": "a", "query": "Update"}'),
    ],
)
def test_tool_body_is_the_grpc_output_in_the_reference_envelope(http, sdk, name, body):
    sid = seed(http)
    response = http.post(f"/{name}", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    # the same call on a twin gRPC session gives the same output bytes
    twin = f"twin-{uuid.uuid4().hex}"
    sdk.seed_legacy(twin, ROW)
    expected = sdk.call_tool_raw(twin, name, body.decode())
    assert response.content == b'{"output":' + expected.encode() + b"}"
    assert sid != twin


def test_null_arguments_are_dropped(http):
    seed(http)
    with_null = http.post("/email_search_emails", json={"query": "Update", "page": None})
    without = http.post("/email_search_emails", json={"query": "Update"})
    assert with_null.content == without.content


def test_unknown_tool_and_bad_kwargs_are_reference_texts(http):
    seed(http)
    assert http.post("/no_such_tool", json={}).json() == {
        "output": "Error executing tool 'no_such_tool': 'no_such_tool'"
    }
    out = http.post("/calendar_create_event", json={"location": "x"}).json()["output"]
    assert out.startswith("Error executing tool 'calendar_create_event': ")
    assert "unexpected keyword argument 'location'" in out


def test_tool_call_without_cookie_is_404_session_lost(http):
    response = http.post("/company_directory_find_email_address", json={"name": "a"})
    assert response.status_code == 404
    assert response.json()["failure_kind"] == "session_lost"


class _LongAgoSigner(itsdangerous.TimestampSigner):
    """Signs as the gateway would have a year ago (past the cookie's 14-day Max-Age)."""

    def get_timestamp(self) -> int:
        return int(time.time()) - 365 * 24 * 3600


def _cookie_signed_by(signer: itsdangerous.TimestampSigner, sid: str) -> str:
    return signer.sign(b64encode(json.dumps({"session_id": sid}).encode())).decode()


@pytest.mark.parametrize(
    ("cookie", "detail"),
    [
        (None, "no session cookie: seed a session first with POST /seed_session"),
        (
            _cookie_signed_by(itsdangerous.TimestampSigner("another-secret"), "s1"),
            "the session cookie was not issued by this gateway (tampered, or signed with "
            "another secret, as after a restart without --cookie-secret): seed again with POST "
            "/seed_session, and give the gateway --cookie-secret",
        ),
        ("not.a.signed.value", "the session cookie was not issued by this gateway"),
        (
            _cookie_signed_by(_LongAgoSigner(SECRET), "s1"),
            "the session cookie has expired (older than its Max-Age): seed again with POST "
            "/seed_session",
        ),
        (CODEC.encode({"session_id": "bad id"}), "the session cookie names no session"),
    ],
    ids=["absent", "another_secret", "tampered", "expired", "no_session_id"],
)
def test_a_tool_call_without_a_session_says_why_and_what_to_do(http, cookie, detail):
    if cookie is not None:
        http.cookies.set(COOKIE_NAME, cookie)
    for route in ("/company_directory_find_email_address", "/session_token"):
        response = http.post(route, json={})
        assert response.status_code == 404
        assert response.json()["failure_kind"] == "session_lost"
        assert response.json()["detail"].startswith(detail), response.json()["detail"]


@pytest.mark.parametrize(
    ("route", "detail"),
    [
        ("/nope", "POST /nope is no route of this gateway"),
        (
            "/email_delet_email",
            "POST /email_delet_email is no route of this gateway; did you mean "
            "'/email_delete_email'?",
        ),
    ],
)
def test_an_unknown_route_without_a_session_is_told_as_unknown(http, route, detail):
    response = http.post(route, json={})
    assert response.status_code == 404
    row = reasons.ROUTE_NOT_FOUND
    expected = {"failure_kind": row.failure_kind, "reason": row.name, "detail": detail}
    assert response.json() == expected


def test_a_verify_on_an_unreadable_cookie_says_why_it_is_lost(http):
    http.cookies.set(COOKIE_NAME, _cookie_signed_by(itsdangerous.TimestampSigner("x"), "s1"))
    body = {**ROW, "response": {"output": []}}
    answer = http.post("/verify", json=body).json()
    assert (answer["reward"], answer["mask_sample"], answer["failure_kind"]) == (
        0.0,
        True,
        "session_lost",
    )
    assert "--cookie-secret" in answer["failure_reason"]


def test_tool_call_on_a_cookie_the_service_does_not_hold_is_404_session_lost(http):
    http.cookies.set(COOKIE_NAME, CODEC.encode({"session_id": f"never-{uuid.uuid4().hex}"}))
    response = http.post("/company_directory_find_email_address", json={"name": "a"})
    assert response.status_code == 404
    assert response.json()["failure_kind"] == "session_lost"
    assert response.json()["reason"] == "SESSION_LOST"


@pytest.mark.parametrize("body", [b"[1, 2]", b'"x"', b"5", b"null", b"{not json", b""])
@pytest.mark.parametrize("with_session", [True, False])
def test_tool_body_not_a_json_object_is_422(http, body, with_session):
    if with_session:
        seed(http)
    response = http.post("/email_send_email", content=body, headers=JSON_CT)
    assert response.status_code == 422
    assert response.json()["failure_kind"] == "invalid_request"
    if with_session:
        assert sent_count(http) == 0


def test_call_id_header_makes_a_call_idempotent(http):
    seed(http)
    first = http.post("/email_send_email", json=SEND, headers={CALL_ID_HEADER: "c-1"})
    again = http.post("/email_send_email", json=SEND, headers={CALL_ID_HEADER: "c-1"})
    assert first.content == again.content
    assert sent_count(http) == 1  # executed once (T6)
    other = {**SEND, "subject": "different"}
    reused = http.post("/email_send_email", json=other, headers={CALL_ID_HEADER: "c-1"})
    assert reused.status_code == 409 and reused.json()["failure_kind"] == "call_id_reused"


def test_an_over_long_call_id_header_is_refused_and_nothing_runs(http):
    seed(http)
    refused = http.post("/email_send_email", json=SEND, headers={CALL_ID_HEADER: "c" * 257})
    assert refused.status_code == 422 and refused.json()["failure_kind"] == "invalid_request"
    # It was once named ["body", "call_id"], a field the body does not have
    assert [d["loc"] for d in refused.json()["detail"]] == [["header", CALL_ID_HEADER]]
    assert refused.json()["reason"] == "INVALID_REQUEST"
    assert sent_count(http) == 0


def test_a_call_id_header_sent_twice_with_different_values_is_refused_and_nothing_runs(http):
    """Two different ``x-workplace-call-id`` headers were accepted (the
    first keyed the call). Refused as the over-long one is, naming the header; the same value
    twice is one call id."""
    seed(http)
    twice = [(CALL_ID_HEADER, "c-a"), (CALL_ID_HEADER, "c-b"), ("content-type", "application/json")]
    refused = http.post("/email_send_email", content=json.dumps(SEND), headers=twice)
    assert refused.status_code == 422 and refused.json()["failure_kind"] == "invalid_request"
    assert [d["loc"] for d in refused.json()["detail"]] == [["header", CALL_ID_HEADER]]
    assert sent_count(http) == 0
    same = [(CALL_ID_HEADER, "c-a"), (CALL_ID_HEADER, "c-a"), ("content-type", "application/json")]
    assert http.post("/email_send_email", content=json.dumps(SEND), headers=same).is_success
    again = [(CALL_ID_HEADER, "c-a"), ("content-type", "application/json")]
    assert http.post("/email_send_email", content=json.dumps(SEND), headers=again).is_success
    assert sent_count(http) == 1  # the same call id: run once


# -- verify ----------------------------------------------------------------------------------


def test_verify_scores_the_response_and_echoes_the_request(http):
    seed(http)
    http.post("/email_send_email", json=SEND)
    body = verify_body([SEND_CALL])
    response = http.post("/verify", json=body)
    assert response.status_code == 200
    assert response.json() == {
        "responses_create_params": body["responses_create_params"],
        "response": body["response"],
        "reward": 1.0,
        "mask_sample": False,
        "failure_kind": None,
        "failure_reason": None,
    }


#: ``{"input": [message], "temperature": 1}`` as NeMo Gym 0.7.0's verify body re-serialises it.
NEMO_CREATE_PARAMS = {
    **dict.fromkeys(
        [
            "background",
            "include",
            "input",
            "instructions",
            "max_output_tokens",
            "max_tool_calls",
            "metadata",
            "model",
            "parallel_tool_calls",
            "previous_response_id",
            "prompt",
            "reasoning",
            "service_tier",
            "store",
            "context_management",
            "conversation",
            "moderation",
            "prompt_cache_key",
            "prompt_cache_retention",
            "safety_identifier",
            "stream_options",
            "temperature",
            "text",
            "tool_choice",
            "tools",
            "top_logprobs",
            "top_p",
            "truncation",
            "user",
            "stream",
        ]
    ),
    "input": [{"content": "send it", "role": "user", "type": "message", "phase": None}],
    "parallel_tool_calls": True,
    "temperature": 1.0,
    "tool_choice": "auto",
    "tools": [],
}


def test_cookieless_verify_echoes_create_params_as_nemos_verify_body(http):
    """H5: a re-verification (no cookie) answers ``responses_create_params`` re-serialised as
    NeMo's verify body does (30 fields in its order, defaults, item types, float temperature);
    a shape outside those it knows comes back as sent, and so does a cookie session's."""
    params = {"input": [{"role": "user", "content": "send it"}], "temperature": 1}
    answer = http.post("/verify", json=verify_body([], responses_create_params=params))
    echoed = answer.json()["responses_create_params"]
    assert json.dumps(echoed) == json.dumps(NEMO_CREATE_PARAMS)  # keys in NeMo's order
    unknown = {"input": [{"role": "user", "content": "send it", "zz": 1}]}
    answer = http.post("/verify", json=verify_body([], responses_create_params=unknown))
    assert answer.json()["responses_create_params"] == unknown
    seed(http)
    answer = http.post("/verify", json=verify_body([], responses_create_params=params))
    assert answer.json()["responses_create_params"] == params


def test_verify_is_request_based(http):
    seed(http)
    http.post("/email_send_email", json=SEND)  # the live tables play no part
    assert http.post("/verify", json=verify_body([])).json()["reward"] == 0.0


def test_verify_releases_a_legacy_session_and_a_resend_scores_the_same(http):
    seed(http)
    body = verify_body([SEND_CALL])
    first = http.post("/verify", json=body)
    assert first.json()["reward"] == 1.0
    lost = http.post("/company_directory_find_email_address", json={"name": "a"})
    assert lost.status_code == 404 and lost.json()["failure_kind"] == "session_lost"  # V2
    again = http.post("/verify", json=body)
    assert again.status_code == 200 and again.json() == first.json()  # V3
    seed(http)  # the cookie can seed again after a verify
    assert http.post("/company_directory_find_email_address", json={}).status_code == 200


def test_verify_keeps_a_typed_session(http):
    sid = f"typed-{uuid.uuid4().hex}"
    http.post("/seed_session", json=typed(sid))
    assert http.post("/verify", json=verify_body([SEND_CALL])).json()["reward"] == 1.0
    assert http.post("/company_directory_find_email_address", json={}).status_code == 200


def test_verify_without_a_session_cookie_is_scored_by_replay(http):
    # H5: offline re-verification (the row's ground truth sends the email the call sends)
    response = http.post("/verify", json=verify_body([SEND_CALL]))
    assert response.status_code == 200
    out = response.json()
    assert (out["reward"], out["mask_sample"], out["failure_kind"]) == (1.0, False, None)
    assert http.post("/verify", json=verify_body([])).json()["reward"] == 0.0


def test_verify_with_an_unreadable_cookie_is_a_masked_session_lost_sample(http):
    http.cookies.set(COOKIE_NAME, "forged")
    out = http.post("/verify", json=verify_body([SEND_CALL])).json()
    assert (out["reward"], out["mask_sample"], out["failure_kind"]) == (0.0, True, "session_lost")


def test_verify_for_a_session_the_service_does_not_hold_is_masked(http):
    http.cookies.set(COOKIE_NAME, CODEC.encode({"session_id": f"never-{uuid.uuid4().hex}"}))
    out = http.post("/verify", json=verify_body([SEND_CALL])).json()
    assert (out["reward"], out["mask_sample"], out["failure_kind"]) == (0.0, True, "session_lost")


@pytest.mark.parametrize(
    "calls,reward", [([], 1.0), ([SEND_CALL], 0.0)], ids=["no_write", "a_write"]
)
def test_verify_with_a_json_string_ground_truth_means_change_nothing(http, calls, reward):
    seed(http)
    body = verify_body(calls, ground_truth=json.dumps([SEND_CALL]))
    assert http.post("/verify", json=body).json()["reward"] == reward


def test_verify_takes_the_ground_truth_from_the_request(http):
    seed(http)  # the seeded row's ground truth sends an email
    body = verify_body([], ground_truth=[])
    assert http.post("/verify", json=body).json()["reward"] == 1.0


@pytest.mark.parametrize(
    "body,loc",
    [
        ({"ground_truth": []}, ["body", "response"]),
        ({"response": []}, ["body", "response"]),
        ({"response": {"id": "r"}}, ["body", "response", "output"]),
        ({"response": {"output": {}}}, ["body", "response", "output"]),
    ],
)
def test_malformed_verify_is_422(http, body, loc):
    seed(http)
    response = http.post("/verify", json=body)
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == loc
    assert http.post("/company_directory_find_email_address", json={}).status_code == 200


def test_verify_body_not_an_object_is_422(http):
    assert http.post("/verify", content=b"[]", headers=JSON_CT).status_code == 422


#: A ``function_call`` item NeMo's Responses types refuse (its arguments are not JSON text).
BAD_ITEM = {"type": "function_call", "call_id": "c", "name": "email_send_email", "arguments": {}}
BAD_TRUTH = [{"name": "email_send_email", "arguments": 5}]


@pytest.fixture
def check_counts(monkeypatch) -> dict[str, int]:
    """How many times each verify JSON check runs, wherever it is called from (the gateway, the
    servicer, the extraction of the prediction)."""
    counts = {"response_output_problems": 0, "ground_truth_problems": 0}
    for name in counts:
        check = getattr(responses, name)

        def counted(value, _check=check, _name=name):
            counts[_name] += 1
            return _check(value)

        for module in (responses, episode_routes, servicer):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, counted)
    return counts


def test_a_verify_checks_its_json_once_per_process_it_crosses(http, gateway_backend, check_counts):
    """Co-hosted, the gateway's check at its edge is the only one (the servicer is told, by
    CheckedJson, that it ran); behind a remote gateway the server checks what it receives
    (both run in this test's process, so both count)."""
    seed(http)
    http.post("/email_send_email", json=SEND)
    body = verify_body([SEND_CALL], ground_truth=[SEND_CALL])
    assert http.post("/verify", json=body).json()["reward"] == 1.0
    once = 1 if gateway_backend == "in_process" else 2
    assert check_counts == {"response_output_problems": once, "ground_truth_problems": once}


def test_a_bad_verify_item_is_refused_by_each_transport_in_its_own_words(http, server, sdk):
    seed(http)
    refused = http.post(
        "/verify",
        json={**verify_body([], ground_truth=BAD_TRUTH), "response": {"output": [BAD_ITEM]}},
    )
    assert refused.status_code == 422
    assert [d["loc"] for d in refused.json()["detail"]] == [
        ["body", "response", "output", 0, "function_call", "arguments"],
        ["body", "ground_truth", "list[dict[str,str]]", 0, "arguments"],
        ["body", "ground_truth", "str"],
    ]
    # gRPC, and the in-process client given plain text (not the gateway's CheckedJson)
    for client in (sdk, in_process_client(server)):
        sid = f"bad-item-{uuid.uuid4().hex}"
        client.seed_legacy(sid, {"id": "t"})
        with pytest.raises(InvalidRequestError) as caught:
            client.verify(sid, response_output=[BAD_ITEM])
        assert [v.field for v in caught.value.violations] == [
            "response_output_json[0].function_call.arguments"
        ]
        with pytest.raises(InvalidRequestError) as caught:
            client.verify(sid, [], ground_truth_json=json.dumps(BAD_TRUTH))
        assert [v.field for v in caught.value.violations] == ["ground_truth_json[0].arguments"]


# -- close -----------------------------------------------------------------------------------


def test_close_session_outcomes(http):
    sid = f"typed-{uuid.uuid4().hex}"
    episode = {"rollout_id": f"r-{sid}", "attempt": 0}
    http.post("/seed_session", json=typed(sid))
    body = {"resources_session_id": sid, "episode_id": episode}
    wrong = http.post("/close_session", json={**body, "episode_id": {"rollout_id": "other"}})
    assert wrong.status_code == 409 and wrong.json()["failure_kind"] == "episode_mismatch"
    for outcome in ("CLOSED", "ALREADY_CLOSED"):
        closed = http.post("/close_session", json=body)
        assert closed.json() == {"resources_session_id": sid}
        assert closed.headers["x-workplace-close-outcome"] == outcome
    lost = http.post("/company_directory_find_email_address", json={})
    assert lost.status_code == 404
    assert (lost.json()["failure_kind"], lost.json()["reason"]) == (
        "session_lost",
        "SESSION_CLOSED",
    )
    never = {"resources_session_id": f"n-{uuid.uuid4().hex}", "episode_id": episode}
    closed = http.post("/close_session", json=never)
    assert closed.json() == {"resources_session_id": never["resources_session_id"]}
    assert closed.headers["x-workplace-close-outcome"] == "NOT_SEEDED"


def test_close_of_the_cookie_legacy_session(http):
    seed(http)
    assert http.post("/close_session", json={}).json() == {"outcome": "CLOSED"}
    assert http.post("/company_directory_find_email_address", json={}).status_code == 404
    seed(http)  # a closed legacy cookie starts a new session on its next seed
    assert http.post("/company_directory_find_email_address", json={}).status_code == 200


@pytest.mark.parametrize(
    "body,loc",
    [
        ({}, ["body", "resources_session_id"]),
        ({"resources_session_id": 3}, ["body", "resources_session_id"]),
        ({"resources_session_id": "s", "episode_id": "r"}, ["body", "episode_id"]),
        (
            {"resources_session_id": "s", "episode_id": {"rollout_id": "!"}},
            ["body", "episode_id", "rollout_id"],
        ),
    ],
)
def test_malformed_close_is_422(http, body, loc):
    response = http.post("/close_session", json=body)
    assert response.status_code == 422
    assert loc in [d["loc"] for d in response.json()["detail"]]


# -- session tokens --------------------------------------------------------------------------


def test_seed_returns_a_session_token_for_its_session(http):
    response = http.post("/seed_session", json=ROW)
    tokens = SessionTokens(SECRET, SETTINGS.token_max_age_s)
    assert tokens.session_of(response.headers[TOKEN_HEADER]) == cookie_sid(response)


def test_session_token_route(http):
    tokens = SessionTokens(SECRET, SETTINGS.token_max_age_s)
    missing = http.post("/session_token")
    assert missing.status_code == 404 and missing.json()["failure_kind"] == "session_lost"
    sid = seed(http)
    mine = http.post("/session_token").json()
    assert mine["resources_session_id"] == sid and tokens.session_of(mine["token"]) == sid
    named = http.post("/session_token", json={"resources_session_id": sid}).json()
    assert tokens.session_of(named["token"]) == sid


def test_a_token_needs_the_sessions_cookie_not_its_id(http, gateway):
    """Knowing a cookie session's id minted a token for it."""
    sid = seed(http)
    with httpx.Client(base_url=gateway.url) as stranger:  # no cookie jar in common
        refused = stranger.post("/session_token", json={"resources_session_id": sid})
        assert refused.status_code == 404 and "token" not in refused.json()
        seed(stranger)  # a session of its own: still not someone else's
        other = stranger.post("/session_token", json={"resources_session_id": sid})
        assert other.status_code == 403 and other.json()["reason"] == "SESSION_COOKIE_REQUIRED"
    assert http.post("/session_token", json={"resources_session_id": 1}).status_code == 422
    assert http.post("/session_token", content=b"[", headers=JSON_CT).status_code == 422


def test_tokens_and_cookies_are_not_interchangeable():
    tokens = SessionTokens(SECRET, 60)
    token = tokens.mint("s1")
    assert tokens.session_of(token) == "s1"
    assert CODEC.decode(token) == {}
    assert tokens.session_of(CODEC.encode({"sid": "s1"})) is None
    assert SessionTokens("another-secret", 60).session_of(token) is None
    assert tokens.session_of(token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]) is None


# -- running it ------------------------------------------------------------------------------


def test_addresses():
    assert parse_address("127.0.0.1:8080") == ("127.0.0.1", 8080)
    assert parse_address("[::1]:0") == ("::1", 0)
    assert local_target("0.0.0.0:9", 50051) == "127.0.0.1:50051"
    assert local_target("[::1]:9", 5) == "[::1]:5"
    for bad in ("8080", "host:", "host:http", "h:70000"):
        with pytest.raises(ValueError):
            parse_address(bad)


def test_start_gateway_on_a_taken_port_raises(gateway, sdk):
    with pytest.raises(RuntimeError, match="cannot bind"):
        start_gateway(client=sdk, address=f"127.0.0.1:{gateway.port}")


def test_settings_from_env(monkeypatch):
    monkeypatch.setenv(SECRET_ENV, "from-the-env")
    assert GatewaySettings.from_env().secret_key == "from-the-env"
    assert GatewaySettings.from_env(secret_key="given").secret_key == "given"
    monkeypatch.delenv(SECRET_ENV)
    assert GatewaySettings.from_env().secret_key != GatewaySettings.from_env().secret_key
    with pytest.raises(ValueError):
        GatewaySettings(mcp_path="mcp")


@pytest.mark.parametrize("blank", ["", " "])
def test_settings_from_env_refuse_a_blank_cookie_secret(monkeypatch, blank):
    """An empty secret was taken as unset: a random key per process, the variable set."""
    monkeypatch.setenv(SECRET_ENV, blank)
    word = "empty" if blank == "" else "blank"
    with pytest.raises(ConfigError, match=f"{SECRET_ENV}\\): {word} value; .* unset it"):
        GatewaySettings.from_env()


def test_without_mcp_the_path_is_just_a_tool_name(sdk):
    gw = start_gateway(client=sdk, settings=GatewaySettings(mcp_path=""))
    try:
        with httpx.Client(base_url=gw.url) as client:
            seeded = client.post("/seed_session", json=ROW)
            assert seeded.status_code == 200 and seeded.content == b"{}"  # no MCP metadata
            assert client.post("/mcp", json={}).json() == {
                "output": "Error executing tool 'mcp': 'mcp'"
            }
    finally:
        gw.stop()


def test_service_unreachable_is_503():
    with EnvironmentClient("127.0.0.1:1", timeout_s=5, max_attempts=1) as dead:
        gw = start_gateway(client=dead)
        try:
            with httpx.Client(base_url=gw.url) as client:
                response = client.post("/seed_session", json=ROW)
                assert response.status_code == 503
                assert response.json()["failure_kind"] == "unavailable"
                assert client.get("/health").json() == {"status": "ok"}
        finally:
            gw.stop()


@pytest.mark.parametrize("backend", GATEWAY_BACKENDS)
def test_service_at_capacity_is_429_with_retry_after(backend, make_server):
    server = make_server(SessionConfig(max_sessions=1, retry_after_s=2.5)).running
    gw = gateway_on(backend, server)
    try:
        with httpx.Client(base_url=gw.url) as first, httpx.Client(base_url=gw.url) as second:
            assert first.post("/seed_session", json=ROW).status_code == 200
            full = second.post("/seed_session", json=ROW)
            assert full.status_code == 429 and full.headers["retry-after"] == "3"
            assert full.json()["failure_kind"] == "capacity_exhausted"
            assert "set-cookie" not in full.headers
    finally:
        gw.stop()


def test_remote_gateway_relays_a_refused_rpc_as_429_at_once():
    """X3 behind the separate gateway: an RPC the server refuses TOO_MANY_RPCS is answered 429
    with the refusal's delay as Retry-After, sent once: the gateway's SDK does not wait it out
    (its HTTP caller retries), though a plain SDK client would."""
    stand_in = RefusingStandIn(refusals=1, retry_after_s=2.0)
    gw = start_gateway(stand_in.target)
    try:
        with httpx.Client(base_url=gw.url) as http:
            refused = http.post("/seed_session", json=ROW)
        assert refused.status_code == 429 and refused.headers["retry-after"] == "2"
        assert refused.json()["reason"] == "TOO_MANY_RPCS"
        assert "set-cookie" not in refused.headers
        assert stand_in.attempts == {"SeedSession": 1}
    finally:
        gw.stop()
        stand_in.server.stop(None)


def test_run_gateway_serves_until_sigterm(server):
    """The blocking entry point (``workplace-env gateway``), in a child process."""
    code = (
        "import sys\n"
        "from workplace_env.gateway import run_gateway\n"
        "run_gateway(sys.argv[1], '127.0.0.1:0', log_level='warning',\n"
        "            on_listening=lambda url: print(url, flush=True))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, f"127.0.0.1:{server.port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().strip()  # printed once the socket listens
        assert url.startswith("http://127.0.0.1:"), url or proc.stderr.read()
        with httpx.Client(base_url=url, timeout=30) as client:
            assert client.get("/health").json() == {"status": "ok"}
            assert client.post("/seed_session", json=ROW).status_code == 200
            assert client.post("/company_directory_find_email_address", json={}).status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


@pytest.mark.parametrize("backend", GATEWAY_BACKENDS)
def test_body_over_the_message_limit_is_413_not_retry_later(backend, make_server):
    server = make_server(settings=Settings(max_message_bytes=64 * 1024)).running
    gw = gateway_on(backend, server, max_message_bytes=64 * 1024)
    try:
        with httpx.Client(base_url=gw.url, timeout=30) as client:
            big = {**ROW, "prompt": "x" * 200_000}
            response = client.post("/seed_session", json=big)
            assert response.status_code == 413, response.text
            assert "retry-after" not in response.headers
            assert response.json()["failure_kind"] == "request_too_large"
            assert response.json()["reason"] == "REQUEST_TOO_LARGE"
    finally:
        gw.stop()


BIG_MAIL = {"recipient": "a@b.com", "subject": "a" * 30_000, "body": "x"}


def _search_answers_over_the_limit(client: httpx.Client) -> list[dict[str, Any]]:
    """Send three 30 KB emails on the client's session, then a search matching all of them
    (output ~90 KB) and its retry by call id; assert each is 502 RESPONSE_TOO_LARGE and return
    both answers' bodies."""
    for _ in range(3):
        assert client.post("/email_send_email", json=BIG_MAIL).status_code == 200
    bodies = []
    for _ in range(2):  # the call and its retry
        answer = client.post(
            "/email_search_emails", json={"query": "aaaa"}, headers={"x-workplace-call-id": "big-1"}
        )
        assert answer.status_code == 502, answer.text
        body = answer.json()
        assert (body["reason"], body["failure_kind"]) == (
            "RESPONSE_TOO_LARGE",
            "response_too_large",
        )
        bodies.append(body)
    return bodies


@pytest.mark.parametrize("backend", GATEWAY_BACKENDS)
def test_an_output_over_the_message_limit_is_502_response_too_large_not_413(backend, make_server):
    """A small tool call whose output was over the server's message limit
    was 413 REQUEST_TOO_LARGE on the separate gateway and 200 on the co-hosted one. Both now
    answer 502 RESPONSE_TOO_LARGE, the same again for a retry with the call's id."""
    limit = 64 * 1024
    server = make_server(settings=Settings(max_message_bytes=limit)).running
    gw = gateway_on(backend, server, settings=SETTINGS, max_message_bytes=limit)
    try:
        with httpx.Client(base_url=gw.url, timeout=30) as client:
            seed(client)
            for body in _search_answers_over_the_limit(client):
                assert f"message limit of {limit} bytes" in body["detail"]
    finally:
        gw.stop()


@pytest.mark.parametrize("backend", GATEWAY_BACKENDS)
def test_a_body_over_the_limit_is_413_request_too_large_however_it_is_sent(
    backend, make_server, monkeypatch
):
    """A chunked body over the limit got reason RESOURCE_EXHAUSTED (it was
    read whole, then refused by the service's message limit), one with a Content-Length
    REQUEST_TOO_LARGE. Both are 413 REQUEST_TOO_LARGE now, the chunked one refused as soon as
    the bytes read pass the limit. The limit is scaled down (the mechanism of the 64 MiB one).
    """
    from workplace_env.gateway import translate

    monkeypatch.setattr(translate, "MAX_BODY_BYTES", 64 * 1024)
    gw = gateway_on(backend, make_server().running)
    big = json.dumps({**ROW, "prompt": "x" * 200_000}).encode()

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(big), 16 * 1024):
            yield big[start : start + 16 * 1024]

    try:
        with httpx.Client(base_url=gw.url, timeout=30) as client:
            for content in (big, chunks()):
                answer = client.post("/seed_session", content=content, headers=JSON_CT)
                assert answer.status_code == 413, answer.text
                assert answer.json()["reason"] == "REQUEST_TOO_LARGE"
                assert answer.json()["failure_kind"] == "request_too_large"
                assert "retry-after" not in answer.headers
            assert client.post("/seed_session", json=ROW).status_code == 200
    finally:
        gw.stop()


def test_over_a_server_with_a_larger_limit_a_body_is_413_and_an_answer_502_naming_the_limit(
    make_server, monkeypatch
):
    """Behind a gateway whose SDK client's limit (64 MiB) is under the server's, a body
    between the two is 413 naming the gateway's limit, as any body over it; an answer between
    them (sent by the server, too large for the gateway's client; the request was fine and the
    call ran) is RESPONSE_TOO_LARGE naming the size and its limit, not REQUEST_TOO_LARGE with
    gRPC's text, so the gateway answers 502 as for the server's own refusal of an answer (the
    same on a retry with the call's id). Scaled: SDK 64 KiB, server 1 MiB."""
    from workplace_env.gateway import translate
    from workplace_env_client import CapacityError, channel

    limit = 64 * 1024
    monkeypatch.setattr(channel, "MAX_MESSAGE_BYTES", limit)  # the gateway's SDK client's
    monkeypatch.setattr(translate, "MAX_BODY_BYTES", limit)  # the gateway's own: the same
    server = make_server(settings=Settings(max_message_bytes=1024 * 1024)).running
    gw = gateway_on("remote", server, settings=SETTINGS)
    try:
        with httpx.Client(base_url=gw.url, timeout=30) as client:
            answer = client.post("/seed_session", json={**ROW, "prompt": "x" * 200_000})
            assert answer.status_code == 413, answer.text
            assert answer.json()["reason"] == "REQUEST_TOO_LARGE"
            assert f"the gateway's limit of {limit} bytes" in answer.json()["detail"]
            seed(client)
            for body in _search_answers_over_the_limit(client):
                assert f"over this client's message limit of {limit} bytes" in body["detail"]
            assert client.post("/email_search_emails", json={"query": "zz"}).status_code == 200
        with EnvironmentClient(f"127.0.0.1:{server.port}") as sdk:
            sdk.seed("direct", ("r-direct", 0), ("unit", "t1"), {"id": "t1"})
            for _ in range(3):
                sdk.call_tool_raw("direct", "email_send_email", json.dumps(BIG_MAIL))
            with pytest.raises(CapacityError) as err:
                sdk.call_tool("direct", "email_search_emails", {"query": "aaaa"})
            assert err.value.reason == "RESPONSE_TOO_LARGE"
            assert re.fullmatch(
                rf"the answer is \d+ bytes, over this client's message limit of {limit} bytes; .*",
                err.value.message,
            )
    finally:
        gw.stop()


@pytest.mark.parametrize(
    "path", ["/verify", "/seed_session", "/health", "/docs", "/email_search_emails"]
)
def test_an_mcp_path_colliding_with_a_gateway_route_is_refused_naming_it(path):
    """``--mcp-path /verify`` (or a tool's route) was accepted, and one of
    the two endpoints then never answered."""
    with pytest.raises(ValueError, match=f"collides with the gateway's route {re.escape(path)}"):
        GatewaySettings(mcp_path=path)
    with pytest.raises(ConfigError, match=r"mcp_path \(from --mcp-path\) .* collides"):
        load_settings({"mcp_path": path}, None, {})
    assert load_settings({"mcp_path": f"{path.rstrip('/')}/mcp"}, None, {})[0].mcp_path


def test_the_routes_an_mcp_path_may_not_take_are_the_gateway_s_own(sdk):
    """``config.GATEWAY_ROUTES`` is the app's list of fixed routes (the tool route aside)."""
    app = gateway_app.create_app(sdk, GatewaySettings(mcp_path=""))
    fixed = {r.path for r in app.routes if "{" not in r.path}
    assert fixed == set(GATEWAY_ROUTES)


@pytest.mark.parametrize(
    ("row_id", "json_type"), [([1], "array"), (1.5, "number"), (True, "boolean")]
)
def test_a_typed_seed_of_a_row_whose_id_is_neither_text_nor_an_integer_is_422(
    http, row_id, json_type
):
    sid = f"typed-{uuid.uuid4().hex}"
    refused = http.post("/seed_session", json=typed(sid, task={**ROW, "id": row_id}))
    assert refused.status_code == 422
    assert (
        f"must be a string or an integer, not {json_type}" in refused.text and "id" in refused.text
    )


def test_a_legacy_seed_keeps_a_row_whatever_its_id_as_the_reference_does(http):
    """The reference seeds any row; an id the service cannot carry is left out of the task."""
    assert http.post("/seed_session", json={**ROW, "id": [1]}).status_code == 200
    assert http.post("/seed_session", json={**ROW, "id": 7}).status_code == 200
