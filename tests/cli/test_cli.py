"""Every ``workplace-env`` command and setting, typed as a user types it.

Each test asserts what a user notices: the output, the exit status, the files written, a server
that answers. ``serve`` and ``gateway`` run as real processes of the console script (they block
until a signal); the other commands run in-process through typer's runner, which goes through
the same argument parsing. The processes listen on loopback port 0 and are awaited through the
addresses they print and health checks, never sleeps.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from importlib import metadata
from pathlib import Path

import click
import grpc
import httpx
import pytest
import typer
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from typer.testing import CliRunner

import workplace_env_client
from tests.conftest import GOLDENS, WORKBENCH, needs_shared, shared_file
from tests.helpers import table_rows
from workplace_env import cli as cli_module
from workplace_env import demo as demo_module
from workplace_env.checkpoint.files import write_checkpoint
from workplace_env.cli import app
from workplace_env.command_errors import COMMAND_WORDS, RUN_WORDS, server_errors
from workplace_env.config import SPECS, Settings
from workplace_env.gateway import COOKIE_NAME, CookieCodec
from workplace_env.locks import lock_file_of, only_writer
from workplace_env.plurals import counted
from workplace_env.run.command import warn_duplicate_ids
from workplace_env.run.rollout_files import NotRolloutsFile, read_finished, read_rollouts
from workplace_env.run.sandbox_check import foreign_lines
from workplace_env.sandbox.generate import person_first_names
from workplace_env.sandbox.load import load_sandbox
from workplace_env.sandbox.tables import CALENDAR, CSV_FILES, EMAILS, BaseTables
from workplace_env.server.app import RunningServer, start_server
from workplace_env.server.servicer import EnvironmentServicer
from workplace_env.sessions import SessionStore
from workplace_env.taskgen import generate_tasks
from workplace_env.terminal import CommandError, console
from workplace_env_client import (
    EnvironmentClient,
    ServerSandbox,
    UnauthenticatedError,
    UnavailableError,
    WorkplaceEnvError,
)
from workplace_env_client.errors import HINTS, error_class, fix_hint, from_rpc_error
from workplace_env_client.id_bounds import id_length_problem

HANG_S = 60.0  # bound of every wait on a process (a hang guard, never a pacing delay)
FILE_TOKEN = "token-from-file"  # the config file's admin token, overridden by the flag
FLAG_TOKEN = "token-from-flag"
ENV_SECRET = "cookie-secret-from-env"
FLAG_SECRET = "cookie-secret-from-flag"
COOKIE_AGE_S = 14 * 24 * 3600
TASK_COUNT = 6
LOOKUP = ("company_directory_find_email_address", {"name": "zzzz"})


def _command() -> list[str]:
    """The console script as installed (``.venv/bin/workplace-env``), else ``python -m``."""
    script = Path(sys.executable).with_name("workplace-env")
    return [str(script)] if script.exists() else [sys.executable, "-m", "workplace_env.cli"]


def invoke(*args: object, env: dict[str, str] | None = None):
    """``workplace-env ARGS`` in this process; wide columns so tables are not cut."""
    result = CliRunner().invoke(
        app,
        [str(a) for a in args],
        env={"COLUMNS": "200", **(env or {})},
        prog_name="workplace-env",
    )
    assert "Traceback" not in result.output, result.output
    return result


def _serving(port: int) -> bool:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        answer = stub.Check(health_pb2.HealthCheckRequest(), wait_for_ready=True, timeout=HANG_S)
    return answer.status == health_pb2.HealthCheckResponse.SERVING


@dataclass
class Process:
    """A ``workplace-env`` process whose stderr is read line by line in the background."""

    proc: subprocess.Popen
    lines: list[str] = field(default_factory=list)
    _new_line: threading.Condition = field(default_factory=threading.Condition)

    @classmethod
    def start(cls, args: list[str], env: dict[str, str], merged: bool = False) -> Process:
        """Start it; with ``merged`` its stdout is read among the stderr lines."""
        proc = subprocess.Popen(
            [*_command(), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if merged else subprocess.DEVNULL,
            stderr=subprocess.STDOUT if merged else subprocess.PIPE,
            text=True,
            env={**env, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"},
        )
        process = cls(proc)
        threading.Thread(target=process._read, daemon=True).start()
        return process

    def _read(self) -> None:
        stream = self.proc.stderr or self.proc.stdout
        assert stream is not None
        for line in stream:
            with self._new_line:
                self.lines.append(line.rstrip("\n"))
                self._new_line.notify_all()
        with self._new_line:
            self.lines.append("")  # EOF
            self._new_line.notify_all()

    def wait_for(self, pattern: str) -> re.Match[str]:
        """The first stderr line matching ``pattern`` (waits for it; fails at exit)."""
        deadline = time.monotonic() + HANG_S
        seen = 0
        with self._new_line:
            while True:
                for line in self.lines[seen:]:
                    found = re.search(pattern, line)
                    if found:
                        return found
                    if line == "" and self.proc.poll() is not None:
                        raise AssertionError(f"exited before {pattern!r}: {self.lines}")
                seen = len(self.lines)
                left = deadline - time.monotonic()
                assert left > 0, f"hang guard: no {pattern!r} in {self.lines}"
                self._new_line.wait(left)

    def stop(self) -> int:
        """SIGTERM, then the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(HANG_S)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("WORKPLACE_ENV_")}


@dataclass
class Served:
    process: Process
    port: int
    http: str
    metrics: str


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """Commands run in this process configure the ``workplace_env`` loggers and the root's
    handlers (JSON on the runner's stderr, no propagation) and capture Python's warnings: put
    them back for the tests that follow."""
    names = ("workplace_env", "workplace_env.rpc", "")
    loggers = [logging.getLogger(name or None) for name in names]
    saved = [(lg.handlers[:], lg.level, lg.propagate) for lg in loggers]
    yield
    logging.captureWarnings(False)
    for lg, (handlers, level, propagate) in zip(loggers, saved, strict=True):
        lg.handlers[:], lg.propagate = handlers, propagate
        lg.setLevel(level)


@pytest.fixture(scope="module")
def config_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("config") / "server.toml"
    path.write_text(
        "[server]\n"
        'metrics_address = "127.0.0.1:0"\n'
        f'admin_token = "{FILE_TOKEN}"\n'
        'log_level = "WARNING"\n'
        "workers = 3\n"
        "grace_s = 2.0\n"
    )
    return path


@pytest.fixture(scope="module")
def served(config_file) -> Iterator[Served]:
    """``workplace-env serve --config FILE ...`` with the cookie secret from the environment:
    the file turns metrics on and sets an admin token, the flag's admin token wins."""
    env = {**_clean_env(), "WORKPLACE_ENV_COOKIE_SECRET": ENV_SECRET}
    args = ["serve", "--config", str(config_file), "--address", "127.0.0.1:0"]
    args += ["--http-address", "127.0.0.1:0", "--admin-token", FLAG_TOKEN]
    process = Process.start(args, env)
    try:
        port = int(process.wait_for(r"serving on 127\.0\.0\.1:(\d+)\"").group(1))
        http = process.wait_for(r"HTTP gateway on (http://[^\s\"]+)\"").group(1)
        metrics = process.wait_for(r"metrics on (127\.0\.0\.1:\d+)\"").group(1)
        assert _serving(port)
        yield Served(process, port, http, metrics)
    finally:
        status = process.stop()
    assert status == 0, process.lines
    assert any("draining ..." in line for line in process.lines)


@pytest.fixture(scope="module")
def gateway_url(served) -> Iterator[str]:
    """``workplace-env gateway`` in front of the served process, its cookie secret a flag."""
    target = f"127.0.0.1:{served.port}"
    args = ["gateway", "--grpc-target", target, "--address", "127.0.0.1:0"]
    process = Process.start([*args, "--cookie-secret", FLAG_SECRET], _clean_env())
    try:
        url = process.wait_for(rf"HTTP gateway on (http://\S+) -> {re.escape(target)}\"").group(1)
        assert httpx.get(f"{url}/health", timeout=HANG_S).json() == {"status": "ok"}
        yield url
    finally:
        status = process.stop()
    assert status == 0, process.lines


@pytest.fixture(scope="module")
def tasks_file(tmp_path_factory) -> Path:
    """``workplace-env generate-tasks --count 6 --seed 3 --out FILE``."""
    path = tmp_path_factory.mktemp("tasks") / "tasks.jsonl"
    result = invoke("generate-tasks", "--count", TASK_COUNT, "--seed", 3, "--out", path)
    assert result.exit_code == 0, result.output
    assert f"wrote {TASK_COUNT} tasks to {path}" in result.output
    return path


@pytest.fixture
def restore_target() -> Iterator[tuple[str, SessionStore]]:
    """An empty server whose admin token is ``restore-token``."""
    store = SessionStore(load_sandbox(None))
    running = start_server(store, "127.0.0.1:0", settings=Settings(admin_token="restore-token"))
    yield f"127.0.0.1:{running.port}", store
    running.stop(grace_s=0.5)


# -- settings -------------------------------------------------------------------------------------


def test_version_prints_the_installed_version():
    done = subprocess.run(
        [*_command(), "--version"], capture_output=True, text=True, timeout=HANG_S
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"workplace-env {metadata.version('workplace-env')}\n"
    # one version: the SDK's __version__ (its metadata) is the one the CLI prints
    assert done.stdout == f"workplace-env {workplace_env_client.__version__}\n"
    assert (
        metadata.requires("workplace-env")[0]
        == f"workplace-env-client=={workplace_env_client.__version__}"
    )


def test_config_shows_each_setting_and_where_it_came_from(config_file):
    env = {"WORKPLACE_ENV_CONFIG": str(config_file), "WORKPLACE_ENV_MAX_SESSIONS": "77"}
    result = invoke("config", env=env)
    assert result.exit_code == 0, result.output
    rows = table_rows(result.stdout)
    assert rows["max_sessions"] == ["77", "env"]
    assert rows["workers"] == ["3", "file"]
    assert rows["address"] == ["127.0.0.1:50051", "default"]
    assert rows["admin_token"] == ["***", "file"]  # a secret is never printed
    assert FILE_TOKEN not in result.output


def test_serve_print_config_puts_flags_over_env_over_file(config_file):
    result = invoke(
        "serve", "--print-config", "--config", config_file, "--workers", "5",
        env={"WORKPLACE_ENV_GRACE_S": "7", "WORKPLACE_ENV_WORKERS": "4"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = table_rows(result.stdout)
    assert rows["workers"] == ["5", "flag"]  # over the env's 4 and the file's 3
    assert rows["grace_s"] == ["7.0", "env"]  # over the file's 2.0
    assert rows["log_level"] == ["WARNING", "file"]
    assert rows["max_sessions"] == ["50000", "default"]


def test_serve_takes_the_verify_bounds_as_flags():
    result = invoke(
        "serve", "--print-config", "--max-verify-output-items", "5", "--max-verify-calls", "7"
    )
    assert result.exit_code == 0, result.output
    rows = table_rows(result.stdout)
    assert rows["max_verify_output_items"] == ["5", "flag"]
    assert rows["max_verify_calls"] == ["7", "flag"]


def test_serve_takes_the_http_limits_as_flags():
    result = invoke(
        "serve",
        "--print-config",
        "--http-header-timeout-s",
        "2.5",
        "--http-body-timeout-s",
        "30",
        "--http-max-connections",
        "100",
    )
    assert result.exit_code == 0, result.output
    rows = table_rows(result.stdout)
    assert rows["http_header_timeout_s"] == ["2.5", "flag"]
    assert rows["http_body_timeout_s"] == ["30.0", "flag"]
    assert rows["http_max_connections"] == ["100", "flag"]


def test_a_connection_limit_over_the_open_file_limit_fails_the_start():
    result = invoke(
        "serve",
        "--address",
        "127.0.0.1:0",
        "--http-address",
        "127.0.0.1:0",
        "--http-max-connections",
        "2000000000",
    )
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert "cannot start the HTTP gateway: http_max_connections 2000000000 is more than" in said
    assert "RLIMIT_NOFILE" in said


def test_a_yaml_config_file_is_read(tmp_path):
    path = tmp_path / "server.yaml"
    path.write_text("server:\n  max_call_ids: 12\n  admin_open: true\n")
    result = invoke("config", "--config", path)
    assert result.exit_code == 0, result.output
    rows = table_rows(result.stdout)
    assert rows["max_call_ids"] == ["12", "file"] and rows["admin_open"] == ["True", "file"]


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["serve", "--workers", "many"], {}, "Invalid value for '--workers'"),
        (
            ["serve", "--print-config", "--max-sessions", "0"],
            {},
            "max_sessions (from --max-sessions)",
        ),
        (
            ["serve", "--print-config", "--max-session-write-bytes", "-1"],
            {},
            "max_session_write_bytes (from --max-session-write-bytes) must be >= 0, got -1",
        ),
        (
            ["gateway", "--max-verify-output-items", "-1"],
            {},
            "max_verify_output_items (from --max-verify-output-items) must be >= 0, got -1",
        ),
        (["gateway", "--max-verify-calls", "x"], {}, "Invalid value for '--max-verify-calls'"),
        (
            ["gateway", "--http-header-timeout-s", "0"],
            {},
            "http_header_timeout_s (from --http-header-timeout-s) must be > 0, got 0.0",
        ),
        (
            ["serve", "--print-config", "--http-max-connections", "-1"],
            {},
            "http_max_connections (from --http-max-connections) must be >= 0, got -1",
        ),
        (["config"], {"WORKPLACE_ENV_MAX_SESSIONS": "lots"}, "WORKPLACE_ENV_MAX_SESSIONS"),
        (
            ["config", "--config", "missing.toml"],
            {},
            "Invalid value for '--config': no such file or directory: missing.toml",
        ),
        (["run", "TASKS", "--policy", "greedy"], {}, "--policy must be one of"),
        (["run", "TASKS", "--concurrency", "0"], {}, "Invalid value for '--concurrency'"),
        (["run", "TASKS", "--policy", "model", "--model", "m"], {}, "needs --base-url"),
        (["demo", "--count", "0"], {}, "Invalid value for '--count'"),
        (["checkpoint", "save"], {}, "Missing argument 'DIRECTORY'"),
        # An infinite deadline was sent, and gRPC answered DEADLINE_EXCEEDED at once
        (["checkpoint", "save", "d", "--timeout-s", "inf"], {}, "Invalid value for '--timeout-s'"),
        (
            ["checkpoint", "restore", ".", "--timeout-s", "nan"],
            {},
            "Invalid value for '--timeout-s'",
        ),
        (
            ["run", "TASKS", "--policy", "model", "--timeout", "inf"],
            {},
            "Invalid value for '--timeout'",
        ),
        (["run", "TASKS", "--max-retries", "1000"], {}, "Invalid value for '--max-retries'"),
        (["generate-tasks", "--data-dir", "no/such/dir"], {}, "Invalid value for '--data-dir'"),
        (["generate-tasks", "--data-dir", "x" * 300], {}, "cannot stat xxx"),  # too long
        (["serve", "--print-config", "--data-dir", "a\0b"], {}, "a NUL byte in the path"),
        (["serve", "--no-such-flag"], {}, "No such option: --no-such-flag"),
        (["run", "TASKS", "--target", " "], {}, "Invalid value for '--target': must be HOST"),
        (["checkpoint", "save", "d", "--target", ""], {}, "Invalid value for '--target'"),
        (["gateway", "--grpc-target", ""], {}, "Invalid value for '--grpc-target'"),
        (["generate-tasks", "--count", "100001"], {}, "Invalid value for '--count'"),
        # Every path or source argument names itself and its actual problem
        (["data", "verify", "no/such/dir"], {}, "'DIRECTORY': no such file or directory"),
        (["data", "verify", ""], {}, "Invalid value for 'DIRECTORY': empty value"),
        (["data", "verify", "TASKS"], {}, "Invalid value for 'DIRECTORY': not a directory"),
        (["data", "fetch", "--from", ""], {}, "--from: empty value"),
        (["data", "fetch", "--from", " "], {}, "--from: blank value"),
        (["run", " "], {}, "Invalid value for 'FILE': blank value"),
        (
            ["serve", "--print-config", "--address", ""],
            {},
            "address (from --address): empty value; give one, or omit the flag for the default",
        ),
        (
            ["serve", "--print-config", "--tls-cert", " "],
            {},
            "tls_cert (from --tls-cert): blank value; give one, or omit the flag",
        ),
        (["data", "fetch"], {"WORKPLACE_ENV_DATA_FROM": ""}, "$WORKPLACE_ENV_DATA_FROM: empty"),
        (
            ["data", "fetch", "--to", "out"],
            {"WORKPLACE_ENV_DATA_FROM": "no/such"},
            "$WORKPLACE_ENV_DATA_FROM: no such file or directory: no/such",
        ),
        (["data", "fetch", "--to", "TASKS"], {}, "Invalid value for '--to': not a directory"),
        (["data", "fetch", "--to", ""], {}, "Invalid value for '--to': empty value"),
        (["run", ""], {}, "Invalid value for 'FILE': empty value"),
        (["run", "no/such.jsonl"], {}, "'FILE': no such file or directory: no/such.jsonl"),
        (["run", "."], {}, "Invalid value for 'FILE': a directory, not a file: ."),
        (["run", "TASKS", "--data-dir", ""], {}, "Invalid value for '--data-dir': empty value"),
        (["run", "TASKS", "--config", ""], {}, "Invalid value for '--config': empty value"),
        (["run", "TASKS", "--json-out", "TASKS/s.json"], {}, "'--json-out': not a directory: /"),
        (["run", "TASKS", "--json-out", "TASKS/a/s.json"], {}, "'--json-out': not a directory: /"),
        (["run", "TASKS", "--out", "."], {}, "'--out': a directory, not a file"),
        (["config"], {"WORKPLACE_ENV_CONFIG": ""}, "WORKPLACE_ENV_CONFIG: empty value"),
        (
            ["serve", "--print-config"],
            {"WORKPLACE_ENV_DATA_DIR": ""},
            "data_dir (from WORKPLACE_ENV_DATA_DIR): empty value",
        ),
        (
            ["config"],
            {"WORKPLACE_ENV_DATA_DIR": "no/such/dir"},
            "data_dir (from WORKPLACE_ENV_DATA_DIR): no such file or directory: no/such/dir",
        ),
        (["generate-tasks", "--out", "TASKS/t.jsonl"], {}, "'--out': not a directory: /"),
        *(
            (args, env, f"{who}: not a sandbox directory: missing {', '.join(names)} (it")
            for args, env, who in [
                (["run", "TASKS", "--data-dir", "EMPTY"], {}, "'--data-dir': EMPTY"),
                (["generate-tasks", "--data-dir", "EMPTY"], {}, "'--data-dir': EMPTY"),
                (["serve", "--data-dir", "EMPTY"], {}, "'--data-dir': EMPTY"),
                (["config"], {"WORKPLACE_ENV_DATA_DIR": "EMPTY"}, "(from WORKPLACE_ENV_DATA_DIR)"),
            ]
            for names in [sorted(CSV_FILES.values())]
        ),
        (["checkpoint", "restore", "no/such"], {}, "'DIRECTORY': no such file or directory"),
        (["run", "TASKS", "--target", "::::"], {}, "'--target': '::::': an IPv6 address goes in"),
        (["checkpoint", "save", "ck", "--target", "h:0"], {}, "'h:0': the port must be a number"),
        (["gateway", "--grpc-target", "http://x:1"], {}, "'http://x:1' is a URL; a gRPC target"),
        (["checkpoint", "save", "TASKS"], {}, "Invalid value for 'DIRECTORY': not a directory"),
    ],
)
def test_a_bad_value_is_a_usage_error_not_a_traceback(tasks_file, tmp_path, args, env, says):
    """``EMPTY``: a directory with no CSV of the sandbox, refused once naming every missing
    file (before, ``--data-dir`` warned it was played as it is, then could not read it)."""
    named = {"TASKS": str(tasks_file), "EMPTY": str(tmp_path)}

    def typed(text: str) -> str:
        for name, value in named.items():
            text = text.replace(name, value)
        return text

    result = invoke(*map(typed, args), env={k: typed(v) for k, v in env.items()})
    said = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert type(result.exception) is SystemExit  # an exit status, not a crash
    assert typed(says) in said, result.output
    assert "played as they are" not in said


MODEL_RUN = ["run", "TASKS", "--policy", "model", "--model", "m", "--base-url", "http://x"]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN", "1e400"])
@pytest.mark.parametrize(
    ("args", "env"),
    [
        ([*MODEL_RUN, "--temperature"], {}),
        ([*MODEL_RUN, "--top-p"], {}),
        ([*MODEL_RUN, "--timeout"], {}),
        (["checkpoint", "save", "OUT", "--timeout-s"], {}),
        (["checkpoint", "restore", "OUT", "--timeout-s"], {}),
        (["serve", "--print-config", "--grace-s"], {}),
        (["gateway", "--http-body-timeout-s"], {}),
        (["config"], {"WORKPLACE_ENV_IDLE_TTL_S": ""}),
    ],
    ids=lambda v: v[-1] if isinstance(v, list) else "env",
)
def test_a_float_that_is_no_finite_number_is_said_to_be_one(tasks_file, tmp_path, args, env, value):
    """Every float option and setting: ``nan`` or an infinity must be a finite number, not a
    number out of range (which ``nan`` never is)."""
    named = {"TASKS": str(tasks_file), "OUT": str(tmp_path)}
    typed = [named.get(a, a) for a in args] + ([value] if not env else [])
    result = invoke(*typed, env={k: value for k in env})
    said = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert "finite number" in said, said
    assert "less than" not in said and "greater than" not in said


#: Every output path of every command, as ``(arguments with OUT, the option's name)``.
OUTPUT_OPTIONS = [
    (["run", "TASKS", "--json-out", "OUT"], "--json-out"),
    (["run", "TASKS", "--policy", "model", "--model", "m", "--base-url", "http://x", "--out",
      "OUT"], "--out"),
    (["generate-tasks", "--count", "1", "--out", "OUT"], "--out"),
    (["data", "fetch", "--to", "OUT"], "--to"),
    (["checkpoint", "save", "OUT"], "DIRECTORY"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "option"), OUTPUT_OPTIONS, ids=lambda v: str(v[:2]))
def test_an_output_in_a_missing_directory_is_refused_before_any_work_saying_how_to_make_it(
    tasks_file, tmp_path, args, option
):
    missing = tmp_path / "no" / "such"
    out = missing / "out.json"
    result = invoke(*[{"TASKS": str(tasks_file), "OUT": str(out)}.get(a, a) for a in args])
    said = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in said
    assert f"no such directory: {missing}; make it first: mkdir -p {missing}" in said
    assert not (tmp_path / "no").exists()  # nothing made


@pytest.mark.parametrize(("args", "option"), OUTPUT_OPTIONS[:3], ids=lambda v: str(v[:2]))
def test_an_output_file_another_command_is_writing_is_refused_naming_it_and_its_pid(
    tasks_file, tmp_path, args, option
):
    """Two commands writing one file at once both said they wrote it while it held one's lines:
    while another command holds the file's lock, the command is refused at once (exit 2)
    naming the file and the holder's pid, and writes nothing; once it ends, the command runs."""
    out = tmp_path / "race.jsonl"
    typed = [{"TASKS": str(tasks_file), "OUT": str(out)}.get(a, a) for a in args]
    with only_writer(lock_file_of(out), f"another command is writing {out}"):
        result = invoke(*typed)
        said = " ".join(result.output.split())
        assert result.exit_code == 2, result.output
        assert f"writing {out} (pid {os.getpid()})" in said, said
        assert not out.exists()
    if args[0] == "generate-tasks":
        assert invoke(*typed).exit_code == 0
        assert len(out.read_text().splitlines()) == 1


@pytest.mark.parametrize(("args", "option"), OUTPUT_OPTIONS, ids=lambda v: str(v[:2]))
def test_an_output_where_no_file_can_be_written_is_refused_before_any_work(
    tasks_file, args, option
):
    """``/proc`` takes no new file even for root, whose permission bits say it may: the
    reason is the error of a create there, not a claim that /proc is missing."""
    with pytest.raises(OSError) as refused:
        os.open("/proc/fx-out", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    result = invoke(*[{"TASKS": str(tasks_file), "OUT": "/proc/fx-out"}.get(a, a) for a in args])
    said = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in said
    assert f"cannot create a file in /proc: {refused.value.strerror}" in said
    assert "episodes" not in said and "wrote" not in said  # nothing played nor written


@pytest.mark.parametrize(
    ("env", "says"),
    [
        (
            {"WORKPLACE_ENV_WORKERS": "abc"},
            "workers (from WORKPLACE_ENV_WORKERS): 'abc' is not an integer",
        ),
        ({"WORKPLACE_ENV_GRACE_S": "soon"}, "'soon' is not a number"),
        ({"WORKPLACE_ENV_ADMIN_OPEN": "maybe"}, "'maybe' is not a boolean (true/false"),
        ({}, "config file both.toml: top-level workers and [server] workers both set"),
    ],
)
def test_config_errors_read_as_written(tmp_path, monkeypatch, env, says):
    """Configuration errors print their text as written: "[server]" is not taken for rich
    markup (which would print "top-level workers and  workers both set"), and a bad integer
    is named in plain English, not "'abc' is not a int"."""
    monkeypatch.chdir(tmp_path)
    Path("both.toml").write_text("workers = 2\n[server]\nworkers = 7\n")
    args = ["config"] if env else ["config", "--config", "both.toml"]
    result = invoke(*args, env=env)
    assert result.exit_code == 2, result.output
    assert says in " ".join(result.output.split()), result.output


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["serve"],
        ["gateway"],
        ["config"],
        ["run"],
        ["generate-tasks"],
        ["demo"],
        ["checkpoint"],
        ["checkpoint", "save"],
        ["checkpoint", "restore"],
        ["data"],
        ["data", "fetch"],
        ["data", "verify"],
    ],
)
def test_every_help_renders(command):
    """Help texts are rich markup too: a default shown in brackets that reads as a closing
    tag (``[/mcp]``) is printed as written, not taken for markup (a MarkupError)."""
    result = invoke(*command, "--help")
    assert result.exit_code == 0, result.output
    if command in (["serve"], ["gateway"]):
        shown = SPECS["mcp_path"].help_for(command[0], Settings().mcp_path)
        assert "[/" in shown and " ".join(shown.split()) in " ".join(result.output.split())


def _every_command() -> Iterator[tuple[list[str], click.Command]]:
    """Each command of the CLI (groups included) with its path of names, walked from the app."""
    todo: list[tuple[list[str], click.Command]] = [([], typer.main.get_command(app))]
    while todo:
        path, command = todo.pop()
        yield path, command
        for name, sub in getattr(command, "commands", {}).items():
            todo.append(([*path, name], sub))


#: Docstring markup that must never reach a help screen (RST roles and literals, Markdown).
HELP_MARKUP = re.compile(r"``|:\w+:`|\*\*|`[^`\s]")


@pytest.mark.parametrize(("path", "command"), list(_every_command()), ids=lambda v: str(v))
def test_every_help_is_plain_text_with_whole_summaries_at_80_columns(path, command):
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert not HELP_MARKUP.search(result.output), result.output
    said = " ".join(result.output.split())
    for name, sub in getattr(command, "commands", {}).items():
        first = inspect.cleandoc(sub.help or "").split("\n\n")[0]
        assert f"{name} {' '.join(first.split())}" in said, name


def _with_csv_names(directory: Path) -> Path:
    """``directory`` made, holding an empty file under each sandbox CSV's name (a data
    directory a setting or ``--data-dir`` takes; its tables are not read here)."""
    directory.mkdir(parents=True)
    for name in CSV_FILES.values():
        (directory / name).touch()
    return directory


def test_printed_values_keep_their_brackets(tmp_path):
    """Every value shown through rich is escaped: a setting's value in the config table and a
    command error's detail (here an address with brackets in it) are printed as they are."""
    data = _with_csv_names(tmp_path / "[data]")
    result = invoke("config", env={"WORKPLACE_ENV_DATA_DIR": str(data)})
    assert result.exit_code == 0, result.output
    assert table_rows(result.output)["data_dir"][0] == str(data)
    result = invoke("serve", "--address", "[fe80::1%nosuch]:1", "--log-level", "ERROR")
    assert result.exit_code == 2, result.output
    assert "[fe80::1%nosuch]:1" in result.output, result.output


def test_every_table_keeps_its_numbers_and_ids_whole_at_40_columns(tasks_file, tmp_path):
    """demo, run and config at a 40-column terminal: every number and id of their tables
    is printed whole (the table is wider than the terminal rather than cut to an ellipsis)."""
    narrow = {"COLUMNS": "40"}
    data_dir = str(_with_csv_names(tmp_path / "a-long-directory-name" / "workbench-data"))
    config = invoke("config", env={**narrow, "WORKPLACE_ENV_DATA_DIR": data_dir})
    rows = table_rows(config.stdout)
    assert rows["max_session_write_bytes"] == ["67108864", "default"]
    assert rows["data_dir"][0] == data_dir
    demo = invoke("demo", "--count", "6", "--concurrency", "1", env=narrow)
    assert demo.exit_code == 0, demo.output
    [episodes, oracle, oracle_rate, perturbed, perturbed_rate] = table_rows(demo.stdout)["all"]
    assert (episodes, oracle) == ("6", "1.000") and 0.0 <= float(perturbed) < 1.0
    assert int(oracle_rate) > 0 and int(perturbed_rate) > 0
    run = invoke("run", tasks_file, "--policy", "oracle", env=narrow)
    assert run.exit_code == 0, run.output
    rows = table_rows(run.stdout)
    assert rows["mean reward (played)"] == ["1.0000"] and float(rows["episodes/s"][0]) > 0
    for result in (config, demo, run):
        assert "…" not in result.stdout, result.stdout


# -- serve, gateway and the cookie secret ---------------------------------------------------------


def test_serve_takes_the_file_settings_the_flags_do_not_override(served):
    """The file's metrics address is served; its admin token lost to the flag's (below)."""
    text = httpx.get(f"http://{served.metrics}/metrics", timeout=HANG_S).text
    assert "workplace_env_seeds_total" in text


def test_serve_names_its_sandbox(served):
    """The embedded sandbox is named with its generator's seed and scale and its digest."""
    record = json.loads(served.process.wait_for('"message": "sandbox: ').string)
    assert record["sandbox"] == f"generated (seed=0,scale=1.0), digest {load_sandbox(None).digest}"


def test_an_address_in_use_stops_serve_and_gateway_with_a_clear_error(served):
    taken = f"127.0.0.1:{served.port}"
    result = invoke("serve", "--address", taken, "--log-level", "ERROR")
    assert result.exit_code == 2, result.output
    said = json.loads(result.output.splitlines()[-1])["message"]  # serve writes JSON lines only
    assert said.startswith(f"cannot start: cannot bind {taken}: ")
    assert "Address already in use" in said and said.endswith("choose another --address")
    http_taken = served.http.removeprefix("http://")
    result = invoke("gateway", "--grpc-target", taken, "--address", http_taken)
    assert result.exit_code == 2, result.output
    said = json.loads(result.output.splitlines()[-1])["message"]
    assert f"cannot start the HTTP gateway: cannot bind {http_taken}: " in said
    assert said.endswith("choose another --address")


@pytest.mark.parametrize("flag", ["--address", "--metrics-address", "--http-address"])
def test_serve_on_a_port_in_use_names_the_address_the_reason_and_the_flag(flag):
    """Each address ``serve`` listens on, held by a plain socket: exit 2 with ``cannot bind
    ADDRESS: [Errno 98] Address already in use`` and the flag to change (gRPC's own message
    names neither the reason nor the flag)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = f"127.0.0.1:{holder.getsockname()[1]}"
        others = [] if flag == "--address" else ["--address", "127.0.0.1:0"]
        result = invoke("serve", flag, taken, *others, "--log-level", "ERROR")
    assert result.exit_code == 2, result.output
    said = json.loads(result.output.splitlines()[-1])["message"]
    assert f"cannot bind {taken}: " in said and "Address already in use" in said
    assert said.endswith(f"choose another {flag}")


@pytest.mark.parametrize(
    ("first", "second", "second_host"),
    [
        ("--address", "--http-address", "127.0.0.1"),
        ("--address", "--metrics-address", "localhost"),
        ("--http-address", "--metrics-address", "0.0.0.0"),
    ],
)
def test_serve_with_two_of_its_listeners_on_one_port_names_both_flags(first, second, second_host):
    """Refused before anything listens (a held port: a missed clash fails to bind, not hangs)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        others = [] if "--address" in (first, second) else ["--address", "127.0.0.1:0"]
        args = [first, f"127.0.0.1:{port}", second, f"{second_host}:{port}", *others]
        result = invoke("serve", *args, "--log-level", "ERROR")
    assert result.exit_code == 2, result.output
    said = result.output.splitlines()[-1]
    assert (
        f"from {first}) 127.0.0.1:{port}" in said and f"from {second}) {second_host}:{port}" in said
    )
    assert f"are the same port {port}" in said and "choose another port for one of them" in said


@pytest.mark.parametrize("command", ["serve", "gateway"])
def test_a_port_in_use_is_said_in_json_lines_only(command):
    """The console script on a port a plain socket holds: every stderr line is a JSON record
    (gRPC core's own ``E... add_port.cc`` line was printed before ours)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = f"127.0.0.1:{holder.getsockname()[1]}"
        proc = subprocess.run(
            [*_command(), command, "--address", taken],
            capture_output=True,
            text=True,
            timeout=HANG_S,
            env=_clean_env(),
        )
    assert proc.returncode == 2, proc.stderr
    records = [json.loads(line) for line in proc.stderr.splitlines()]
    assert f"cannot bind {taken}: " in records[-1]["message"]


@pytest.mark.parametrize(
    "args",
    [
        ["serve", "--address", "127.0.0.1:0", "--admin-open"],
        ["serve", "--address", "127.0.0.1:0", "--admin-open", "--http-address", "127.0.0.1:0"],
        ["gateway", "--address", "127.0.0.1:0", "--grpc-target"],
    ],
    ids=["serve", "serve-http", "gateway"],
)
def test_every_line_a_server_writes_is_json(served, args):
    """From the first line (a settings warning) to the last after SIGTERM, stdout and stderr
    carry JSON records only: the addresses, warnings, uvicorn's lines, the drain."""
    if args[-1] == "--grpc-target":
        args = [*args, f"127.0.0.1:{served.port}"]
    env = {**_clean_env(), "WORKPLACE_ENV_QQQ": "1"}
    process = Process.start(args, env, merged=True)
    try:
        if args[0] == "serve" and "--http-address" not in args:
            process.wait_for("serving on ")
        else:
            url = json.loads(process.wait_for("HTTP gateway on ").string)["url"]
            assert httpx.get(f"{url}/health", timeout=HANG_S).status_code == 200
    finally:
        status = process.stop()
    assert status == 0
    records = [json.loads(line) for line in process.lines if line]
    assert records[0]["level"] == "WARNING" and "WORKPLACE_ENV_QQQ" in records[0]["message"]
    assert all({"ts", "level", "logger", "message"} <= r.keys() for r in records)
    if args[0] == "serve":
        assert records[-1]["message"] == "drain: stopped"


MCP_NAME = "mcp__workplace_assistant__email_send_email"
SEND_ARGS = {"recipient": "a@b.com", "subject": "s", "body": "b"}
MCP_ROW = {
    "id": "mcp-off",
    "ground_truth": [{"name": "email_send_email", "arguments": json.dumps(SEND_ARGS)}],
}


def _legacy_episode(url: str, name: str) -> tuple[dict, float]:
    """A legacy seed (its answer) and the reward of one call of ``name`` with the truth's
    arguments, through the gateway at ``url``."""
    call = {"type": "function_call", "call_id": "c1", "name": name}
    call["arguments"] = MCP_ROW["ground_truth"][0]["arguments"]
    with httpx.Client(base_url=url, timeout=HANG_S) as http:
        seeded = http.post("/seed_session", json=MCP_ROW)
        assert seeded.status_code == 200, seeded.text
        body = {**MCP_ROW, "responses_create_params": {"input": []}, "response": {"output": [call]}}
        verified = http.post("/verify", json=body)
        assert verified.status_code == 200, verified.text
        return seeded.json(), verified.json()["reward"]


def test_mcp_is_on_by_default_and_off_with_an_empty_mcp_path(served, tmp_path):
    """``--mcp-path ''`` (serve's co-hosted gateway) and ``WORKPLACE_ENV_MCP_PATH=`` (the
    ``gateway`` command) turn MCP off: the legacy seed answers ``{}`` and a call named in the
    MCP namespace is scored as sent (an unknown tool), as the reference's default config."""
    seeded, reward = _legacy_episode(served.http, MCP_NAME)
    assert "mcp" in seeded and reward == 1.0  # the served fixture: MCP on
    args = ["serve", "--address", "127.0.0.1:0", "--http-address", "127.0.0.1:0"]
    off = Process.start([*args, "--mcp-path", "", "--log-level", "ERROR"], _clean_env())
    target = f"127.0.0.1:{served.port}"
    args = ["gateway", "--grpc-target", target, "--address", "127.0.0.1:0"]
    gateway_off = Process.start(args, {**_clean_env(), "WORKPLACE_ENV_MCP_PATH": ""})
    try:
        urls = [
            off.wait_for(r"HTTP gateway on (http://[^\s\"]+)\"").group(1),
            gateway_off.wait_for(r"HTTP gateway on (http://\S+) -> ").group(1),
        ]
        for url in urls:
            assert _legacy_episode(url, MCP_NAME) == ({}, 0.0), url
            assert _legacy_episode(url, "email_send_email") == ({}, 1.0), url
    finally:
        assert (off.stop(), gateway_off.stop()) == (0, 0)
    result = invoke("config", env={"WORKPLACE_ENV_MCP_PATH": "mcp"})
    assert result.exit_code == 2
    assert "mcp_path (from WORKPLACE_ENV_MCP_PATH) must start with '/'" in result.output


def test_a_gateway_whose_backend_is_down_warns_once_naming_it_and_how_to_start_it():
    """No server at ``--grpc-target`` (a port just freed): the gateway serves at once (its
    address line first) and logs one warning naming the target and the command to start it."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        target = f"127.0.0.1:{holder.getsockname()[1]}"
    args = ["gateway", "--grpc-target", target, "--address", "127.0.0.1:0"]
    process = Process.start(args, _clean_env())
    try:
        url = process.wait_for(r"HTTP gateway on (http://\S+) -> ").group(1)
        warned = process.wait_for(r"^.*the gRPC server at .*$").group(0)
        assert httpx.get(f"{url}/ready", timeout=HANG_S).status_code == 503
    finally:
        assert process.stop() == 0, process.lines
    record = json.loads(warned)
    assert record["level"] == "WARNING" and record["grpc_target"] == target
    assert record["message"].startswith(f"the gRPC server at {target} does not answer (UNAVAILABLE")
    # the command starts as the gateway was started (the console script's path, so it runs
    # as printed), else ``workplace-env``
    started = _command()[0] if len(_command()) == 1 else "workplace-env"
    assert f"start it with `{started} serve --address {target}`" in record["message"]
    assert sum("the gRPC server at" in line for line in process.lines) == 1
    printed = shlex.split(record["message"].split("`")[1])
    started = Process.start(printed[1:], _clean_env())  # the command, as printed
    try:
        started.wait_for(rf"workplace-env serving on {re.escape(target)}")
    finally:
        assert started.stop() == 0, started.lines


def _seed_over_http(url: str) -> str:
    """A legacy seed through a gateway: the value of the session cookie it sets."""
    with httpx.Client(base_url=url, timeout=HANG_S) as http:
        assert set(http.post("/seed_session", json={"task_id": 1}).json()) == {"mcp"}
        return http.cookies[COOKIE_NAME]


@pytest.mark.parametrize("which", ["serve (env secret)", "gateway (flag secret)"])
def test_a_cookie_signed_with_the_configured_secret_is_accepted_another_refused(
    served, gateway_url, which
):
    url, secret, other = (
        (served.http, ENV_SECRET, FLAG_SECRET)
        if which.startswith("serve")
        else (gateway_url, FLAG_SECRET, ENV_SECRET)
    )
    issued = _seed_over_http(url)
    session = CookieCodec(secret, COOKIE_AGE_S).decode(issued)
    assert session.get("session_id"), "the issued cookie is not signed with the secret"
    assert CookieCodec(other, COOKIE_AGE_S).decode(issued) == {}
    for signer, status in ((secret, 200), (other, 404)):
        cookie = CookieCodec(signer, COOKIE_AGE_S).encode(session)
        with httpx.Client(base_url=url, cookies={COOKIE_NAME: cookie}, timeout=HANG_S) as http:
            answer = http.post(f"/{LOOKUP[0]}", json=LOOKUP[1])
        assert answer.status_code == status, answer.text
        if status == 200:
            assert answer.content == b'{"output":[]}'
        else:
            assert answer.json()["failure_kind"] == "session_lost"


# -- run ------------------------------------------------------------------------------------------


def _seeds(served: Served) -> float:
    text = httpx.get(f"http://{served.metrics}/metrics", timeout=HANG_S).text
    return float(re.search(r"^workplace_env_seeds_total (\S+)$", text, re.M).group(1))


def test_run_against_a_target_with_concurrency_writes_the_json_summary(
    served, tasks_file, tmp_path
):
    before = _seeds(served)
    out = tmp_path / "summary.json"
    result = invoke(
        "run", tasks_file, "--policy", "oracle", "--target", f"127.0.0.1:{served.port}",
        "--concurrency", "3", "--json-out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(out.read_text())
    assert summary["episodes"] == TASK_COUNT and summary["mean_reward"] == 1.0
    assert summary["mismatches"] == []
    rows = table_rows(result.stdout)
    count = [str(TASK_COUNT)]
    assert (rows["episodes"], rows["played"], rows["failed"]) == (count, count, ["0"])
    assert rows["mean reward (played)"] == ["1.0000"]
    assert _seeds(served) - before == TASK_COUNT  # played on the target, not in-process


def test_run_perturbed_scores_below_the_oracle(served, tasks_file):
    target = f"127.0.0.1:{served.port}"
    result = invoke("run", tasks_file, "--policy", "perturbed", "--target", target)
    assert result.exit_code == 0, result.output  # no recording to disagree with
    assert float(table_rows(result.stdout)["mean reward (played)"][0]) < 1.0


def test_run_recorded_in_process_exits_1_on_a_reward_that_differs(tasks_file, tmp_path):
    tasks = [json.loads(line) for line in tasks_file.read_text().splitlines()][:2]
    rollouts = tmp_path / "rollouts.jsonl"
    lines = [
        {**tasks[0], "function_calls": tasks[0]["ground_truth"], "reward": 1.0},
        {**tasks[1], "function_calls": tasks[1]["ground_truth"], "reward": 0.0},
    ]
    rollouts.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = invoke("run", rollouts)  # --policy recorded, an in-process server
    assert result.exit_code == 1, result.output
    rows = table_rows(result.stdout)
    assert rows["mean reward (played)"] == ["1.0000"] and rows["reward mismatches"] == ["1"]
    assert rows["output mismatches"] == rows["state mismatches"] == rows["failed"] == ["0"]
    said = " ".join(result.output.split())  # the line may wrap
    assert f"mismatch {tasks[1]['id']} reward: reward differs: recorded 0.0, replayed 1.0" in said


@pytest.mark.parametrize(("token", "reason"), [(None, "REQUIRED"), ("nope", "INVALID")])
def test_run_without_the_targets_admin_token_stops_before_playing_and_says_why(
    served, tmp_path, token, reason
):
    """Against a server with an admin token, a run of tables_after lines without it (or
    with a wrong one) counted every such line as a state mismatch ('cannot export the
    session's tables: UNAUTHENTICATED ...'), exit 1. Now it plays nothing, exit 2, and says
    which lines need the token and why; with the token the same file passes."""
    lines = tmp_path / "checked.jsonl"
    line = {"id": "t", "ground_truth": [], "calls": [], "tables_after": {}}
    lines.write_text(json.dumps(line) + "\n" + json.dumps({**line, "id": "u"}) + "\n")
    target = ["--target", f"127.0.0.1:{served.port}"]
    before = _seeds(served)
    result = invoke("run", lines, *target, *(["--token", token] if token else []))
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert "2 of the 2 lines have tables_after" in said and "--token" in said
    assert f"ADMIN_TOKEN_{reason}" in said and "nothing was played" in said
    assert _seeds(served) == before
    passed = invoke("run", lines, *target, "--token", FLAG_TOKEN)
    assert passed.exit_code == 0, passed.output
    assert _seeds(served) == before + 2


@pytest.mark.parametrize("policy", ["recorded", "model"])
def test_run_refuses_data_dir_with_a_target(served, tasks_file, tmp_path, policy):
    """--data-dir has no effect with --target (the server plays on its own sandbox), so a
    run against other tables than meant reported their differences as mismatches."""
    data_dir = _with_csv_names(tmp_path / "workbench")
    model = ["--base-url", "http://127.0.0.1:1/v1", "--model", "m"] if policy == "model" else []
    if policy == "model":
        model += ["--out", str(tmp_path / "out.jsonl")]
    before = _seeds(served)
    result = invoke(
        "run", tasks_file, "--policy", policy, *model, "--target", f"127.0.0.1:{served.port}",
        "--data-dir", data_dir,
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert "--data-dir" in said and "has no effect with --target" in said
    assert _seeds(served) == before


# -- run: the sandbox a run plays on -------------------------------------------------------------

WORKBENCH_FILES = [
    "tasks_public.jsonl",
    "rollouts_public.jsonl",
    "workbench_original_tasks_public.jsonl",
]


def _workbench_file(name: str) -> Path:
    path = WORKBENCH / name
    if not path.exists():
        pytest.skip(f"{path} not found (set WORKPLACE_ENV_SHARED to the shared data)")
    return path


@pytest.mark.parametrize("policy", ["recorded", "oracle", "model"])
@pytest.mark.parametrize("name", WORKBENCH_FILES)
def test_run_refuses_workbench_tasks_on_the_generated_sandbox(tmp_path, name, policy):
    """WorkBench's lines name customers, events and employees the generated sandbox lacks:
    refused before anything is played (exit 2), naming the sandbox and the fixes."""
    out = tmp_path / "out.jsonl"
    model = ["--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--out", out]
    if policy != "model":
        model = []
    result = invoke("run", _workbench_file(name), "--policy", policy, *model)
    said = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert "generated sandbox (seed 0, scale 1.0) sha256:" in said
    assert "--data-dir" in said and "workplace-env data fetch" in said
    assert "--any-sandbox" in said and "Nothing was played" in said
    assert not out.exists()


def _on_generated(lines: list[dict]) -> list[tuple[int, str]]:
    """:func:`foreign_lines` of ``lines`` on the default generated sandbox."""
    base = load_sandbox(None)
    return foreign_lines(lines, ServerSandbox(digest=base.digest, origin="x"), base)


def _task(prompt: str, *calls: tuple[str, dict]) -> dict:
    truth = [{"name": name, "arguments": json.dumps(args)} for name, args in calls]
    return {"id": "t", "prompt": prompt, "ground_truth": truth}


def _stranger(base: BaseTables) -> str:
    """A first name no cell of ``base`` holds as a word."""
    words = {w.lower() for t in base.tables.values() for c in t.columns for v in t.data[c]
             if isinstance(v, str) for w in re.findall(r"[A-Za-z]+", v)}  # fmt: skip
    return min(person_first_names() - words)


def test_the_sandbox_check_finds_every_kind_of_entity_the_generated_sandbox_lacks():
    """Only 1 of NeMo Gym's 5 WorkBench example tasks was found foreign on the generated
    sandbox: a name in the prompt, a subject an e-mail is looked up by, an id held only in
    another table's id column were not checked."""
    base = load_sandbox(None)
    stranger = _stranger(base)
    email_ids = set(base.tables[EMAILS].data["email_id"])
    event_ids = set(base.tables[CALENDAR].data["event_id"])
    only_an_email_id = min(email_ids - event_ids)
    reply = ("email_reply_email", {"email_id": min(email_ids), "body": "Thanks!"})
    event = {"event_id": min(event_ids)}
    found = _on_generated([
        _task(f"Reply to {stranger}'s last email with 'Thanks!'", reply),
        _task(f"Reply to the last email from {stranger.capitalize()} with 'Thanks!'", reply),
        _task("Reply to the email about 'Update on Nothing Held Here' with 'Thanks!'", reply),
        _task("Delete that event", ("calendar_delete_event", {"event_id": only_an_email_id})),
        _task("Cancel the next Nothing Held Here meeting", ("calendar_delete_event", event)),
        {"id": "nemo", "ground_truth": [reply], "responses_create_params": {"input": [
            {"role": "system", "content": "Today is Thursday."},
            {"role": "user", "content": [{"type": "input_text", "text": f"{stranger}'s mail"}]},
        ]}},
    ])  # fmt: skip
    assert [i for i, _ in found] == [0, 1, 2, 3, 4, 5]
    assert f"names {stranger!r} in its prompt, a person no table of it holds" in found[0][1]
    assert "names 'Update on Nothing Held Here' in its prompt" in found[2][1]
    assert found[3][1] == f"names event_id {only_an_email_id!r}, which its event_id column holds"
    assert "names the event 'nothing held here' in its prompt" in found[4][1]


def test_the_sandbox_check_flags_no_task_generated_for_the_sandbox():
    """Generated tasks without their sandbox field (the entity check alone), and names given as
    new values, in quotes, or words such as "don't", are no foreign entity."""
    base = load_sandbox(None)
    tasks = [{k: v for k, v in t.items() if k != "sandbox"} for t in generate_tasks(base, 600, 7)]
    assert _on_generated(tasks) == []
    stranger = _stranger(base)
    name = f"{stranger.capitalize()} Lee"
    add = ("customer_relationship_manager_add_customer", {"customer_name": name})
    sent = ("email_send_email", {"recipient": "x@y.com", "subject": "s", "body": "b"})
    assert _on_generated([
        _task(f"Add {name} as a new lead in the crm", add),
        _task(f"I don't need it. Send x@y.com an email saying 'Hi {stranger}'", sent),
        _task(f'Send an email titled "{stranger} notes" to x@y.com', sent),
        _task("Find my first meeting on Friday and schedule a 30 minute meeting after it", sent),
    ]) == []  # fmt: skip


@pytest.mark.parametrize(
    ("name", "at_least"),
    [("tasks_public.jsonl", 24), ("rollouts_public.jsonl", 6), ("verify_cases_public.jsonl", 457)],
)
def test_workbench_lines_found_foreign_on_the_generated_sandbox_and_none_on_theirs(name, at_least):
    """Measured: tasks 17 -> 24 of 38, rollouts 3 -> 6 of 10 on the generated sandbox; none of
    them on the WorkBench tables they were written for."""
    path = WORKBENCH / name if name != "verify_cases_public.jsonl" else GOLDENS / name
    lines = [json.loads(text) for text in shared_file(path).read_text().splitlines() if text]
    assert len(_on_generated(lines)) >= at_least
    workbench = load_sandbox(shared_file(WORKBENCH / "emails.csv").parent)
    sandbox = ServerSandbox(digest=workbench.digest, origin=str(WORKBENCH))
    assert foreign_lines(lines, sandbox, workbench) == []


def test_run_plays_workbench_tasks_on_their_tables_and_names_them(tmp_path):
    summary = tmp_path / "summary.json"
    result = invoke(
        "run", _workbench_file("tasks_public.jsonl"), "--policy", "oracle",
        "--data-dir", WORKBENCH, "--json-out", summary,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    digest = load_sandbox(WORKBENCH).digest
    assert f"sandbox: data directory {WORKBENCH} {digest}" in " ".join(result.output.split())
    assert json.loads(summary.read_text())["sandbox"] == {
        "digest": digest,
        "origin": str(WORKBENCH),
    }


def test_any_sandbox_plays_them_anyway_with_a_warning():
    result = invoke(
        "run", _workbench_file("tasks_public.jsonl"), "--policy", "oracle", "--any-sandbox"
    )
    said = " ".join(result.output.split())
    assert "written for another sandbox" in said and "Played anyway (--any-sandbox)" in said
    rows = table_rows(result.stdout)
    assert rows["played"] == rows["episodes"] == ["38"]


def test_generated_tasks_are_refused_on_other_tables_naming_the_sandbox_they_were_made_for(
    tasks_file, served, tmp_path
):
    """generate-tasks writes the sandbox a task was made on; played on the WorkBench tables
    (in-process), or WorkBench-made tasks against a --target on the generated sandbox, the run
    is refused naming the way back."""
    _workbench_file("emails.csv")
    here = invoke("run", tasks_file, "--policy", "oracle", "--data-dir", WORKBENCH)
    said = " ".join(here.output.split())
    assert here.exit_code == 2, here.output
    assert "was made for the sandbox" in said and "drop --data-dir" in said
    made = tmp_path / "workbench_tasks.jsonl"
    generated = invoke("generate-tasks", "--count", 3, "--data-dir", WORKBENCH, "--out", made)
    assert generated.exit_code == 0, generated.output
    before = _seeds(served)
    target = f"127.0.0.1:{served.port}"
    there = invoke("run", made, "--policy", "oracle", "--target", target)
    said = " ".join(there.output.split())
    assert there.exit_code == 2, there.output
    assert f"start the server at {target} with --data-dir DIR" in said
    assert "--any-sandbox" in said and _seeds(served) == before


def test_run_names_a_remote_servers_sandbox_in_the_summary(served, tasks_file, tmp_path):
    out = tmp_path / "summary.json"
    target = f"127.0.0.1:{served.port}"
    result = invoke("run", tasks_file, "--policy", "oracle", "--target", target, "--json-out", out)
    assert result.exit_code == 0, result.output
    sandbox = json.loads(out.read_text())["sandbox"]
    assert sandbox == {"digest": load_sandbox(None).digest, "origin": "generated:seed=0,scale=1.0"}
    assert f"sandbox: generated sandbox (seed 0, scale 1.0) {sandbox['digest']}" in result.output


def test_run_recorded_warns_when_lines_have_no_recorded_calls(tasks_file):
    result = invoke("run", tasks_file)  # the default policy, a tasks file
    said = " ".join(result.output.split())
    assert f"{TASK_COUNT} of the {TASK_COUNT} lines have no recorded calls" in said
    assert "--policy oracle" in said and "--policy model" in said


# -- checkpoint -----------------------------------------------------------------------------------


def test_checkpoint_save_and_restore_need_the_right_token(served, restore_target, tmp_path):
    source = f"127.0.0.1:{served.port}"
    with EnvironmentClient(source, timeout_s=HANG_S) as client:
        client.seed("cli-ckpt", ("cli-rollout", 0), ("cli", "t"), {"id": "t"})
        sent = client.call_tool(
            "cli-ckpt", "email_send_email",
            {"recipient": "a@b.com", "subject": "cli-checkpoint", "body": "hi"},
        )  # fmt: skip
        assert sent == "Email sent successfully."
    directory = tmp_path / "ckpt"

    refused = invoke("checkpoint", "save", directory, "--target", source, "--token", FILE_TOKEN)
    assert refused.exit_code == 1 and "export failed:" in refused.output, refused.output
    assert not (directory / "manifest.json").exists()
    saved = invoke("checkpoint", "save", directory, "--target", source, "--token", FLAG_TOKEN)
    assert saved.exit_code == 0, saved.output
    count = int(re.search(r"saved (\d+) sessions? to", saved.output).group(1))
    assert count >= 1 and len(list(directory.glob("session-*.json"))) == count
    assert (directory / "manifest.json").exists()

    target, store = restore_target
    refused = invoke("checkpoint", "restore", directory, "--target", target, "--token", "nope")
    assert refused.exit_code == 1, refused.output
    assert "restore refused, nothing installed:" in refused.output
    assert store.live_count() == 0
    restored = invoke(  # the token from the environment this time
        "checkpoint", "restore", directory, "--target", target,
        env={"WORKPLACE_ENV_ADMIN_TOKEN": "restore-token"},
    )  # fmt: skip
    assert restored.exit_code == 0, restored.output
    restored_count = counted(count, "session")
    assert f"restored {restored_count} from {directory}" in " ".join(restored.output.split())
    with EnvironmentClient(target, timeout_s=HANG_S) as client:
        client.seed("cli-ckpt", ("cli-rollout", 0), ("cli", "t"), {"id": "t"})  # claims it (K4)
        found = client.call_tool("cli-ckpt", "email_search_emails", {"query": "cli-checkpoint"})
    assert "cli-checkpoint" in json.dumps(found)


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (
            [],
            {},
            [
                "ADMIN_TOKEN_REQUIRED",
                "fix:",
                "--token",
                "$WORKPLACE_ENV_ADMIN_TOKEN",
                "admin_token in the --config file",
            ],
        ),
        (["--token", "nope"], {}, ["ADMIN_TOKEN_INVALID", "fix:", "--token", "--admin-token"]),
        ([], {"WORKPLACE_ENV_ADMIN_TOKEN": "nope"}, ["ADMIN_TOKEN_INVALID", "--token"]),
    ],
    ids=["no-token", "wrong-flag", "wrong-variable"],
)
@pytest.mark.parametrize("command", ["save", "restore"])
def test_a_refused_admin_token_names_the_flag_and_variable(
    restore_target, tmp_path, command, args, env, says
):
    target, _store = restore_target
    directory = tmp_path / "ckpt"
    if command == "restore":
        write_checkpoint(directory, [], fences=[])
    result = invoke("checkpoint", command, directory, "--target", target, *args, env=env)
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())
    assert all(word in said for word in says), said


def test_admin_rpcs_off_on_the_server_names_its_flag(sandbox, tmp_path):
    running = start_server(SessionStore(sandbox), "127.0.0.1:0")  # no admin token: admin off
    try:
        result = invoke("checkpoint", "save", tmp_path, "--target", f"127.0.0.1:{running.port}")
    finally:
        running.stop(grace_s=0.5)
    said = " ".join(result.output.split())
    assert result.exit_code == 1 and "ADMIN_DISABLED" in said
    assert f"fix: restart the server at 127.0.0.1:{running.port} with --admin-token" in said


@pytest.mark.parametrize("command", ["save", "restore"])
def test_an_unreachable_server_names_its_address_and_the_target_flag(tmp_path, command):
    directory = tmp_path / "ckpt"
    if command == "restore":
        write_checkpoint(directory, [], fences=[])
    dead = "127.0.0.1:1"  # nothing listens on port 1
    result = invoke("checkpoint", command, directory, "--target", dead, "--timeout-s", "10")
    said = " ".join(result.output.split())
    assert result.exit_code == 1, said
    assert f"{dead}" in said and "fix:" in said and "--target" in said and "--tls-ca" in said


@pytest.mark.parametrize(
    ("manifest", "says"),
    [
        (None, "not a checkpoint directory: no manifest.json in {directory}"),
        (b"{not json", "not a checkpoint directory: {directory}/manifest.json is not JSON"),
        (b"[]", "not a checkpoint directory: {directory}/manifest.json is not a schema_version"),
    ],
    ids=["missing", "garbled", "not-a-manifest"],
)
def test_restore_from_a_directory_without_a_manifest_is_a_usage_error(tmp_path, manifest, says):
    """A directory that holds no readable checkpoint manifest: exit 2 naming the directory,
    before any server is called (the target here is dead)."""
    directory = tmp_path / "ckpt"
    directory.mkdir()
    if manifest is not None:
        (directory / "manifest.json").write_bytes(manifest)
    result = invoke("checkpoint", "restore", directory, "--target", "127.0.0.1:1")
    said = " ".join(result.output.split())
    assert result.exit_code == 2, said
    assert says.format(directory=directory) in said
    assert "Errno" not in said


def test_generate_tasks_refuses_an_out_that_is_a_data_dir_csv(tmp_path):
    """`generate-tasks --data-dir DIR --out DIR/<table>.csv` would write tasks over the sandbox
    it reads: exit 2 before any task, naming --out and --data-dir, the CSV unchanged."""
    data = tmp_path / "data"
    data.mkdir()
    for name in CSV_FILES.values():
        shutil.copyfile(shared_file(WORKBENCH / name), data / name)
    csv = data / next(iter(CSV_FILES.values()))
    before = csv.read_bytes()
    result = invoke("generate-tasks", "--count", 1, "--data-dir", data, "--out", csv)
    said = " ".join(result.output.split())
    assert result.exit_code == 2, said
    assert f"--out {csv} is the input --data-dir" in said and "no task was generated" in said
    assert csv.read_bytes() == before


def test_run_refuses_a_json_out_that_is_its_input_file(tasks_file):
    """`run FILE --json-out FILE` would write the summary over the tasks: exit 2 before any
    episode, naming both, FILE unchanged."""
    before = Path(tasks_file).read_bytes()
    result = invoke("run", tasks_file, "--json-out", tasks_file, "--target", "127.0.0.1:1")
    said = " ".join(result.output.split())
    assert result.exit_code == 2, said
    assert f"--json-out {tasks_file} is the input FILE" in said and "nothing was played" in said
    assert Path(tasks_file).read_bytes() == before


@pytest.mark.parametrize("policy", ["recorded", "oracle"])
def test_run_against_an_unreachable_server_says_so_in_one_line_with_the_flags(tasks_file, policy):
    """A dead --target: no traceback, exit 1, one message naming the address and what to
    type on the command line (never the SDK's arguments), and no progress bar drawn."""
    dead = "127.0.0.1:1"  # nothing listens on port 1
    result = invoke("run", tasks_file, "--policy", policy, "--target", dead)
    said = " ".join(result.stderr.split())
    assert result.exit_code == 1, result.output
    assert "run failed: UNAVAILABLE" in said and f"fix: no server answered at {dead}" in said
    assert "--target HOST:PORT" in said and "--tls-ca (or $WORKPLACE_ENV_TLS_CA)" in said
    assert "tls_credentials(" not in said and f"{policy} episodes" not in said


#: The SDK's words of every hint, which a command line never shows.
SDK_ONLY = ("tls_credentials(", "AdminClient(", "admin_token=", "timeout_s")
#: The CLI's client flags and variables, which an SDK hint never shows.
CLI_ONLY = ("--target", "--tls-ca", "--tls-client-cert", "--token", "--timeout-s", "$WORKPLACE")


def _hint_error(kind: str) -> WorkplaceEnvError:
    """An SDK error of the hint ``kind`` (a reason, a status code's name, or TLS)."""
    if kind == "TLS":
        return UnavailableError("SSL handshake failed", grpc.StatusCode.UNAVAILABLE)
    if kind in grpc.StatusCode.__members__:
        code = grpc.StatusCode[kind]
        return error_class(code, "")("refused", code)
    return UnauthenticatedError("refused", grpc.StatusCode.UNAUTHENTICATED, reason=kind)


@pytest.mark.parametrize("kind", sorted(HINTS))
def test_every_hint_is_worded_for_its_surface(kind):
    """Each hint kind in a command's words names the address and only CLI flags and
    variables; the same kind raised in the SDK names only its arguments."""
    error = _hint_error(kind)
    with pytest.raises(CommandError) as stopped, server_errors("checkpoint save", "db:7"):
        raise error
    said = stopped.value.markup()
    assert stopped.value.exit_code == 1 and "checkpoint save failed:" in said
    fix = fix_hint(error.code, error.reason, error.message, COMMAND_WORDS, "db:7")
    assert f"; fix: {fix}" in said
    assert "db:7" in said and not any(word in said for word in SDK_ONLY), said
    sdk = from_rpc_error(_rpc_error(error))
    assert sdk.hint and not any(word in sdk.hint for word in CLI_ONLY), sdk.hint
    assert f"fix: {sdk.hint}" in sdk.__notes__


def _rpc_error(error: WorkplaceEnvError) -> grpc.RpcError:
    """The RPC failure the SDK turns into ``error`` (its code, reason and message)."""
    status = status_pb2.Status(code=error.code.value[0], message=error.message)
    if error.reason:
        status.details.add().Pack(error_details_pb2.ErrorInfo(reason=error.reason))

    class Failed(grpc.RpcError, grpc.Call):  # type: ignore[misc]
        def code(self) -> grpc.StatusCode:
            return error.code

        def details(self) -> str:
            return error.message

        def trailing_metadata(self):
            return (("grpc-status-details-bin", status.SerializeToString()),)

    return Failed()


def test_an_sdk_error_with_no_hint_is_still_one_line_with_the_address():
    with pytest.raises(CommandError) as stopped, server_errors("run", None, RUN_WORDS):
        raise UnavailableError("gone", grpc.StatusCode.UNAVAILABLE, reason="INJECTED_FAULT")
    assert stopped.value.markup() == "[red]run failed:[/red] UNAVAILABLE INJECTED_FAULT: gone"


# -- demo -----------------------------------------------------------------------------------------


def test_demo_plays_generated_tasks_with_both_policies():
    result = invoke("demo", "--count", "8", "--concurrency", "2")
    assert result.exit_code == 0, result.output
    assert "generated 8 tasks" in result.output
    sandbox = f"on the sandbox: generated (seed=0,scale=1.0), digest {load_sandbox(None).digest}"
    assert sandbox in result.stderr.replace("\n", "")
    all_row = table_rows(result.stdout)["all"]
    assert all_row[:2] == ["8", "1.000"] and float(all_row[3]) < 1.0


def test_demo_stops_once_its_server_is_gone(monkeypatch):
    """The in-process server stops when the 3rd Verify arrives: the episode in flight fails,
    no further one starts (of either policy), and demo exits 1 saying the server was lost."""
    servers: list[RunningServer] = []
    serving = demo_module.local_server

    @contextmanager
    def recorded(data_dir: Path | None) -> Iterator[RunningServer]:
        with serving(data_dir) as server:
            servers.append(server)
            yield server

    verify = EnvironmentServicer.Verify
    seen: list[int] = []

    def dying_verify(self, request, context, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(1)
        if len(seen) == 3:
            servers[0].server.stop(None)
        return verify(self, request, context, **kwargs)

    monkeypatch.setattr(demo_module, "local_server", recorded)
    monkeypatch.setattr(EnvironmentServicer, "Verify", dying_verify)
    result = invoke("demo", "--count", "8", "--concurrency", "1")
    said = " ".join(result.stderr.split())
    assert result.exit_code == 1, result.output
    assert "server lost: the server does not answer a health check" in said
    assert "stopped: server lost" in said and "13 episodes not started" in said
    assert len(seen) == 3


@needs_shared
def test_demo_names_a_data_directory_sandbox(workbench_tables):
    result = invoke("demo", "--count", "4", "--data-dir", WORKBENCH)
    assert result.exit_code == 0, result.output
    sandbox = f"on the sandbox: data directory {WORKBENCH}, digest {workbench_tables.digest}"
    assert sandbox in result.stderr.replace("\n", "")


# -- files that are not UTF-8 text ---------------------------------------------

NOT_UTF8 = b"\xff\xfe"


def _not_utf8_data_dir(tmp_path: Path) -> Path:
    """A WorkBench CSV directory (the embedded sandbox's) whose emails.csv is not UTF-8."""
    root = tmp_path / "data"
    root.mkdir()
    for key, text in load_sandbox(None).to_csv_texts().items():
        (root / CSV_FILES[key]).write_text(text, encoding="utf-8")
    with (root / CSV_FILES[EMAILS]).open("ab") as fh:
        fh.write(b"\n" + NOT_UTF8)
    return root


@pytest.mark.parametrize("suffix", [".toml", ".yaml"])
@pytest.mark.parametrize("command", [("serve",), ("config",), ("gateway",)])
def test_a_config_file_that_is_not_utf8_is_a_configuration_error(tmp_path, suffix, command):
    path = tmp_path / f"c{suffix}"
    path.write_bytes(NOT_UTF8)
    result = invoke(*command, "--config", path)
    assert result.exit_code == 2
    assert "configuration error:" in result.output and "is not UTF-8 text" in result.output


@pytest.mark.parametrize(
    "command",
    [
        ("serve", "--address", "127.0.0.1:0"),
        ("demo", "--count", "1"),
        ("generate-tasks", "--count", "1"),
    ],
)
def test_a_data_dir_csv_that_is_not_utf8_is_named_without_a_traceback(tmp_path, command):
    root = _not_utf8_data_dir(tmp_path)
    result = invoke(*command, "--data-dir", root)
    assert result.exit_code == 2, result.output
    assert f"{CSV_FILES[EMAILS]} is not UTF-8 text" in " ".join(result.output.split())


def test_a_rollouts_file_with_a_damaged_line_is_refused_but_a_torn_last_line_is_read_past(
    tmp_path,
):
    """``run --policy model --out`` resumes from its output file: a last line cut short by a
    crash (no closing newline) is skipped, but a damaged line before it (not UTF-8) refuses
    the file rather than being dropped, and raises no traceback."""
    out = tmp_path / "rollouts.jsonl"
    line = {"id": "t", "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0}
    out.write_bytes(json.dumps(line).encode() + b"\n\n" + NOT_UTF8)
    assert read_finished(out) == [line]
    assert read_rollouts(out) == [line]
    out.write_bytes(json.dumps(line).encode() + b"\n" + NOT_UTF8 + b"\n\n")
    with pytest.raises(NotRolloutsFile, match="non-blank line 2 is not JSON"):
        read_finished(out)


def test_run_counts_agree_with_their_verbs(tmp_path):
    """One line of four: "1 of the 4 lines has no recorded calls", "... is a masked
    rollout", never "1 of the 4 lines have"."""
    path = tmp_path / "lines.jsonl"
    rows = [{"id": f"r{i}", "ground_truth": [], "function_calls": []} for i in range(3)]
    rows.append({"id": "bare", "ground_truth": [], "reward": 1.0, "mask_sample": True})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    said = " ".join(invoke("run", path).output.split())
    assert "1 of the 4 lines has no recorded calls" in said, said
    assert "1 of the 4 lines is a masked rollout" in said, said
    assert " lines have " not in said and " lines are " not in said


def test_lines_with_the_same_problem_are_named_once_by_their_line_ranges(tmp_path):
    """Five NeMo Gym rollouts (no ground truth) and one bad field: the rollouts' long reason is
    said once for "lines 1-4, 6", the other line by its own."""
    path = tmp_path / "rollouts.jsonl"
    rollout = {"response": {"output": []}, "reward": 1.0}
    rows = [rollout] * 4 + [{"ground_truth": 5}, rollout]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = invoke("run", path)
    said = " ".join(result.output.split())
    assert result.exit_code == 2, said
    assert "6 of the 6 lines are no episode; nothing was played: lines 1-4, 6: not an " in said
    assert "; line 5: ground_truth: must be a" in said, said
    assert said.count("a NeMo Gym rollout") == 1


GOOD_LINE = json.dumps({"id": "good", "ground_truth": []}).encode() + b"\n"


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (GOOD_LINE + b"\n{not json\n", ":3: not JSON: "),
        (GOOD_LINE + b'["a", "list"]\n', ":2: not a JSON object"),
        (GOOD_LINE + b'"a string"\n', ":2: not a JSON object"),
        (GOOD_LINE + b"null\n", ":2: not a JSON object"),
        (GOOD_LINE + NOT_UTF8 + b"\n", ": not UTF-8 text"),
        (b"\n  \n", " holds no episodes"),
        (GOOD_LINE + b"[" * 100_000 + b"]" * 100_000 + b"\n", ":2: not JSON: "),
        (GOOD_LINE + b'{"n": ' + b"9" * 4301 + b"}\n", ":2: not JSON: "),
    ],
    ids=["not_json", "a_list", "a_string", "null", "not_utf8", "blank", "deep", "giant_int"],
)
@pytest.mark.parametrize("policy", ["recorded", "oracle", "model"])
def test_a_line_without_an_identity_refuses_the_whole_file_before_playing(
    tmp_path, content, said, policy
):
    """A line that is not a JSON object has no identity (no id, no task
    index of its own), so the whole file is refused up front (exit 2, naming the file and the
    physical line), for every policy; nothing is played or written. A JSON object whose fields
    are wrong is an episode's failure instead (tests/cli/test_runner.py)."""
    path = tmp_path / "lines.jsonl"
    path.write_bytes(content)
    out = tmp_path / "run" / "rollouts.jsonl"
    out.parent.mkdir()
    more = ["--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--out", str(out)]
    args = ["run", str(path), "--policy", policy, *(more if policy == "model" else [])]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert f"{path}{said}" in " ".join(result.output.split())
    assert not any(out.parent.iterdir())


@pytest.mark.parametrize(
    "command",
    [["serve"], ["gateway"], ["config"], ["run"], ["generate-tasks"], ["demo"],
     ["checkpoint", "save"], ["checkpoint", "restore"], ["data", "fetch"], ["data", "verify"]],
)  # fmt: skip
def test_every_flag_s_full_name_shows_in_help_at_80_columns(command):
    """At 80 columns rich's options table cut
    ``--session-close-retry-window-seconds`` to ``--session-close-retry…``."""
    group = typer.main.get_command(app)
    click_command = group
    for name in command:
        click_command = click_command.commands[name]  # type: ignore[attr-defined]
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "…" not in result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80
    flags = [o for p in click_command.params for o in (*p.opts, *p.secondary_opts)]
    assert flags and all(o.startswith("-") or o.isidentifier() for o in flags)
    for flag in flags:
        if flag.startswith("--"):
            assert re.search(rf"(^|[\s,/]){re.escape(flag)}(\s|,|$)", result.output, re.M), flag


def test_every_setting_is_a_flag():
    """Each field of Settings can be given as a flag (named after the field) of ``serve``, or
    of ``gateway`` for the gateway's own TLS client settings."""
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    params = [*commands["serve"].params, *commands["gateway"].params]
    flags = {p.name: p.opts[0] for p in params}
    expected = {f.name: f"--{f.name}".replace("_", "-") for f in fields(Settings)}
    assert {name: flags.get(name) for name in expected} == expected


@pytest.mark.parametrize("command", [["serve"], ["gateway"]])
def test_a_stopped_server_exempts_its_heap_from_the_last_collections(monkeypatch, command):
    """The process took ~3.5 s more to exit after ``drain: stopped``,
    in the interpreter's last garbage collections over the whole heap (no Python frame). Once
    the server has drained, ``serve`` and ``gateway`` freeze the heap (``gc.freeze``) so the
    exit is prompt; nothing is frozen when the command fails."""
    calls: list[str] = []
    monkeypatch.setattr(cli_module, "serve_until_signalled", lambda s: calls.append("served"))
    monkeypatch.setattr(
        "workplace_env.gateway.serve.serve_gateway_until_signalled",
        lambda *a: calls.append("served"),
    )
    monkeypatch.setattr(cli_module.gc, "freeze", lambda: calls.append("frozen"))
    assert invoke(*command).exit_code == 0
    assert calls == ["served", "frozen"]
    calls.clear()
    assert invoke(*command, "--workers" if command == ["serve"] else "--mcp-path", "x").exit_code
    assert calls == []


@pytest.mark.parametrize(
    ("policy", "flags", "named"),
    [
        ("oracle", ["--base-url", "http://x/v1"], "--base-url"),
        ("oracle", ["--model", "m"], "--model"),
        ("recorded", ["--repeats", "3"], "--repeats"),
        ("perturbed", ["--out", "foo.jsonl"], "--out"),
        ("oracle", ["--fail-on-masked"], "--fail-on-masked"),
        ("oracle", ["--temperature", "0.5"], "--temperature"),
        ("model", ["--json-out", "x.json"], "--json-out"),
        ("model", ["--token", "t"], "--token"),
    ],
)
def test_a_flag_of_another_policy_is_a_usage_error_naming_it(tmp_path, policy, flags, named):
    """A flag that does not apply to the chosen policy exits 2 naming it and its policy,
    before anything is played or written."""
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps({"id": "t", "prompt": "p", "ground_truth": []}) + "\n")
    more = ["--model", "m", "--base-url", "http://127.0.0.1:1/v1"] if policy == "model" else []
    result = invoke("run", tasks, "--policy", policy, *more, *flags)
    said = " ".join(result.output.split())
    assert result.exit_code == 2, said
    assert f"{named} applies to --policy" in said and f"not to --policy {policy}" in said
    assert not (Path("foo.jsonl").exists() or (tmp_path / "x.json").exists())


def test_checkpoint_restore_refuses_a_rollout_id_past_the_id_bound(restore_target, tmp_path):
    """A snapshot whose ``rollout_id`` is longer than 256 characters (the bound of
    ``resources_session_id``) is refused naming its field, nothing installed; 256 is saved."""
    target, store = restore_target
    with EnvironmentClient(target, timeout_s=HANG_S) as client:
        client.seed("cli-long", ("r" * 256, 0), ("cli", "t"), {"id": "t"})
    directory = tmp_path / "ckpt"
    saved = invoke("checkpoint", "save", directory, "--target", target, "--token", "restore-token")
    assert saved.exit_code == 0, saved.output
    manifest = json.loads((directory / "manifest.json").read_text())
    for name in manifest["files"]:
        data = (directory / name).read_bytes().replace(b"r" * 256, b"r" * 257)
        (directory / name).write_bytes(data)
        manifest["files"][name] = hashlib.sha256(data).hexdigest()
    (directory / "manifest.json").write_text(json.dumps(manifest))
    store.retire("cli-long")
    refused = invoke(
        "checkpoint", "restore", directory, "--target", target, "--token", "restore-token"
    )
    said = " ".join(refused.output.split())
    assert refused.exit_code == 1, said
    assert "restore refused, nothing installed:" in said
    assert f"episode_id.rollout_id: {id_length_problem('r' * 257)}" in said
    assert store.live_count() == 0


def test_generate_tasks_refuses_to_replace_an_existing_out_unless_overwrite(tmp_path):
    """`generate-tasks --count 1 --out FILE` over a file of 300 tasks: exit 2 naming the file
    and --overwrite, the file unchanged; with --overwrite it is replaced and the count's noun
    agrees with it ("wrote 1 task"); an empty file loses nothing and is written."""
    out = tmp_path / "gw.jsonl"
    out.write_text('{"id": "kept"}\n' * 300)
    before = out.read_bytes()
    refused = invoke("generate-tasks", "--count", 1, "--out", out)
    said = " ".join(refused.output.split())
    assert refused.exit_code == 2, said
    assert f"--out {out} exists" in said and "--overwrite" in said
    assert "no task was generated" in said
    assert out.read_bytes() == before
    replaced = invoke("generate-tasks", "--count", 1, "--out", out, "--overwrite")
    assert replaced.exit_code == 0, replaced.output
    assert f"wrote 1 task to {out}" in " ".join(replaced.output.split())
    assert len(out.read_text().splitlines()) == 1
    empty = tmp_path / "empty.jsonl"
    empty.touch()
    assert invoke("generate-tasks", "--count", 2, "--out", empty).exit_code == 0
    assert len(empty.read_text().splitlines()) == 2


def test_run_refuses_to_replace_an_existing_json_out_unless_overwrite(tasks_file, tmp_path):
    totals = tmp_path / "totals.json"
    totals.write_text('{"kept": true}\n')
    refused = invoke("run", tasks_file, "--policy", "oracle", "--json-out", totals)
    said = " ".join(refused.output.split())
    assert refused.exit_code == 2, said
    assert f"--json-out {totals} exists" in said and "--overwrite" in said
    assert "nothing was played" in said and json.loads(totals.read_text()) == {"kept": True}
    replaced = invoke("run", tasks_file, "--policy", "oracle", "--json-out", totals, "--overwrite")
    assert replaced.exit_code == 0, replaced.output
    assert json.loads(totals.read_text())["episodes"] == TASK_COUNT


def test_the_shared_id_warning_is_capped_at_five_ids_and_five_lines_each(tmp_path):
    """30,000 copies of a line (and 7 ids shared twice) give a warning of bounded size: the
    first five ids, each with its first five line numbers and how many more."""
    file = tmp_path / "copies.jsonl"
    rows = [{"id": "same", "ground_truth": []}] * 30_000
    rows += [{"id": f"pair{i}", "ground_truth": []} for i in range(7) for _ in range(2)]
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lines = [json.loads(x) for x in file.read_text().splitlines()]
    with console.capture() as captured:
        warn_duplicate_ids(lines, range(1, len(lines) + 1))
    said = " ".join(captured.get().split())
    assert len(said) < 1_000, len(said)
    assert "8 ids on more than one line (30,014 of the 30,014 lines)" in said, said
    assert "'same' (lines 1, 2, 3, 4, 5 and 29,995 more)" in said, said
    assert "'pair3' (lines 30007, 30008); and 3 more" in said, said


def test_run_names_ids_shared_by_several_lines_and_plays_every_line(tasks_file, tmp_path):
    """Three lines, two of them with the first's id: a warning names that id with its line
    numbers and how many lines share it; every line is still played (exit 0)."""
    rows = [json.loads(line) for line in tasks_file.read_text().splitlines()][:3]
    rows[2] = {**rows[2], "id": rows[0]["id"]}
    rows[1] = {**rows[1], "id": rows[0]["id"]}
    file = tmp_path / "dup.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    totals = tmp_path / "totals.json"
    result = invoke("run", file, "--policy", "oracle", "--json-out", totals)
    said = " ".join(result.output.split())
    assert result.exit_code == 0, said
    assert f"1 id on more than one line (3 of the 3 lines): '{rows[0]['id']}' (lines 1, 2, 3)" in (
        said
    )
    assert json.loads(totals.read_text())["played_episodes"] == 3
    unique = invoke("run", tasks_file, "--policy", "oracle")
    assert "more than one line" not in " ".join(unique.output.split())
