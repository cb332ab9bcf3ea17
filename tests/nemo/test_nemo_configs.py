"""Every NeMo Gym config the project ships validates with NeMo Gym 0.7.0's own config classes,
and its example typed rows with NeMo's typed task model.

Shipped: the YAML files of ``docs/examples/``, ``resources_servers/*/configs/`` and
``responses_api_agents/*/configs/``, and every YAML block of the README and the docs pages
(an included file read as included). ``driver.py configs`` validates each instance in the NeMo
venv as ``ng_run`` does and as the server it starts does (its server class's ``config``);
this checkout's resources server reads its block itself (:func:`nemo_entry.serve_command`).
``docs/examples/typed_rows.py`` makes NeMo Gym's ``example.jsonl`` into typed rows.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import read_jsonl
from tests.helpers import REPO
from tests.nemo.launcher import ENTRY
from tests.nemo.rows import typed_rows
from tests.nemo.servers import run_driver
from tests.nemo.venv import nemo_python, site_packages
from workplace_env.nemo_entry import serve_command
from workplace_env.sandbox.source import NEMO_PACKAGE

SERVER_TYPES = (
    "resources_servers",
    "responses_api_agents",
    "responses_api_models",
    "environment_servers",
)
#: Instances the shipped configs reference that NeMo's own configs define (openai_model.yaml).
NEMO_INSTANCES = {("responses_api_models", "policy_model")}
TYPED_ROWS_SCRIPT = REPO / "docs" / "examples" / "typed_rows.py"
#: What the typed flow makes of a row (``ng_collect_rollouts`` routing it by its taskset).
TYPED_ROW_MODEL = (
    "nemo_gym.episode_types:MaterializedTask"
    "[nemo_gym.single_agent_turn_types:SingleAgentTurnTaskInput]"
)
FENCE = re.compile(r"^```ya?ml\n(.*?)^```", re.M | re.S)
INCLUDE = re.compile(r'^--8<-- "([^"]+)"\n\Z')
#: Where the docs' ``--8<--`` includes are looked up (mkdocs.yml's snippets base_path).
INCLUDE_BASES = (REPO / "docs" / "examples", REPO)


def _is_nemo_config(config: Any) -> bool:
    return isinstance(config, dict) and any(
        isinstance(block, dict) and any(key in block for key in SERVER_TYPES)
        for block in config.values()
    )


def _included(name: str) -> Path:
    (path,) = [base / name for base in INCLUDE_BASES if (base / name).is_file()][:1]
    return path


def shipped_configs() -> dict[str, dict[str, Any]]:
    """Every NeMo config shipped, by where it is (a file, or ``PAGE#N`` for a page's Nth YAML
    block that includes no file)."""
    files = sorted((REPO / "docs" / "examples").glob("*.yaml"))
    for kind in ("resources_servers", "responses_api_agents"):
        files += sorted((REPO / kind).glob("*/configs/*.yaml"))
    texts = {str(p.relative_to(REPO)): p.read_text(encoding="utf-8") for p in files}
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    for page in pages:
        for number, body in enumerate(FENCE.findall(page.read_text(encoding="utf-8"))):
            include = INCLUDE.match(body)
            if include:
                path = _included(include.group(1))
                texts.setdefault(str(path.relative_to(REPO)), path.read_text(encoding="utf-8"))
            else:
                texts[f"{page.relative_to(REPO)}#{number}"] = body
    loaded = {where: yaml.safe_load(text) for where, text in texts.items()}
    return {where: config for where, config in loaded.items() if _is_nemo_config(config)}


def _references(block: Any) -> list[tuple[str, str]]:
    """The ``{type, name}`` server references anywhere in ``block``."""
    if isinstance(block, dict):
        if set(block) == {"type", "name"}:
            return [(block["type"], block["name"])]
        return [ref for value in block.values() for ref in _references(value)]
    if isinstance(block, list):
        return [ref for value in block for ref in _references(value)]
    return []


def test_the_shipped_configs_include_every_kind_the_docs_show():
    """The collection is not empty by accident: the launcher configs, the README's block and
    the pages' includes of both are all in it."""
    where = set(shipped_configs())
    assert {f"{ENTRY}/configs/{n}.yaml" for n in ("workplace_env", "typed", "legacy")} <= where
    assert "docs/examples/nemo_gym.yaml" in where
    assert "README.md#0" in where  # the README's block, validated as it is shown


def test_every_server_reference_names_a_shipped_instance():
    """An agent or environment server naming an instance no shipped config (or NeMo's
    openai_model.yaml) defines fails to start."""
    configs = shipped_configs()
    defined = set(NEMO_INSTANCES)
    for config in configs.values():
        defined |= {(t, name) for name, block in config.items() for t in SERVER_TYPES if t in block}
    dangling = [
        (where, name, ref)
        for where, config in configs.items()
        for name, block in config.items()
        for ref in _references(block)
        if ref not in defined
    ]
    assert dangling == []


def test_every_shipped_config_validates_with_nemo_gyms_config_classes():
    """ng_run refused docs/examples/nemo_gym.yaml (single_agent_turn's
    ``cleanup_timeout_seconds`` is required) and warned on legacy.yaml's limits, which
    legacy_agent ignores: every instance must validate with no error and no warning."""
    configs = shipped_configs()
    request = {"configs": configs, "roots": [str(REPO)], "base_only": [ENTRY]}
    out = run_driver(nemo_python(), ["configs"], json.dumps(request), timeout_s=600)
    assert out.returncode == 0, out.stderr[-4000:]
    checked = json.loads(out.stdout)
    problems = {
        (where, name): result["problems"]
        for where, instances in checked.items()
        for name, result in instances.items()
        if result["problems"] or not result["validated_by"]
    }
    assert problems == {}
    own = 0
    for where, instances in checked.items():
        for name, result in instances.items():
            if result["implementation"] == ENTRY:
                block = configs[where][name]["resources_servers"]["workplace_env"]
                _entry_accepts(name, block)
                own += 1
    assert own >= 1


def _entry_accepts(name: str, block: dict[str, Any]) -> None:
    """This checkout's entry starts from ``block`` as the launcher hands it over."""
    given = {"host": "127.0.0.1", "port": 8080, **block}
    config = {name: {"resources_servers": {"workplace_env": given}}}
    environ = {"NEMO_GYM_CONFIG_DICT": yaml.safe_dump(config), "NEMO_GYM_CONFIG_PATH": name}
    try:
        serve_command(environ)
    except ValueError as exc:  # EntryError
        pytest.fail(f"{name}: {exc}")


def test_the_typed_rows_script_makes_nemos_example_tasks_what_the_typed_flow_takes(tmp_path):
    """docs/examples/typed_rows.py over NeMo's example.jsonl: each row valid as NeMo's typed
    task, and the rows the launcher tests collect."""
    python = nemo_python()
    example = site_packages(python) / NEMO_PACKAGE / "data" / "example.jsonl"
    made = tmp_path / "typed_in.jsonl"
    subprocess.run([sys.executable, TYPED_ROWS_SCRIPT, example, made], check=True)
    shipped = read_jsonl(made)
    assert shipped == typed_rows(read_jsonl(example))
    request = {"model": TYPED_ROW_MODEL, "bodies": shipped}
    out = run_driver(python, ["validate"], json.dumps(request))
    assert out.returncode == 0, out.stderr[-4000:]
    answers = json.loads(out.stdout)
    assert [a["ok"] for a in answers] == [True] * len(shipped) and len(shipped) == 5
    assert [a["value"]["task_id"] for a in answers] == [r["task_id"] for r in shipped]
    bad = {**shipped[0], "task_input": {"task_data": {}}}  # no responses_create_params
    request = {"model": TYPED_ROW_MODEL, "bodies": [bad]}
    out = run_driver(python, ["validate"], json.dumps(request))
    assert json.loads(out.stdout)[0]["ok"] is False


def test_typed_rows_refuses_a_line_that_is_no_dataset_row(tmp_path):
    """A generated task (no model request) is refused naming its line, with no traceback."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "gen-1", "prompt": "p", "ground_truth": []}\n', encoding="utf-8")
    done = subprocess.run(
        [sys.executable, TYPED_ROWS_SCRIPT, tasks, tmp_path / "typed.jsonl"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and f"{tasks}:1: not a dataset row" in done.stderr
    assert "Traceback" not in done.stderr


_SERVER_KEY = "workplace_assistant.resources_servers.workplace_env.server"


@pytest.mark.parametrize(
    ("server", "said"),
    [
        (
            {"max_sessions": "abc"},
            f"max_sessions (from {_SERVER_KEY}.max_sessions): 'abc' is not an integer",
        ),
        ({"idle_ttl_s": 0}, f"idle_ttl_s (from {_SERVER_KEY}.idle_ttl_s) must be > 0"),
        ({"admin_token": " "}, f"admin_token (from {_SERVER_KEY}.admin_token): "),
        ({"tls_cert": "/x.pem"}, f"tls_cert (from {_SERVER_KEY}.tls_cert) needs tls_key"),
        ({"tls_ca": "/x.pem"}, f"{_SERVER_KEY}.tls_ca: not a workplace-env serve setting"),
    ],
)
def test_a_server_setting_serve_would_refuse_is_named_by_its_config_path(server, said):
    """A value from the NeMo config is refused before the server starts, named by the key the
    user wrote (a ``++...server.max_sessions=abc`` override), never by the variable the entry
    passes it in."""
    block = {"host": "127.0.0.1", "port": 8080, "server": server}
    config = {"workplace_assistant": {"resources_servers": {"workplace_env": block}}}
    environ = {
        "NEMO_GYM_CONFIG_DICT": yaml.safe_dump(config),
        "NEMO_GYM_CONFIG_PATH": "workplace_assistant",
    }
    with pytest.raises(ValueError) as err:  # EntryError
        serve_command(environ)
    assert said in str(err.value) and "WORKPLACE_ENV_" not in str(err.value)
    if "max_sessions" in server:
        done = subprocess.run(
            [sys.executable, "-c", "from workplace_env.nemo_entry import main; main()"],
            capture_output=True,
            text=True,
            env=environ,
            timeout=60,
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert done.stderr.strip() == (
            f"workplace_env NeMo Gym entry: configuration error: {said}"
        ), done.stderr
