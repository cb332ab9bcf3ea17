"""Shared fixtures: where ../shared is, the sandboxes loaded once per test run, and the servers,
SDK clients, gateways and HTTP agents the test modules run against (helpers: tests/helpers.py).

A module picks its variant of the module-scoped ``server`` and ``gateway`` with markers::

    pytestmark = [
        pytest.mark.server(config=SessionConfig(max_sessions=3), settings=Settings(workers=2)),
        pytest.mark.gateway(backends=GATEWAY_BACKENDS, settings=GatewaySettings(secret_key="s")),
    ]

``server(...)`` takes a SessionConfig, Settings and :func:`start_server` keywords (or
``data="workbench"``: the session's WorkBench server); ``gateway(...)`` takes GatewaySettings and
the backends every test using the gateway runs on (default: remote only).
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import HANG_S, REPO, Env, FakeClock, Served, gateway_on, local, serving
from workplace_env.gateway import RunningGateway
from workplace_env.sandbox.load import load_sandbox
from workplace_env.sandbox.tables import CSV_FILES, BaseTables
from workplace_env.server.app import RunningServer
from workplace_env.sessions import SessionConfig, SessionStore
from workplace_env.testing.faults import Faults
from workplace_env_client import EnvironmentClient

SHARED = Path(os.environ.get("WORKPLACE_ENV_SHARED", REPO.parent / "shared"))
WORKBENCH = SHARED / "data" / "workbench"
GOLDENS = SHARED / "data" / "goldens"

#: The fuzz goldens :func:`fuzz_sample` draws from.
FUZZ_GOLDENS = GOLDENS / "tool_calls_fuzz_public.jsonl"


def absent_reason(path: Path) -> str:
    """Why a test needing the shared file ``path`` skips: the file, and how to get it."""
    if path.name in CSV_FILES.values():
        where = shlex.quote(str(path.parent))
        how = f"`mkdir -p {where} && workplace-env data fetch --to {where}` puts the CSVs there"
    else:
        how = (
            "only the project's reference data holds it, not `data fetch`; point "
            "WORKPLACE_ENV_SHARED at the folder holding its data/ directory"
        )
    return f"{path} is absent ({how})"


def needs(*paths: Path) -> pytest.MarkDecorator:
    """A mark skipping the test unless every file of ``paths`` exists, naming the first absent
    one and how to get it (:func:`absent_reason`)."""
    absent = [p for p in paths if not p.exists()]
    return pytest.mark.skipif(bool(absent), reason=absent_reason(absent[0]) if absent else "")


def shared_file(path: Path) -> Path:
    """``path``, or skip the running test naming it when it is absent."""
    if not path.exists():
        pytest.skip(absent_reason(path))
    return path


#: The WorkBench sandbox's six CSVs (the ``workbench_tables`` fixture's data).
SANDBOX_CSVS = tuple(WORKBENCH / name for name in CSV_FILES.values())
needs_shared = needs(*SANDBOX_CSVS)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every JSON object of a JSONL file, or [] when it is absent: for parametrizing at
    collection; a test using the rows carries ``needs(path)``, which skips naming the file."""
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def fuzz_sample(stride: int, email_stride: int = 1) -> list[dict[str, Any]]:
    """A fixed sample of the generated tool-call goldens (tool_calls_fuzz_public.jsonl), to bound
    CI time: every ``email_stride``-th case that calls an email or directory tool (the classes
    with the most edge cases) and every ``stride``-th case. [] when the file is absent (tests
    using it carry ``needs(FUZZ_GOLDENS)``)."""
    sample = []
    emails = 0
    for i, case in enumerate(read_jsonl(FUZZ_GOLDENS)):
        if any(call["name"].startswith(("email_", "company_")) for call in case["calls"]):
            emails += 1
            if emails % email_stride == 0:
                sample.append(case)
                continue
        if i % stride == 0:
            sample.append(case)
    return sample


@pytest.fixture(scope="session")
def workbench_tables() -> Iterator[BaseTables]:
    """The real WorkBench sandbox of the shared data (skips naming an absent CSV)."""
    for name in CSV_FILES.values():
        shared_file(WORKBENCH / name)
    yield BaseTables.from_directory(WORKBENCH)


@pytest.fixture(scope="session")
def workbench_server(workbench_tables) -> Iterator[RunningServer]:
    """A real gRPC server in this process over the WorkBench sandbox (admin open: loopback)."""
    from workplace_env.config import Settings

    with serving(workbench_tables, settings=Settings(admin_open=True), grace_s=0.5) as server:
        yield server


@pytest.fixture(scope="session")
def workbench_client(workbench_server) -> Iterator[EnvironmentClient]:
    """An SDK client connected to :func:`workbench_server`."""
    with EnvironmentClient(local(workbench_server.port)) as client:
        yield client


# -- servers, clients and gateways on the embedded default sandbox --------------------------------


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "server(config, settings, data, **start): the module's `server` variant"
    )
    config.addinivalue_line(
        "markers", "gateway(backends, settings): the module's `gateway` variants and settings"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each test that uses the gateway once per backend its module's marker names."""
    if "gateway_backend" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("gateway")
    backends = marker.kwargs.get("backends") if marker else None
    if backends:
        metafunc.parametrize("gateway_backend", backends, indirect=True, scope="module")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under mutmut only, a mutant's tests run quickest first (tests/mutation/order.py)."""
    if os.environ.get("MUTANT_UNDER_TEST"):
        from tests.mutation.order import quickest_first

        quickest_first(items)


def _options(request: pytest.FixtureRequest, name: str) -> dict[str, Any]:
    marker = request.node.get_closest_marker(name)
    return dict(marker.kwargs) if marker else {}


@pytest.fixture(scope="session")
def sandbox() -> BaseTables:
    """The embedded default sandbox (no ../shared needed), parsed once."""
    return load_sandbox(None)


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest, sandbox) -> Iterator[RunningServer]:
    """The module's gRPC server in this process (variant: the ``server`` marker)."""
    options = _options(request, "server")
    if options.pop("data", None) == "workbench":
        yield request.getfixturevalue("workbench_server")
        return
    with serving(sandbox, **options) as running:
        yield running


@pytest.fixture(scope="module")
def sdk(request: pytest.FixtureRequest, server) -> Iterator[EnvironmentClient]:
    """An SDK client on :func:`server`."""
    if _options(request, "server").get("data") == "workbench":
        yield request.getfixturevalue("workbench_client")
        return
    with EnvironmentClient(local(server.port), timeout_s=HANG_S) as client:
        yield client


@pytest.fixture(scope="module")
def gateway_backend(request: pytest.FixtureRequest) -> str:
    """The gateway's backend: ``remote`` unless the module's marker names several."""
    return str(getattr(request, "param", "remote"))


@pytest.fixture(scope="module")
def gateway(
    request: pytest.FixtureRequest, gateway_backend, server, sdk
) -> Iterator[RunningGateway]:
    """The HTTP gateway over :func:`server` (settings: the ``gateway`` marker)."""
    settings = _options(request, "gateway").get("settings")
    running = gateway_on(gateway_backend, server, sdk, settings)
    yield running
    running.stop()


@pytest.fixture
def http(gateway) -> Iterator[httpx.Client]:
    """A fresh HTTP agent on :func:`gateway` with its own cookie jar."""
    with httpx.Client(base_url=gateway.url, timeout=HANG_S) as client:
        yield client


@pytest.fixture
def make_server(sandbox) -> Iterator[Callable[..., Served]]:
    """Start servers for one test (all stopped after it): ``make_server(config, settings,
    admin_token=..., clock=..., tables=..., **start_server_keywords)``."""
    made: list[Served] = []

    def make(
        config: SessionConfig | None = None,
        settings: Any = None,
        *,
        admin_token: str | None = None,
        clock: Callable[[], float] | None = None,
        tables: BaseTables | None = None,
        **start: Any,
    ) -> Served:
        store = SessionStore(tables or sandbox, config, **({"clock": clock} if clock else {}))
        made.append(Served.start(store, settings, admin_token, **start))
        return made[-1]

    yield make
    for served in made:
        served.stop()


@pytest.fixture
def make_env(make_server) -> Iterator[Callable[..., Env]]:
    """A fresh server per call on a settable clock, ``SessionConfig(**config)``; the tests drive
    eviction themselves (fake clock), so the sweep thread stays out of it."""
    made: list[Env] = []

    def make(**config: Any) -> Env:
        clock = FakeClock()
        served = make_server(SessionConfig(**config), clock=clock, evict_interval_s=3600)
        made.append(Env(served.client, served.raw, served.store, clock, served.running))
        return made[-1]

    yield make
    for env in made:
        Faults.of(env.store).clear()


@pytest.fixture
def env(make_env) -> Env:
    """A fresh server (default SessionConfig) with its two clients (CONTRACT tests)."""
    return make_env()
