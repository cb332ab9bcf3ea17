"""Server operations: health, reflection, drain on shutdown, the ``serve`` console script."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from workplace_env.sandbox.load import load_sandbox
from workplace_env.server.app import SERVICE_NAME, start_server
from workplace_env.sessions import SessionStore
from workplace_env_client import EnvironmentClient, UnavailableError


@pytest.fixture
def server():
    running = start_server(SessionStore(load_sandbox(None)), "127.0.0.1:0")
    yield running
    running.stop(grace_s=0.2)


def _health(port: int, service: str = "") -> int:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status


def test_fresh_server_is_serving(server):
    assert _health(server.port) == health_pb2.HealthCheckResponse.SERVING
    assert _health(server.port, SERVICE_NAME) == health_pb2.HealthCheckResponse.SERVING


def test_reflection_lists_services(server):
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        responses = stub.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5
        )
        names = {s.name for r in responses for s in r.list_services_response.service}
    assert {SERVICE_NAME, "grpc.health.v1.Health"} <= names


def test_draining_refuses_new_seeds_but_serves_live_sessions(server):
    client = EnvironmentClient(f"127.0.0.1:{server.port}")
    task = {"id": "t", "ground_truth": []}
    client.seed("live", ("r", 0), ("u", "t"), task)
    server.health.enter_graceful_shutdown()
    server.store.start_draining()
    assert _health(server.port) == health_pb2.HealthCheckResponse.NOT_SERVING
    with pytest.raises(UnavailableError) as err:
        client.seed("new", ("r2", 0), ("u", "t"), task)
    assert err.value.reason == "DRAINING"
    assert client.call_tool("live", "company_directory_find_email_address", {"name": "zzzz"}) == []
    client.close()


def test_serve_command_drains_on_sigterm(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "workplace_env.cli", "serve", "--address", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        line = proc.stderr.readline()  # "workplace-env serving on HOST:PORT"
        assert "serving on" in line, line
        port = int(line.rsplit(":", 1)[1])
        assert _health(port) == health_pb2.HealthCheckResponse.SERVING
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_serve_cohosts_the_http_gateway():
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workplace_env.cli",
            "serve",
            "--address",
            "127.0.0.1:0",
            "--http-address",
            "127.0.0.1:0",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert "serving on" in proc.stderr.readline()
        line = proc.stderr.readline()
        assert "HTTP gateway on" in line, line
        url = line.split("HTTP gateway on", 1)[1].strip()
        import httpx

        with httpx.Client(base_url=url, timeout=10) as http:
            assert http.post("/seed_session", json={"task_id": 1}).json() == {}
            out = http.post("/company_directory_find_email_address", json={"name": "zzzz"})
            assert out.content == b'{"output":[]}'
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
