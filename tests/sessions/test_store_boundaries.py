"""The session store at the edges its other tests did not reach (the mutation run).

Each test names the CONTRACT case it holds, drives a :class:`SessionStore` in this process with a
settable clock (no server, no sleeps), and asserts what a caller would see: an answer, a reward,
an error reason, whether an id is still held. They were written against mutants that survived
the selected suite; tests/mutation/SURVIVORS.md lists the ones that are equivalent.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import pytest

from tests.helpers import HANG_S, FakeClock, wait
from workplace_env import errors
from workplace_env.checkpoint.snapshot import Snapshot
from workplace_env.identity import EpisodeId, FunctionCall, Task, TaskId
from workplace_env.sandbox.load import load_sandbox
from workplace_env.sessions import SessionConfig, SessionState, SessionStore
from workplace_env.sessions.types import SeedResult
from workplace_env.testing.faults import Faults

EP = EpisodeId("r1", 0)
TID = TaskId("ts", "t1")
WRITE = FunctionCall("email_send_email", '{"recipient": "a@b.com", "subject": "s", "body": "b"}')
WRITES = Task("t1", ground_truth=(WRITE,))
NOTHING = Task("t1")


@pytest.fixture(scope="module")
def base():
    return load_sandbox(None)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def store_of(base, clock: FakeClock, **config) -> SessionStore:
    return SessionStore(base, SessionConfig(**config), clock=clock)


class SignallingLock:
    """A session lock that tells the test when a thread starts waiting for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.waiting = threading.Event()

    def acquire(self, blocking: bool = True) -> bool:
        if blocking:
            self.waiting.set()
        return self._lock.acquire(blocking)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> SignallingLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def hold_while_released(store: SessionStore, sid: str, call) -> object:
    """Run ``call`` in a thread that finds ``sid`` live, then waits for its lock while a racing
    close releases the session; return what ``call`` returned (or raise what it raised)."""
    session = store.table.sessions[sid]
    session.lock = lock = SignallingLock()
    answer: dict[str, object] = {}

    def run() -> None:
        try:
            answer["value"] = call()
        except BaseException as exc:  # handed to the test thread
            answer["error"] = exc

    with lock:
        worker = threading.Thread(target=run)
        worker.start()
        wait(lock.waiting)
        # what a racing close does while it holds the session lock
        store.table.release(session)
        with store.scope.lock:
            store.table.unmap(session)
            store.records.fence(sid, store.clock(), session.episode)
    worker.join(HANG_S)
    assert not worker.is_alive()
    if "error" in answer:
        raise answer["error"]  # type: ignore[misc]
    return answer["value"]


# -- S1/S2: a legacy re-seed rebuilds on the new task --------------------------------------------


def test_a_legacy_reseed_scores_against_the_new_task(base, clock):
    """S2 for cookies: a re-seed rebuilds fresh tables for the new row, and verify scores the
    new row's ground truth (an empty prediction matches a task that changes nothing)."""
    store = store_of(base, clock)
    store.seed("lg", None, None, WRITES, legacy=True)
    rebuilt = SeedResult(SessionState.SEEDED, already_seeded=False, rebuilt=True)
    assert store.seed("lg", None, None, NOTHING, legacy=True) == rebuilt
    outcome = store.verify("lg", [])
    assert outcome.reward == 1.0
    assert not outcome.mask_sample


def test_a_legacy_reseed_counts_as_use_for_the_idle_sweep(base, clock):
    """X1: a session is idle from its last use; a legacy re-seed is a use."""
    store = store_of(base, clock, idle_ttl_s=10)
    store.seed("lg", None, None, NOTHING, legacy=True)
    clock.now += 8
    store.seed("lg", None, None, NOTHING, legacy=True)
    clock.now += 7  # 15 s after the first seed, 7 s after the re-seed
    assert store.evict_idle() == 0
    assert store.live_count() == 1


# -- K6: retire of an id a racing close released -------------------------------------------------


def test_retire_of_a_session_a_racing_close_released_is_false(base, clock):
    """K6: RetireSession answers retired=false when the server no longer holds the session,
    also when a close released it while the retire waited for the session's lock."""
    store = store_of(base, clock)
    store.seed("s", EP, TID, NOTHING)
    assert hold_while_released(store, "s", lambda: store.retire("s")) is False
    assert store.state_counts() == {}


# -- C1/C4/X1: closing an id the idle sweep evicted ----------------------------------------------


def evicted_store(base, clock: FakeClock, **config) -> SessionStore:
    """A store whose typed session "ev" (episode r1/0) the sweep evicted at ``clock.now``."""
    store = store_of(base, clock, idle_ttl_s=10, **config)
    store.seed("ev", EP, TID, NOTHING)
    clock.now += 11
    assert store.evict_idle() == 1
    return store


def test_closing_an_evicted_id_from_another_episode_names_the_binding(base, clock):
    """C4: the eviction record keeps the binding; a close from another episode is refused with
    EPISODE_MISMATCH naming the session and the episode it belongs to."""
    store = evicted_store(base, clock)
    with pytest.raises(errors.EpisodeMismatch) as refused:
        store.close("ev", EpisodeId("r2", 0))
    assert refused.value.session_id == "ev"
    assert refused.value.message == "session ev belongs to episode r1/0"
    assert store.close("ev", EP).value == "CLOSED"  # the refusal recorded nothing


def test_an_eviction_record_counts_until_the_end_of_its_ttl(base, clock):
    """C1 vs C3: closing an evicted id answers CLOSED while the eviction record is valid, up to
    and including ``fence_ttl_s`` after the eviction (records are valid while not older)."""
    store = evicted_store(base, clock, fence_ttl_s=100)
    clock.now += 100
    with pytest.raises(errors.EpisodeMismatch):
        store.close("ev", EpisodeId("r2", 0))
    assert store.close("ev", EP).value == "CLOSED"


def test_an_eviction_record_past_its_ttl_is_forgotten(base, clock):
    """C3: past ``fence_ttl_s`` the eviction is forgotten: the close answers NOT_SEEDED."""
    store = evicted_store(base, clock, fence_ttl_s=100)
    clock.now += 100.5
    assert store.close("ev", EpisodeId("r2", 0)).value == "NOT_SEEDED"


def test_a_close_replaces_the_eviction_record_by_its_fence(base, clock):
    """X1 then C1: once closed, the id is fenced, not expired; when the count bound drops its
    fence, nothing of the old session is left to refuse a new seed of the id."""
    store = evicted_store(base, clock, max_fences=1)
    assert store.close("ev", EP).value == "CLOSED"
    assert store.close("other", EP).value == "NOT_SEEDED"  # its fence pushes out ev's
    assert store.seed("ev", EP, TID, NOTHING).state is SessionState.SEEDED


# -- S3/K4: what a refused seed says -------------------------------------------------------------


def test_a_conflicting_seed_says_why(base, clock):
    """S3: the SESSION_CONFLICT message names the binding, and adds that the task data differs
    only when it does (same episode and task id, another row)."""
    store = store_of(base, clock)
    store.seed("s", EP, TID, NOTHING)
    with pytest.raises(errors.SessionConflict) as other_episode:
        store.seed("s", EpisodeId("r2", 0), TID, NOTHING)
    assert other_episode.value.session_id == "s"
    assert other_episode.value.message == "session s is bound to episode r1/0 and task ts/t1"
    with pytest.raises(errors.SessionConflict) as other_row:
        store.seed("s", EP, TID, WRITES)
    assert other_row.value.message == (
        "session s is bound to episode r1/0 and task ts/t1"
        " (the seed's task data differs from the bound task's)"
    )


def test_a_typed_seed_of_a_legacy_id_is_a_conflict_naming_the_session(base, clock):
    """S3: a cookie session's id cannot be taken by a typed seed."""
    store = store_of(base, clock)
    store.seed("lg", None, None, NOTHING, legacy=True)
    with pytest.raises(errors.SessionConflict) as refused:
        store.seed("lg", EP, TID, NOTHING)
    assert refused.value.session_id == "lg"
    assert refused.value.message == "session lg is a legacy (cookie) session"


def test_a_seed_of_restored_tables_another_binding_claimed_is_session_claimed(base, clock):
    """K4: once a restored session is claimed by its own binding, another binding's seed is
    SESSION_CLAIMED, naming the session."""
    source = store_of(base, clock)
    source.seed("rs", EP, TID, NOTHING)
    snapshots, missing, failures = source.export(["rs"])
    assert (missing, failures) == ([], [])
    store = store_of(base, clock)
    assert store.restore(snapshots) == 1
    claimed = store.seed("rs", EP, TID, NOTHING)  # the claim is the first seed here, no retry
    assert (claimed.restored, claimed.already_seeded) == (True, False)
    with pytest.raises(errors.SessionClaimed) as refused:
        store.seed("rs", EpisodeId("r2", 0), TID, NOTHING)
    assert refused.value.session_id == "rs"
    assert refused.value.message == "session rs was restored and claimed by its own binding"


# -- T4/T5/X1: what a call on an id no longer held says ------------------------------------------

READ = ("email_get_email_information_by_id", '{"email_id": "00000000"}')
SEND = (WRITE.name, WRITE.arguments)


def test_a_call_after_close_is_session_closed_saying_so(base, clock):
    """T5: SESSION_CLOSED, "session <id> was closed"."""
    store = store_of(base, clock)
    store.seed("s", EP, TID, NOTHING)
    store.close("s", EP)
    with pytest.raises(errors.SessionClosed) as refused:
        store.call_tool("s", *READ)
    assert (refused.value.session_id, refused.value.message) == ("s", "session s was closed")


def test_a_call_on_an_evicted_id_is_expired_until_the_end_of_the_record_ttl(base, clock):
    """X1: SESSION_EXPIRED with the idle TTL while the eviction record is valid (up to and
    including ``fence_ttl_s`` after the eviction), SESSION_LOST after."""
    store = evicted_store(base, clock, fence_ttl_s=100)
    clock.now += 100
    with pytest.raises(errors.SessionExpired) as refused:
        store.call_tool("ev", *READ)
    assert refused.value.message == "session ev was evicted after 10 s idle"
    assert refused.value.session_id == "ev"  # the status's resources_session_id
    clock.now += 0.5
    with pytest.raises(errors.SessionLost) as lost:
        store.call_tool("ev", *READ)
    assert lost.value.message == (
        "the server holds no session ev: never seeded on this server, or lost when it restarted"
    )


# -- T4: how an id released without a fence ended ------------------------------------------------

RELEASED_BY_VERIFY = (
    "session lg was verified and released (a legacy session ends at its verify; seed it again)"
)


def test_a_call_after_a_legacy_verify_says_it_was_verified_until_the_record_ttl(base, clock):
    """T4 after V2: SESSION_LOST saying the verify released it, past the retry window and up to
    ``fence_ttl_s`` after the release; the unknown-id answer after that."""
    store = store_of(base, clock, retry_window_s=10, fence_ttl_s=100)
    store.seed("lg", None, None, NOTHING, legacy=True)
    store.verify("lg", [])
    clock.now += 100
    with pytest.raises(errors.SessionLost) as lost:
        store.call_tool("lg", *READ)
    assert (lost.value.session_id, lost.value.message) == ("lg", RELEASED_BY_VERIFY)
    clock.now += 0.5
    with pytest.raises(errors.SessionLost) as unknown:
        store.call_tool("lg", *READ)
    assert unknown.value.message.startswith("the server holds no session lg: never seeded")


def test_a_call_after_a_retire_says_it_was_retired(base, clock):
    """T4 after K6: SESSION_LOST saying the session was retired."""
    store = store_of(base, clock)
    store.seed("rt", EP, TID, NOTHING)
    assert store.retire("rt")
    with pytest.raises(errors.SessionLost) as lost:
        store.call_tool("rt", *READ)
    assert lost.value.message == (
        "session rt was retired (its attempt discarded; seed or restore it again)"
    )


def test_a_released_id_seeded_again_ends_by_its_new_way(base, clock):
    """A release record is dropped by the next seed of the id: the new session, once closed,
    is told closed; once evicted, expired (never the old release)."""
    store = store_of(base, clock, idle_ttl_s=10)
    store.seed("lg", None, None, NOTHING, legacy=True)
    store.verify("lg", [])
    store.seed("lg", None, None, NOTHING, legacy=True)
    assert store.call_tool("lg", *READ).output
    assert "lg" not in store.records.releases
    clock.now += 11
    assert store.evict_idle() == 1
    with pytest.raises(errors.SessionExpired):
        store.call_tool("lg", *READ)


# -- V2/V3: a verified legacy session's marker ---------------------------------------------------


def test_a_resend_with_another_ground_truth_is_scored_afresh(base, clock):
    """V3: only an identical resend answers from the marker; the same prediction against
    another ground truth is another request and is scored again."""
    store = store_of(base, clock)
    store.seed("lg", None, None, NOTHING, legacy=True)
    predicted: list[object] = []
    assert store.verify("lg", predicted, [WRITE]).reward == 0.0
    assert store.verify("lg", predicted, []).reward == 1.0
    assert store.verify("lg", predicted, [WRITE]).reward == 0.0


def test_an_identical_resend_is_answered_with_the_remembered_outcome(base, clock):
    """V2: an identical resend (same calls, same ground truth, whatever the order of its
    objects' keys) is answered with the outcome remembered at the verify (the same object),
    not scored again; a request differing in its ground truth alone is another request."""
    store = store_of(base, clock)
    store.seed("lg", None, None, NOTHING, legacy=True)
    sent = [{"name": WRITE.name, "arguments": WRITE.arguments}]
    first = store.verify("lg", sent, [WRITE])
    assert first.reward == 1.0
    assert store.verify("lg", sent, [WRITE]) is first
    reordered = [{"arguments": WRITE.arguments, "name": WRITE.name}]
    assert store.verify("lg", reordered, [WRITE]) is first
    other = store.verify("lg", sent)  # against the task's ground truth, which writes nothing
    assert other is not first and other.reward == 0.0


def nested(depth: int) -> list[object]:
    """A JSON array nested past what json.dumps can encode under the recursion limit."""
    value: list[object] = []
    for _ in range(depth):
        value = [value]
    return value


def test_requests_the_digest_cannot_encode_are_each_scored(base, clock):
    """V3 for requests too deep to canonicalise: each is scored as itself, never answered with
    another such request's outcome (a nested array is skipped by the replay)."""
    store = store_of(base, clock)
    store.seed("lg", None, None, NOTHING, legacy=True)
    writes = [{"name": WRITE.name, "arguments": WRITE.arguments}, nested(5000)]
    nothing = [nested(5000)]
    assert store.verify("lg", writes).reward == 0.0
    assert store.verify("lg", nothing).reward == 1.0


class SlowRelease:
    """Hooks under which releasing a session's tables takes ``seconds`` of the fake clock."""

    def __init__(self, clock: FakeClock, seconds: float) -> None:
        self.clock, self.seconds = clock, seconds

    def hit(self, point: str, session_id: str) -> None:
        pass

    def take(self, kind: str) -> bool:
        if kind == "release":
            self.clock.now += self.seconds
        return False


def test_the_retry_window_counts_from_the_release(base, clock):
    """V2: the verified legacy id is remembered for ``retry_window_s`` after its release, so a
    slow release does not shorten the window an identical resend has."""
    store = store_of(base, clock, retry_window_s=300)
    store.hooks = SlowRelease(clock, 50)  # type: ignore[assignment]
    store.seed("lg", None, None, NOTHING, legacy=True)
    assert store.verify("lg", []).reward == 1.0
    clock.now += 300  # 350 s after the verify began, 300 s after the release
    again = store.verify("lg", [])
    assert (again.reward, again.mask_sample) == (1.0, False)


# -- K4: a claim is a use ------------------------------------------------------------------------


def test_a_seed_claiming_restored_tables_counts_as_use_for_the_idle_sweep(base, clock):
    """K4 then X1: the claiming seed is the session's last use."""
    source = store_of(base, clock)
    source.seed("rs", EP, TID, NOTHING)
    snapshots, _, _ = source.export(["rs"])
    store = store_of(base, clock, idle_ttl_s=10)
    store.restore(snapshots)
    clock.now += 8
    assert store.seed("rs", EP, TID, NOTHING).restored
    clock.now += 7
    assert store.evict_idle() == 0
    assert store.state_counts() == {"seeded": 1}


# -- K2/K3: restores -----------------------------------------------------------------------------


def exported(base, clock: FakeClock, sid: str = "rs", **config) -> Snapshot:
    """The snapshot of a fresh typed session ``sid`` (episode r1/0, task t1 changing nothing)."""
    source = store_of(base, clock, **config)
    source.seed(sid, EP, TID, NOTHING)
    snapshots, _, _ = source.export([sid])
    return snapshots[0]


def test_a_batch_naming_an_id_twice_is_refused_naming_the_second(base, clock):
    """K2: INVALID_REQUEST with the field ``snapshots[1].resources_session_id`` and the id."""
    snapshot = exported(base, clock)
    store = store_of(base, clock)
    with pytest.raises(errors.InvalidRequest) as refused:
        store.restore([snapshot, snapshot])
    assert refused.value.session_id == "rs"
    violations = [(v.field, v.description) for v in refused.value.violations]
    assert violations == [("snapshots[1].resources_session_id", "appears twice")]
    assert store.live_count() == 0


def reordered(value: object) -> object:
    """``value`` with every JSON object's keys in reverse order (the same JSON value)."""
    if isinstance(value, dict):
        return {k: reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reordered(v) for v in value]
    return value


def test_a_retried_restore_is_the_same_restore_whatever_the_key_order(base, clock):
    """K3: a retry whose state JSON lists the same keys in another order (another encoder)
    installs the same snapshot: it counts as restored, not as a live id."""
    snapshot = exported(base, clock)
    store = store_of(base, clock)
    assert store.restore([snapshot]) == 1
    again = replace(snapshot, state=reordered(snapshot.state))
    assert list(again.state) != list(snapshot.state)
    assert store.restore([again]) == 1
    assert store.state_counts() == {"restored_unclaimed": 1}


@pytest.mark.parametrize(
    "change",
    [
        {"episode": EpisodeId("r1", 1)},
        {"task_id": TaskId("ts", "t2")},
        {"task": WRITES},
    ],
    ids=["episode", "task_id", "task"],
)
def test_another_snapshot_of_an_unclaimed_restored_id_is_refused(base, clock, change):
    """K3: only the identical snapshot counts as restored again; another binding or task for the
    id is SESSION_LIVE and installs nothing (the first restore's binding stays)."""
    snapshot = exported(base, clock)
    store = store_of(base, clock)
    store.restore([snapshot])
    with pytest.raises(errors.SessionLive):
        store.restore([replace(snapshot, **change)])
    assert store.seed("rs", EP, TID, NOTHING).restored  # still the first snapshot's binding


def test_a_call_record_exactly_call_id_ttl_old_replays_after_a_restore(base, clock):
    """T6 across K2: a record is kept while not older than ``call_id_ttl_s``, as on the live
    session, so a retry at that age replays instead of running the tool again."""
    source = store_of(base, clock, call_id_ttl_s=100)
    source.seed("rs", EP, TID, NOTHING)
    first = source.call_tool("rs", *SEND, call_id="c1")
    clock.now += 100
    snapshots, _, _ = source.export(["rs"])
    assert [c.age_s for c in snapshots[0].calls] == [100]
    store = store_of(base, clock, call_id_ttl_s=100)
    store.restore(snapshots)
    retried = store.call_tool("rs", *SEND, call_id="c1")
    assert (retried.replayed, retried.output) == (True, first.output)


# -- S3: the legacy placeholder identity ---------------------------------------------------------


def test_a_typed_seed_naming_the_legacy_placeholder_identity_is_a_conflict(base, clock):
    """S3: a cookie session is bound to no episode. A typed seed that happens to name the
    placeholder identity a cookie session carries (episode legacy/0, task legacy/<row id>)
    is still another binding, never a retry."""
    store = store_of(base, clock)
    store.seed("lg", None, None, NOTHING, legacy=True)
    with pytest.raises(errors.SessionConflict):
        store.seed("lg", EpisodeId("legacy", 0), TaskId("legacy", "t1"), NOTHING)


def legacy_exported(base, clock: FakeClock, sid: str = "lg") -> Snapshot:
    source = store_of(base, clock)
    source.seed(sid, None, None, NOTHING, legacy=True)
    snapshots, _, _ = source.export([sid])
    return snapshots[0]


def test_a_legacy_snapshot_names_no_episode_or_task_id(base, clock):
    """K1 for cookies: a cookie session is bound to no episode or task, so its snapshot names
    none (not the placeholder identity the store gives it)."""
    snapshot = legacy_exported(base, clock)
    assert (snapshot.legacy, snapshot.episode, snapshot.task_id) == (True, None, None)


# JSON 1e999 is an infinite float: the tool stores it, the checkpoint codec cannot write it.
INFINITE_PHONE = (
    "customer_relationship_manager_add_customer",
    '{"customer_name": "A", "assigned_to_email": "a@b.com", "status": "Lead",'
    ' "customer_phone": 1e999}',
)


def test_an_export_reports_a_session_it_cannot_encode_and_goes_on(base, clock):
    """K1: a session the codec cannot write is reported; the ones after it still export, and
    an id not held after it is still named."""
    store = store_of(base, clock)
    for sid in ("a-bad", "b-fine"):
        store.seed(sid, EpisodeId(sid, 0), TID, NOTHING)
    store.call_tool("a-bad", *INFINITE_PHONE)
    for ids, gone in (((), []), (("a-bad", "b-fine", "c-gone"), ["c-gone"])):
        snapshots, missing, failures = store.export(ids)
        assert [s.session_id for s in snapshots] == ["b-fine"] and missing == gone
        assert [sid for sid, _ in failures] == ["a-bad"]
        assert "customer_relationship_manager._crm_data" in failures[0][1]


def test_a_restored_legacy_session_is_claimed_by_a_legacy_seed(base, clock):
    """K4 for cookies: the restored session is a cookie session again."""
    store = store_of(base, clock)
    store.restore([legacy_exported(base, clock)])
    assert store.seed("lg", None, None, NOTHING, legacy=True).restored
    assert store.seed("lg", None, None, NOTHING, legacy=True).rebuilt  # a cookie re-seed


def test_restored_sessions_are_swept_when_idle(base, clock):
    """X1 after K2: restored sessions, typed or legacy, age from the restore and are evicted
    by the sweep like any other (their eviction records keep their binding)."""
    store = store_of(base, clock, idle_ttl_s=10)
    store.restore([exported(base, clock), legacy_exported(base, clock)])
    clock.now += 11
    assert store.evict_idle() == 2
    with pytest.raises(errors.SessionExpired):
        store.call_tool("lg", *READ)
    with pytest.raises(errors.EpisodeMismatch):
        store.close("rs", EpisodeId("r2", 0))


def test_a_restored_verified_session_is_verified_once_claimed(base, clock):
    """K1/K4: the state a session had when exported comes back with the claim."""
    source = store_of(base, clock)
    source.seed("rs", EP, TID, NOTHING)
    source.verify("rs", [])
    snapshots, _, _ = source.export(["rs"])
    store = store_of(base, clock)
    store.restore(snapshots)
    assert store.seed("rs", EP, TID, NOTHING).state is SessionState.VERIFIED
    assert store.state_counts() == {"verified": 1}


def test_restores_refused_for_live_or_closed_ids_say_which(base, clock):
    """K2: SESSION_LIVE / SESSION_CLOSED name the ids and say nothing was restored."""
    snapshot = exported(base, clock)
    store = store_of(base, clock)
    store.seed("rs", EP, TID, WRITES)
    with pytest.raises(errors.SessionLive) as live:
        store.restore([snapshot])
    assert (live.value.session_id, live.value.message) == (
        "rs",
        "sessions ['rs'] are live here; nothing was restored",
    )
    store.close("rs", EP)
    with pytest.raises(errors.SessionClosed) as closed:
        store.restore([snapshot])
    assert (closed.value.session_id, closed.value.message) == (
        "rs",
        "sessions ['rs'] were closed here; nothing was restored",
    )


def test_restore_capacity_counts_only_what_it_adds(base, clock):
    """K2/S7: a restore may fill the store exactly; one more session is CAPACITY_EXHAUSTED with
    the retry delay; a retried batch counts only the snapshots not installed yet (K3)."""
    first, second, third = (exported(base, clock, sid) for sid in ("a", "b", "c"))
    store = store_of(base, clock, max_sessions=2, retry_after_s=7)
    assert store.restore([first]) == 1
    with pytest.raises(errors.CapacityExhausted) as full:
        store.restore([second, third])
    assert full.value.message == "restoring 2 sessions would pass the maximum of 2"
    assert full.value.retry_after_s == 7
    assert store.restore([first, second]) == 2  # first is already installed: adds one
    assert store.live_count() == 2


@contextmanager
def seed_building(store: SessionStore, sid: str) -> Iterator[None]:
    """Seed ``sid`` (episode r1/0, task t1) in a thread, held while its tables build; the
    seed finishes when the block ends."""
    building, go = threading.Event(), threading.Event()

    def hold(session_id: str) -> None:
        building.set()
        wait(go)

    Faults.of(store).on("build", hold)
    seed = threading.Thread(target=store.seed, args=(sid, EP, TID, NOTHING))
    seed.start()
    try:
        wait(building)
        yield
    finally:
        go.set()
        seed.join(HANG_S)
    assert not seed.is_alive()


def test_restore_capacity_counts_seeds_still_building(base, clock):
    """S7 with K2: a seed whose tables are building holds a place a restore cannot take."""
    store = store_of(base, clock, max_sessions=1)
    snapshot = exported(base, clock)
    with seed_building(store, "s"), pytest.raises(errors.CapacityExhausted):
        store.restore([snapshot])
    assert store.live_count() == 1


def test_a_restore_of_an_id_whose_seed_is_building_is_refused_as_live(base, clock):
    """K2: an id whose seed is still building its tables is live (no session to compare with
    the snapshot yet): SESSION_LIVE naming it, nothing restored; the seed then binds it."""
    store = store_of(base, clock)
    snapshot = exported(base, clock)
    with seed_building(store, "rs"), pytest.raises(errors.SessionLive) as live:
        store.restore([snapshot])
    assert (live.value.session_id, live.value.message) == (
        "rs",
        "sessions ['rs'] are live here; nothing was restored",
    )
    assert store.seed("rs", EP, TID, NOTHING) == SeedResult(SessionState.SEEDED, True)


def test_a_retried_restore_says_which_sessions_were_claimed_since(base, clock):
    """K3: a retry finding every live id of the batch restored from the same snapshot and
    claimed since says the batch was restored already, how many others are installed and
    unclaimed, and names a claimed session (``already_restored`` in its ErrorInfo). With an id
    live for another reason, it names that one, says nothing was restored, and which ids
    were claimed since."""
    snapshots = [exported(base, clock, sid) for sid in ("a", "b", "c")]
    store = store_of(base, clock)
    assert store.restore(snapshots) == 3
    assert store.seed("a", EP, TID, NOTHING).restored  # claims a
    with pytest.raises(errors.SessionLive) as again:
        store.restore(snapshots)
    assert (again.value.session_id, again.value.message, again.value.info) == (
        "a",
        "these snapshots were restored here already: sessions ['a'] were claimed since (they "
        "went on from the snapshot and are not reset), 2 others are installed and unclaimed; "
        "nothing changed",
        {"already_restored": "true"},
    )
    store.seed("d", EpisodeId("d", 0), TID, NOTHING)
    with pytest.raises(errors.SessionLive) as mixed:
        store.restore([*snapshots, exported(base, clock, "d")])
    assert (mixed.value.session_id, mixed.value.message) == (
        "d",
        "sessions ['d'] are live here (and ['a'] were restored from these snapshots and claimed "
        "since); nothing was restored",
    )
    assert "already_restored" not in mixed.value.info
    assert store.state_counts() == {"restored_unclaimed": 2, "seeded": 2}


def test_a_retired_restore_over_an_evicted_id_leaves_the_id_free(base, clock):
    """K2 then K6: a restore replaces what the store remembered of the id (here its eviction),
    so once the restored attempt is retired the id seeds afresh."""
    snapshot = exported(base, clock, "ev")
    store = evicted_store(base, clock)
    assert store.restore([snapshot]) == 1
    assert store.retire("ev")
    assert store.seed("ev", EP, TID, NOTHING) == SeedResult(SessionState.SEEDED, False)


def test_a_failed_release_says_which_session(base, clock):
    """C5: RELEASE_FAILED names the session, and the session stays live for a retry."""
    store = store_of(base, clock)
    store.seed("s", EP, TID, NOTHING)
    Faults.of(store).fail_next_release()
    with pytest.raises(errors.ReleaseFailed) as failed:
        store.close("s", EP)
    assert (failed.value.session_id, failed.value.message) == (
        "s",
        "injected fault: releasing session s failed",
    )
    assert store.close("s", EP).value == "CLOSED"


# -- S4/S5/S6/S7/X1/X2: what a refused seed says (the continued run of 2026-12-03) ---------------


def test_a_seed_of_a_closed_id_is_session_closed_saying_so(base, clock):
    """S4: SESSION_CLOSED, "session <id> was closed", naming the session."""
    store = store_of(base, clock)
    store.seed("s", EP, TID, NOTHING)
    store.close("s", EP)
    with pytest.raises(errors.SessionClosed) as refused:
        store.seed("s", EP, TID, NOTHING)
    assert (refused.value.session_id, refused.value.message) == ("s", "session s was closed")


def test_a_typed_seed_of_an_evicted_id_is_expired_until_the_end_of_the_record_ttl(base, clock):
    """X1: a retried seed of an evicted id is SESSION_EXPIRED, saying the calls are gone, while
    the eviction record is valid (up to and including ``fence_ttl_s`` after the eviction, on a
    clock far from 0); past it the id seeds afresh."""
    store = evicted_store(base, clock, fence_ttl_s=100)
    clock.now += 100
    with pytest.raises(errors.SessionExpired) as refused:
        store.seed("ev", EP, TID, NOTHING)
    assert (refused.value.session_id, refused.value.message) == (
        "ev",
        "session ev was evicted after its idle TTL; its tool calls are gone. "
        "Seed a new resources_session_id",
    )
    assert store.live_count() == 0
    clock.now += 0.5
    assert store.seed("ev", EP, TID, NOTHING) == SeedResult(SessionState.SEEDED, False)


def test_a_seed_of_an_evicted_id_with_other_task_data_says_why(base, clock):
    """S3 against an eviction record: the conflict says the task data differs (same episode
    and task id, another row), as for a live binding."""
    store = evicted_store(base, clock)
    with pytest.raises(errors.SessionConflict) as refused:
        store.seed("ev", EP, TID, WRITES)
    assert (refused.value.session_id, refused.value.message) == (
        "ev",
        "session ev is bound to episode r1/0 and task ts/t1"
        " (the seed's task data differs from the bound task's)",
    )


def test_a_seed_while_draining_is_refused_saying_so(base, clock):
    """X2: DRAINING, "the server is shutting down", naming the session; nothing is built."""
    store = store_of(base, clock)
    store.start_draining()
    with pytest.raises(errors.Draining) as refused:
        store.seed("s", EP, TID, NOTHING)
    assert (refused.value.session_id, refused.value.message) == (
        "s",
        "the server is shutting down",
    )
    assert store.live_count() == 0


def test_a_seed_at_capacity_says_the_maximum(base, clock):
    """S7: CAPACITY_EXHAUSTED names the maximum and the session, with the retry delay."""
    store = store_of(base, clock, max_sessions=1, retry_after_s=7)
    store.seed("a", EP, TID, NOTHING)
    with pytest.raises(errors.CapacityExhausted) as full:
        store.seed("b", EpisodeId("r2", 0), TID, NOTHING)
    assert (full.value.session_id, full.value.message, full.value.retry_after_s) == (
        "b",
        "the server holds its maximum of 1 session",
        7,
    )


def test_a_failed_table_build_says_why(base, clock):
    """S6: TABLES_UNAVAILABLE carries the build's own error, names the session, and leaves
    nothing behind (a retry builds)."""
    store = store_of(base, clock)
    factory = store.table_factory

    def broken():
        raise OSError("no space left on device")

    store.table_factory = broken
    with pytest.raises(errors.TablesUnavailable) as failed:
        store.seed("s", EP, TID, NOTHING)
    assert (failed.value.session_id, failed.value.message) == (
        "s",
        "could not build the tables: no space left on device",
    )
    store.table_factory = factory
    assert store.seed("s", EP, TID, NOTHING) == SeedResult(SessionState.SEEDED, False)


def test_an_injected_build_failure_says_so(base, clock):
    """S6 under the test hooks: the error carries the injected cause, naming the session."""
    store = store_of(base, clock)
    Faults.of(store).fail_next_build()
    with pytest.raises(errors.TablesUnavailable) as failed:
        store.seed("s", EP, TID, NOTHING)
    assert (failed.value.session_id, failed.value.message) == (
        "s",
        "could not build the tables: injected fault: the table build failed",
    )


# -- S1/S5 for cookies: the placeholder task id --------------------------------------------------


def test_a_legacy_seed_of_a_task_without_an_id_is_seeded(base, clock):
    """S1 for cookies: a cookie session needs no task id, also when its row has no id."""
    store = store_of(base, clock)
    assert store.seed("lg", None, None, Task(""), legacy=True) == SeedResult(
        SessionState.SEEDED, False
    )


def test_a_legacy_seed_without_a_task_is_an_invalid_request(base, clock):
    """S5 for cookies: a seed without task data is INVALID_REQUEST naming the field ``task``
    (not a crash), and binds nothing."""
    store = store_of(base, clock)
    with pytest.raises(errors.InvalidRequest) as refused:
        store.seed("lg", None, None, None, legacy=True)
    assert refused.value.session_id == "lg"
    assert [(v.field, v.description) for v in refused.value.violations] == [("task", "required")]
    assert store.live_count() == 0


# -- T3/T6/T7: what a refused tool call says -----------------------------------------------------


def test_a_call_id_over_its_bound_is_refused_naming_the_session(base, clock):
    """T6's bound: INVALID_REQUEST on ``call_id``, with the session id for the status."""
    store = store_of(base, clock)
    store.seed("s", EP, TID, NOTHING)
    with pytest.raises(errors.InvalidRequest) as refused:
        store.call_tool("s", *READ, call_id="c" * 257)
    assert refused.value.session_id == "s"
    assert [v.field for v in refused.value.violations] == ["call_id"]


def test_tool_arguments_that_are_no_object_are_refused_saying_why(base, clock):
    """T3: INVALID_TOOL_ARGUMENTS carries the parser's reason."""
    store = store_of(base, clock)
    store.seed("s", EP, TID, NOTHING)
    with pytest.raises(errors.InvalidToolArguments) as refused:
        store.call_tool("s", READ[0], "[1]")
    assert (refused.value.session_id, refused.value.message) == (
        "s",
        "arguments must be a JSON object, got list",
    )


def test_a_reused_call_id_is_refused_saying_so(base, clock):
    """T7: CALL_ID_REUSED names the call_id and the session."""
    store = store_of(base, clock)
    store.seed("s", EP, TID, NOTHING)
    store.call_tool("s", *SEND, call_id="c1")
    with pytest.raises(errors.CallIdReused) as refused:
        store.call_tool("s", *READ, call_id="c1")
    assert refused.value.session_id == "s"
    assert "'c1'" in refused.value.message and READ[0] in refused.value.message


def test_calls_without_a_call_id_are_never_replayed_or_refused(base, clock):
    """T1 vs T6: without a call_id every call runs (no record), whatever came before."""
    store = store_of(base, clock)
    store.seed("s", EP, TID, NOTHING)
    first, second = store.call_tool("s", *SEND), store.call_tool("s", *SEND)
    assert not first.replayed and not second.replayed
    assert not store.call_tool("s", *READ).replayed
    assert len(store.table.sessions["s"].calls) == 0


def test_a_lost_response_says_which_session(base, clock):
    """The test hooks' lost response: INJECTED_FAULT (UNAVAILABLE) naming the session, and the
    call_id record kept, so the retry replays (T6)."""
    store = store_of(base, clock)
    store.seed("s", EP, TID, NOTHING)
    Faults.of(store).lose_next_response()
    with pytest.raises(errors.InjectedFault) as lost:
        store.call_tool("s", *SEND, call_id="c1")
    assert (lost.value.session_id, lost.value.message) == (
        "s",
        "injected fault: the response was lost",
    )
    assert store.call_tool("s", *SEND, call_id="c1").replayed


# -- V3/V4: what a verify of an id no longer held answers ----------------------------------------


def test_a_verify_of_an_id_not_held_says_why(base, clock):
    """V4: a masked 0 whose ``failure_reason`` is the error a call would get: closed, expired
    or lost, naming the session."""
    store = evicted_store(base, clock, retry_window_s=1)
    store.seed("s", EpisodeId("r2", 0), TID, NOTHING)
    store.close("s", EpisodeId("r2", 0))
    store.seed("lg", None, None, NOTHING, legacy=True)
    store.verify("lg", [])
    store.seed("rt", EpisodeId("r3", 0), TID, NOTHING)
    store.retire("rt")
    clock.now += 2  # past the verify's retry window: its marker no longer answers
    reasons = {
        "s": "session s was closed",
        "ev": "session ev was evicted after 10 s idle",
        "never": "the server holds no session never: never seeded on this server, or lost "
        "when it restarted",
        "lg": "session lg was verified and released (a legacy session ends at its verify; seed "
        "it again)",
        "rt": "session rt was retired (its attempt discarded; seed or restore it again)",
    }
    for sid, reason in reasons.items():
        outcome = store.verify(sid, [])
        assert (outcome.reward, outcome.mask_sample, outcome.failure_kind) == (
            0.0,
            True,
            "session_lost",
        )
        assert outcome.failure_reason == reason
        assert outcome.tables == ()


def table_rows(outcome) -> list[tuple[str, bool, int, int]]:
    return [(t.table, t.equal, t.predicted_rows, t.expected_rows) for t in outcome.tables]


def test_a_resend_scored_afresh_reports_its_tables(base, clock):
    """V3: a different request to a verified legacy id is scored as a live session would be,
    with the per-table comparison ``VerifyResponse.tables`` carries, not only the reward."""
    store = store_of(base, clock)
    for sid in ("lg", "live"):
        store.seed(sid, None, None, WRITES, legacy=True)
    assert store.verify("lg", []).reward == 0.0  # released; its marker remembers this request
    afresh = store.verify("lg", [WRITE])
    assert (afresh.reward, afresh.mask_sample) == (1.0, False)
    live = store.verify("live", [WRITE])
    assert table_rows(afresh) == table_rows(live)
    assert ("email._emails", True, 501, 501) in table_rows(afresh)  # the sandbox's 500, sent 1


# -- S1 for cookies: a re-seed of an id the store remembers --------------------------------------


def test_a_legacy_seed_after_an_eviction_forgets_the_eviction(base, clock):
    """X1 then S1: a cookie id the sweep evicted seeds fresh tables; what the store remembers
    of the id is then that session's, so once a verify releases it a call is SESSION_LOST
    (not the old eviction's SESSION_EXPIRED)."""
    store = store_of(base, clock, idle_ttl_s=10)
    store.seed("lg", None, None, NOTHING, legacy=True)
    clock.now += 11
    assert store.evict_idle() == 1
    assert not store.seed("lg", None, None, NOTHING, legacy=True).already_seeded
    assert store.verify("lg", []).reward == 1.0
    with pytest.raises(errors.SessionLost):
        store.call_tool("lg", *READ)


def test_a_legacy_seed_after_a_verify_forgets_the_verify(base, clock):
    """V2 then S1: a cookie id seeded again after its verify is a new session; once that one
    is closed, a verify is V4 (session lost, closed), not the first session's remembered
    outcome."""
    store = store_of(base, clock)
    store.seed("lg", None, None, NOTHING, legacy=True)
    assert store.verify("lg", []).reward == 1.0
    store.seed("lg", None, None, NOTHING, legacy=True)
    assert store.close("lg", EP).value == "CLOSED"
    outcome = store.verify("lg", [])
    assert (outcome.reward, outcome.mask_sample, outcome.failure_reason) == (
        0.0,
        True,
        "session lg was closed",
    )
