"""A server that dies mid-run: ``python -m tests.dying_server N`` serves the embedded sandbox on
a free loopback port, prints its ``HOST:PORT`` on stdout, and kills itself (SIGKILL: no drain,
no answer) when its N-th ``Verify`` arrives, so a run against it loses its server at a known
episode.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tests.helpers import REPO
from workplace_env.server.servicer import EnvironmentServicer

#: Seconds a killed child may take to be reaped.
_REAP_S = 30


def _kill_at_verify(n: int) -> None:
    """Make the N-th Verify of this process kill it before answering."""
    verify = EnvironmentServicer.Verify
    seen = [0]
    lock = threading.Lock()

    def dying_verify(self, request, context, **kwargs):  # type: ignore[no-untyped-def]
        with lock:
            seen[0] += 1
            if seen[0] >= n:
                os.kill(os.getpid(), signal.SIGKILL)
        return verify(self, request, context, **kwargs)

    EnvironmentServicer.Verify = dying_verify  # type: ignore[method-assign]


@contextmanager
def dying_server(verifies: int) -> Iterator[tuple[str, subprocess.Popen]]:
    """A child :mod:`tests.dying_server` that dies at its ``verifies``-th Verify: its target
    and process (killed at the end if it still runs)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.dying_server", str(verifies)],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        target = proc.stdout.readline().strip()
        assert target, "the dying server exited before serving"
        yield target, proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=_REAP_S)


def main(argv: list[str]) -> None:
    from workplace_env.server.serve import local_server

    _kill_at_verify(int(argv[1]))
    with local_server(None) as server:
        print(f"127.0.0.1:{server.port}", flush=True)
        server.wait()


if __name__ == "__main__":
    main(sys.argv)
