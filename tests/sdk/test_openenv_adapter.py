"""The OpenEnv adapter (workplace_env_client.openenv), driven by OpenEnv 0.10's own harness:
its rollout collector and TRL rollout function with its OpenAI client against a stand-in model,
and its in-process MCP bridge."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest
from openenv.core.harness import (
    HarnessRunLimits,
    MCPHarnessAdapter,
    ResourceSession,
    ResourceSessionFactory,
    SessionMCPBridge,
    build_harness_rollout_func,
)
from openenv.core.harness.collect import CollectRunner, RolloutSerializer, build_model_step
from openenv.core.llm_client import OpenAIClient

from tests.model_standin import Calls, Hold, StandInModel, Text
from workplace_env.config import Settings
from workplace_env.taskgen import generate_tasks
from workplace_env_client import ArgumentError, SessionClosedError, SessionLeftOpenWarning
from workplace_env_client.openenv import WorkplaceSessionFactory

ADMIN_TOKEN = "openenv-adapter-admin"
CONCURRENT = 24  # above the 16 sessions older openenv-core servers held by default


@pytest.fixture
def served(make_server):
    return make_server(settings=Settings(admin_token=ADMIN_TOKEN), admin_token=ADMIN_TOKEN)


@pytest.fixture
def rows(sandbox) -> list[dict[str, Any]]:
    """Generated tasks on the generated (default) sandbox, as a dataset's rows."""
    return generate_tasks(sandbox, CONCURRENT, seed=27)


def oracle_script(row: dict[str, Any], drop_first: bool = False) -> list[Any]:
    """The stand-in model's turns for ``row``: its ground-truth calls (less the first one when
    ``drop_first``), then a text answer."""
    calls = [(c["name"], c["arguments"]) for c in row["ground_truth"]]
    return [Calls(calls[1 if drop_first else 0 :]), Text()]


def model_step_for(model: StandInModel):
    """OpenEnv's model step over its own OpenAI client, pointed at the stand-in."""
    return build_model_step(OpenAIClient(model.base_url, None, model="stand-in"))


def nothing_open(served) -> bool:
    return served.store.live_count() == 0 and served.admin.export_sessions().snapshots == []


def test_the_factory_and_its_sessions_are_openenvs_types(served, rows):
    factory = WorkplaceSessionFactory(served.client)
    assert isinstance(factory, ResourceSessionFactory)
    session = factory.create(task=rows[0], episode_id="ep-types")
    try:
        assert isinstance(session, ResourceSession)
        assert session.episode.episode == ("ep-types", 0)
        assert session.initial_messages() == [
            {"role": "system", "content": rows[0]["system"]},
            {"role": "user", "content": rows[0]["prompt"]},
        ]
    finally:
        session.close()
    assert nothing_open(served)


def test_collected_oracle_episodes_score_one_perturbed_zero(served, rows, tmp_path):
    oracle, perturbed = rows[:3], rows[3:6]
    scripts = {r["prompt"]: oracle_script(r) for r in oracle}
    scripts |= {r["prompt"]: oracle_script(r, drop_first=True) for r in perturbed}
    with StandInModel(scripts) as model:
        runner = CollectRunner(
            session_factory=WorkplaceSessionFactory(served.client),
            harness_adapter=MCPHarnessAdapter(),
            serializer=RolloutSerializer(tmp_path),
            tasks=oracle + perturbed,
            limits=HarnessRunLimits(max_turns=4),
        )
        result = runner.run(model_step=model_step_for(model), num_episodes=6)
    assert (result.num_collected, result.num_failed) == (6, 0)
    records = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["reward"] for r in records] == [1.0] * 3 + [0.0] * 3
    assert [r["verify_metrics"]["tool_calls"] for r in records] == [
        len(r["ground_truth"]) - (i >= 3) for i, r in enumerate(oracle + perturbed)
    ]
    with served.client.session(oracle[0]) as fresh:  # the same calls on a fresh session
        expected = [
            served.client.call_tool_raw(fresh.id, c["name"], c["arguments"])
            for c in oracle[0]["ground_truth"]
        ]
    assert [m["content"] for m in records[0]["messages"] if m["role"] == "tool"] == expected
    assert nothing_open(served)


def test_bad_arguments_answer_the_tools_error_text(served, rows):
    session = WorkplaceSessionFactory(served.client).create(task=rows[0])
    bridge = SessionMCPBridge(session)

    def call(name: str, arguments: dict[str, Any]) -> Any:
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        answer = bridge.handle_request(request | {"params": {"name": name, "arguments": arguments}})
        return answer["result"]["data"]

    assert call("email_get_email_information_by_id", {"field": "body"}) == (
        '"Email ID not provided."'
    )
    assert call("email_delete_email", {"email_id": "nope"}) == '"Email not found."'
    assert call("email_search_emails", {"bogus": 1}) == (
        "\"Error executing tool 'email_search_emails': EmailTool.search_emails() got an"
        " unexpected keyword argument 'bogus'\""
    )
    assert session.verify([]).env_reward == 0.0
    session.close()
    assert nothing_open(served)


def test_the_tool_list_is_listtools(served):
    tools = served.client.list_tools()
    session = WorkplaceSessionFactory(served.client).create(task={"id": "t", "prompt": "p"})
    listed = SessionMCPBridge(session).handle_request(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    )["result"]["tools"]
    session.close()
    assert len(listed) == 27
    assert listed == [
        {"name": t["name"], "description": t["description"], "inputSchema": t["parameters"]}
        for t in tools
    ]


def test_concurrent_rollouts_through_the_trl_rollout_function(served, rows):
    """OpenEnv's TRL rollout function, one per thread: every session is open at once (each
    model's first answer is held until all have arrived), then all score 1.0."""
    holds = [(threading.Event(), threading.Event()) for _ in rows]
    scripts = {
        r["prompt"]: [Hold(arrived, release, then=oracle_script(r)[0]), Text()]
        for r, (arrived, release) in zip(rows, holds, strict=True)
    }
    with StandInModel(scripts) as model:
        model_step = model_step_for(model)
        rollout = build_harness_rollout_func(
            session_factory=WorkplaceSessionFactory(served.client),
            harness_adapter=MCPHarnessAdapter(),
            model_step_builder=lambda trainer, session: model_step,
            limits=HarnessRunLimits(max_turns=4),
        )
        with ThreadPoolExecutor(CONCURRENT) as pool:
            futures = [pool.submit(rollout, [row], None) for row in rows]
            for arrived, _ in holds:
                assert arrived.wait(timeout=60)
            assert served.store.live_count() == CONCURRENT
            for _, release in holds:
                release.set()
            rewards = [f.result(timeout=60)["env_reward"] for f in futures]
    assert rewards == [[1.0]] * CONCURRENT
    assert nothing_open(served)


def test_a_lost_session_verifies_as_the_masked_sample(served, rows):
    session = WorkplaceSessionFactory(served.client).create(task=rows[0])
    for call in rows[0]["ground_truth"]:
        session.call_tool(call["name"], json.loads(call["arguments"]))
    assert served.admin.retire_session(session.episode.session_id) is True
    verified = session.verify([])
    assert verified.env_reward == 0.0 and verified.done
    assert verified.metrics["mask_sample"] is True
    assert verified.metrics["failure_kind"] == "session_lost"
    session.close()
    assert nothing_open(served)


def test_a_dropped_session_closes_ours_and_warns_once(served, rows):
    factory = WorkplaceSessionFactory(served.client)
    session = factory.create(task=rows[0])
    session.call_tool("email_search_emails", {"query": "budget"})
    sid = session.episode.session_id
    assert served.store.live_count() == 1
    with pytest.warns(SessionLeftOpenWarning) as warned:
        del session
        gc.collect()
    assert [str(w.message) for w in warned if w.category is SessionLeftOpenWarning] == [
        f"session {sid!r} was closed after its episode was left unfinished (dropped "
        "unclosed): the episode is not scored"
    ]
    assert nothing_open(served)
    with pytest.raises(SessionClosedError) as refused:
        served.raw.call_tool_raw(sid, "email_search_emails", {"query": "budget"})
    assert refused.value.code == grpc.StatusCode.NOT_FOUND


def test_a_closed_session_ends_without_a_warning(served, rows):
    with warnings.catch_warnings():
        warnings.simplefilter("error", SessionLeftOpenWarning)
        session = WorkplaceSessionFactory(served.client).create(task=rows[0])
        session.verify([])
        session.close()
        del session
        gc.collect()
    assert nothing_open(served)


def test_closed_sessions_and_bad_tasks_are_refused_leaving_nothing_open(served, rows):
    factory = WorkplaceSessionFactory(served.client)
    session = factory.create(task=rows[0])
    with pytest.raises(ArgumentError, match=r"arguments\.query"):
        session.call_tool("email_search_emails", {"query": {1, 2}})
    answer = SessionMCPBridge(session).handle_request(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "email_search_emails", "arguments": {"query": {3}}},
        }
    )
    assert answer["error"]["code"] == -32602 and "arguments.query" in answer["error"]["message"]
    assert session.episode.calls == []
    session.close()
    session.close()
    with pytest.raises(RuntimeError, match="closed"):
        session.call_tool("email_search_emails", {"query": "budget"})
    with pytest.raises(RuntimeError, match="closed"):
        session.verify([])
    with pytest.raises(ArgumentError, match=r"task"):
        factory.create(task=None)
    with pytest.raises(ArgumentError, match=r"task\.ground_truth"):
        factory.create(task={"id": "x", "ground_truth": 5})
    for own in ({}, {"input": 5}):  # refused before the seed: nothing to close, no warning
        with warnings.catch_warnings():
            warnings.simplefilter("error", SessionLeftOpenWarning)
            with pytest.raises(ArgumentError, match=r"responses_create_params\.input"):
                factory.create(task={"id": "x", "responses_create_params": own})
    assert nothing_open(served)
    with pytest.raises(ValueError, match="reset"):
        WorkplaceSessionFactory(served.client, [{"name": "reset"}])


def test_without_openenv_the_import_names_the_extra():
    code = "import sys; sys.modules['openenv'] = None; import workplace_env_client.openenv"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "ImportError: workplace_env_client.openenv needs OpenEnv 0.10: install the SDK's" in (
        proc.stderr
    )
