"""pytest fixtures for users' own tests: a real environment server in the test process.

Installed with the package (entry point ``pytest11``), so any test can ask for:

* ``workplace_server``: a started server on the embedded default sandbox (one per test session;
  ``RunningServer`` with ``.port`` and ``.store``);
* ``workplace_client``: an :class:`~workplace_env_client.EnvironmentClient` connected to it.

>>> def test_my_agent_deletes_the_email(workplace_client):
...     task = {"id": "t1", "ground_truth": [...]}
...     with workplace_client.session(task) as s:
...         my_agent.run(s)  # calls s.call_tool(...)
...         assert s.verify().reward == 1.0  # the calls s made

Set ``WORKPLACE_ENV_TEST_DATA_DIR`` to run them on WorkBench CSVs instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from workplace_env.config import Settings
from workplace_env.sandbox.load import load_sandbox
from workplace_env.server.app import RunningServer, start_server
from workplace_env.sessions import SessionStore
from workplace_env_client import EnvironmentClient


@pytest.fixture(scope="session")
def workplace_server() -> Iterator[RunningServer]:
    """A real gRPC environment server on 127.0.0.1 (free port), for the whole test session.

    Its admin RPCs are open (loopback only), so ``Session.checkpoint`` and recovery work in
    users' tests without a token.
    """
    base = load_sandbox(os.environ.get("WORKPLACE_ENV_TEST_DATA_DIR") or None)
    server = start_server(SessionStore(base), "127.0.0.1:0", settings=Settings(admin_open=True))
    yield server
    server.stop(grace_s=0.5)


@pytest.fixture
def workplace_client(workplace_server: RunningServer) -> Iterator[EnvironmentClient]:
    """An SDK client connected to :func:`workplace_server` (closed after the test)."""
    with EnvironmentClient(f"127.0.0.1:{workplace_server.port}") as client:
        yield client
