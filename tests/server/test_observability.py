"""Prometheus metrics and JSON logs after real episodes."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.helpers import HANG_S, ServeProcess
from workplace_env.server.observability import start_metrics_server
from workplace_env_client import EnvironmentClient, SessionConflictError

TASK = {"id": "t", "ground_truth": []}


@pytest.fixture
def served(make_server):
    """A fresh server (its metrics start at zero) and a client."""
    served = make_server()
    return served.running, served.client


def _scrape(server) -> dict[str, float]:
    port = start_metrics_server(server.metrics, "127.0.0.1:0")
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def test_metrics_after_an_episode(served):
    server, client = served
    client.seed("m1", ("r", 0), ("u", "t"), TASK)
    client.call_tool("m1", "company_directory_find_email_address", {"name": "a"})
    client.verify("m1", [])
    with pytest.raises(SessionConflictError):
        client.seed("m1", ("other", 0), ("u", "t"), TASK)
    client.verify("ghost", [])
    live = _scrape(server)['workplace_env_sessions_live{state="verified"}']
    client.close_session("m1", ("r", 0))
    m = _scrape(server)
    assert live == 1.0
    assert m['workplace_env_rpc_total{code="OK",method="SeedSession"}'] == 1.0
    assert m['workplace_env_rpc_total{code="ALREADY_EXISTS",method="SeedSession"}'] == 1.0
    assert m['workplace_env_errors_total{method="SeedSession",reason="SESSION_CONFLICT"}'] == 1.0
    assert m['workplace_env_rpc_duration_seconds_count{method="CallTool"}'] == 1.0
    assert m["workplace_env_seeds_total"] == 1.0
    assert m['workplace_env_closes_total{outcome="closed"}'] == 1.0
    assert m["workplace_env_rewards_total"] == 1.0 and m["workplace_env_reward_sum_total"] == 1.0
    assert m["workplace_env_rewards_masked_total"] == 1.0
    assert m['workplace_env_sessions_live{state="verified"}'] == 0.0


def test_failed_rpc_is_logged_as_json_by_serve():
    """The real logging configuration of ``serve``: a failed RPC is one JSON line on stderr at
    WARNING; at the default level (INFO) a successful one writes nothing."""
    serve = ServeProcess().ready()
    try:
        with EnvironmentClient(serve.target, timeout_s=HANG_S, max_attempts=1) as client:
            client.seed("logged", ("r", 0), ("u", "t"), TASK)
            with pytest.raises(SessionConflictError):
                client.seed("logged", ("r2", 0), ("u", "t"), TASK)
        record = json.loads(serve.wait_line("SESSION_CONFLICT"))
        assert record["method"] == "SeedSession" and record["code"] == "ALREADY_EXISTS"
        assert record["reason"] == "SESSION_CONFLICT" and record["resources_session_id"] == "logged"
        assert record["level"] == "WARNING" and record["logger"] == "workplace_env.rpc"
        assert record["duration_ms"] >= 0 and record["ts"] > 0
        logged = [json.loads(line) for line in serve.lines]  # every line is JSON
        rpcs = [r["code"] for r in logged if r["logger"] == "workplace_env.rpc"]
        assert rpcs == ["ALREADY_EXISTS"]  # the OK seed: not at INFO
    finally:
        serve.stop()


def test_live_gauge_counts_every_live_state(served):
    """Restored, unclaimed sessions are live too (they were left out of the gauge)."""
    from workplace_env.sandbox.load import load_sandbox
    from workplace_env.server.app import start_server
    from workplace_env.server.observability import LIVE_STATES
    from workplace_env.sessions import SessionState, SessionStore

    assert set(LIVE_STATES) == {s.value.lower() for s in SessionState} - {"closed"}
    server, client = served
    for i in range(3):
        client.seed(f"g{i}", ("r", i), ("u", "t"), TASK)
    client.verify("g0", [])
    snapshots, _, _ = server.store.export(["g1", "g2"])
    other = start_server(SessionStore(load_sandbox(None)), "127.0.0.1:0")
    try:
        assert other.store.restore(snapshots) == 2
        m = _scrape(other)
        assert m['workplace_env_sessions_live{state="restored_unclaimed"}'] == 2.0
        assert m['workplace_env_sessions_live{state="seeded"}'] == 0.0
    finally:
        other.stop(grace_s=0.2)
    m = _scrape(server)
    assert m['workplace_env_sessions_live{state="seeded"}'] == 2.0
    assert m['workplace_env_sessions_live{state="verified"}'] == 1.0


def test_errors_of_the_co_hosted_gateway_are_counted_by_reason(make_server):
    """A co-hosted gateway's (and MCP's) calls that the service refused
    were counted in ``workplace_env_rpc_total`` by code but missing from
    ``workplace_env_errors_total``; they count by ``ErrorInfo`` reason as gRPC calls do."""
    import httpx

    from tests.helpers import gateway_on

    served = make_server()
    gateway = gateway_on("in_process", served.running)
    typed = {
        "resources_session_id": "obs-1",
        "episode_id": {"rollout_id": "r", "attempt": 0},
        "task_id": {"taskset": "u", "task_id": "t"},
        "task_data": TASK,
    }
    try:
        with httpx.Client(base_url=gateway.url, timeout=HANG_S) as http:
            assert http.post("/seed_session", json=typed).status_code == 200
            other = {**typed, "episode_id": {"rollout_id": "other", "attempt": 0}}
            assert http.post("/seed_session", json=other).status_code == 409
            bad = {**typed, "resources_session_id": "obs-2", "episode_id": {"rollout_id": "!"}}
            assert http.post("/seed_session", json=bad).status_code == 422
            close = {"resources_session_id": "obs-1", "episode_id": typed["episode_id"]}
            assert http.post("/close_session", json=close).status_code == 200
            answer = http.post("/email_send_email", json={})
            assert answer.status_code == 404 and answer.json()["reason"] == "SESSION_CLOSED"
    finally:
        gateway.stop()
    m = _scrape(served.running)
    assert m['workplace_env_rpc_total{code="ALREADY_EXISTS",method="SeedSession"}'] == 1.0
    assert m['workplace_env_errors_total{method="SeedSession",reason="SESSION_CONFLICT"}'] == 1.0
    assert m['workplace_env_rpc_total{code="INVALID_ARGUMENT",method="SeedSession"}'] == 1.0
    assert m['workplace_env_errors_total{method="SeedSession",reason="INVALID_REQUEST"}'] == 1.0
    assert m['workplace_env_errors_total{method="CallTool",reason="SESSION_CLOSED"}'] == 1.0


@pytest.mark.parametrize("path", ["/", "/healthz", "/anything", "/metrics/x", "/favicon.ico"])
def test_the_metrics_port_serves_only_its_metrics_path(served, path):
    """The metrics are at ``GET /metrics`` (a query string kept); any other path is 404."""
    server, _ = served
    port = start_metrics_server(server.metrics, "127.0.0.1:0")
    base = f"http://127.0.0.1:{port}"
    with urllib.request.urlopen(
        f"{base}/metrics?name[]=workplace_env_seeds_total", timeout=HANG_S
    ) as ok:
        assert ok.status == 200
        assert b"workplace_env_seeds_total" in ok.read()
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(base + path, timeout=HANG_S)
    assert refused.value.code == 404
    assert refused.value.read() == b"404 Not Found: the metrics are served at /metrics\n"
