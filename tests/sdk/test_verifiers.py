"""verifiers 0.4.0's own evaluation (``vf-eval``, its built-in NeMo Gym taskset) on the gateway.

verifiers runs as a black box in its own Python 3.13 venv (tests/nemo/venv.py): the ``vf-eval``
line of docs/examples/verifiers_eval.sh, on docs/examples/verifiers_eval.toml as written, with the
test's gateway, model and output directory added as flags. Its agent
(the ``null`` harness in a local subprocess runtime) asks NeMo's stand-in model (``driver.py
model``, chat completions) for each episode's recorded calls and calls them through the taskset's
tool server, which reaches the gateway over the seed's MCP metadata, or over direct HTTP when the
gateway's MCP is off; the taskset verifies each rollout on the gateway. Compared: rewards with the
recorded ones (a rollout's reward, 1.0 for a ground truth), tool outputs with the goldens (the
reference's outputs of the same calls), and no session left open (admin API). About 40 s per
transport once both venvs exist (the first run builds the verifiers venv and uv-installs the
agent program's dependencies into a cache beside it).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import GOLDENS, WORKBENCH, needs, needs_shared, read_jsonl
from tests.helpers import REPO, Served, gateway_on
from tests.nemo.rows import dataset_row, episodes, write_jsonl
from tests.nemo.servers import NemoStack, die_with_parent, stand_in_model
from tests.nemo.venv import nemo_python, verifiers_python
from workplace_env.config import Settings
from workplace_env.gateway import GatewaySettings
from workplace_env.parity import outputs_match
from workplace_env.sessions import SessionStore

EXAMPLES = REPO / "docs" / "examples"
EVAL_TOML = EXAMPLES / "verifiers_eval.toml"
EVAL_SH = EXAMPLES / "verifiers_eval.sh"
TOOL_GOLDENS = GOLDENS / "tool_calls_public.jsonl"
TOOL_SCHEMAS = WORKBENCH / "tool_schemas.json"
pytestmark = [
    needs_shared,
    needs(WORKBENCH / "rollouts_public.jsonl", WORKBENCH / "tasks_public.jsonl"),
    needs(TOOL_GOLDENS, TOOL_SCHEMAS),
]

ADMIN_TOKEN = "verifiers-admin"
#: The episodes run: a rollout the verifier scores 0.0, one scoring 1.0 (a directory lookup,
#: then a send), and two ground truths (calendar deletions, CRM updates).
EPISODES = ("rollout-gpt41-a-0", "rollout-gpt41-b-3", "nemo-validation-475", "nemo-example-2")
TRANSPORTS = {"mcp": GatewaySettings(), "direct_http": GatewaySettings(mcp_path="")}
_EVAL_TIMEOUT_S = 900  # a cold run uv-installs the agent program's dependencies


def recorded_outputs(key: str, calls: list[dict[str, str]]) -> list[Any] | None:
    """The reference's output of each of ``calls`` in the goldens' replay of episode ``key``
    (a ground truth's replay reads back after each write: its calls are matched in order), or
    None when the goldens hold no replay of it."""
    case = next((c for c in read_jsonl(TOOL_GOLDENS) if c.get("source") == key), None)
    if case is None:
        return None
    replayed = iter(case["calls"])
    outputs = []
    for call in calls:
        wanted = (call["name"], call["arguments"])
        outputs.append(next(c for c in replayed if (c["name"], c["arguments"]) == wanted)["output"])
    return outputs


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("verifiers")


@pytest.fixture(scope="module")
def chosen() -> dict[str, dict[str, Any]]:
    """:data:`EPISODES` by key (:func:`tests.nemo.rows.episodes`)."""
    by_key = {e["key"]: e for e in episodes()}
    return {key: by_key[key] for key in EPISODES}


@pytest.fixture(scope="module")
def dataset(workdir, chosen) -> Path:
    """The episodes as NeMo Gym dataset rows (the taskset's ``dataset``)."""
    tools = json.loads(TOOL_SCHEMAS.read_text())
    rows = [dataset_row(i, e, tools) for i, e in enumerate(chosen.values())]
    return write_jsonl(workdir / "rows.jsonl", rows)


@pytest.fixture(scope="module")
def model_url(workdir, chosen) -> Iterator[str]:
    """The stand-in model's OpenAI base URL (``/v1``); a chat request is matched by its user
    message, so the recordings are keyed by prompt."""
    prompts = [e["prompt"] for e in chosen.values()]
    assert len(set(prompts)) == len(prompts)
    recordings = workdir / "recordings.json"
    recordings.write_text(json.dumps({e["prompt"]: e["calls"] for e in chosen.values()}))
    server = stand_in_model(recordings)
    with NemoStack(nemo_python(), [server], workdir / "model") as stack:
        yield stack.url(server.name) + "/v1"


@pytest.fixture(scope="module")
def served(workbench_tables) -> Iterator[Served]:
    """A gRPC server over the WorkBench sandbox, its admin API behind a token."""
    running = Served.start(
        SessionStore(workbench_tables), Settings(admin_token=ADMIN_TOKEN), ADMIN_TOKEN
    )
    yield running
    running.stop()


def documented_vf_eval(dataset: Path) -> list[str]:
    """The arguments of verifiers_eval.sh's ``vf-eval`` line (``$DATA/example.jsonl``: ``dataset``;
    the config file's path made absolute)."""
    line = next(x for x in EVAL_SH.read_text().splitlines() if x.startswith("vf/bin/vf-eval "))
    argv = shlex.split(line.replace('"$DATA/example.jsonl"', shlex.quote(str(dataset))))
    return [str(EVAL_TOML) if a == str(EVAL_TOML.relative_to(REPO)) else a for a in argv[1:]]


def vf_eval(gateway_url: str, dataset: Path, model_url: str, output_dir: Path) -> list[dict]:
    """The documented ``vf-eval`` line with the test's gateway, model and output directory; its
    traces (asserts exit 0)."""
    python = verifiers_python()
    home = python.parents[1].with_name(python.parents[1].name + "-home")  # caches, kept
    argv = [
        str(python.with_name("vf-eval")),
        *documented_vf_eval(dataset),
        "--env.taskset.task.resources-url",
        gateway_url,
        "--client.base-url",
        model_url,
        "--output-dir",
        str(output_dir),
    ]
    env = {
        **os.environ,
        "HOME": str(home),  # verifiers' runtimes and uv's cache live under ~/.cache
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # uv
        "POLICY_API_KEY": "stand-in",
    }
    result = subprocess.run(
        die_with_parent(argv, python),
        env=env,
        cwd=output_dir.parent,
        capture_output=True,
        text=True,
        timeout=_EVAL_TIMEOUT_S,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    (traces,) = output_dir.glob("*/traces.jsonl")
    return read_jsonl(traces)


def tool_calls(trace: dict[str, Any]) -> list[dict[str, str]]:
    """The agent's function calls in ``trace``, in order, as ``{name, arguments}``."""
    messages = [node["message"] for node in trace["nodes"]]
    return [
        {"name": call["name"], "arguments": call["arguments"]}
        for message in messages
        if message["role"] == "assistant"
        for call in message.get("tool_calls") or []
    ]


def tool_outputs(trace: dict[str, Any]) -> list[Any]:
    """The decoded output of each tool message of ``trace``, in order."""
    return [
        json.loads(node["message"]["content"])["output"]
        for node in trace["nodes"]
        if node["message"]["role"] == "tool"
    ]


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_vf_eval_scores_the_recorded_rewards_with_the_reference_tool_outputs(
    transport, served, dataset, model_url, chosen, workdir
):
    gateway = gateway_on("remote", served.running, served.client, TRANSPORTS[transport])
    try:
        ran = vf_eval(gateway.url, dataset, model_url, workdir / transport)
    finally:
        gateway.stop()
    assert [episode["errors"] for episode in ran] == [[]] * len(EPISODES)
    rewards, outputs = {}, {}
    for episode in ran:
        (trace,) = episode["traces"]
        key = trace["task"]["data"]["row"]["responses_create_params"]["metadata"]["ng_stand_in"]
        assert tool_calls(trace) == chosen[key]["calls"], key  # as the stand-in replayed them
        rewards[key] = trace["rewards"]["nemo_gym"]["score"]
        outputs[key] = tool_outputs(trace)
    assert rewards == {key: e["reward"] for key, e in chosen.items()}
    compared = 0
    for key, e in chosen.items():
        assert len(outputs[key]) == len(e["calls"]), key
        expected = recorded_outputs(key, e["calls"])
        if expected is not None:
            assert all(map(outputs_match, expected, outputs[key])), (key, outputs[key])
            compared += 1
    assert compared == len(EPISODES) - 1  # rollout-gpt41-a-0 has no replay in the goldens
    assert served.admin.export_sessions().snapshots == []  # every session verified and closed
