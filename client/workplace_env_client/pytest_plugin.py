"""The pytest fixtures ``workplace_server`` and ``workplace_client`` where the SDK is installed
alone: they come with the server distribution, ``workplace-env`` (its plugin,
``workplace_env.pytest_plugin``, starts a server in the test process). Without it, each fixture
fails its test saying so and how to install it; with it, this plugin defines nothing.
"""

from __future__ import annotations

import importlib.util

import pytest

#: Why a fixture of the server distribution is missing, and what to install.
SERVER_FIXTURE_MISSING = (
    "the fixture {name!r} comes with the server distribution, workplace-env (its pytest plugin "
    "starts an environment server in the test process); this environment has the SDK "
    "(workplace-env-client) alone: build both wheels and install the server's, as "
    "docs/sdk.md 'Installing the SDK alone' shows"
)

if importlib.util.find_spec("workplace_env") is None:

    @pytest.fixture(scope="session")
    def workplace_server() -> None:
        """Fails: the server distribution is not installed (see the module docstring)."""
        pytest.fail(SERVER_FIXTURE_MISSING.format(name="workplace_server"), pytrace=False)

    @pytest.fixture
    def workplace_client() -> None:
        """Fails: the server distribution is not installed (see the module docstring)."""
        pytest.fail(SERVER_FIXTURE_MISSING.format(name="workplace_client"), pytrace=False)
