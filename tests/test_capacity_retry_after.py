"""A full store's Retry-After is honest (issue L10): a seed refused CAPACITY_EXHAUSTED (S7) is
told the time until the least recently used session passes its idle TTL (when the sweep can
free its slot), at least ``retry_after_s``; over gRPC (RetryInfo) and HTTP (``Retry-After``).
Before, it was always ``retry_after_s`` (1 s) though no slot could free for an hour."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers import GATEWAY_BACKENDS, FakeClock, gateway_on
from workplace_env import errors
from workplace_env.model import EpisodeId, Task, TaskId
from workplace_env.sessions import SessionConfig, SessionStore
from workplace_env_client import CapacityError

TASK = Task(id="l10")
TID = TaskId("unit", "l10")


def _store(sandbox, **config) -> SessionStore:
    return SessionStore(sandbox, SessionConfig(**config), clock=FakeClock())


def _seed(store: SessionStore, sid: str) -> None:
    store.seed(sid, EpisodeId(f"r-{sid}", 0), TID, TASK)


def _refused_after(store: SessionStore, sid: str = "late") -> float:
    with pytest.raises(errors.CapacityExhausted) as err:
        _seed(store, sid)
    return err.value.retry_after_s


def test_a_full_store_says_when_its_least_recently_used_session_expires(sandbox):
    store = _store(sandbox, max_sessions=2, idle_ttl_s=100, retry_after_s=1)
    clock = store.clock
    _seed(store, "a")
    clock.now += 30
    _seed(store, "b")
    clock.now += 10
    assert _refused_after(store) == 60  # "a": used at 0, expires at 100, now 40
    clock.now += 0.5  # within retry_after_s of the last answer: it stands, no rescan
    assert _refused_after(store) == 60
    store.call_tool("a", "email_search_emails", '{"query": "x"}')  # "a" used again at 40.5
    clock.now += 0.5
    assert _refused_after(store) == 89  # rescanned: now "b", used at 30: 130 - 41
    clock.now += 90
    assert _refused_after(store) == 1  # expired but not swept yet: at least retry_after_s
    assert store.evict_idle() == 1
    _seed(store, "late")


def test_the_floor_is_retry_after_s(sandbox):
    store = _store(sandbox, max_sessions=1, idle_ttl_s=2, retry_after_s=5)
    _seed(store, "a")
    assert _refused_after(store) == 5


@pytest.mark.parametrize("backend", GATEWAY_BACKENDS)
def test_cookieless_http_seeds_filling_the_store_get_an_honest_retry_after(backend, make_server):
    """The L10 repro: cookieless legacy seeds fill a small store; the next seed, over HTTP or
    gRPC, is told the idle TTL (600 s here), not 1 s."""
    served = make_server(SessionConfig(max_sessions=3, idle_ttl_s=600), clock=FakeClock())
    gw = gateway_on(backend, served.running)
    try:
        with httpx.Client(base_url=gw.url) as http:
            for _ in range(3):
                http.cookies.clear()
                assert http.post("/seed_session", json={"id": "x"}).status_code == 200
            http.cookies.clear()
            full = http.post("/seed_session", json={"id": "x"})
            assert full.status_code == 429, full.text
            assert full.headers["retry-after"] == "600"
        with pytest.raises(CapacityError) as err:
            served.raw.seed("typed", ("r", 0), ("unit", "l10"), {"id": "l10"})
        assert err.value.retry_after_s == 600
    finally:
        gw.stop()
