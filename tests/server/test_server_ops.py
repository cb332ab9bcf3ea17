"""Server operations: health, reflection, drain on shutdown, the ``serve`` console script."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
import httpx
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from tests.helpers import (
    EP,
    HANG_S,
    NOT_SERVING,
    SERVING,
    TASK,
    TID,
    WRITE,
    ServeProcess,
    emails,
    health,
    local,
    wait,
)
from workplace_env.server.app import SERVICE_NAME
from workplace_env_client import EnvironmentClient, UnavailableError

SENT = "Email sent successfully."


def test_fresh_server_is_serving(server):
    assert health(local(server.port)) == SERVING
    assert health(local(server.port), SERVICE_NAME) == SERVING


def test_reflection_lists_services(server):
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        responses = stub.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5
        )
        names = {s.name for r in responses for s in r.list_services_response.service}
    assert {SERVICE_NAME, "grpc.health.v1.Health"} <= names


def test_draining_refuses_new_seeds_but_serves_live_sessions(make_server):
    served = make_server()
    server, client = served.running, served.client
    task = {"id": "t", "ground_truth": []}
    client.seed("live", ("r", 0), ("u", "t"), task)
    server.health.enter_graceful_shutdown()
    server.store.start_draining()
    assert health(served.target) == NOT_SERVING
    with pytest.raises(UnavailableError) as err:
        client.seed("new", ("r2", 0), ("u", "t"), task)
    assert err.value.reason == "DRAINING"
    assert client.call_tool("live", "company_directory_find_email_address", {"name": "zzzz"}) == []


def _held_body(sent: threading.Event, release: threading.Event) -> Iterator[bytes]:
    """A tool body sent in two parts: the second once ``release`` is set (a call in flight)."""
    yield b'{"recipient": "a@b.com", "subject": "in flight", '
    sent.set()
    wait(release)
    yield b'"body": "b"}'


def test_serve_command_drains_on_sigterm():
    """What a user relies on when ``serve`` gets SIGTERM (CONTRACT X2): from then on health is
    NOT_SERVING and ``/ready`` 503, a new seed is refused (UNAVAILABLE, HTTP 503), sessions
    already admitted are served, a call in flight finishes with its real output, and the
    process exits 0. ``--drain-delay-s`` keeps it listening while the test looks."""
    serve = ServeProcess(
        "--http-address", "127.0.0.1:0", "--drain-delay-s", "5", "--grace-s", str(HANG_S)
    ).ready()
    body_sent, release = threading.Event(), threading.Event()
    try:
        with (
            EnvironmentClient(serve.target, timeout_s=HANG_S, max_attempts=1) as client,
            httpx.Client(base_url=serve.url, timeout=HANG_S) as agent,
            httpx.Client(base_url=serve.url, timeout=HANG_S) as probe,
            ThreadPoolExecutor(1) as pool,
        ):
            client.seed("live", EP, TID, TASK)
            assert agent.post("/seed_session", json=TASK).status_code == 200
            assert probe.get("/ready").status_code == 200
            in_flight = pool.submit(
                agent.post,
                f"/{WRITE[0]}",
                content=_held_body(body_sent, release),
                headers={"content-type": "application/json"},
            )
            wait(body_sent)
            serve.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + HANG_S
            while health(serve.target) != NOT_SERVING:  # the signal is taken
                assert time.monotonic() < deadline, "still SERVING after SIGTERM"
            ready = probe.get("/ready")
            assert ready.status_code == 503
            assert (ready.json()["status"], ready.json()["reason"]) == ("draining", "DRAINING")
            seeded = probe.post("/seed_session", json=TASK)
            assert seeded.status_code == 503 and seeded.json()["reason"] == "DRAINING"
            with pytest.raises(UnavailableError) as err:
                client.seed("new", ("rollout-new", 0), TID, TASK)
            assert err.value.reason == "DRAINING"
            assert client.call_tool("live", *WRITE) == SENT
            assert emails(client, "live") == 1
            release.set()
            answer = in_flight.result(HANG_S)
            assert (answer.status_code, answer.json()) == (200, {"output": SENT})
            # the drain waits for the admitted episodes: once both close, the process exits
            assert client.close_session("live", EP) == "CLOSED"
            assert agent.post("/close_session", json={}).json() == {"outcome": "CLOSED"}
        assert serve.proc.wait(HANG_S) == 0
    finally:
        release.set()
        serve.stop()


def test_serve_cohosts_the_http_gateway():
    serve = ServeProcess("--http-address", "127.0.0.1:0").ready()
    try:
        with httpx.Client(base_url=serve.url, timeout=10) as http:
            assert set(http.post("/seed_session", json={"task_id": 1}).json()) == {"mcp"}
            out = http.post("/company_directory_find_email_address", json={"name": "zzzz"})
            assert out.content == b'{"output":[]}'
        serve.proc.send_signal(signal.SIGTERM)
        assert serve.proc.wait(timeout=30) == 0
    finally:
        serve.stop()


def test_serve_drains_and_exits_on_signals_arriving_together():
    """Stop signals arriving at once (NeMo's SIGINT with the parent-death SIGTERM of the
    NeMo entry, or a burst) each interrupt the previous one's handler: ``serve`` still drains
    and exits 0 (its handler takes no lock the interrupted code may hold)."""
    serve = ServeProcess("--http-address", "127.0.0.1:0").ready()
    try:
        for _ in range(5000):  # signals while the previous ones are being handled
            if serve.proc.poll() is not None:
                break
            serve.proc.send_signal(signal.SIGINT)
            serve.proc.send_signal(signal.SIGTERM)
        assert serve.proc.wait(timeout=30) == 0
    finally:
        serve.stop()
