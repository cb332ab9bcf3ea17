"""Fuzz the CLI's inputs: hostile flag values, environment variables, config files, JSONL task
files and checkpoint directories never crash a command.

Each example runs one command in this process (typer's runner) with hostile input: any flag
of ``serve --print-config``, ``config``, ``generate-tasks`` and ``checkpoint save/restore``
with any value (as a shell hands it over: bytes decoded with ``surrogateescape``), settings in
``WORKPLACE_ENV_*`` variables or a TOML/YAML file, a ``run`` file of hostile lines, and a
checkpoint directory of hostile files against a live server. Every exit must be 0, 1 or 2
with no traceback (a crash is an uncaught exception). Budget: :mod:`tests.fuzz_inputs`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests import fuzz_inputs as fz
from tests.helpers import local
from workplace_env.cli import app
from workplace_env.config import Settings

pytestmark = pytest.mark.server(settings=Settings(admin_open=True))

COMMANDS = {
    "serve": ["serve", "--print-config"],
    "config": ["config"],
    "generate-tasks": ["generate-tasks"],
    "checkpoint save": ["checkpoint", "save"],
    "checkpoint restore": ["checkpoint", "restore"],
}


def _options(command: list[str]) -> list[str]:
    """The ``--flags`` of a command (from its click parameters)."""
    click_command: Any = typer.main.get_command(app)
    for name in command:
        if name.startswith("--"):
            break
        click_command = click_command.commands[name]
    return sorted(
        opt for p in click_command.params for opt in p.opts if opt.startswith("--") and p.opts
    )


OPTIONS = {kind: _options(command) for kind, command in COMMANDS.items()}
SETTING_NAMES = sorted(Settings.__dataclass_fields__)


def _small(text: str) -> bool:
    """Not a number large enough to make ``generate-tasks --count`` run for long."""
    try:
        return int(text) < 50
    except ValueError:
        return True


#: An argument as a shell hands it over: bytes (no NUL) decoded as the OS decodes argv.
argv_text = st.one_of(
    st.binary(max_size=24).filter(lambda b: b"\0" not in b).map(os.fsdecode),
    fz.hostile_text.map(fz.clean).filter(lambda t: "\0" not in t),
    st.sampled_from(["", "-1", "0", "1e999", "nan", "inf", "2147483648", "::", "[::1]:0", "-"]),
).filter(_small)
#: An environment value a process can hold (no NUL, no lone surrogate).
env_text = fz.hostile_text.map(fz.clean).filter(lambda t: "\0" not in t)
config_texts = st.one_of(
    st.builds(
        lambda pairs: "\n".join(f"{k} = {json.dumps(v)}" for k, v in pairs),
        st.lists(st.tuples(st.sampled_from(SETTING_NAMES), fz.json_values), max_size=4),
    ),
    st.builds(
        lambda pairs: "\n".join(f"{k}: {v}" for k, v in pairs),
        st.lists(st.tuples(st.sampled_from([*SETTING_NAMES, "server"]), env_text), max_size=4),
    ),
    env_text,
    fz.json_texts,
)


def _ok(result: Any, kind: str) -> None:
    fz.seen(f"CLI {kind}", result.exit_code)
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, (kind, repr(result.exception), result.output[-2000:])
    assert result.exit_code in (0, 1, 2), (kind, result.exit_code, result.output[-2000:])
    assert "Traceback" not in result.output, result.output[-2000:]


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fuzz-cli-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)
    fz.write_report()


def _invoke(args: list[str], env: dict[str, str] | None = None) -> Any:
    """The command, run from a scratch directory (a fuzzed ``--out`` or checkpoint directory
    is created there, never in the checkout)."""
    with tempfile.TemporaryDirectory(prefix="fuzz-cli-cwd-") as cwd, contextlib.chdir(cwd):
        return CliRunner().invoke(app, args, env={"COLUMNS": "200", **(env or {})})


@given(
    kind=st.sampled_from(sorted(COMMANDS)),
    flags=st.lists(st.tuples(st.integers(0, 10**6), argv_text), max_size=4),
    env=st.dictionaries(st.sampled_from(SETTING_NAMES), env_text, max_size=3),
    config=st.one_of(st.none(), config_texts),
    suffix=st.sampled_from([".toml", ".yaml", ".yml", ".txt"]),
)
@fz.FUZZ
def test_fuzz_cli_flags_environment_and_config(workdir, server, kind, flags, env, config, suffix):
    args = list(COMMANDS[kind])
    options = OPTIONS[kind]
    for index, value in flags:
        args += [options[index % len(options)], value]
    if kind.startswith("checkpoint"):
        args += [str(workdir / "empty"), "--target", local(server.port), "--timeout-s", "5"]
    variables = {f"WORKPLACE_ENV_{name.upper()}": value for name, value in env.items()}
    if config is not None:
        path = workdir / f"config{suffix}"
        path.write_text(config, encoding="utf-8", errors="surrogatepass")
        variables["WORKPLACE_ENV_CONFIG"] = str(path)
    fz.count(f"CLI {kind}")
    _ok(_invoke(args, variables), kind)


@given(lines=st.lists(st.one_of(fz.json_texts.map(fz.surrogate_utf8), fz.garbage), max_size=4))
@fz.FUZZ
def test_fuzz_cli_run_files(workdir, server, lines):
    """``run`` of a file of hostile lines: refused up front (exit 2), or episodes that fail."""
    path = workdir / "tasks.jsonl"
    path.write_bytes(b"\n".join(lines))
    fz.count("CLI run")
    _ok(_invoke(["run", str(path), "--target", local(server.port)]), "run")


@given(
    manifest=st.one_of(fz.json_texts, fz.json_values.map(json.dumps)),
    sessions=st.lists(fz.json_texts, max_size=3),
)
@fz.FUZZ
def test_fuzz_cli_checkpoint_directories(workdir, server, manifest, sessions):
    """``checkpoint restore`` of a directory of hostile files: refused, nothing installed."""
    directory = workdir / "checkpoint"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir()
    (directory / "manifest.json").write_text(manifest, encoding="utf-8", errors="surrogatepass")
    for i, text in enumerate(sessions):
        name = f"session-fz-{i:06d}.json"
        (directory / name).write_text(text, encoding="utf-8", errors="surrogatepass")
    fz.count("CLI checkpoint restore (files)")
    args = ["checkpoint", "restore", str(directory), "--target", local(server.port)]
    _ok(_invoke([*args, "--timeout-s", "5"]), "checkpoint restore (files)")
