"""Concurrency of the session store: one session's calls are serialised, different sessions
never wait for each other, racing seeds build once, closes and sweeps racing a call stay
consistent.

A call is held inside a session with the store's test-only fault hooks and
``threading.Event``; a wait's timeout only guards against a hang (a deadlock fails the test
instead of blocking CI); nothing sleeps and nothing is timed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.helpers import EP, HANG_S, TASK, TID, WRITE, FakeClock
from tests.helpers import wait as _wait
from workplace_env import errors
from workplace_env.identity import EpisodeId, FunctionCall, Task, TaskId
from workplace_env.server.app import start_server
from workplace_env.sessions import (
    CloseOutcome,
    SessionConfig,
    SessionState,
    SessionStore,
    StoreHooks,
)
from workplace_env.sessions.types import SeedResult
from workplace_env.testing.faults import Faults
from workplace_env_client import EnvironmentClient

EPISODE = EpisodeId(*EP)
TASK_ID = TaskId(*TID)
DOMAIN_TASK = Task(id="task-1", ground_truth=(FunctionCall(WRITE[0], json.dumps(WRITE[1])),))
SEND = json.dumps(WRITE[1])


_HOLDS: list[Hold] = []


class Hold:
    """Holds the first thread reaching fault point ``point`` for ``session_id`` until ``go``.

    At ``"tool"`` (the default) that is a tool call inside its session's lock.
    """

    def __init__(self, store: SessionStore, session_id: str, point: str = "tool") -> None:
        self.entered = threading.Event()
        self.go = threading.Event()
        self.session_id = session_id
        Faults.of(store).on(point, self)
        _HOLDS.append(self)

    def __call__(self, sid: str) -> None:
        if sid == self.session_id and not self.entered.is_set():
            self.entered.set()
            _wait(self.go)


def _release_holds() -> None:
    """Let every held thread go (a failed test must not leave threads parked)."""
    while _HOLDS:
        _HOLDS.pop().go.set()


@pytest.fixture
def store(sandbox) -> Iterator[SessionStore]:
    store = SessionStore(sandbox, SessionConfig(idle_ttl_s=60), clock=FakeClock())
    yield store
    Faults.of(store).clear()
    _release_holds()


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(4) as pool:
        yield pool
        _release_holds()


def _seed(store: SessionStore, sid: str, rollout: str = "rollout-1") -> None:
    store.seed(sid, EpisodeId(rollout, 0), TASK_ID, DOMAIN_TASK)


def _subjects(store: SessionStore, sid: str) -> list[str]:
    out = json.loads(
        store.call_tool(sid, "email_search_emails", '{"query": "zq", "page_size": 100}').output
    )
    return [] if isinstance(out, str) else sorted(e["subject"] for e in out["emails"])


def _send(store: SessionStore, sid: str, subject: str, call_id: str = "") -> str:
    arguments = json.dumps({"recipient": "a@b.com", "subject": subject, "body": "b"})
    return store.call_tool(sid, "email_send_email", arguments, call_id).output


def _other_sessions_work(store: SessionStore, clock: FakeClock, tag: str) -> list[Any]:
    """Every kind of store operation on sessions other than the held one."""
    sid = f"other-{tag}"
    _seed(store, sid, rollout=f"r-{tag}")
    _send(store, sid, f"zq{tag}")
    out: list[Any] = [
        _subjects(store, sid),
        store.verify(sid, [FunctionCall(WRITE[0], SEND)]).reward,
        store.close(sid, EpisodeId(f"r-{tag}", 0)),
        store.close(f"never-{tag}", EPISODE),
        store.verify(f"never-{tag}", []).failure_kind,
        store.evict_idle(),
        store.live_count() >= 1,
    ]
    store.seed(f"cookie-{tag}", None, None, DOMAIN_TASK, legacy=True)
    out.append(store.seed(f"cookie-{tag}", None, None, DOMAIN_TASK, legacy=True).rebuilt)
    return out


def test_other_sessions_never_wait_for_a_held_session(store, pool):
    clock: FakeClock = store.clock  # type: ignore[assignment]
    _seed(store, "held")
    hold = Hold(store, "held")
    held_call = pool.submit(_send, store, "held", "zqheld")
    _wait(hold.entered)
    # the held session is idle by the clock but busy: the sweep skips it without waiting
    clock.now += 61
    expected = [["zqa"], 1.0, CloseOutcome.CLOSED, CloseOutcome.NOT_SEEDED, "session_lost"]
    assert pool.submit(_other_sessions_work, store, clock, "a").result(HANG_S)[:5] == expected
    # a close of the held session waits for its call, and only it waits
    closing_started = threading.Event()
    Faults.of(store).on("release_wait", lambda sid: closing_started.set())
    closing = pool.submit(store.close, "held", EPISODE)
    _wait(closing_started)
    result = pool.submit(_other_sessions_work, store, clock, "b").result(HANG_S)
    assert result[:5] == [
        ["zqb"],
        1.0,
        CloseOutcome.CLOSED,
        CloseOutcome.NOT_SEEDED,
        "session_lost",
    ]
    assert result[-1] is True  # a legacy re-seed (a rebuild) does not wait either
    assert not held_call.done() and not closing.done()
    hold.go.set()
    assert held_call.result(HANG_S) == '"Email sent successfully."'  # finished before release
    assert closing.result(HANG_S) is CloseOutcome.CLOSED
    with pytest.raises(errors.SessionClosed):
        _send(store, "held", "late")


def test_other_sessions_never_wait_over_grpc(sandbox):
    store = SessionStore(sandbox)
    running = start_server(store, "127.0.0.1:0", evict_interval_s=3600)
    client = EnvironmentClient(f"127.0.0.1:{running.port}", timeout_s=HANG_S)
    hold = Hold(store, "held")
    try:
        client.seed("held", EP, TID, TASK)
        with ThreadPoolExecutor(2) as pool:
            held_call = pool.submit(client.call_tool, "held", *WRITE)
            _wait(hold.entered)
            for i in range(5):
                sid = f"free-{i}"
                client.seed(sid, (f"r-{i}", 0), TID, TASK)
                assert client.call_tool(sid, *WRITE) == "Email sent successfully."
                assert client.verify(sid, [WRITE]).reward == 1.0
                assert client.close_session(sid, (f"r-{i}", 0)) == "CLOSED"
            assert not held_call.done()
            hold.go.set()
            assert held_call.result(HANG_S) == "Email sent successfully."
    finally:
        hold.go.set()
        client.close()
        running.stop(0)


def test_calls_on_one_session_are_serialised(store, pool):
    _seed(store, "s")
    hold = Hold(store, "s")
    ran: list[str] = []
    Faults.of(store).on("tool", lambda sid: (hold(sid), ran.append(sid)))
    second_waiting = threading.Event()
    faults = Faults.of(store)
    faults.on("tool_wait", lambda sid: second_waiting.set() if hold.entered.is_set() else 0)
    first = pool.submit(_send, store, "s", "zq1")
    _wait(hold.entered)
    second = pool.submit(_send, store, "s", "zq2")
    _wait(second_waiting)
    assert store.table.sessions["s"].lock.locked() and ran == []  # the second has not run
    hold.go.set()
    assert first.result(HANG_S) == second.result(HANG_S) == '"Email sent successfully."'
    assert ran == ["s", "s"] and _subjects(store, "s") == ["zq1", "zq2"]


def test_S8_many_racing_identical_seeds_build_once(store):
    builds: list[str] = []
    Faults.of(store).on("build", builds.append)
    start = threading.Barrier(8)

    def seed() -> bool:
        start.wait(HANG_S)
        return store.seed("race", EPISODE, TASK_ID, DOMAIN_TASK).already_seeded

    with ThreadPoolExecutor(8) as pool:
        retries = [f.result(HANG_S) for f in [pool.submit(seed) for _ in range(8)]]
    assert builds == ["race"] and sorted(retries) == [False] + [True] * 7
    assert store.live_count() == 1


def test_close_racing_a_call_that_already_holds_the_session(store, pool):
    _seed(store, "c")
    hold = Hold(store, "c")
    call = pool.submit(_send, store, "c", "zq")
    _wait(hold.entered)
    waiting = threading.Event()
    Faults.of(store).on("release_wait", lambda sid: waiting.set())
    close = pool.submit(store.close, "c", EPISODE)
    _wait(waiting)
    hold.go.set()
    assert call.result(HANG_S) == '"Email sent successfully."'  # completes before the release
    assert close.result(HANG_S) is CloseOutcome.CLOSED
    assert store.live_count() == 0


@pytest.mark.parametrize("remover", ["close", "evict"])
def test_a_call_that_found_the_session_before_its_removal_is_not_found(store, pool, remover):
    _seed(store, "c")
    hold = Hold(store, "c", point="tool_wait")  # found the session, not yet its lock
    ran: list[str] = []
    Faults.of(store).on("tool", ran.append)
    call = pool.submit(_send, store, "c", "zq")
    _wait(hold.entered)
    if remover == "close":
        assert store.close("c", EPISODE) is CloseOutcome.CLOSED
    else:
        store.clock.now += 61  # type: ignore[attr-defined]
        assert store.evict_idle() == 1
    hold.go.set()
    expected = errors.SessionClosed if remover == "close" else errors.SessionExpired
    with pytest.raises(expected):
        call.result(HANG_S)
    assert ran == []  # the tool never ran on released tables


def test_racing_closes_close_once(store, pool):
    _seed(store, "c")
    hold = Hold(store, "c", point="release_wait")
    first = pool.submit(store.close, "c", EPISODE)
    _wait(hold.entered)  # the first close is about to release
    second = store.close("c", EPISODE)  # the second goes ahead and releases
    hold.go.set()
    assert {first.result(HANG_S), second} == {CloseOutcome.CLOSED, CloseOutcome.ALREADY_CLOSED}
    assert second is CloseOutcome.CLOSED


def test_close_during_a_seed_build_waits_for_it(store, pool):
    hold = Hold(store, "c", point="build")
    seed = pool.submit(_seed, store, "c")
    _wait(hold.entered)
    waiting = threading.Event()
    waited_for: list[str] = []
    Faults.of(store).on("seed_wait", lambda sid: (waited_for.append(sid), waiting.set()))
    close = pool.submit(store.close, "c", EPISODE)
    _wait(waiting)
    assert waited_for == ["c"]  # the hook point names the session it waits on
    hold.go.set()
    seed.result(HANG_S)
    assert close.result(HANG_S) is CloseOutcome.CLOSED  # closed what the seed built
    assert store.live_count() == 0


def test_a_seed_racing_a_build_waits_for_it_and_answers_as_a_retry(store, pool):
    """S8 step by step: the second seed waits for the first one's build (the hook point names
    the session), builds nothing, and answers as a retry of the same seed (S2)."""
    hold = Hold(store, "s", point="build")
    first = pool.submit(store.seed, "s", EPISODE, TASK_ID, DOMAIN_TASK)
    _wait(hold.entered)
    waiting = threading.Event()
    waited_for: list[str] = []
    Faults.of(store).on("seed_wait", lambda sid: (waited_for.append(sid), waiting.set()))
    second = pool.submit(store.seed, "s", EPISODE, TASK_ID, DOMAIN_TASK)
    _wait(waiting)
    assert waited_for == ["s"]
    hold.go.set()
    assert first.result(HANG_S) == SeedResult(SessionState.SEEDED, already_seeded=False)
    assert second.result(HANG_S) == SeedResult(SessionState.SEEDED, already_seeded=True)
    assert store.live_count() == 1


def test_pending_builds_count_toward_capacity(sandbox, pool):
    store = SessionStore(sandbox, SessionConfig(max_sessions=1), clock=FakeClock())
    hold = Hold(store, "a", point="build")
    seed = pool.submit(_seed, store, "a")
    _wait(hold.entered)
    with pytest.raises(errors.CapacityExhausted):
        _seed(store, "b", rollout="r-b")
    hold.go.set()
    seed.result(HANG_S)
    assert store.live_count() == 1


def test_many_threads_many_sessions_stay_isolated(store):
    """Each worker runs whole episodes; every read sees exactly its own session's writes."""

    def episode(worker: int, n: int) -> list[str]:
        sid, rollout = f"w{worker}-{n}", f"r{worker}-{n}"
        _seed(store, sid, rollout=rollout)
        mine = [f"zq{worker}x{n}x{k}" for k in range(3)]
        for k, subject in enumerate(mine):
            _send(store, sid, subject, call_id=f"c{k}")
            _send(store, sid, subject, call_id=f"c{k}")  # a retry: not run twice
        seen = _subjects(store, sid)
        store.verify(sid, [])
        assert store.close(sid, EpisodeId(rollout, 0)) is CloseOutcome.CLOSED
        return seen if seen == sorted(mine) else [f"{sid} saw {seen}"]

    start = threading.Barrier(6)

    def worker(w: int) -> list[str]:
        start.wait(HANG_S)
        bad: list[str] = []
        for n in range(15):
            seen = episode(w, n)
            if not seen[0].startswith("zq"):
                bad += seen
        return bad

    with ThreadPoolExecutor(6) as pool:
        problems = [f.result(HANG_S * 4) for f in [pool.submit(worker, w) for w in range(6)]]
    assert problems == [[]] * 6
    assert store.live_count() == 0


def test_legacy_rebuild_waits_for_its_own_session_only(store, pool):
    store.seed("cookie", None, None, DOMAIN_TASK, legacy=True)
    hold = Hold(store, "cookie")
    call = pool.submit(_send, store, "cookie", "zq")
    _wait(hold.entered)
    reseed = pool.submit(store.seed, "cookie", None, None, DOMAIN_TASK, True)
    _seed(store, "typed")  # would block if the rebuild held the store lock
    assert _send(store, "typed", "zqt") == '"Email sent successfully."'
    hold.go.set()
    assert call.result(HANG_S) == '"Email sent successfully."'
    assert reseed.result(HANG_S).rebuilt
    assert _subjects(store, "cookie") == []  # rebuilt after the call: fresh tables


def test_a_sweep_skips_a_busy_or_unreleasable_session_and_evicts_the_rest(store, pool):
    # X1: a session with a call in flight is in use, and one whose release fails stays live
    # for the next sweep; neither stops this sweep from evicting the idle sessions after it.
    for sid in ("sweep-busy", "sweep-stuck", "sweep-idle"):
        _seed(store, sid, rollout=sid)
    hold = Hold(store, "sweep-busy")
    call = pool.submit(_send, store, "sweep-busy", "zq-busy")
    _wait(hold.entered)
    store.clock.now += 61  # all three last used 61 s ago; sweep-busy's call still runs
    Faults.of(store).fail_next_release()  # the first release tried: sweep-stuck's
    assert store.evict_idle() == 1
    with pytest.raises(errors.SessionExpired):
        _subjects(store, "sweep-idle")
    assert _subjects(store, "sweep-stuck") == []  # still live (and now used again)
    hold.go.set()
    assert call.result(HANG_S) == '"Email sent successfully."'
    assert _subjects(store, "sweep-busy") == ["zq-busy"]


class HoldFirstSweep(StoreHooks):
    """Holds the first eviction pass at its first release until ``go``; ``queued`` is set when
    a second pass reaches the sweep lock (``"sweep_wait"``) meanwhile."""

    def __init__(self) -> None:
        self.releasing, self.queued, self.go = (threading.Event() for _ in range(3))
        self.passes = 0

    def hit(self, point: str, session_id: str) -> None:
        if point == "sweep_wait":
            assert session_id == ""  # a pass is for no one session
            self.passes += 1
            if self.passes == 2:
                self.queued.set()

    def take(self, kind: str) -> bool:
        if kind == "release" and not self.releasing.is_set():
            self.releasing.set()
            _wait(self.go)
        return False


def test_a_full_stores_seed_during_a_sweep_waits_for_it_and_is_admitted(sandbox, pool):
    # S7 with X1: the seed finds the store full while the periodic sweep is releasing its
    # expired session. Its own pass waits for that sweep's, then finds the place free: one
    # eviction, counted once, and the seed admitted (a pass that only saw the session busy
    # would refuse it).
    store = SessionStore(sandbox, SessionConfig(max_sessions=1, idle_ttl_s=10), clock=FakeClock())
    counted: list[int] = []
    store.on_evicted = counted.append
    _seed(store, "old", rollout="old")
    store.clock.now += 11  # type: ignore[attr-defined]
    hooks = store.hooks = HoldFirstSweep()
    try:
        sweep = pool.submit(store.evict_idle)
        _wait(hooks.releasing)
        seed = pool.submit(_seed, store, "new", "new")
        _wait(hooks.queued)
    finally:
        hooks.go.set()
    assert sweep.result(HANG_S) == 1
    seed.result(HANG_S)
    assert sorted(store.table.sessions) == ["new"]
    assert counted == [1, 0]
    with pytest.raises(errors.SessionExpired):
        _send(store, "old", "zq")
    assert _send(store, "new", "zq") == '"Email sent successfully."'


def test_racing_seeds_of_a_store_full_of_expired_sessions_are_all_admitted(sandbox):
    # S7 with X1, many threads: seeds racing each other and the periodic sweep over a store
    # full of expired sessions. Each expired session is evicted once; every seed is admitted;
    # each new session holds its own writes only.
    n = 8
    store = SessionStore(sandbox, SessionConfig(max_sessions=n, idle_ttl_s=10), clock=FakeClock())
    counted: list[int] = []
    store.on_evicted = counted.append
    for i in range(n):
        _seed(store, f"old{i}", rollout=f"old{i}")
    store.clock.now += 11  # type: ignore[attr-defined]
    start = threading.Barrier(n + 1)

    def episode(i: int) -> list[str]:
        start.wait(HANG_S)
        sid = f"new{i}"
        _seed(store, sid, rollout=sid)
        _send(store, sid, f"zq-{sid}")
        return _subjects(store, sid)

    def sweep() -> int:
        start.wait(HANG_S)
        return store.evict_idle()

    with ThreadPoolExecutor(n + 1) as threads:
        episodes = [threads.submit(episode, i) for i in range(n)]
        swept = threads.submit(sweep)
        assert [e.result(HANG_S) for e in episodes] == [[f"zq-new{i}"] for i in range(n)]
        swept.result(HANG_S)
    assert sorted(store.table.sessions) == [f"new{i}" for i in range(n)]
    assert sorted(store.records.evictions) == [f"old{i}" for i in range(n)]
    assert sum(counted) == n
    assert not store.table.building
