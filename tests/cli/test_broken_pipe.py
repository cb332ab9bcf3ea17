"""``workplace-env CMD | head -1``: every command that prints, whose reader closed its output
before it wrote, exits quietly with 141 (128 + SIGPIPE): no traceback, no message.

Each command runs in its own process with stdout (and, for the commands that only talk on
stderr, stderr too) the write end of a pipe whose read end is already closed, so its first
write fails whatever the pipe's buffer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO
from workplace_env.sandbox.load import load_sandbox
from workplace_env.taskgen import generate_tasks
from workplace_env.terminal import BROKEN_PIPE_STATUS

CLI = (sys.executable, "-m", "workplace_env.cli")


def closed_early(args: list[str], *, stderr_too: bool = False) -> subprocess.CompletedProcess:
    """``workplace-env ARGS`` writing into a pipe nobody reads (stderr captured unless
    ``stderr_too``)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [*CLI, *args],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=write,
            stderr=write if stderr_too else subprocess.PIPE,
            text=True,
            timeout=300,
            env={**os.environ, "COLUMNS": "80"},
        )
    finally:
        os.close(write)


@pytest.fixture(scope="module")
def tasks_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pipe") / "tasks.jsonl"
    tasks = generate_tasks(load_sandbox(None), 3, 0)
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["--version"],
        ["run", "--help"],
        ["data", "--help"],
        ["serve", "--print-config"],
        ["config"],
        ["generate-tasks", "--count", "3"],
        ["demo", "--count", "2", "--concurrency", "1"],
        ["run", "{tasks}", "--policy", "oracle"],
    ],
    ids=lambda args: " ".join(args),
)
def test_a_reader_gone_ends_the_command_with_141_and_no_traceback(args, tasks_file):
    done = closed_early([a.format(tasks=tasks_file) for a in args])
    assert done.returncode == BROKEN_PIPE_STATUS == 141, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    assert "Broken pipe" not in done.stderr and "Error" not in done.stderr


def test_stderr_closed_too_ends_quietly(tmp_path):
    """``2>&1 | head -1``: a command that only talks on stderr ends the same way."""
    done = closed_early(["data", "verify", str(tmp_path)], stderr_too=True)
    assert done.returncode == 141


@pytest.mark.parametrize(
    "args",
    [
        ["run", "{tasks}", "--policy", "oracle", "--json-out"],
        ["generate-tasks", "--count", "3", "--out"],
    ],
    ids=lambda args: args[-1],
)
def test_an_output_file_whose_reader_is_gone_ends_with_141(args, tasks_file):
    """``--json-out /dev/stdout | head`` exited 1 ("cannot write"), ``generate-tasks --out``
    2: an output path that is a pipe whose reader has gone ends as stdout's does."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [*CLI, *[a.format(tasks=tasks_file) for a in args], f"/dev/fd/{write}"],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
            pass_fds=(write,),
        )
    finally:
        os.close(write)
    assert done.returncode == BROKEN_PIPE_STATUS, done.stderr
    assert "Traceback" not in done.stderr and "cannot write" not in done.stderr


def test_a_reader_gone_leaves_no_progress_line():
    """``generate-tasks | head``: its progress bar (stderr) was left drawn, ``tasks 0/20``."""
    done = closed_early(["generate-tasks", "--count", "20"])
    assert done.returncode == BROKEN_PIPE_STATUS, done.stderr
    assert done.stderr.strip() == "", done.stderr
