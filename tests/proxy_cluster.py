"""Replicas behind HAProxy on loopback, for tests/deploy/test_proxy.py and bench/proxy_bench.py.

:class:`Cluster` starts N ``workplace-env serve --address 127.0.0.1:0 --http-address 127.0.0.1:0``
processes (a shared cookie secret and admin token, Prometheus metrics), waits for each one's
gRPC health to say SERVING, then runs ``haproxy -f deploy/haproxy.cfg`` with the replicas'
addresses in the environment variables that file reads (the recipe of docs/operations/replicas.md,
unchanged).
:func:`ensure_haproxy` installs Debian's ``haproxy`` package when it is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

from tests.helpers import REPO, ServeProcess

HAPROXY_CONFIG = REPO / "deploy" / "haproxy.cfg"
#: How many replicas deploy/haproxy.cfg names (server r1..r3 in each backend).
CONFIG_REPLICAS = 3
COOKIE_SECRET = "proxy-test-cookie-secret"
ADMIN_TOKEN = "proxy-test-admin-token"
#: HAProxy's own cookie (deploy/haproxy.cfg, backend http_replicas): the replica's server name.
REPLICA_COOKIE = "WPENV_REPLICA"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def ensure_haproxy(timeout_s: float = 600.0) -> tuple[str | None, str]:
    """The path of ``haproxy``, installing the Debian package when it is missing.

    Returns ``(path, "")``, or ``(None, reason)`` when it is absent and cannot be installed
    (no apt-get, not root, or the package manager unreachable).
    """
    found = shutil.which("haproxy") or (
        "/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None
    )
    if found:
        return found, ""
    apt = shutil.which("apt-get")
    if apt is None:
        return None, "haproxy is not installed and there is no apt-get to install it"
    if os.geteuid() != 0:
        return None, "haproxy is not installed and installing it needs root (apt-get)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in ([apt, "update", "-q"], [apt, "install", "-y", "-q", "haproxy"]):
        try:
            done = subprocess.run(
                cmd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
            )
        except subprocess.TimeoutExpired:
            return None, f"the package manager did not answer: {' '.join(cmd)} timed out"
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return None, f"the package manager failed ({' '.join(cmd)}): {' / '.join(tail)}"
    found = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(found).exists():
        return None, "apt-get installed haproxy but no haproxy binary was found"
    return found, ""


def free_port() -> int:
    """A loopback port free at the time of asking (HAProxy cannot bind port 0 and report it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


class Replica(ServeProcess):
    """One ``workplace-env serve`` process with the gRPC service, the HTTP gateway and metrics,
    each on a free loopback port."""

    def __init__(self, *extra: str) -> None:
        super().__init__(
            "--http-address",
            "127.0.0.1:0",
            "--metrics-address",
            "127.0.0.1:0",
            "--cookie-secret",
            COOKIE_SECRET,
            "--admin-token",
            ADMIN_TOKEN,
            "--log-level",
            "ERROR",
            *extra,
        )

    @property
    def grpc(self) -> str:
        return self.target

    @property
    def http(self) -> str:
        return self.url.removeprefix("http://")

    def cpu_s(self) -> float:
        return proc_cpu_s(self.proc.pid)


#: The ``actconn/feconn/beconn/srv_conn/retries`` field of an HTTP log line, redispatched.
_REDISPATCHED = re.compile(r" \d+/\d+/\d+/\d+/\+\d+ ")


class HAProxy:
    """``haproxy -f deploy/haproxy.cfg`` on free loopback ports in front of ``replicas``."""

    def __init__(self, binary: str, replicas: list[Replica], attempts: int = 3) -> None:
        if len(replicas) != CONFIG_REPLICAS:
            raise ValueError(f"{HAPROXY_CONFIG.name} names {CONFIG_REPLICAS} replicas")
        for _ in range(attempts):  # a port taken between free_port() and bind: pick again
            grpc_port, http_port = free_port(), free_port()
            env = {**os.environ, **self.environment(replicas, grpc_port, http_port)}
            self.proc = subprocess.Popen(
                [binary, "-db", "-f", str(HAPROXY_CONFIG)],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            if self._listening(grpc_port, http_port):
                self.grpc_target = f"127.0.0.1:{grpc_port}"
                self.http_url = f"http://127.0.0.1:{http_port}"
                #: HAProxy's own messages, such as "Server grpc_replicas/r1 is DOWN, reason:".
                self.log: list[str] = []
                threading.Thread(target=self._keep_log, daemon=True).start()
                return
        raise RuntimeError(f"haproxy did not start: {self.proc.stderr.read()}")  # type: ignore[union-attr]

    def _keep_log(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line.rstrip())

    def went_down(self) -> list[str]:
        """HAProxy's messages so far that took a server out ("... is DOWN, reason: ...")."""
        return [line for line in list(self.log) if " is DOWN" in line]

    def redispatched(self) -> list[str]:
        """Requests HAProxy retried on another server than the one first chosen (its log's
        retries field reads ``+N``): for a session's request, a replica without the session."""
        return [line for line in list(self.log) if _REDISPATCHED.search(line)]

    @staticmethod
    def environment(replicas: list[Replica], grpc_port: int, http_port: int) -> dict[str, str]:
        """The variables deploy/haproxy.cfg reads."""
        env = {
            "WPENV_GRPC_BIND": f"127.0.0.1:{grpc_port}",
            "WPENV_HTTP_BIND": f"127.0.0.1:{http_port}",
        }
        for i, replica in enumerate(replicas, start=1):
            env[f"WPENV_R{i}_GRPC"] = replica.grpc
            env[f"WPENV_R{i}_HTTP"] = replica.http
        return env

    def _listening(self, *ports: int, timeout_s: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout_s
        pending = list(ports)
        while pending and time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                socket.create_connection(("127.0.0.1", pending[0]), timeout=1).close()
                pending.pop(0)
            except OSError:
                time.sleep(0.05)  # poll interval while haproxy binds
        return not pending

    def cpu_s(self) -> float:
        return proc_cpu_s(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc.wait(timeout=10)


class Cluster:
    """Three replicas and HAProxy in front of them; a context manager that stops them all."""

    def __init__(self, haproxy: str, *replica_args: str) -> None:
        self.replicas = [Replica(*replica_args) for _ in range(CONFIG_REPLICAS)]
        try:
            for replica in self.replicas:  # started together: they import in parallel
                replica.ready()
            self.proxy = HAProxy(haproxy, self.replicas)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        proxy: HAProxy | None = getattr(self, "proxy", None)
        if proxy is not None:
            proxy.stop()
        for replica in self.replicas:
            replica.stop()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        proxy: HAProxy | None = getattr(self, "proxy", None)
        if exc is not None and proxy is not None and proxy.log:  # why a replica left, if one did
            exc.add_note("HAProxy said:\n" + "\n".join(proxy.log[-20:]))
        self.close()
