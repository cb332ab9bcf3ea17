"""Start NeMo Gym's own servers on loopback, without Ray, as black boxes.

A :class:`NemoStack` is one NeMo Gym "run": a set of server instances sharing one global config
(what ``gym env start`` would resolve), each a child process of NeMo's own entrypoint
(``<type>/<implementation>/app.py``) started the way NeMo starts it (``NEMO_GYM_CONFIG_DICT``
and ``NEMO_GYM_CONFIG_PATH`` in its environment, cwd its directory), minus the per-server uv
venvs (every server runs in the one NeMo venv) and minus Ray (``driver.py serve``). Servers
that are already serving (our gateway) are named in the config with their URL, not launched.

Build the instance list with the ``*_server`` / ``*_agent`` helpers, then::

    with NemoStack(nemo_python(), [reference_resources(), stand_in_model(recordings), ...],
                   workdir) as stack:
        stack.url("workplace_assistant")   # base URL of a server
        stack.run_cli(["ng_collect_rollouts"], {...})  # a NeMo CLI against this run

Every port is chosen free on 127.0.0.1 by the OS; every child is stopped (SIGTERM, then
SIGKILL) on exit, and its log is kept in ``workdir`` for the failure message. A test process
killed outright (``timeout``, SIGKILL) runs no exit code: every child here also gets SIGKILL
from the kernel when the test process dies (:func:`die_with_parent`), and the process groups
still running at interpreter exit are killed (:func:`_kill_left_groups`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from tests.nemo.venv import site_packages

DRIVER = Path(__file__).resolve().with_name("driver.py")
HOST = "127.0.0.1"
_START_TIMEOUT_S = 120.0

# The child asks the kernel for SIGKILL when its parent dies (Linux ``prctl(PR_SET_PDEATHSIG)``),
# then execs the command: done by the child's own code, not a ``preexec_fn``, because a
# ``preexec_fn`` makes subprocess use fork() instead of vfork(), and fork() runs gRPC's at-fork
# handlers in the child of this gRPC-busy test process (seen failing as "epoll_wait: Bad file
# descriptor" before the exec). SIGINT is reset to its default: a test process started in the
# background of a shell ignores it, and the child would inherit that (NeMo's launcher stops its
# servers on SIGINT).
_DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None).prctl(1, signal.SIGKILL)\n"
    "signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    os._exit(1)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)
#: Process groups of NeMo servers started and not stopped yet (killed at exit).
_LIVE_GROUPS: set[int] = set()


def die_with_parent(argv: list[str], python: str | Path | None = None) -> list[str]:
    """``argv`` (its first item an absolute path) started so that the kernel sends it SIGKILL
    when the test process dies, however it dies (Linux; elsewhere ``argv`` itself): ``python``
    (default: this interpreter) sets that up and execs ``argv``, keeping its pid. The parent is
    the thread that starts it, so children are started from the test's main thread."""
    if sys.platform != "linux":
        return argv
    return [str(python or sys.executable), "-c", _DIE_WITH_PARENT, str(os.getpid()), *argv]


@atexit.register
def _kill_left_groups() -> None:
    """Kill the process groups of NeMo servers a test left running (no ``stop``)."""
    for group in list(_LIVE_GROUPS):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    _LIVE_GROUPS.clear()


def free_port() -> int:
    """A port free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


@dataclass
class NemoServer:
    """One server instance of a NeMo Gym config.

    ``name`` is the top-level instance name, ``kind`` the server type (``resources_servers``,
    ``responses_api_models``, ``responses_api_agents``, ``environment_servers``), ``impl`` the
    implementation directory under it, ``options`` its further config keys. ``url`` marks a
    server already serving (not launched); ``command`` replaces NeMo's entrypoint (the stand-in
    model).
    """

    name: str
    kind: str
    impl: str
    options: dict[str, Any] = field(default_factory=dict)
    url: str | None = None
    command: list[str] | None = None


def _ref(kind: str, name: str) -> dict[str, str]:
    return {"type": kind, "name": name}


def reference_resources(name: str = "workplace_assistant", mcp: bool = False) -> NemoServer:
    """NeMo's own ``workplace_assistant`` resources server (the reference, as a black box)."""
    options: dict[str, Any] = {"domain": "agent"}
    if mcp:
        options["expose_tools_over_mcp"] = True
    return NemoServer(name, "resources_servers", "workplace_assistant", options)


def external_resources(url: str, name: str = "workplace_assistant") -> NemoServer:
    """A resources server already serving at ``url`` (our gateway), named ``name`` in the config."""
    return NemoServer(
        name, "resources_servers", "workplace_assistant", {"domain": "agent"}, url=url
    )


def stand_in_model(recordings: Path, name: str = "policy_model") -> NemoServer:
    """A model server replaying recorded function calls (see ``driver.py model``).

    ``recordings``: a JSON file ``{key: [{"name", "arguments"}, ...]}``; a request is matched by
    ``metadata.ng_stand_in`` of its create params, else by the text of its first user message.
    """
    return NemoServer(
        name,
        "responses_api_models",
        "stand_in",
        command=["model", "--recordings", str(recordings)],
    )


def simple_agent(
    name: str = "simple_agent",
    resources: str = "workplace_assistant",
    model: str = "policy_model",
    max_steps: int = 12,
) -> NemoServer:
    """NeMo's ``simple_agent`` bound to a resources server and a model server."""
    return NemoServer(
        name,
        "responses_api_agents",
        "simple_agent",
        {
            "resources_server": _ref("resources_servers", resources),
            "model_server": _ref("responses_api_models", model),
            "max_steps": max_steps,
        },
    )


def legacy_agent(name: str = "legacy_env", agent: str = "simple_agent") -> NemoServer:
    """NeMo's ``legacy_agent`` environment server relaying ``/run`` to ``agent``."""
    return NemoServer(
        name,
        "environment_servers",
        "legacy_agent",
        {
            "agent_server": _ref("responses_api_agents", agent),
        },  # no episode limits: the relay enforces none and warns when given one
    )


def single_agent_turn(
    name: str = "single_turn_env",
    resources: str = "workplace_assistant",
    agent: str = "simple_agent",
    legacy: bool = False,
    transports: tuple[str, ...] = ("direct_http",),
) -> NemoServer:
    """NeMo's typed ``single_agent_turn`` environment server (``legacy``: its flat-row
    ``single_agent_turn_legacy`` adapter), seeding ``resources`` with the typed protocol."""
    return NemoServer(
        name,
        "environment_servers",
        "single_agent_turn_legacy" if legacy else "single_agent_turn",
        {
            "resources_server": _ref("resources_servers", resources),
            "agent_server": _ref("responses_api_agents", agent),
            "resources_tool_transports": list(transports),
            "max_concurrent_episodes": None,
            "queue_timeout_seconds": None,
            "default_episode_timeout_seconds": 600,
            "cleanup_timeout_seconds": 60,
        },
    )


def run_driver(
    python: Path,
    args: list[str],
    stdin: str = "",
    timeout_s: float = 300.0,
    env: dict | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``driver.py ARGS`` in the NeMo venv; the completed process (not checked)."""
    return subprocess.run(
        die_with_parent([str(python), str(DRIVER), *args], python),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
    )


class Started:
    """A context manager over ``start()`` and ``stop()`` (stopped too when starting fails)."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> object:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class NemoStack(Started):
    """One NeMo Gym run of ``servers`` (see the module docstring). A context manager."""

    def __init__(self, python: Path, servers: list[NemoServer], workdir: Path) -> None:
        self.python = python
        self.servers = {s.name: s for s in servers}
        self.workdir = workdir
        self.config_yaml = ""
        self._urls: dict[str, str] = {}
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: dict[str, Path] = {}

    def url(self, name: str) -> str:
        """Base URL (``http://127.0.0.1:PORT``) of server ``name``."""
        return self._urls[name]

    def log(self, name: str) -> str:
        """The output of launched server ``name`` so far (for failure messages)."""
        path = self._logs.get(name)
        return path.read_text(errors="replace") if path and path.exists() else ""

    def _config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "head_server": {"host": HOST, "port": free_port()},
            "ray_enabled": False,
            "error_on_agent_without_environment_server": False,
        }
        for server in self.servers.values():
            if server.url:
                host, _, port = server.url.removeprefix("http://").rstrip("/").partition(":")
                address = {"host": host, "port": int(port)}
            else:
                address = {"host": HOST, "port": free_port()}
            self._urls[server.name] = f"http://{address['host']}:{address['port']}"
            config[server.name] = {
                server.kind: {
                    server.impl: {
                        "entrypoint": "app.py",
                        **address,
                        **server.options,
                    }
                }
            }
        return config

    def start(self) -> None:
        """Resolve the config with NeMo's own parser, launch every server, wait until each
        answers HTTP (bounded; raises with the server's log when one dies or times out)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        resolved = run_driver(self.python, ["resolve"], json.dumps(self._config()))
        if resolved.returncode != 0:
            raise RuntimeError(f"NeMo config resolution failed: {resolved.stderr[-3000:]}")
        self.config_yaml = resolved.stdout
        (self.workdir / "nemo_config.yaml").write_text(self.config_yaml)
        root = site_packages(self.python)
        for server in self.servers.values():
            if server.url:
                continue
            env = {
                **os.environ,
                "NEMO_GYM_CONFIG_DICT": self.config_yaml,
                "NEMO_GYM_CONFIG_PATH": server.name,
                "PYTHONUNBUFFERED": "1",
            }
            if server.command:
                port = self._urls[server.name].rpartition(":")[2]
                argv = [str(self.python), str(DRIVER), *server.command, "--port", port]
                cwd = self.workdir
            else:
                cwd = root / server.kind / server.impl
                module = f"{server.kind}.{server.impl}.app"
                argv = [str(self.python), str(DRIVER), "serve", "--module", module]
            log_path = self.workdir / f"{server.name}.log"
            self._logs[server.name] = log_path
            with log_path.open("wb") as log:
                self._procs[server.name] = subprocess.Popen(
                    die_with_parent(argv, self.python),
                    cwd=cwd,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
                _LIVE_GROUPS.add(self._procs[server.name].pid)
        for name in self._procs:
            self._wait_ready(name)

    def _wait_ready(self, name: str) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        proc = self._procs[name]
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"NeMo server {name} exited {proc.returncode}:\n{self.log(name)[-4000:]}"
                )
            try:
                urllib.request.urlopen(self._urls[name] + "/", timeout=2).close()
                return
            except urllib.error.HTTPError:
                return  # it answers HTTP: up (not every server has a GET / route)
            except (OSError, urllib.error.URLError):
                time.sleep(0.2)  # polling a port that is not listening yet
        raise RuntimeError(
            f"NeMo server {name} not up in {_START_TIMEOUT_S}s:\n{self.log(name)[-4000:]}"
        )

    def stop(self) -> None:
        """Stop every launched server (its process group: SIGTERM, then SIGKILL after 10 s)."""
        for proc in self._procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self._procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
            _LIVE_GROUPS.discard(proc.pid)
        self._procs.clear()

    def cli_env(self, extra: dict[str, Any] | None = None) -> dict[str, str]:
        """Environment for a NeMo CLI process attached to this run: the run's resolved config
        plus ``extra`` top-level keys (the CLI's own settings), injected as NeMo injects it."""
        merged = run_driver(
            self.python, ["merge"], json.dumps({"yaml": self.config_yaml, "extra": extra or {}})
        )
        if merged.returncode != 0:
            raise RuntimeError(f"config merge failed: {merged.stderr[-3000:]}")
        return {**os.environ, "NEMO_GYM_CONFIG_DICT": merged.stdout, "PYTHONUNBUFFERED": "1"}

    def run_cli(
        self, argv: list[str], extra: dict[str, Any] | None = None, timeout_s: float = 600.0
    ) -> subprocess.CompletedProcess[str]:
        """Run NeMo console script ``argv[0]`` (from the venv's ``bin``) with ``argv[1:]``,
        attached to this run with ``extra`` settings, in ``workdir``; not checked."""
        script = self.python.parent / argv[0]
        return subprocess.run(
            die_with_parent([str(script), *argv[1:]], self.python),
            cwd=self.workdir,
            env=self.cli_env(extra),
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
