"""The gateway's fast paths answer exactly as the slow ones: the SDK client in-process as the
SDK over gRPC (values and typed errors, counts and logs), orjson as the standard library (bytes),
the cookie cache as a full signature check (expiry included), a direct route as FastAPI's handler
(status, body, headers)."""

from __future__ import annotations

import contextvars
import functools
import json
import logging
import math
import uuid
from collections.abc import Iterator
from typing import Annotated

import pytest
from fastapi import Depends, FastAPI, Request, routing
from fastapi.responses import Response
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.responses import JSONResponse

from tests.helpers import local
from workplace_env import wire
from workplace_env.gateway import CookieCodec, cookies, fastjson
from workplace_env.gateway.routes.direct import DirectRoute
from workplace_env.gateway.translate import HttpProblem, json_response
from workplace_env.server.in_process import InProcessTransport, in_process_client
from workplace_env.sessions import SessionConfig
from workplace_env_client import EnvironmentClient, WorkplaceEnvError
from workplace_env_client.transport import GrpcTransport, Transport

SEND = '{"recipient": "a@b.com", "subject": "s", "body": "b"}'


# -- the two transports --------------------------------------------------------------------------


pytestmark = pytest.mark.server(config=SessionConfig(max_sessions=3))


@pytest.fixture(scope="module")
def backends(server) -> Iterator[tuple[EnvironmentClient, EnvironmentClient]]:
    """The SDK over gRPC, and over the server's servicer in-process (4,096-byte limit)."""
    with EnvironmentClient(local(server.port), timeout_s=20, max_attempts=1) as sdk:
        yield sdk, in_process_client(server, max_message_bytes=4096)


def test_the_two_clients_differ_only_by_their_transport(backends):
    remote, local = backends
    assert type(remote) is type(local) is EnvironmentClient
    assert isinstance(remote.transport, GrpcTransport) and remote.transport.blocking
    assert isinstance(local.transport, InProcessTransport) and not local.transport.blocking
    assert all(isinstance(c.transport, Transport) for c in backends)
    assert local.channel is None and local.stub is None
    with pytest.raises(ValueError, match="gRPC channel"):
        local.admin()


def outcome(fn, *args, **kwargs):
    """A call's answer, or its typed error as comparable values."""
    try:
        return ("ok", fn(*args, **kwargs))
    except WorkplaceEnvError as exc:
        return (type(exc).__name__, exc.code, exc.reason, exc.violations, exc.retry_after_s)


def episode_on(backend, sid: str) -> list:
    """One episode with every kind of answer and error, ids made unique per client."""
    ep, task = (f"r-{sid}", 0), {"id": "t1", "ground_truth": [("email_send_email", SEND)]}
    out = [
        outcome(backend.seed, sid, ep, ("fast", "t1"), task),
        outcome(backend.seed, sid, (f"other-{sid}", 0), ("fast", "t1"), task),  # conflict
        outcome(backend.seed, sid, ep, ("fast", "t1"), {"id": "t1", "environment_name": "x"}),
        outcome(backend.call_tool_raw, sid, "email_send_email", SEND, "c1"),
        outcome(backend.call_tool_raw, sid, "email_send_email", SEND, "c1"),  # replay
        outcome(backend.call_tool_raw, sid, "email_search_emails", "{}", "c1"),  # reused id
        outcome(backend.call_tool_raw, sid, "no_such_tool", "{}"),
        outcome(backend.call_tool_raw, sid, "email_search_emails", "[1]"),
        outcome(backend.call_tool_raw, f"lost-{sid}", "email_search_emails", "{}"),
        outcome(backend.call_tool_raw, "", "email_search_emails", "{}"),
        outcome(backend.verify, sid, [("email_send_email", SEND)]),
        outcome(backend.verify, sid, response_output="{"),
        outcome(backend.verify, sid, response_output=[], ground_truth_json="3"),
        outcome(backend.verify, f"lost-{sid}", []),
        outcome(backend.close_session, sid, (f"other-{sid}", 0)),
        outcome(backend.close_session, sid, ep),
        outcome(backend.close_session, sid, ep),
        outcome(backend.call_tool_raw, sid, "email_search_emails", "{}"),  # closed
        outcome(backend.seed, sid, ep, ("fast", "t1"), task),  # closed
        outcome(backend.seed_legacy, f"legacy-{sid}", {"id": "t2"}),
        outcome(backend.close_session, f"legacy-{sid}", ("legacy", 0)),
        outcome(backend.close_session, f"never-{sid}", ("legacy", 0)),
        outcome(backend.list_tools),
    ]

    def scrub(value):  # the ids differ per client by construction
        return json.loads(json.dumps(value, default=repr).replace(sid, "SID"))

    return [scrub(o) for o in out]


def test_in_process_client_answers_as_the_sdk_over_grpc(backends):
    remote, local = backends
    assert episode_on(local, uuid.uuid4().hex) == episode_on(remote, uuid.uuid4().hex)


def test_in_process_client_refuses_what_grpc_refuses(backends, server):
    remote, local = backends
    seeded = [f"cap-{i}" for i in range(3 - server.store.live_count())]
    for sid in seeded:
        remote.seed_legacy(sid, {"id": "t"})
    try:
        full = [outcome(b.seed_legacy, f"cap-x-{i}", {"id": "t"}) for i, b in enumerate(backends)]
        assert full[0] == full[1] and full[0][0] == "CapacityError"
        assert full[0][2] == "CAPACITY_EXHAUSTED"
    finally:
        for sid in seeded:
            remote.close_session(sid, ("legacy", 0))
    big = outcome(local.seed_legacy, "big", {"id": "t", "prompt": "x" * 5000})
    # gRPC's message limit sends no ErrorInfo; the SDK names its registry row
    assert big[0] == "CapacityError" and big[2] == "REQUEST_TOO_LARGE"


def test_in_process_calls_are_counted_and_logged_as_rpcs(server, caplog):
    """The server's own counting: by code, a failure also by its reason, and a WARNING line."""
    local = in_process_client(server)
    ok = server.metrics.rpcs.labels("ListTools", "OK")
    lost = server.metrics.rpcs.labels("CallTool", "NOT_FOUND")
    reason = server.metrics.errors.labels("CallTool", "SESSION_LOST")
    before = (ok._value.get(), lost._value.get(), reason._value.get())
    local.list_tools()
    sid = f"never-{uuid.uuid4().hex}"
    with caplog.at_level(logging.WARNING, logger="workplace_env.rpc"):
        assert outcome(local.call_tool_raw, sid, "email_search_emails", "{}")[2] == "SESSION_LOST"
    after = (ok._value.get(), lost._value.get(), reason._value.get())
    assert [b - a for a, b in zip(before, after, strict=True)] == [1, 1, 1]
    logged = [json.loads(r.getMessage()) for r in caplog.records if r.name == "workplace_env.rpc"]
    assert logged == [
        {
            "method": "CallTool",
            "code": "NOT_FOUND",
            "duration_ms": logged[0]["duration_ms"],
            "resources_session_id": sid,
            "reason": "SESSION_LOST",
        }
    ]


def test_an_in_process_tool_call_without_a_call_id_records_none(backends, server):
    """Nothing in-process is sent twice, so no idempotency key is made for it; over gRPC the
    SDK makes one (T6)."""
    remote, local = backends
    calls = {}
    for name, client in (("remote", remote), ("local", local)):
        sid = f"{name}-{uuid.uuid4().hex}"
        client.seed_legacy(sid, {"id": "t"})
        client.call_tool_raw(sid, "email_search_emails", "{}")
        calls[name] = len(server.store.table.sessions[sid].calls)
        client.close_session(sid, ("legacy", 0))
    assert calls == {"remote": 1, "local": 0}


# -- JSON ----------------------------------------------------------------------------------------

TEXTS = [
    '{"a": 1, "a": 2}',
    '{"n": 123456789012345678901234567890, "m": -9223372036854775809}',
    '{"f": [1e-05, 1e16, 0.1, -0.0, 1E5, 2.5e-324]}',
    '{"nan": NaN, "inf": -Infinity, "big": 1e400}',
    '{"s": "\\ud800 lone", "t": "\\u2028 é 😀 \\u0000"}',
    "[" * 2000 + "]" * 2000,
    '{"a": }',
    "",
    "  [1, 2]  ",
]


def _answer(fn, text):
    try:
        return ("ok", repr(fn(text)))
    except RecursionError:
        return ("RecursionError",)
    except ValueError as exc:
        return ("ValueError", str(exc))


@pytest.mark.parametrize("constants", [False, True])
@pytest.mark.parametrize("text", TEXTS)
def test_loads_is_the_wire_rule_over_json_loads(text, constants):
    """Same refusals as wire.loads, and json.loads' value for what it accepts."""
    ctx = contextvars.copy_context()
    mine = ctx.run(_answer, functools.partial(fastjson.loads, constants=constants), text)
    assert mine == _answer(functools.partial(wire.loads, constants=constants), text)
    if mine[0] == "ok":
        assert mine == _answer(json.loads, text)


def _starlette(content) -> bytes | str:
    try:
        return JSONResponse(content).body
    except ValueError as exc:
        return str(exc)


def _fast(content) -> bytes | str:
    try:
        return fastjson.dumps(content)
    except ValueError as exc:
        return str(exc)


@pytest.mark.parametrize(
    "text",
    [t for t in TEXTS if _answer(functools.partial(wire.loads, constants=True), t)[0] == "ok"],
)
def test_dumps_of_a_parsed_body_is_starlettes_bytes(text):
    def parse_then_dump():  # constants=True: what the tool route accepts
        return _fast(fastjson.loads(text, constants=True))

    assert contextvars.copy_context().run(parse_then_dump) == _starlette(json.loads(text))


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_dumps_of_any_parsed_body_is_starlettes_bytes(value):
    text = json.dumps(value)

    def parse_then_dump():
        return _fast(fastjson.loads(text))

    assert contextvars.copy_context().run(parse_then_dump) == _starlette(json.loads(text))


@pytest.mark.parametrize("extra", [0.0, 1.0, 7, "text", None, True])
def test_dumps_of_what_the_gateway_adds_is_starlettes_bytes(extra):
    def run():
        body = fastjson.loads('{"response": {"output": [], "temperature": 0.7}}')
        return _fast({**body, "reward": extra})

    assert contextvars.copy_context().run(run) == _starlette(
        {"response": {"output": [], "temperature": 0.7}, "reward": extra}
    )


def test_after_a_nan_body_dumps_refuses_nan_as_starlette_does_or_passes_it_on_when_asked():
    def run():
        body = fastjson.loads('{"x": NaN}', constants=True)  # only json.loads makes a NaN
        return _fast(body), fastjson.dumps([math.inf, body["x"]], allow_nan=True)

    refused, passed = contextvars.copy_context().run(run)
    assert refused == _starlette({"x": math.nan}) and isinstance(refused, str)
    assert passed == b"[Infinity,NaN]"


# -- the cookie cache ----------------------------------------------------------------------------


def test_a_cached_cookie_still_expires(monkeypatch):
    codec = CookieCodec("k", max_age_s=100)
    now = [1_800_000_000.0]
    monkeypatch.setattr(cookies.time, "time", lambda: now[0])
    monkeypatch.setattr("itsdangerous.timed.time.time", lambda: now[0])
    value = codec.encode({"session_id": "s1"})
    assert codec.decode(value) == {"session_id": "s1"}  # now cached
    got = codec.decode(value)
    got["session_id"] = "changed"  # the caller's copy, not the cache's
    assert codec.decode(value) == {"session_id": "s1"}
    now[0] += 101
    assert codec.decode(value) == {}
    assert CookieCodec("other", 100).decode(value) == {}


def test_cookie_caches_stay_bounded():
    codec = CookieCodec("k", max_age_s=100, cache_size=8)
    for i in range(50):
        assert codec.decode(codec.encode({"session_id": f"s{i}"})) == {"session_id": f"s{i}"}
    assert len(codec._decoded) <= 8 and len(codec._encoded) <= 8


# -- FastAPI's handler, skipped where it has nothing to resolve ------------------------------------


async def _path_of(request: Request) -> str:
    """A dependency of the request alone (as the gateway's state is)."""
    return request.url.path


async def _query_count(q: int = 0) -> int:
    """A dependency with a parameter to validate."""
    return q


def _routes_app(route_class):
    app = FastAPI()
    app.router.route_class = route_class

    @app.exception_handler(HttpProblem)
    async def _problem(request: Request, exc: HttpProblem) -> Response:
        return exc.response

    @app.post("/plain")
    async def plain(request: Request) -> Response:
        return json_response({"body": (await request.body()).decode(), "q": request.url.query})

    @app.post("/refused")
    async def refused(request: Request) -> Response:
        raise HttpProblem(json_response({"failure_kind": "x"}, 409, {"retry-after": "1"}))

    @app.post("/typed/{count}")
    async def typed(count: int, request: Request) -> Response:  # FastAPI validates the int
        return json_response({"count": count})

    @app.get("/dict")
    async def as_dict(q: int = 1) -> dict[str, int]:  # FastAPI serializes, validates q
        return {"q": q}

    @app.post("/of_request")
    async def of_request(request: Request, path: Annotated[str, Depends(_path_of)]) -> Response:
        return json_response({"path": path})

    @app.post("/of_two")  # more than one dependency: FastAPI's handler
    async def of_two(
        request: Request,
        path: Annotated[str, Depends(_path_of)],
        again: Annotated[str, Depends(_path_of, use_cache=False)],
    ) -> Response:
        return json_response({"paths": [path, again]})

    @app.post("/of_query")
    async def of_query(request: Request, q: Annotated[int, Depends(_query_count)]) -> Response:
        return json_response({"q": q})

    @app.post("/{name}")
    async def named(name: str, request: Request) -> Response:
        return json_response({"name": name})

    return app


def test_direct_routes_answer_as_fastapis_handler(monkeypatch):
    solved: list[str] = []
    real = routing.solve_dependencies

    async def counting(*args, **kwargs):
        solved.append(kwargs["request"].url.path)
        return await real(*args, **kwargs)

    monkeypatch.setattr(routing, "solve_dependencies", counting)
    requests = [
        ("post", "/plain?a=1", b'{"x": 1}'),
        ("post", "/refused", b"{}"),
        ("post", "/typed/3", b""),
        ("post", "/typed/three", b""),
        ("get", "/dict?q=2", None),
        ("get", "/dict?q=two", None),
        ("post", "/a%20tool", b"{}"),
        ("get", "/plain", None),
        ("post", "/of_request", b""),
        ("post", "/of_two", b""),
        ("post", "/of_query?q=3", b""),
        ("post", "/of_query?q=three", b""),
    ]
    answers = {}
    for route_class in (routing.APIRoute, DirectRoute):
        solved.clear()
        with TestClient(_routes_app(route_class)) as client:
            answers[route_class] = [
                (r.status_code, r.content, sorted(r.headers.items()))
                for r in (client.request(m, p, content=b) for m, p, b in requests)
            ]
        if route_class is DirectRoute:  # only the routes with something to resolve
            assert sorted(set(solved)) == [
                "/dict",
                "/of_query",
                "/of_two",
                "/typed/3",
                "/typed/three",
            ]
        else:
            assert len(solved) == 11  # every matched route (GET /plain is a 405)
    assert answers[DirectRoute] == answers[routing.APIRoute]
