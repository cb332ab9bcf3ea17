"""Shared fixtures: where ../shared is, the WorkBench sandbox loaded once per test run."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from workplace_env.sandbox.tables import BaseTables

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("WORKPLACE_ENV_SHARED", REPO.parent / "shared"))
WORKBENCH = SHARED / "data" / "workbench"
GOLDENS = SHARED / "data" / "goldens"

needs_shared = pytest.mark.skipif(
    not (WORKBENCH / "emails.csv").exists(),
    reason=f"reference data not found at {SHARED} (set WORKPLACE_ENV_SHARED to ../shared)",
)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every JSON object of a JSONL file, or [] when the file is absent (tests then skip)."""
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def fuzz_sample(stride: int, email_stride: int = 1) -> list[dict[str, Any]]:
    """A fixed sample of the generated tool-call goldens (tool_calls_fuzz_public.jsonl), to bound
    CI time: every ``email_stride``-th case that calls an email or directory tool (issue 14's
    classes) and every ``stride``-th case. [] when the file is absent."""
    sample = []
    emails = 0
    for i, case in enumerate(read_jsonl(GOLDENS / "tool_calls_fuzz_public.jsonl")):
        if any(call["name"].startswith(("email_", "company_")) for call in case["calls"]):
            emails += 1
            if emails % email_stride == 0:
                sample.append(case)
                continue
        if i % stride == 0:
            sample.append(case)
    return sample


@pytest.fixture(scope="session")
def workbench_tables() -> Iterator[BaseTables]:
    """The real WorkBench sandbox from ../shared (skips when absent)."""
    if not (WORKBENCH / "emails.csv").exists():
        pytest.skip(f"reference data not found at {WORKBENCH}")
    yield BaseTables.from_directory(WORKBENCH)


@pytest.fixture(scope="session")
def workbench_server(workbench_tables):
    """A real gRPC server in this process over the WorkBench sandbox (admin open: loopback)."""
    from workplace_env.config import Settings
    from workplace_env.server.app import start_server
    from workplace_env.sessions import SessionStore

    settings = Settings(admin_open=True)
    server = start_server(SessionStore(workbench_tables), "127.0.0.1:0", settings=settings)
    yield server
    server.stop(grace_s=0.5)


@pytest.fixture(scope="session")
def workbench_client(workbench_server):
    """An SDK client connected to :func:`workbench_server`."""
    from workplace_env_client import EnvironmentClient

    with EnvironmentClient(f"127.0.0.1:{workbench_server.port}") as client:
        yield client
