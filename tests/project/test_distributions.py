"""The two distributions: the client SDK alone in a fresh venv runs an episode.

Both wheels are built from a copy of the checkout as a clean clone plus ``./build.sh`` has it
(the files git tracks or would track, and the stubs build.sh generated into ``gen/``). The SDK
wheel goes alone into a new venv (its dependencies from the pip cache or PyPI); a script there
runs one episode (seed, call a tool, verify, close) against a server of the project venv (this
process). About 20-30 s, most of it pip.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from tests.helpers import REPO
from workplace_env_client import EnvironmentClient, SessionClosedError

#: What the SDK wheel may require (client/pyproject.toml), extras apart.
SDK_REQUIRES = {"grpcio", "grpcio-status", "protobuf"}
#: Server-side packages a rollout collector must not get with the SDK.
SERVER_ONLY = ("pandas", "numpy", "fastapi", "starlette", "uvicorn", "mcp", "workplace_env")
PIP_TIMEOUT_S = 300


def install_lines() -> tuple[list[str], list[list[str]]]:
    """docs/examples/install_wheels.sh (docs' "Installing the SDK alone"): its ``pip wheel``
    command and each ``pip install`` command, as argument lists (comments dropped)."""
    script = (REPO / "docs" / "examples" / "install_wheels.sh").read_text(encoding="utf-8")
    commands = [shlex.split(line, comments=True) for line in script.splitlines()]
    wheel = next(c for c in commands if c[1:4] == ["-m", "pip", "wheel"])
    installs = [c for c in commands if c[:2] == ["pip", "install"]]
    return wheel, installs


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _run(*args: str | Path, timeout: float = PIP_TIMEOUT_S) -> str:
    proc = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=timeout, env=_env()
    )
    assert proc.returncode == 0, f"{args}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _copy_checkout(dest: Path) -> None:
    """The checkout's files as a clean clone holds them, plus gen/ (built by build.sh)."""
    if not (REPO / "gen" / "workplace" / "env" / "v1" / "environment_pb2.py").exists():
        pytest.fail("gen/ holds no generated stubs: run ./build.sh first")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
    )
    if listed.returncode == 0:
        for name in listed.stdout.decode().split("\0"):
            source = REPO / name
            if name and source.is_file():
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, dest / name)
    else:  # not a git checkout (an unpacked archive): everything but local state
        shutil.copytree(
            REPO,
            dest,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns(
                ".venv", ".git", "gen", "build", "dist", "*.egg-info", "__pycache__", ".*_cache"
            ),
        )
    shutil.copytree(REPO / "gen", dest / "gen", ignore=shutil.ignore_patterns("__pycache__"))


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    """``{"sdk": ..., "server": ...}``: both wheels, built without build isolation by the
    project venv's setuptools (a test extra) and without dependencies."""
    root = tmp_path_factory.mktemp("dists")
    source = root / "checkout"
    out = source / "dist"  # the -w dist of the documented command
    source.mkdir()
    _copy_checkout(source)
    # the documented command as written, run in the clone, but with this venv's python and its
    # setuptools (no build isolation: no download)
    wheel, _ = install_lines()
    args = [sys.executable, *wheel[1:4], "-q", "--no-build-isolation", *wheel[4:]]
    done = subprocess.run(
        args, cwd=source, env=_env(), capture_output=True, text=True, timeout=PIP_TIMEOUT_S
    )
    assert done.returncode == 0, done.stderr
    built = {p.name.split("-")[0]: p for p in out.glob("*.whl")}
    assert set(built) == {"workplace_env_client", "workplace_env"}, sorted(built)
    return {"sdk": built["workplace_env_client"], "server": built["workplace_env"]}


def _wheel(path: Path) -> tuple[set[str], dict[str, list[str]]]:
    """The wheel's file names and its METADATA headers (each name to its values)."""
    with zipfile.ZipFile(path) as whl:
        names = set(whl.namelist())
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        message = Parser().parsestr(whl.read(meta_name).decode())
    headers: dict[str, list[str]] = {}
    for key, value in message.items():
        headers.setdefault(key, []).append(value)
    return names, headers


def _required(headers: dict[str, list[str]]) -> set[str]:
    """Names of the required (not extra-only) dependencies in METADATA."""
    found = set()
    for spec in headers.get("Requires-Dist", []):
        if "extra ==" not in spec:
            match = re.match(r"[A-Za-z0-9_.\-]+", spec)
            assert match is not None, spec
            found.add(match.group(0).lower().replace("_", "-"))
    return found


def test_the_sdk_wheel_holds_the_stubs_and_the_sdk_only(wheels):
    names, headers = _wheel(wheels["sdk"])
    top = {n.split("/")[0] for n in names if ".dist-info/" not in n}
    assert top == {"workplace", "workplace_env_client"}
    stubs = (
        "environment_pb2",
        "environment_pb2_grpc",
        "admin_pb2",
        "admin_pb2_grpc",
        "error_reason_pb2",
    )
    for stub in stubs:
        assert f"workplace/env/v1/{stub}.py" in names
        assert f"workplace/env/v1/{stub}.pyi" in names
    assert "workplace_env_client/py.typed" in names
    assert "workplace_env_client/client.py" in names
    assert _required(headers) == SDK_REQUIRES


def test_the_server_wheel_depends_on_the_sdk_and_holds_the_rest(wheels):
    names, headers = _wheel(wheels["server"])
    top = {n.split("/")[0] for n in names if ".dist-info/" not in n}
    assert top == {"workplace_env"}
    assert "workplace_env/sessions/store.py" in names
    assert "workplace_env/testing/faults.py" in names
    assert "workplace-env-client" in _required(headers)
    assert {"pandas", "fastapi", "mcp"} <= _required(headers)
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    with zipfile.ZipFile(wheels["server"]) as whl:
        assert "workplace-env = workplace_env.cli:main" in whl.read(entry_points).decode()


#: Runs in the SDK-only venv: what is installed there, then one episode against argv[1].
EPISODE = """
import importlib.metadata, importlib.util, json, sys
from workplace_env_client import EnvironmentClient
import workplace_env_client

target, sid = sys.argv[1], sys.argv[2]
report = {
    "importable": [m for m in json.loads(sys.argv[3]) if importlib.util.find_spec(m)],
    "dists": sorted(d.metadata["Name"].lower() for d in importlib.metadata.distributions()),
    "sdk_file": workplace_env_client.__file__,
}
args = '{"email_id": "00000057"}'
task = {"id": "t1", "ground_truth": [{"name": "email_delete_email", "arguments": args}]}
episode = ("rollout-sdk-wheel", 0)
with EnvironmentClient(target) as env:
    report["tools"] = len(env.list_tools())
    env.seed(sid, episode, ("sdk-wheel", "t1"), task)
    report["output"] = env.call_tool(sid, "email_delete_email", args)
    report["reward"] = env.verify(sid, [("email_delete_email", args)]).reward
    report["close"] = env.close_session(sid, episode)
print(json.dumps(report))
"""


def test_the_install_lines_name_the_wheels_built_and_their_extras(wheels):
    _, installs = install_lines()
    assert len(installs) == 3
    named = [arg for line in installs for arg in line[2:]]
    paths = {re.sub(r"\[.*\]$", "", arg) for arg in named}
    assert paths == {f"dist/{wheels['sdk'].name}", f"dist/{wheels['server'].name}"}
    extras = {m for arg in named for m in re.findall(r"\[(\w+)\]$", arg)}
    assert extras == {"model"}
    assert extras <= set(_wheel(wheels["server"])[1]["Provides-Extra"])
    assert [arg for arg in installs[-1][2:]] == [f"dist/{wheels['sdk'].name}"]  # the SDK alone


def test_the_sdk_wheel_alone_runs_an_episode(wheels, workplace_server, tmp_path):
    venv = tmp_path / "sdk-venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv, timeout=120)
    python = venv / "bin" / "python"
    # the documented SDK-alone line as written, from dist/'s parent; this venv's pip installs into
    # the new one (no pip of its own to bootstrap).
    sdk_alone = install_lines()[1][-1]
    pip = [sys.executable, "-m", "pip", "--python", python]
    proc = subprocess.run(
        [*pip, *sdk_alone[1:], "-q"], cwd=wheels["sdk"].parent.parent, env=_env(),
        capture_output=True, text=True, timeout=PIP_TIMEOUT_S,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr

    sid = f"sdk-wheel-{uuid.uuid4().hex}"
    target = f"127.0.0.1:{workplace_server.port}"
    out = _run(python, "-I", "-c", EPISODE, target, sid, json.dumps(SERVER_ONLY), timeout=120)
    report = json.loads(out.strip().splitlines()[-1])

    assert report["importable"] == []
    assert not {"pandas", "fastapi", "mcp", "workplace-env"} & set(report["dists"])
    assert "workplace-env-client" in report["dists"]
    assert Path(report["sdk_file"]).is_relative_to(venv)
    assert report["tools"] == 27
    assert report["output"] == "Email deleted successfully."
    assert report["reward"] == 1.0
    assert report["close"] == "CLOSED"
    # The episode ran on this process's server: the id is fenced there now.
    with (
        EnvironmentClient(target) as env,
        pytest.raises(SessionClosedError),
    ):
        env.call_tool(sid, "email_delete_email", '{"email_id": "00000057"}')


def test_the_server_fixtures_say_where_they_come_from_in_an_sdk_only_venv(wheels, tmp_path):
    """The pytest plugin's fixtures belong to the server distribution: with the SDK wheel
    alone (and pytest), a test asking for one fails naming the distribution to install."""
    venv = tmp_path / "sdk-pytest-venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv, timeout=120)
    python = venv / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", python, "install", "-q", wheels["sdk"], "pytest")
    test = tmp_path / "test_agent.py"
    test.write_text("def test_agent(workplace_client):\n    pass\n")
    proc = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
        capture_output=True, text=True, timeout=120, env=_env(), cwd=tmp_path,
    )  # fmt: skip
    said = " ".join(proc.stdout.split())
    assert proc.returncode == 1, said
    assert "fixture 'workplace_client' comes with the server distribution, workplace-env" in said
    assert "fixture 'workplace_client' not found" not in said
