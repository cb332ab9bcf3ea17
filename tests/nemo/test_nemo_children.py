"""NeMo Gym's servers never outlive a killed test run (after ``timeout``
killed ``pytest tests/nemo/test_nemo_gym.py``, six ``driver.py`` processes were left running).

No NeMo venv needed: the child is a plain sleeper started the way :mod:`tests.nemo.servers`
starts NeMo's servers (own session, :func:`~tests.nemo.servers.die_with_parent`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import REPO

WAIT_S = 60.0

PARENT = """
import subprocess, sys, time
from tests.nemo.servers import die_with_parent
child = subprocess.Popen(die_with_parent([sys.executable, "-c", "import time; time.sleep(600)"]),
                         start_new_session=True)
print(child.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (dead, not yet reaped by init) counts as gone
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_a_nemo_child_dies_when_the_test_process_is_killed():
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)  # no cleanup code runs in the parent
        parent.wait(WAIT_S)
        deadline = time.monotonic() + WAIT_S
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)  # polling another process's exit: no event to wait on
        assert not _alive(child), "the child outlived its killed parent"
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)
