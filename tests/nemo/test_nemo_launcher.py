"""NeMo Gym 0.7.0's launcher starting the project from the configs the README shows.

``ng_run`` (tests/nemo/launcher.py) reads ``resources_servers/workplace_env/configs`` of this
checkout (an extra root), builds the entry's venv with uv from its ``requirements.txt``, starts
``workplace-env serve`` on the instance's port and stops it with SIGINT. The policy model is
NeMo's ``openai_model`` in front of the stand-in model (``driver.py model``), which replays
the recorded episodes; NeMo's own CLIs collect the rollouts (typed: routed by taskset
to ``single_agent_turn``, whose agent is NeMo's ``simple_agent`` over direct HTTP or this
checkout's ``workplace_env_mcp`` over MCP; legacy: by agent name, through ``legacy_agent``) and
``gym eval reverify`` re-verifies them, starting the server from the same config.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import WORKBENCH, read_jsonl
from tests.helpers import REPO
from tests.nemo.launcher import ENTRY, MCP_AGENT_ENTRY, NgRun
from tests.nemo.rows import (
    needs_recorded,
    recorded_inputs,
    rewards_by_key,
    typed_rows,
    write_jsonl,
)
from tests.nemo.servers import HOST, NemoServer, NemoStack, free_port, stand_in_model
from tests.nemo.venv import nemo_python
from workplace_env import nemo_entry
from workplace_env.config import load_settings
from workplace_env.nemo_entry import serve_command
from workplace_env_client import AdminClient

RESOURCES = "workplace_assistant"  # the instance name of configs/workplace_env.yaml
AGENT = "workplace_assistant_simple_agent"
TYPED_ENV = "workplace_assistant_env"
MCP_ENV = "workplace_assistant_mcp_env"
MODEL_CONFIG = "responses_api_models/openai_model/configs/openai_model.yaml"
#: The config files as a user names them (NeMo resolves them under its extra roots).
SERVER_CONFIG = f"{ENTRY}/configs/workplace_env.yaml"
TYPED_CONFIG = f"{ENTRY}/configs/typed.yaml"
LEGACY_CONFIG = f"{ENTRY}/configs/legacy.yaml"
TYPED_MCP_CONFIG = f"{ENTRY}/configs/typed_mcp.yaml"
ADMIN_TOKEN = "nemo-launcher-admin-token"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ng_run")


@pytest.fixture(scope="module")
def inputs(workdir) -> dict[str, Any]:
    return recorded_inputs(workdir)


@pytest.fixture(scope="module")
def model_url(workdir, inputs) -> Iterator[str]:
    """The stand-in model's OpenAI base URL (``/v1``), served for the module."""
    server: NemoServer = stand_in_model(inputs["recordings"])
    with NemoStack(nemo_python(), [server], workdir / "model") as stack:
        yield stack.url(server.name) + "/v1"


@pytest.fixture(scope="module")
def venv_dir(workdir) -> Path:
    """``uv_venv_dir`` of every launch of the module: the entry's venv is built once, by uv."""
    return workdir / "venvs"


def overrides(model_url: str, grpc_port: int) -> list[str]:
    """What a user adds to the documented configs: the model, the data and the gRPC port."""
    server = f"++{RESOURCES}.resources_servers.workplace_env.server"
    return [
        f"+policy_base_url={model_url}",
        "+policy_api_key=stand-in",
        "+policy_model_name=stand-in",
        f"{server}.data_dir={WORKBENCH}",
        f"{server}.address={HOST}:{grpc_port}",
    ]


def ng_run(
    config: str, workdir: Path, model_url: str, venv_dir: Path, extra: tuple[str, ...] = ()
) -> tuple[NgRun, int]:
    """The launcher of the resources server's config, ``config`` and the model's, with the
    ``extra`` overrides; its gRPC port."""
    grpc_port = free_port()
    configs = [SERVER_CONFIG, config, MODEL_CONFIG]
    given = [*overrides(model_url, grpc_port), *extra]
    return NgRun(nemo_python(), configs, given, workdir, venv_dir), grpc_port


def nemo_cli(run: NgRun, argv: list[str], timeout_s: float = 900.0) -> None:
    """NeMo console script ``argv[0]`` in the launcher's environment; asserts exit 0."""
    script = run.nemo_python.with_name(argv[0])
    result = subprocess.run(
        [str(script), *argv[1:]],
        cwd=run.workdir,
        env=run.env(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-4000:]}"


def collect(run: NgRun, name: str, rows: list[dict[str, Any]], routing: list[str]) -> Path:
    """``ng_collect_rollouts`` against the running launcher (its head server)."""
    source = write_jsonl(run.workdir / f"{name}_in.jsonl", rows)
    output = run.workdir / f"{name}.jsonl"
    nemo_cli(
        run,
        [
            "ng_collect_rollouts",
            f"++head_server.host={HOST}",
            f"++head_server.port={run.head_port}",
            f"+input_jsonl_fpath={source}",
            f"+output_jsonl_fpath={output}",
            *routing,
        ],
    )
    return output


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex((HOST, port)) == 0


def reverify(run: NgRun, collected: Path, model_url: str) -> Path:
    """``gym eval reverify`` of ``collected`` (it starts the server from the config itself)."""
    output = collected.with_name(f"{collected.stem}_reverified.jsonl")
    nemo_cli(
        run,
        [
            "gym",
            "eval",
            "reverify",
            "--config",
            SERVER_CONFIG,
            "--inputs",
            str(collected.with_name(f"{collected.stem}_materialized_inputs.jsonl")),
            "--rollouts",
            str(collected),
            "--output",
            str(output),
            *overrides(model_url, free_port()),
            "++skip_venv_if_present=true",
            f"++uv_venv_dir={run.venv_dir}",
            f"++head_server.port={free_port()}",
        ],
    )
    return output


@needs_recorded
def test_ng_run_typed_config_collects_and_reverifies_the_recorded_rewards(
    workdir, inputs, model_url, venv_dir
):
    """Typed: ng_run builds the entry's venv with uv, collects through single_agent_turn,
    re-verifies with ``gym eval reverify``; SIGINT drains the server."""
    entry_venv = venv_dir / ENTRY / ".venv"
    assert not entry_venv.exists()
    run, grpc_port = ng_run(TYPED_CONFIG, workdir / "typed", model_url, venv_dir)
    with run:
        assert (entry_venv / "bin" / "workplace-env").exists()  # built by the launcher (uv)
        assert listening(grpc_port)
        collected = collect(
            run,
            "typed",
            typed_rows(inputs["rows"]),
            [f"+environment_server_routes={{workplace_assistant_typed: {TYPED_ENV}}}"],
        )
        assert rewards_by_key(collected) == inputs["rewards"]
    assert run.stop() == 0
    assert "draining ..." in run.log()
    assert not listening(grpc_port)
    reverified = read_jsonl(reverify(run, collected, model_url))
    got = {r["responses_create_params"]["metadata"]["ng_stand_in"]: r["reward"] for r in reverified}
    assert got == inputs["rewards"]


@needs_recorded
def test_ng_run_typed_mcp_config_plays_the_tools_over_mcp_and_reverifies(
    workdir, inputs, model_url, venv_dir
):
    """Typed over MCP: single_agent_turn hands workplace_env_mcp the seed's MCP endpoint; every
    recorded call runs there (one tool-call observation of the agent per call, each completed),
    the rewards are the recorded ones, no session is left open, and re-verification agrees."""
    admin = f"++{RESOURCES}.resources_servers.workplace_env.server.admin_token={ADMIN_TOKEN}"
    run, grpc_port = ng_run(TYPED_MCP_CONFIG, workdir / "typed_mcp", model_url, venv_dir, (admin,))
    with run:
        collected = collect(
            run,
            "typed_mcp",
            typed_rows(inputs["rows"]),
            [f"+environment_server_routes={{workplace_assistant_typed: {MCP_ENV}}}"],
        )
        assert rewards_by_key(collected) == inputs["rewards"]
        with AdminClient(f"{HOST}:{grpc_port}", token=ADMIN_TOKEN) as client:
            assert client.export_sessions().snapshots == []  # every session closed
    assert run.stop() == 0
    played = 0
    for row in read_jsonl(collected):
        calls = [i for i in row["response"]["output"] if i["type"] == "function_call"]
        observed = row["ng_agent_observations"]
        assert observed["source"] == "workplace_env_mcp"
        records = observed["records"]
        assert [r["tool_call_id"] for r in records] == [c["call_id"] for c in calls]
        assert [r["tool_name"] for r in records] == [c["name"] for c in calls]
        assert {r["status"] for r in records} <= {"completed"}
        played += len(calls)
    assert played == sum(len(e["calls"]) for e in inputs["episodes"])
    reverified = read_jsonl(reverify(run, collected, model_url))
    got = {r["responses_create_params"]["metadata"]["ng_stand_in"]: r["reward"] for r in reverified}
    assert got == inputs["rewards"]


@needs_recorded
def test_ng_run_legacy_config_collects_the_recorded_rewards(workdir, inputs, model_url, venv_dir):
    """Legacy: rows collected by agent name through legacy_agent (the entry's venv reused)."""
    run, grpc_port = ng_run(LEGACY_CONFIG, workdir / "legacy", model_url, venv_dir)
    with run:
        collected = collect(run, "legacy", inputs["rows"], [f"+agent_name={AGENT}"])
        assert rewards_by_key(collected) == inputs["rewards"]
    assert run.stop() == 0
    assert not listening(grpc_port)


def _nemo_environ(block: dict[str, Any], instance: str = RESOURCES) -> dict[str, str]:
    config = {instance: {"resources_servers": {"workplace_env": block}}}
    return {"NEMO_GYM_CONFIG_DICT": yaml.safe_dump(config), "NEMO_GYM_CONFIG_PATH": instance}


def test_entry_serves_the_gateway_on_the_instance_port_with_the_config_settings():
    block = {
        "entrypoint": "app.py",
        "host": "127.0.0.1",
        "port": 8123,
        "server": {"address": "127.0.0.1:0", "max_sessions": 7, "admin_open": True},
    }
    block["server"]["data_dir"] = None
    argv, env = serve_command(_nemo_environ(block))
    assert argv[1:] == ["serve", "--http-address", "127.0.0.1:8123"]
    assert Path(argv[0]).name == "workplace-env"
    assert env["WORKPLACE_ENV_ADDRESS"] == "127.0.0.1:0"
    assert env["WORKPLACE_ENV_MAX_SESSIONS"] == "7"
    assert env["WORKPLACE_ENV_ADMIN_OPEN"] == "true"
    assert "WORKPLACE_ENV_DATA_DIR" not in env  # null: the default (or an exported variable)
    settings, _ = load_settings({}, environ=env)  # what serve makes of that environment
    assert (settings.max_sessions, settings.admin_open) == (7, True)
    ipv6 = serve_command(_nemo_environ({"host": "::1", "port": 9}))[0]
    assert ipv6[-1] == "[::1]:9"


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({}, "NEMO_GYM_CONFIG_DICT and NEMO_GYM_CONFIG_PATH must be set"),
        (_nemo_environ({"host": "h", "port": 1}, "other") | {"NEMO_GYM_CONFIG_PATH": "x"}, "no x."),
        (_nemo_environ({"host": "h"}), "host and port must be set"),
        (_nemo_environ({"host": "h", "port": 1, "server": {"max_sesions": 1}}), "max_sessions?"),
        (_nemo_environ({"host": "h", "port": 1, "server": {"http_address": "a:1"}}), "host and"),
        (_nemo_environ({"host": "h", "port": 1, "server": [1]}), "must be a mapping"),
    ],
)
def test_entry_refuses_a_config_it_cannot_start_from(environ, message, monkeypatch, capsys):
    """Exit 2 naming the key, before anything is started (NeMo shows the server's output)."""
    for name in ("NEMO_GYM_CONFIG_DICT", "NEMO_GYM_CONFIG_PATH"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exited:
        nemo_entry.main()
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


#: The tool transports each agent the shipped configs use can play (NeMo Gym 0.7.0's
#: simple_agent refuses a required MCP tool access at every seed, workplace_env_mcp a required
#: direct HTTP one).
AGENT_TRANSPORTS = {"simple_agent": {"direct_http"}, "workplace_env_mcp": {"mcp"}}


def test_every_shipped_environment_server_uses_transports_its_agent_plays():
    """typed.yaml shipped an MCP environment server in front of simple_agent, which fails every
    episode of it ("Simple Agent does not support required MCP tool access"); the README's
    config (docs/examples/nemo_gym.yaml) is checked too."""
    configs: dict[str, Any] = {}
    paths = sorted((REPO / ENTRY / "configs").glob("*.yaml"))
    for path in [*paths, REPO / "docs" / "examples" / "nemo_gym.yaml"]:
        configs |= yaml.safe_load(path.read_text())
    agents = {
        name: next(iter(block["responses_api_agents"]))
        for name, block in configs.items()
        if "responses_api_agents" in block
    }
    checked = 0
    for name, block in configs.items():
        for server in block.get("environment_servers", {}).values():
            agent = agents[server["agent_server"]["name"]]
            transports = set(server.get("resources_tool_transports") or ["direct_http"])
            assert transports <= AGENT_TRANSPORTS[agent], (name, agent, transports)
            checked += 1
    assert checked >= 4  # typed's and typed_mcp's single_agent_turn, legacy_agent, the README's


def test_git_ignores_what_ng_run_leaves_in_a_checkout():
    """ng_run run from a checkout left its server venvs, outputs and setup locks untracked."""
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    left = [
        "environment_servers/single_agent_turn/.venv/bin/python",
        "responses_api_agents/simple_agent/.venv/bin/python",
        f"{MCP_AGENT_ENTRY}/.venv/bin/python",
        f"{MCP_AGENT_ENTRY}/.venv.setup.lock",
        "responses_api_models/openai_model/.venv/bin/python",
        "outputs/2026-01-01/run.log",
        ".venv.setup.lock",
        f"{ENTRY}/.venv.setup.lock",
    ]
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", *left],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.split() == left, done.stderr
    shipped = [f"{MCP_AGENT_ENTRY}/app.py", f"{MCP_AGENT_ENTRY}/requirements.txt"]
    kept = subprocess.run(
        ["git", "check-ignore", "--no-index", *shipped], cwd=REPO, capture_output=True, timeout=60
    )
    assert kept.returncode == 1, kept.stdout  # none of them ignored


@needs_recorded
def test_gym_env_start_serves_the_configs_and_gym_eval_run_collects(
    workdir, inputs, model_url, venv_dir
):
    """NeMo Gym 0.7.0's ``gym env start`` starts the legacy configs as ng_run does, and ``gym
    eval run --no-serve`` collects the rows by agent name against them. (``gym eval run``
    serving itself plays only the prepared dataset a config declares; ours declare none.)"""
    run, grpc_port = ng_run(LEGACY_CONFIG, workdir / "gym_env_start", model_url, venv_dir)
    run.gym_env_start = True
    with run:
        assert listening(grpc_port)
        source = write_jsonl(run.workdir / "rows.jsonl", inputs["rows"])
        output = run.workdir / "eval_run.jsonl"
        nemo_cli(
            run,
            [
                "gym",
                "eval",
                "run",
                "--no-serve",
                "--agent",
                AGENT,
                "--input",
                str(source),
                "--output",
                str(output),
                f"++head_server.host={HOST}",
                f"++head_server.port={run.head_port}",
            ],
        )
        assert rewards_by_key(output) == inputs["rewards"]
    assert run.stop() == 0
    assert not listening(grpc_port)
