"""NeMo Gym 0.7.0's own code, unmodified, against the HTTP gateway (issue 12, CONTRACT H1-H6).

NeMo Gym runs as a black box in its own Python 3.13 venv (tests/nemo): its conformance check,
its agents and environment servers collecting rollouts with default aggregation (a stand-in
model replays the recorded calls of rollouts_public.jsonl and the ground truths of
tasks_public.jsonl), its re-verification, and the official ``mcp`` client with the seed's MCP
metadata. The reference ``workplace_assistant`` resources server runs next to the gateway for
the comparisons (aggregate metrics, MCP shapes).

Everything shares one NeMo run (:func:`stack`): the servers start once (the slow part).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import WORKBENCH, needs_shared, read_jsonl
from tests.nemo.servers import (
    NemoStack,
    external_resources,
    legacy_agent,
    reference_resources,
    run_driver,
    simple_agent,
    single_agent_turn,
    stand_in_model,
)
from tests.nemo.venv import nemo_python

pytestmark = [needs_shared, pytest.mark.server(data="workbench")]

ROLLOUTS = read_jsonl(WORKBENCH / "rollouts_public.jsonl")
TASKS = read_jsonl(WORKBENCH / "tasks_public.jsonl")
REFERENCE = "reference"  # the reference resources server's instance name
TYPED_TASKSET = "workplace_assistant_typed"


def episodes() -> list[dict[str, Any]]:
    """Every rollout (its recorded calls and reward) and every task (its ground truth as the
    oracle's calls, reward 1.0), as ``{key, row, calls, reward}``."""
    out = [
        {
            "key": r["id"],
            "prompt": r["prompt"],
            "system": r["system"],
            "truth": r["ground_truth"],
            "category": "workplace_assistant_rollout",
            "calls": r["function_calls"],
            "reward": r["reward"],
        }
        for r in ROLLOUTS
    ]
    out += [
        {
            "key": t["id"],
            "prompt": t["prompt"],
            "system": t["system"],
            "truth": t["ground_truth"],
            "category": t["category"],
            "calls": t["ground_truth"],
            "reward": 1.0,
        }
        for t in TASKS
    ]
    return out


def dataset_row(index: int, episode: dict[str, Any], tools: list[Any]) -> dict[str, Any]:
    """A NeMo workplace_assistant dataset row (the shape of its example.jsonl)."""
    return {
        "id": index,
        "category": episode["category"],
        "environment_name": "workplace_assistant",
        "ground_truth": episode["truth"],
        "responses_create_params": {
            "input": [
                {"role": "system", "content": episode["system"]},
                {"role": "user", "content": episode["prompt"]},
            ],
            "tools": tools,
            "parallel_tool_calls": False,
            "metadata": {"ng_stand_in": episode["key"]},  # which recording the model replays
        },
    }


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("nemo")


@pytest.fixture(scope="module")
def inputs(workdir) -> dict[str, Any]:
    """The episodes, the recordings file and the flat dataset rows."""
    eps = episodes()
    tools = json.loads((WORKBENCH / "tool_schemas.json").read_text())
    recordings = workdir / "recordings.json"
    recordings.write_text(json.dumps({e["key"]: e["calls"] for e in eps}))
    rows = [dataset_row(i, e, tools) for i, e in enumerate(eps)]
    return {"episodes": eps, "recordings": recordings, "rows": rows}


@pytest.fixture(scope="module")
def stack(gateway, workdir, inputs) -> Iterator[NemoStack]:
    """One NeMo run: the gateway (as ``workplace_assistant``), the reference with MCP on, the
    stand-in model, simple_agent, and the legacy_agent, single_agent_turn_legacy and
    single_agent_turn environment servers."""
    servers = [
        external_resources(gateway.url),
        reference_resources(REFERENCE, mcp=True),
        stand_in_model(inputs["recordings"]),
        simple_agent(),
        legacy_agent("legacy_env"),
        single_agent_turn("typed_legacy_env", legacy=True),
        single_agent_turn("typed_env"),
    ]
    with NemoStack(nemo_python(), servers, workdir / "run") as running:
        yield running


def collect(stack: NemoStack, name: str, rows: list[dict[str, Any]], **routing: Any) -> Path:
    """``ng_collect_rollouts`` (default aggregation) of ``rows``; asserts exit 0."""
    source = write_jsonl(stack.workdir / f"{name}_in.jsonl", rows)
    output = stack.workdir / f"{name}.jsonl"
    result = stack.run_cli(
        ["ng_collect_rollouts"],
        {"input_jsonl_fpath": str(source), "output_jsonl_fpath": str(output), **routing},
    )
    assert result.returncode == 0, f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    return output


def rewards_by_key(output: Path) -> dict[str, float]:
    rows = read_jsonl(output)
    assert all(not r.get("_ng_failure_class") for r in rows), rows[:1]
    return {r["responses_create_params"]["metadata"]["ng_stand_in"]: r["reward"] for r in rows}


def expected_rewards(inputs: dict[str, Any]) -> dict[str, float]:
    return {e["key"]: e["reward"] for e in inputs["episodes"]}


@pytest.fixture(scope="module")
def legacy_collection(stack, inputs) -> Path:
    return collect(
        stack,
        "legacy_agent",
        inputs["rows"],
        environment_routing_mode="legacy",
        environment_server_name="legacy_env",
    )


def test_conformance_check_passes_unmodified(gateway):
    out = run_driver(nemo_python(), ["conformance", "--url", gateway.url])
    assert out.returncode == 0, out.stderr[-4000:]
    assert "passed" in out.stdout


def test_legacy_agent_chain_collects_the_recorded_rewards(legacy_collection, inputs):
    assert rewards_by_key(legacy_collection) == expected_rewards(inputs)
    metrics = json.loads(
        legacy_collection.with_name("legacy_agent_aggregate_metrics.json").read_text()
    )
    expected = expected_rewards(inputs).values()
    assert metrics[0]["agent_metrics"]["mean/reward"] == pytest.approx(
        sum(expected) / len(expected)
    )


def test_single_agent_turn_legacy_chain_collects_the_recorded_rewards(stack, inputs):
    output = collect(
        stack,
        "single_agent_turn_legacy",
        inputs["rows"],
        environment_routing_mode="legacy",
        environment_server_name="typed_legacy_env",
    )
    assert rewards_by_key(output) == expected_rewards(inputs)


def test_single_agent_turn_chain_collects_the_recorded_rewards(stack, inputs):
    materialized = []
    for row in inputs["rows"]:
        task_data = {k: v for k, v in row.items() if k != "responses_create_params"}
        materialized.append(
            {
                "task_id": {"taskset": TYPED_TASKSET, "task_id": str(row["id"])},
                "task_input": {
                    "responses_create_params": row["responses_create_params"],
                    "task_data": task_data,
                },
            }
        )
    output = collect(
        stack,
        "single_agent_turn",
        materialized,
        environment_server_routes={TYPED_TASKSET: "typed_env"},
    )
    assert rewards_by_key(output) == expected_rewards(inputs)


def test_reverify_without_force_reproduces_the_rewards(stack, legacy_collection, inputs):
    output = stack.workdir / "reverified.jsonl"
    env = stack.cli_env(
        {
            "materialized_inputs_jsonl_fpath": str(
                legacy_collection.with_name("legacy_agent_materialized_inputs.jsonl")
            ),
            "rollouts_jsonl_fpath": str(legacy_collection),
            "output_jsonl_fpath": str(output),
        }
    )
    result = run_driver(stack.python, ["reverify"], env=env, timeout_s=600)
    assert result.returncode == 0, f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    rows = read_jsonl(output)
    assert len(rows) == len(inputs["episodes"])
    assert all(not r.get("mask_sample") for r in rows)
    got = {r["responses_create_params"]["metadata"]["ng_stand_in"]: r["reward"] for r in rows}
    assert got == expected_rewards(inputs)


def same_metrics(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Where two metrics documents differ: keys (and their order), lengths, and values (floats
    to 1e-12 relative: the reference's pandas sums in another order, the last bit differs)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        if list(ours) != list(theirs):
            return [f"{path}: keys {list(ours)} != {list(theirs)}"]
        return [d for k in ours for d in same_metrics(ours[k], theirs[k], f"{path}/{k}")]
    if isinstance(ours, list) and isinstance(theirs, list):
        if len(ours) != len(theirs):
            return [f"{path}: {len(ours)} items != {len(theirs)}"]
        return [
            d
            for i, pair in enumerate(zip(ours, theirs, strict=True))
            for d in same_metrics(*pair, f"{path}[{i}]")
        ]
    if isinstance(ours, float) and isinstance(theirs, float):
        return (
            []
            if ours == pytest.approx(theirs, rel=1e-12, abs=1e-15)
            else [f"{path}: {ours} != {theirs}"]
        )
    return (
        [] if ours == theirs and type(ours) is type(theirs) else [f"{path}: {ours!r} != {theirs!r}"]
    )


def test_aggregate_metrics_equal_the_reference(stack, legacy_collection):
    """H3: the collected verify responses, also masked and as three repeats, aggregate as the
    reference aggregates them."""
    rows = read_jsonl(legacy_collection)
    light = [
        {k: v for k, v in r.items() if k not in ("response", "responses_create_params")}
        for r in rows
    ]
    masked = [dict(r, mask_sample=(i % 4 == 0)) for i, r in enumerate(light)]
    repeats = [dict(r, _ng_rollout_index=i % 3) for i, r in enumerate(light)]
    for verify_responses in (light, masked, repeats, [light[0]], []):
        body = {"verify_responses": verify_responses}
        ours = httpx.post(f"{stack.url('workplace_assistant')}/aggregate_metrics", json=body)
        theirs = httpx.post(f"{stack.url(REFERENCE)}/aggregate_metrics", json=body)
        assert ours.status_code == theirs.status_code == 200
        assert same_metrics(ours.json(), theirs.json()) == []


@pytest.mark.parametrize("form", ["typed", "legacy"])
def test_official_mcp_client_with_nemo_seed_metadata(stack, form):
    """H6: the seed's MCP metadata leads NeMo's client to our /mcp; listing and results have
    the reference's shapes and bytes (the reference started with expose_tools_over_mcp). A
    legacy seed (the row alone) answers the metadata under ``"mcp"``, as the reference does:
    NeMo's sandbox tools and coding agents look for it there."""
    row = {
        "id": 0,
        "category": "workplace_assistant_email",
        "environment_name": "workplace_assistant",
        "ground_truth": [],
        "responses_create_params": {"input": [{"role": "user", "content": "hi"}]},
    }
    calls = [
        {
            "name": "email_get_email_information_by_id",
            "arguments": {"email_id": "00000057", "field": "subject"},
        },
        {"name": "email_delete_email", "arguments": {"email_id": "00000057"}},
        {"name": "email_get_email_information_by_id", "arguments": {"email_id": "00000057"}},
        {"name": "no_such_tool", "arguments": {}},
    ]
    answers = {}
    for name in ("workplace_assistant", REFERENCE):
        seed = {
            "resources_session_id": f"mcp-{uuid.uuid4().hex}",
            "episode_id": {"rollout_id": f"r{uuid.uuid4().hex}", "attempt": 0},
            "task_id": {"taskset": "mcp", "task_id": "0"},
            "task_data": row,
        }
        if form == "legacy":
            seed = row
        out = run_driver(
            stack.python,
            ["mcp", "--url", stack.url(name)],
            json.dumps({"seed": seed, "calls": calls}),
        )
        assert out.returncode == 0, out.stderr[-4000:]
        answers[name] = json.loads(out.stdout)
    ours, theirs = answers["workplace_assistant"], answers[REFERENCE]
    if form == "typed":
        assert ours["seed"]["resources_session_id"]  # typed answer (the reference answers legacy)
    else:
        assert set(ours["seed"]) == set(theirs["seed"]) == {"mcp"}
    # server_name is each server's config instance name (what MCP clients namespace tools by)
    assert (ours["metadata"]["server_name"], theirs["metadata"]["server_name"]) == (
        "workplace_assistant",
        REFERENCE,
    )
    for key in ("url_path", "transport"):
        assert ours["metadata"][key] == theirs["metadata"][key]
    assert list(ours["metadata"]["headers"]) == ["X-NeMo-Gym-Session-Token"]
    assert ours["tools"] == theirs["tools"]
    assert ours["results"] == theirs["results"]
    assert [r["isError"] for r in ours["results"]] == [False, False, False, True]
