"""NeMo Gym's own launcher (``ng_run``) starting this checkout's resources-server entry.

:class:`NgRun` runs ``ng_run +config_paths=[...] OVERRIDES`` from the NeMo venv with this
checkout as an extra root (``NEMO_GYM_EXTRA_ROOTS``), as a user would, and waits for the head
server's ``/readyz``. Venvs: ``uv_venv_dir`` is a directory of the test's; NeMo's built-in
servers and this checkout's agent, which needs nemo-gym alone (:data:`BUILT_INS`), get the NeMo
venv itself there (``skip_venv_if_present``), while
``resources_servers/workplace_env`` has none at first, so the launcher builds it the way it
builds every server (``uv venv`` + ``uv pip install -r requirements.txt``: this checkout,
editable). ``uv`` comes from the test venv, Python 3.13 from :func:`find_python313`, uv's cache
from ``<cache_dir()>/nemo-launcher-uv-cache`` (kept between runs). Exit sends SIGINT (NeMo's
Ctrl-C) and waits for the launcher's own shutdown.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import REPO
from tests.nemo.servers import _LIVE_GROUPS, HOST, Started, die_with_parent, free_port
from tests.nemo.venv import find_python313
from workplace_env.sandbox.source import cache_dir

#: The entry's directory under this checkout (NeMo's extra root).
ENTRY = "resources_servers/workplace_env"
#: This checkout's MCP agent (its requirements: nemo-gym alone).
MCP_AGENT_ENTRY = "responses_api_agents/workplace_env_mcp"
#: The servers the documented configs use that run from the NeMo venv: NeMo's built-ins and
#: :data:`MCP_AGENT_ENTRY` (uv refuses nemo-gym 0.7.0 on a Python older than 3.13.14).
BUILT_INS = (
    "responses_api_agents/simple_agent",
    "environment_servers/single_agent_turn",
    "environment_servers/legacy_agent",
    "responses_api_models/openai_model",
    MCP_AGENT_ENTRY,
)
UV_CACHE = cache_dir() / "nemo-launcher-uv-cache"  # outside the checkout, kept between runs
_READY_TIMEOUT_S = 900.0  # a cold uv cache downloads the server's dependencies
_STOP_TIMEOUT_S = 60.0
#: Ray's message when its node is not up within its fixed startup wait, and the launches tried.
_RAY_NODE_TIMEOUT = "The current node timed out during startup"
_RAY_ATTEMPTS = 3
#: The launcher's Ray settings for a busy machine: its raylet may take longer than Ray's
#: default 30 s wait (docs/examples/nemo_launcher.sh exports the same).
RAY_ENV = {"RAY_raylet_start_wait_time_s": "300"}


def uv_binary() -> str:
    """The ``uv`` executable (the test venv's, else PATH's); skips when there is none."""
    beside = Path(sys.executable).with_name("uv")
    found = str(beside) if beside.exists() else shutil.which("uv")
    if not found:
        pytest.skip("the NeMo launcher tests need uv (the project's test extra)")
    return found


def prepare_venvs(venv_dir: Path, nemo_python: Path) -> None:
    """``venv_dir`` as ``uv_venv_dir``: each of :data:`BUILT_INS` a link to the NeMo venv."""
    nemo_venv = nemo_python.parent.parent
    for server in BUILT_INS:
        (venv_dir / server).mkdir(parents=True, exist_ok=True)
        link = venv_dir / server / ".venv"
        if not link.exists():
            link.symlink_to(nemo_venv, target_is_directory=True)


class NgRun(Started):
    """One ``ng_run`` of this checkout's configs (see the module docstring); a context
    manager. ``configs``: paths as a user passes them (relative to an extra root)."""

    def __init__(
        self,
        nemo_python: Path,
        configs: list[str],
        overrides: list[str],
        workdir: Path,
        venv_dir: Path,
    ) -> None:
        self.nemo_python = nemo_python
        self.configs = configs
        self.overrides = overrides
        self.workdir = workdir
        self.venv_dir = venv_dir
        self.head_port = free_port()
        self.log_path = workdir / "ng_run.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def head_url(self) -> str:
        return f"http://{HOST}:{self.head_port}"

    #: Start with ``gym env start --config ...`` (NeMo Gym's newer CLI) instead of ``ng_run``.
    gym_env_start = False

    def argv(self) -> list[str]:
        """The ``ng_run`` (or ``gym env start``) command line (its script first)."""
        if self.gym_env_start:
            configs = [arg for config in self.configs for arg in ("--config", config)]
            launch = [str(self.nemo_python.with_name("gym")), "env", "start", *configs]
        else:
            launch = [
                str(self.nemo_python.with_name("ng_run")),
                f"+config_paths=[{','.join(self.configs)}]",
            ]
        return [
            *launch,
            *self.overrides,
            f"++head_server.host={HOST}",
            f"++head_server.port={self.head_port}",
            "++skip_venv_if_present=true",
            f"++uv_venv_dir={self.venv_dir}",
            f"++uv_cache_dir={UV_CACHE}",
        ]

    def env(self) -> dict[str, str]:
        """The launcher's environment: this checkout as extra root, uv and Python 3.13 first
        on PATH (``uv venv --python 3.13.x`` finds it there)."""
        python313 = find_python313()
        if python313 is None:
            pytest.skip("the NeMo launcher tests need Python 3.13")
        path = [str(Path(uv_binary()).parent), str(Path(python313).parent)]
        path += [str(self.nemo_python.parent), os.environ.get("PATH", "")]
        return {
            **os.environ,
            "NEMO_GYM_EXTRA_ROOTS": str(REPO),
            "PATH": os.pathsep.join(path),
            "PYTHONUNBUFFERED": "1",
            **RAY_ENV,
        }

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self) -> None:
        """Launch ``ng_run`` and wait until its head server is ready (raises with its log). A
        launcher that dies because its Ray node missed Ray's fixed 30 s startup wait (a busy
        machine) is launched again, :data:`_RAY_ATTEMPTS` times at most."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        prepare_venvs(self.venv_dir, self.nemo_python)
        for attempt in range(1, _RAY_ATTEMPTS + 1):
            with self.log_path.open("wb") as log:
                self.proc = subprocess.Popen(
                    die_with_parent(self.argv(), self.nemo_python),
                    cwd=self.workdir,
                    env=self.env(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            _LIVE_GROUPS.add(self.proc.pid)
            try:
                self._wait_ready()
                return
            except RuntimeError:
                if attempt == _RAY_ATTEMPTS or _RAY_NODE_TIMEOUT not in self.log():
                    raise
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)  # Ray processes it left
                _LIVE_GROUPS.discard(self.proc.pid)

    def _wait_ready(self) -> None:
        """Poll the head server's ``/readyz`` (200 once every server answers); raises with the
        launcher's log when it exits or the bound passes."""
        assert self.proc is not None
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ng_run exited {self.proc.returncode}:\n{self.log()[-6000:]}")
            try:
                with urllib.request.urlopen(self.head_url + "/readyz", timeout=5) as answer:
                    if answer.status == 200:
                        return
            except (OSError, urllib.error.URLError):
                pass  # not listening, or 503 until every server answers
            time.sleep(1.0)  # polling NeMo's readiness endpoint
        raise RuntimeError(f"ng_run not ready in {_READY_TIMEOUT_S}s:\n{self.log()[-6000:]}")

    def stop(self) -> int | None:
        """SIGINT (NeMo's own shutdown of its servers), SIGKILL of the group after a bound;
        the launcher's exit code (None when never started)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        _LIVE_GROUPS.discard(self.proc.pid)
        return self.proc.returncode
