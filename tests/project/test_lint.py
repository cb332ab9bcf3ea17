"""Static checks as tests, so the one test command also lints: ruff on Python, buf on protos."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed (it is a test extra: ./build.sh installs it)")
    return found


def _run(*args: str) -> None:
    """Run a lint tool from the repository root; its output is the failure message (a cold
    mypy cache on a loaded machine takes minutes: the timeout only catches a hang)."""
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_check():
    _run(_tool("ruff"), "check", ".")


def test_ruff_format():
    _run(_tool("ruff"), "format", "--check", ".")


def test_buf_lint_standard():
    _run(_tool("buf"), "lint")


def test_buf_breaking_against_previous_commit():
    has_parent = subprocess.run(
        ["git", "rev-parse", "--verify", "-q", "HEAD~1"], cwd=REPO, capture_output=True
    )
    if has_parent.returncode != 0:
        pytest.skip("no previous commit to compare the protos with (not a git clone with history)")
    _run(_tool("buf"), "breaking", "--against", ".git#ref=HEAD~1")


def test_mypy_strict_on_the_sdk():
    _run(_tool("mypy"), "--strict", "client/workplace_env_client")


def test_the_mutation_run_names_files_that_exist():
    # tests/mutation/run.sh mutates .mutation/workplace_env/, a link to service/workplace_env.
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mutmut"]
    assert config["source_paths"] == ["workplace_env"]
    for path in config["only_mutate"]:
        assert (REPO / "service" / path).is_file(), path
    for path in config["pytest_add_cli_args_test_selection"]:
        assert (REPO / path).is_file(), path
