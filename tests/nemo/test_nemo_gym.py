"""NeMo Gym 0.7.0's own code, unmodified, against the HTTP gateway (CONTRACT H1-H6).

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
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.aggregate_cases import (
    CASES,
    NOT_AGGREGATED,
    REFERENCE_ANSWERS_PATH,
    REFUSED,
    random_bodies,
    random_index_bodies,
    reference_answers,
    request_body,
    same_metrics,
)
from tests.conftest import read_jsonl
from tests.nemo.rows import (
    TASKS_FILE,
    TOOL_SCHEMAS_FILE,
    TYPED_TASKSET,
    needs_recorded,
    recorded_inputs,
    rewards_by_key,
    typed_rows,
    write_jsonl,
)
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

pytestmark = [
    needs_recorded,
    pytest.mark.server(data="workbench"),
]

TASKS = read_jsonl(TASKS_FILE)
REFERENCE = "reference"  # the reference resources server's instance name


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("nemo")


@pytest.fixture(scope="module")
def inputs(workdir) -> dict[str, Any]:
    return recorded_inputs(workdir)


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


def expected_rewards(inputs: dict[str, Any]) -> dict[str, float]:
    return inputs["rewards"]


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
    output = collect(
        stack,
        "single_agent_turn",
        typed_rows(inputs["rows"]),
        environment_server_routes={TYPED_TASKSET: "typed_env"},
    )
    assert rewards_by_key(output) == expected_rewards(inputs)


def materialized_inputs(collected: Path) -> Path:
    """The materialized inputs NeMo writes beside the rollouts file ``collected``."""
    return collected.with_name(f"{collected.stem}_materialized_inputs.jsonl")


def reverify(
    stack: NemoStack,
    collected: Path,
    name: str,
    resources: str = "workplace_assistant",
    force: bool = False,
) -> Path:
    """NeMo's re-verification (``gym eval reverify`` once its servers are up) of the rollouts
    ``collected`` (with its ``<stem>_materialized_inputs.jsonl``), scored by
    ``resources`` (simple_agent's resources server in this run's config), with ``force`` (the
    reference's ``/reverify_mode`` is "unknown": NeMo asks for it); asserts exit 0. The rows'
    path (NeMo prefixes ``unsafe_`` to a forced re-verification of an "unknown" server's)."""
    output = stack.workdir / f"{name}.jsonl"
    agent = {"responses_api_agents": {"simple_agent": {"resources_server": {"name": resources}}}}
    env = stack.cli_env(
        {
            "materialized_inputs_jsonl_fpath": str(materialized_inputs(collected)),
            "rollouts_jsonl_fpath": str(collected),
            "output_jsonl_fpath": str(output),
            "simple_agent": agent,
            "force": force,
        }
    )
    result = run_driver(stack.python, ["reverify"], env=env, timeout_s=600)
    assert result.returncode == 0, f"{result.stdout[-2000:]}\n{result.stderr[:3000]}"
    unsafe = output.with_name(f"unsafe_{output.name}")  # NeMo's name when forced on "unknown"
    return unsafe if unsafe.exists() else output


def test_reverify_without_force_reproduces_the_rewards(stack, legacy_collection, inputs):
    rows = read_jsonl(reverify(stack, legacy_collection, "reverified"))
    assert len(rows) == len(inputs["episodes"])
    assert all(not r.get("mask_sample") for r in rows)
    got = {r["responses_create_params"]["metadata"]["ng_stand_in"]: r["reward"] for r in rows}
    assert got == expected_rewards(inputs)


def test_reverified_rows_and_aggregates_are_the_references_byte_for_byte(stack, legacy_collection):
    """H5 and H3 as NeMo users diff them: the rollouts, as three repeats, re-verified by us and
    by the reference give the same rows (the echo re-serialised as NeMo's verify body does) and
    the same aggregate metrics file (the t intervals of every repeat, to the last bit)."""
    collected = legacy_collection.with_name("legacy_agent_repeats.jsonl")
    pairs = [(legacy_collection, collected)]
    pairs.append((materialized_inputs(legacy_collection), materialized_inputs(collected)))
    for source, target in pairs:
        rows = read_jsonl(source)
        write_jsonl(target, [dict(r, _ng_rollout_index=i) for i in range(3) for r in rows])
    ours = reverify(stack, collected, "reverified_ours", force=True)
    theirs = reverify(stack, collected, "reverified_reference", REFERENCE, force=True)
    assert sorted(ours.read_bytes().splitlines()) == sorted(theirs.read_bytes().splitlines())
    metrics = [p.with_name(f"{p.stem}_aggregate_metrics.json") for p in (ours, theirs)]
    assert metrics[0].read_bytes() == metrics[1].read_bytes()
    assert "ci_low_95/reward" in json.loads(metrics[0].read_text())[0]["repeat_level_metrics"][0]


def test_aggregate_metrics_equal_the_reference(stack, legacy_collection):
    """H3: the collected verify responses (whole, with their responses' usage, and stripped to
    the scores), also masked and as three repeats, aggregate as the reference aggregates them."""
    rows = read_jsonl(legacy_collection)
    light = [
        {k: v for k, v in r.items() if k not in ("response", "responses_create_params")}
        for r in rows
    ]
    masked = [dict(r, mask_sample=(i % 4 == 0)) for i, r in enumerate(light)]
    repeats = [dict(r, _ng_rollout_index=i % 3) for i, r in enumerate(light)]
    for verify_responses in (rows, light, masked, repeats, [light[0]], []):
        body = {"verify_responses": verify_responses}
        ours = httpx.post(f"{stack.url('workplace_assistant')}/aggregate_metrics", json=body)
        theirs = httpx.post(f"{stack.url(REFERENCE)}/aggregate_metrics", json=body)
        assert ours.status_code == theirs.status_code == 200
        assert same_metrics(ours.json(), theirs.json()) == []


def test_aggregate_metrics_of_every_body_shape_equal_the_reference(stack):
    """H3 side by side for usage (present, partial, nested), booleans, integer rewards, null
    and missing fields, indices (booleans, infinities), repeats, masks, NaN and Infinity, and
    ``ng_perf`` (tests/aggregate_cases.py); the recorded answers the fast test pins are still
    the reference's. What the reference fails on (500) we refuse with a 422, and a NaN index
    too (NOT_AGGREGATED)."""
    recorded = reference_answers()
    for name, rows in CASES.items():
        body = request_body(rows)  # NaN and Infinity too
        ours = httpx.post(f"{stack.url('workplace_assistant')}/aggregate_metrics", **body)
        theirs = httpx.post(f"{stack.url(REFERENCE)}/aggregate_metrics", **body)
        assert (ours.status_code, theirs.status_code) == (200, 200), name
        assert same_metrics(ours.json(), theirs.json()) == [], name
        assert same_metrics(recorded[name], theirs.json()) == [], (
            f"the reference now answers {name} otherwise: re-record {REFERENCE_ANSWERS_PATH.name}"
        )
    for name, (rows, _) in REFUSED.items():
        body = request_body(rows)
        ours = httpx.post(f"{stack.url('workplace_assistant')}/aggregate_metrics", **body)
        theirs = httpx.post(f"{stack.url(REFERENCE)}/aggregate_metrics", **body)
        assert (ours.status_code, theirs.status_code) == (422, 500), name
    for name, (rows, _) in NOT_AGGREGATED.items():  # refused on purpose (see there)
        body = request_body(rows)
        ours = httpx.post(f"{stack.url('workplace_assistant')}/aggregate_metrics", **body)
        theirs = httpx.post(f"{stack.url(REFERENCE)}/aggregate_metrics", **body)
        assert (ours.status_code, theirs.status_code) == (422, 200), name


def test_aggregate_metrics_of_random_bodies_equal_the_reference(stack):
    """H3 on 150 random bodies (any value in any field, usage, masks, repeated indices): the
    same answer, or a 422 from us where the reference fails (500)."""
    compared = 0
    for rows in random_bodies(seed=23, count=150):
        body = {"verify_responses": rows}
        ours = httpx.post(f"{stack.url('workplace_assistant')}/aggregate_metrics", json=body)
        theirs = httpx.post(f"{stack.url(REFERENCE)}/aggregate_metrics", json=body)
        if theirs.status_code == 500:
            assert ours.status_code == 422, rows
            continue
        assert (ours.status_code, theirs.status_code) == (200, 200), rows
        assert same_metrics(ours.json(), theirs.json()) == [], rows
        compared += 1
    assert compared > 50  # most bodies are aggregated, not refused


def test_aggregate_metrics_of_random_indices_equal_the_reference(stack):
    """H3 on 150 bodies of random indices (``null``, integers, booleans, floats, strings,
    absent; some masked): the same answer, a 422 from us where the reference fails (500), or
    our deliberate 422 for numbers and strings as repeat indices (NOT_AGGREGATED)."""
    outcomes: Counter[tuple[int, int]] = Counter()
    for rows in random_index_bodies(seed=5, count=150):
        body = {"verify_responses": rows}
        ours = httpx.post(f"{stack.url('workplace_assistant')}/aggregate_metrics", json=body)
        theirs = httpx.post(f"{stack.url(REFERENCE)}/aggregate_metrics", json=body)
        outcomes[theirs.status_code, ours.status_code] += 1
        if (theirs.status_code, ours.status_code) == (200, 422):
            [problem] = ours.json()["detail"]
            assert problem["loc"] == ["body", "verify_responses", "_ng_rollout_index"], rows
            assert "mixes numbers and strings" in problem["msg"], rows
        elif theirs.status_code == 500:
            assert ours.status_code == 422, rows
        else:
            assert (ours.status_code, theirs.status_code) == (200, 200), rows
            assert same_metrics(ours.json(), theirs.json()) == [], rows
    assert outcomes[200, 200] > 30 and outcomes[500, 422] > 30, outcomes


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


#: ``episode_id`` values of every kind NeMo's ``EpisodeId`` coerces or refuses.
_ATTEMPTS: list[Any] = [0, 1, "1", " 1 ", "+1", "-0", "01", "1_0", "1.0", "1.5", 1.0, 1.5]
_ATTEMPTS += [True, False, None, "", [1], {"a": 1}, -1, "-1", 2**31 - 1, "2147483647", "1e2"]
_ATTEMPTS += [1e2, 1e20, "0x10", "\uff11", "1 000", "\t1\n", -0.0, "1.", ".0"]
_ROLLOUT_IDS: list[Any] = ["r1", "r-a1", "r-a0", "r-a01", "r-a10", "r-A1", "r-a1x", "r--a1"]
_ROLLOUT_IDS += ["x-a1-a0", "a-a1-a2", "R-a9999999999", "r-a1\n", "r1\n", "", 5, None, "é"]
_ROLLOUT_IDS += ["r a", "-a1", "r-a", "r-a1.", "r-a\u0663"]
EPISODE_IDS: list[Any] = [{"rollout_id": "r1", "attempt": a} for a in _ATTEMPTS]
EPISODE_IDS += [{"rollout_id": r} for r in _ROLLOUT_IDS] + [{"attempt": 0}, {}, [], "r1"]


def test_episode_ids_are_validated_and_coerced_as_nemos_models(stack):
    """Every ``episode_id`` above is taken by our typed seed (``task_data``) and close as
    NeMo's ``ResourcesSeedSessionRequest`` / ``ResourcesCloseSessionRequest`` take it (run in
    the NeMo venv): refused (422 naming a field of ``episode_id``) exactly when NeMo's model
    refuses, else bound to the episode the model makes of it; and the reference server's own
    close answers alike. Beyond our int32 attempts only NeMo's model is larger (none here)."""
    row = {"id": 0, "ground_truth": [], "responses_create_params": {"input": "hi"}}
    seeds = [
        {
            "resources_session_id": f"ep-{uuid.uuid4().hex}",
            "episode_id": episode,
            "task_id": {"taskset": "ep", "task_id": "0"},
            "task_data": row,
        }
        for episode in EPISODE_IDS
    ]
    closes = [{k: s[k] for k in ("resources_session_id", "episode_id")} for s in seeds]
    verdicts = {}
    for kind, bodies in (
        ("ResourcesSeedSessionRequest", seeds),
        ("ResourcesCloseSessionRequest", closes),
    ):
        out = run_driver(
            stack.python,
            ["validate"],
            json.dumps({"model": f"nemo_gym.base_resources_server:{kind}", "bodies": bodies}),
        )
        assert out.returncode == 0, out.stderr[-4000:]
        verdicts[kind] = json.loads(out.stdout)
    ours_url, theirs_url = stack.url("workplace_assistant"), stack.url(REFERENCE)
    for seed, close, nemo_seed, nemo_close in zip(
        seeds,
        closes,
        verdicts["ResourcesSeedSessionRequest"],
        verdicts["ResourcesCloseSessionRequest"],
        strict=True,
    ):
        case = repr(seed["episode_id"])
        assert nemo_seed["ok"] == nemo_close["ok"], case
        seeded = httpx.post(f"{ours_url}/seed_session", json=seed)
        theirs = httpx.post(f"{theirs_url}/close_session", json=close)
        if not nemo_seed["ok"]:
            assert (seeded.status_code, theirs.status_code) == (422, 422), case
            assert all(d["loc"][:2] == ["body", "episode_id"] for d in seeded.json()["detail"])
            assert httpx.post(f"{ours_url}/close_session", json=close).status_code == 422, case
            continue
        assert (seeded.status_code, theirs.status_code) == (200, 200), case
        coerced = {**close, "episode_id": nemo_seed["value"]["episode_id"]}
        closed = httpx.post(f"{ours_url}/close_session", json=coerced)  # the bound episode
        assert closed.headers["x-workplace-close-outcome"] == "CLOSED", case


def _hand_written_verify_bodies() -> list[dict[str, Any]]:
    """``/verify`` bodies as a hand-written client sends them: a minimal ``response`` whose
    output holds the task's ground-truth calls (some with an unknown key), a reasoning item
    and a message; a ``created_at`` integer and a ``temperature`` integer."""
    bodies = []
    for i, task in enumerate(TASKS[:12]):
        output: list[dict[str, Any]] = [
            {
                "type": "reasoning",
                "id": f"rs{i}",
                "summary": [{"type": "summary_text", "text": "t"}],
            }
        ]
        for j, call in enumerate(task["ground_truth"]):
            item = {"type": "function_call", "call_id": f"c{j}", "name": call["name"]}
            output.append({**item, "arguments": call["arguments"], "status": "completed"})
            if i % 3 == 0:
                output[-1]["zz"] = 1
        output.append(
            {
                "type": "message",
                "id": "m",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "done", "annotations": []}],
            }
        )
        bodies.append(
            {
                "id": i,
                "category": task["category"],
                "environment_name": "workplace_assistant",
                "ground_truth": task["ground_truth"],
                "responses_create_params": {"input": task["prompt"], "temperature": 1},
                "response": {
                    "id": f"r{i}",
                    "created_at": 0,
                    "model": "m",
                    "object": "response",
                    "output": output,
                    "parallel_tool_calls": True,
                    "tool_choice": "auto",
                    "tools": [],
                },
            }
        )
    return bodies


def test_verify_echo_is_byte_identical_for_bodies_nemos_models_wrote(stack):
    """Measured: the reference echoes ``response`` re-serialised through NeMo's models; we
    echo it as sent (docs/http-gateway.md, "Verify echo"). So a body NeMo's
    ``BaseVerifyRequest`` has written (what its agents send) answers the same bytes, and a
    hand-written one the same reward with another ``response`` (defaults added, ``created_at``
    0.0, unknown item keys dropped)."""
    raw = _hand_written_verify_bodies()
    out = run_driver(
        stack.python,
        ["validate"],
        json.dumps({"model": "nemo_gym.base_resources_server:BaseVerifyRequest", "bodies": raw}),
    )
    assert out.returncode == 0, out.stderr[-4000:]
    row_keys = ("id", "category", "environment_name", "ground_truth")
    written = []
    for body, verdict in zip(raw, json.loads(out.stdout), strict=True):
        assert verdict["ok"], verdict
        written.append({**{k: body[k] for k in row_keys}, **verdict["value"]})
    ours_url, theirs_url = stack.url("workplace_assistant"), stack.url(REFERENCE)
    for sent, agent_body in zip(raw, written, strict=True):
        ours = httpx.post(f"{ours_url}/verify", json=agent_body, timeout=60)
        theirs = httpx.post(f"{theirs_url}/verify", json=agent_body, timeout=60)
        assert ours.status_code == theirs.status_code == 200
        assert ours.content == theirs.content
        ours = httpx.post(f"{ours_url}/verify", json=sent, timeout=60).json()
        theirs = httpx.post(f"{theirs_url}/verify", json=sent, timeout=60).json()
        assert ours["reward"] == theirs["reward"] == 1.0
        assert ours["response"] == sent["response"]  # as sent
        assert theirs["response"]["created_at"] == 0.0 and "background" in theirs["response"]
        assert all("zz" not in item for item in theirs["response"]["output"])


def _create_params_cases() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``responses_create_params`` a client sends: the shapes NeMo's verify body re-serialises
    (echoed as it does), and shapes outside them (echoed as sent)."""
    tools = json.loads(TOOL_SCHEMAS_FILE.read_text())
    text = [{"type": "input_text", "text": "u"}]
    said = [{"type": "output_text", "text": "t", "annotations": []}]
    summary = [{"type": "summary_text", "text": "t"}]
    message = {"type": "message", "role": "assistant", "id": "m", "status": "completed"}
    call = {"type": "function_call", "call_id": "c", "name": "n", "arguments": "{}"}
    rewritten = [
        {"input": "hi"},
        {"input": [], "temperature": 1, "top_p": 1, "max_output_tokens": 5, "top_logprobs": 2},
        {
            "input": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
            "tools": tools,
            "parallel_tool_calls": False,
            "metadata": {"k": "v"},
        },
        {"input": [{"role": "user", "content": text}, {"role": "developer", "content": text}]},
        {"input": [{"type": "message", "role": "assistant", "content": "a", "phase": None}]},
        {"input": [dict(message, content=said)]},
        {"input": [{"type": "reasoning", "id": "rs", "summary": summary}]},
        {"input": [{"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "e"}]},
        {"input": [call, dict(call, id="fc", status="completed")]},
        {"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]},
        {"input": "x", "reasoning": {"effort": "low"}, "text": {"format": {"type": "text"}}},
        {"input": "x", "model": "m", "store": False, "user": "u", "instructions": "i"},
        {
            "input": "x",
            "tools": [{"parameters": None, "strict": None, "name": "f", "type": "function"}],
        },
        {"input": "x", "temperature": 0.7, "tool_choice": "required", "truncation": "auto"},
    ]
    as_sent = [
        {"input": [{"role": "user", "content": "u", "zz": 1}]},
        {"input": "x", "tool_choice": {"type": "function", "name": "f"}},
        {"input": [dict(call, zz=1)]},
        {"input": [{"type": "function_call_output", "call_id": "c", "output": text}]},
        {
            "input": [
                {
                    "role": "assistant",
                    "content": said[:1] and [{"type": "output_text", "text": "t"}],
                }
            ]
        },
        {"input": "x", "temperature": True},
        {"input": "x", "max_output_tokens": 5.0},
    ]
    return rewritten, as_sent


def test_cookieless_verify_echoes_create_params_as_the_reference(stack):
    """H5: a re-verification's ``responses_create_params`` answer is the reference's, byte for
    byte, for every shape NeMo's verify body re-serialises; other shapes (the reference
    re-serialises them otherwise, e.g. drops unknown keys) come back as sent, same reward."""
    rewritten, as_sent = _create_params_cases()
    response = {
        "id": "r",
        "created_at": 0.0,
        "model": "m",
        "object": "response",
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    written = run_driver(
        stack.python,
        ["validate"],
        json.dumps(
            {
                "model": "nemo_gym.base_resources_server:BaseVerifyRequest",
                "bodies": [{"responses_create_params": {"input": "x"}, "response": response}],
            }
        ),
    )
    assert written.returncode == 0, written.stderr[-4000:]
    response = json.loads(written.stdout)[0]["value"]["response"]  # as NeMo's agents send it
    for params in rewritten + as_sent:
        body = {
            "id": 0,
            "category": "workplace_assistant_email",
            "environment_name": "workplace_assistant",
            "ground_truth": [],
            "responses_create_params": params,
            "response": response,
        }
        ours = httpx.post(f"{stack.url('workplace_assistant')}/verify", json=body, timeout=60)
        theirs = httpx.post(f"{stack.url(REFERENCE)}/verify", json=body, timeout=60)
        assert ours.status_code == theirs.status_code == 200, params
        if params in rewritten:
            assert ours.content == theirs.content, params
        else:
            assert ours.json()["responses_create_params"] == params
            assert ours.json()["reward"] == theirs.json()["reward"]
