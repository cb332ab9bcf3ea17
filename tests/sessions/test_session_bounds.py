"""Bounds of the session store: capacity, idle TTL, and the count and age bounds of fences,
eviction records, legacy markers and per-session call_id records; all on a fake clock.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tests.helpers import (
    BOUND_FIRST,
    BOUND_LIMIT,
    BOUND_REST,
    BOUND_SEARCH,
    EP,
    TID,
    WRITE,
    FakeClock,
    send_args,
    total_emails,
)
from workplace_env import errors
from workplace_env.identity import EpisodeId, FunctionCall, Task, TaskId
from workplace_env.sessions import CloseOutcome, SessionConfig, SessionStore

EPISODE = EpisodeId(*EP)
TASK_ID = TaskId(*TID)
TASK = Task(id="task-1", ground_truth=(FunctionCall(WRITE[0], json.dumps(WRITE[1])),))


def _store(sandbox, **config) -> SessionStore:
    return SessionStore(sandbox, SessionConfig(**config), clock=FakeClock())


def _send(store: SessionStore, sid: str, subject: str, call_id: str = "") -> bool:
    """Send an email; return whether the output was replayed from a call_id record."""
    arguments = json.dumps({"recipient": "a@b.com", "subject": subject, "body": "b"})
    return store.call_tool(sid, "email_send_email", arguments, call_id).replayed


def _sent(store: SessionStore, sid: str) -> list[str]:
    out = json.loads(
        store.call_tool(sid, "email_search_emails", '{"query": "zq", "page_size": 100}').output
    )
    return [] if isinstance(out, str) else sorted(e["subject"] for e in out["emails"])


def _seed(store: SessionStore, sid: str, rollout: str = EP[0]) -> None:
    store.seed(sid, EpisodeId(rollout, 0), TASK_ID, TASK)


# -- call_id records (T6) ---------------------------------------------------------------------


def test_call_id_records_are_bounded_by_count_oldest_first(sandbox):
    store = _store(sandbox, max_call_ids=2)
    _seed(store, "s")
    assert [_send(store, "s", f"zq{i}", f"c{i}") for i in range(3)] == [False] * 3
    assert _send(store, "s", "zq2", "c2") and _send(store, "s", "zq1", "c1")  # kept: replayed
    assert not _send(store, "s", "zq0", "c0")  # forgotten: runs again
    assert _sent(store, "s") == ["zq0", "zq0", "zq1", "zq2"]
    assert len(store.table.sessions["s"].calls) == 2


def test_call_id_records_are_bounded_by_age(sandbox):
    store = _store(sandbox, call_id_ttl_s=10)
    _seed(store, "s")
    _send(store, "s", "zq0", "c0")
    store.clock.now += 10  # type: ignore[attr-defined]
    assert _send(store, "s", "zq0", "c0")  # 10 s old: still kept
    store.clock.now += 0.5  # type: ignore[attr-defined]
    assert not _send(store, "s", "zq0", "c0")  # past the age bound: runs again
    assert _sent(store, "s") == ["zq0", "zq0"]


def test_call_id_records_are_per_session(sandbox):
    store = _store(sandbox)
    _seed(store, "a")
    _seed(store, "b", rollout="r-b")
    assert not _send(store, "a", "zqa", "same")
    assert not _send(store, "b", "zqb", "same")  # another session's key: not a reuse
    assert _sent(store, "a") == ["zqa"] and _sent(store, "b") == ["zqb"]


@pytest.mark.parametrize("how", ["close", "evict", "legacy_verify", "legacy_reseed"])
def test_call_id_records_are_released_with_the_session(sandbox, how):
    store = _store(sandbox, idle_ttl_s=60)
    if how.startswith("legacy"):
        store.seed("s", None, None, TASK, legacy=True)
    else:
        _seed(store, "s")
    _send(store, "s", "zq", "c0")
    session = store.table.sessions["s"]
    assert len(session.calls) == 1
    if how == "close":
        store.close("s", EPISODE)
    elif how == "evict":
        store.clock.now += 61  # type: ignore[attr-defined]
        assert store.evict_idle() == 1
    elif how == "legacy_verify":
        store.verify("s", [])
    else:
        assert store.seed("s", None, None, TASK, legacy=True).rebuilt
        assert not _send(store, "s", "zq", "c0")  # fresh tables, fresh records: runs
        return
    assert session.tables is None and len(session.calls) == 0
    assert store.live_count() == 0


# -- fences, eviction records, markers --------------------------------------------------------


def test_fences_are_bounded_by_count(sandbox):
    store = _store(sandbox, max_fences=2)
    for sid in ("a", "b", "c"):
        assert store.close(sid, EPISODE) is CloseOutcome.NOT_SEEDED
    assert len(store.records.fences) == 2
    _seed(store, "a")  # the oldest fence was dropped: the id is free again
    with pytest.raises(errors.SessionClosed):
        _seed(store, "b")


def test_fences_are_bounded_by_age(sandbox):
    store = _store(sandbox, fence_ttl_s=100)
    _seed(store, "a")
    store.close("a", EPISODE)
    store.clock.now += 100  # type: ignore[attr-defined]
    with pytest.raises(errors.SessionClosed):  # T5 while the fence is valid
        _send(store, "a", "zq")
    store.clock.now += 1  # type: ignore[attr-defined]
    with pytest.raises(errors.SessionLost):  # forgotten: the server holds nothing of it
        _send(store, "a", "zq")
    assert store.close("a", EPISODE) is CloseOutcome.NOT_SEEDED
    store.clock.now += 101  # type: ignore[attr-defined]
    store.evict_idle()  # any store operation prunes aged records
    assert len(store.records.fences) == 0


def test_a_fence_keeps_its_episode_when_an_older_fence_ages_out(sandbox):
    # C4 after the close: pruning an aged fence drops its episode only, not a younger one's.
    store = _store(sandbox, fence_ttl_s=100)
    _seed(store, "old", rollout="r-old")
    store.close("old", EpisodeId("r-old", 0))
    store.clock.now += 50  # type: ignore[attr-defined]
    _seed(store, "young", rollout="r-young")
    store.close("young", EpisodeId("r-young", 0))
    store.clock.now += 51  # type: ignore[attr-defined]  # "old" is past its TTL, "young" not
    with pytest.raises(errors.EpisodeMismatch) as refused:  # this close prunes "old" first
        store.close("young", EPISODE)
    assert refused.value.message == "session young belongs to episode r-young/0"
    assert list(store.records.fence_episodes) == ["young"]
    assert store.close("young", EpisodeId("r-young", 0)) is CloseOutcome.ALREADY_CLOSED


def test_eviction_records_are_bounded_by_count_and_age(sandbox):
    store = _store(sandbox, idle_ttl_s=10, max_fences=2, fence_ttl_s=100)
    for i, sid in enumerate(("a", "b", "c")):
        _seed(store, sid, rollout=f"r{i}")
    store.clock.now += 11  # type: ignore[attr-defined]
    assert store.evict_idle() == 3
    assert len(store.records.evictions) == 2
    with pytest.raises(errors.SessionLost):  # the oldest record was dropped
        _send(store, "a", "zq")
    with pytest.raises(errors.SessionExpired):
        _send(store, "c", "zq")
    store.clock.now += 101  # type: ignore[attr-defined]
    with pytest.raises(errors.SessionLost):  # past fence_ttl_s: forgotten
        _send(store, "c", "zq")
    store.evict_idle()  # any store operation prunes aged records: none is kept
    assert len(store.records.evictions) == 0


def test_legacy_markers_are_bounded_by_count_and_window(sandbox):
    store = _store(sandbox, max_markers=1, retry_window_s=50)
    good = [FunctionCall(WRITE[0], json.dumps(WRITE[1]))]
    for sid in ("k1", "k2"):
        store.seed(sid, None, None, TASK, legacy=True)
        assert store.verify(sid, good).reward == 1.0
    assert store.verify("k1", good).failure_kind == "session_lost"  # dropped by count
    assert store.verify("k2", good).reward == 1.0
    store.clock.now += 51  # type: ignore[attr-defined]
    assert store.verify("k2", good).failure_kind == "session_lost"  # past the window
    store.evict_idle()
    assert len(store.records.markers) == 0


def test_a_marker_outlives_other_sessions_requests_within_its_window(sandbox):
    # V3: an identical resend inside the window answers the same, whatever other sessions did
    # meanwhile (their seeds and closes prune aged records; this one is not aged, even at the
    # window's last instant).
    store = _store(sandbox, retry_window_s=50)
    good = [FunctionCall(WRITE[0], json.dumps(WRITE[1]))]
    store.seed("k1", None, None, TASK, legacy=True)
    assert store.verify("k1", good).reward == 1.0
    _seed(store, "other")
    store.clock.now += 50  # type: ignore[attr-defined]
    assert store.close("other", EPISODE) is CloseOutcome.CLOSED
    again = store.verify("k1", good)
    assert (again.reward, again.mask_sample, again.failure_kind) == (1.0, False, "")
    assert list(store.records.markers) == ["k1"]


# -- capacity and idle TTL --------------------------------------------------------------------


def test_capacity_counts_live_sessions_only(sandbox):
    store = _store(sandbox, max_sessions=2, idle_ttl_s=10, retry_after_s=3)
    _seed(store, "a")
    _seed(store, "b", rollout="r-b")
    with pytest.raises(errors.CapacityExhausted) as err:
        _seed(store, "c", rollout="r-c")
    assert err.value.retry_after_s == 3
    _seed(store, "a")  # a retry of a live seed is not a new session (S2)
    store.clock.now += 11  # type: ignore[attr-defined]
    assert store.evict_idle() == 2  # evicted sessions free their places
    _seed(store, "c", rollout="r-c")
    assert store.live_count() == 1


def test_every_request_on_a_session_keeps_it_alive(sandbox):
    store = _store(sandbox, idle_ttl_s=10)
    for sid in ("seeded", "called", "verified", "retried"):
        _seed(store, sid, rollout=sid)
    store.clock.now += 6  # type: ignore[attr-defined]
    _send(store, "called", "zq")
    store.verify("verified", [])
    _seed(store, "retried", rollout="retried")
    store.clock.now += 5  # type: ignore[attr-defined]
    assert store.evict_idle() == 1
    assert sorted(store.table.sessions) == ["called", "retried", "verified"]


def test_a_session_idle_exactly_its_ttl_is_kept_and_one_idle_longer_is_evicted(sandbox):
    # X1: evicted once idle *past* its TTL.
    store = _store(sandbox, idle_ttl_s=10)
    _seed(store, "edge")
    store.clock.now += 10  # type: ignore[attr-defined]
    assert store.evict_idle() == 0
    store.clock.now += 0.5  # type: ignore[attr-defined]
    assert store.evict_idle() == 1
    assert store.live_count() == 0


def _counted(store: SessionStore) -> list[int]:
    """The numbers of sessions ``store``'s eviction passes free, from now on, in order."""
    counted: list[int] = []
    store.on_evicted = counted.append
    return counted


def _gone_answers(store: SessionStore, sid: str) -> list[object]:
    """What a tool call, a typed re-seed, a verify and a close answer on ``sid``, which
    ``store`` no longer holds (the close goes last: it fences the id)."""
    answers: list[object] = []
    for request in (lambda: _send(store, sid, "zq"), lambda: _seed(store, sid, rollout=sid)):
        with pytest.raises(errors.SessionError) as refused:
            request()
        err = refused.value
        answers.append((type(err), err.reason, err.message, err.session_id))
    lost = store.verify(sid, [])
    answers.append((lost.reward, lost.mask_sample, lost.failure_kind, lost.failure_reason))
    answers.append(store.close(sid, EpisodeId(sid, 0)))
    return answers


def test_a_full_store_evicts_its_sessions_past_their_ttl_to_admit_a_seed(sandbox):
    # S7 with X1: expired sessions hold no place. The seed's eviction is the periodic sweep's:
    # the same records, the same count, the same answers on the evicted ids afterwards.
    full, swept = (_store(sandbox, max_sessions=2, idle_ttl_s=10) for _ in range(2))
    counted, counted_by_sweep = _counted(full), _counted(swept)
    for store in (full, swept):
        _seed(store, "a", rollout="a")
        _seed(store, "b", rollout="b")
        store.clock.now += 11  # type: ignore[attr-defined]
    assert swept.evict_idle() == 2
    _seed(full, "c", rollout="c")
    assert sorted(full.table.sessions) == ["c"]
    assert counted == counted_by_sweep == [2]
    assert full.records.evictions == swept.records.evictions
    assert list(full.records.evictions) == ["a", "b"]
    for sid in ("a", "b"):
        answers = _gone_answers(full, sid)
        assert answers == _gone_answers(swept, sid)
        assert answers[0][:2] == answers[1][:2] == (errors.SessionExpired, "SESSION_EXPIRED")
        assert answers[3] is CloseOutcome.CLOSED


def test_a_full_store_of_sessions_within_their_ttl_refuses_as_before(sandbox):
    # S7: a session idle exactly its TTL still holds its place; the refusal is unchanged, and
    # the held sessions are untouched. Half a second later both are past it.
    store = _store(sandbox, max_sessions=2, idle_ttl_s=10, retry_after_s=3)
    counted = _counted(store)
    _seed(store, "a", rollout="a")
    _seed(store, "b", rollout="b")
    store.clock.now += 10  # type: ignore[attr-defined]
    with pytest.raises(errors.CapacityExhausted) as full:
        _seed(store, "c", rollout="c")
    assert type(full.value) is errors.CapacityExhausted
    assert (full.value.session_id, full.value.message, full.value.retry_after_s) == (
        "c",
        "the server holds its maximum of 2 sessions",
        3,
    )
    assert sum(counted) == 0
    assert sorted(store.table.sessions) == ["a", "b"]
    assert not store.records.evictions
    store.clock.now += 0.5  # type: ignore[attr-defined]
    _seed(store, "c", rollout="c")
    assert sorted(store.table.sessions) == ["c"]
    assert sum(counted) == 2


def test_a_full_store_admits_a_seed_only_when_its_expired_sessions_free_a_place(sandbox):
    # S7 with X1: one session past its TTL makes room for one seed, not for two.
    store = _store(sandbox, max_sessions=2, idle_ttl_s=10, retry_after_s=3)
    counted = _counted(store)
    _seed(store, "old", rollout="old")
    store.clock.now += 6  # type: ignore[attr-defined]
    _seed(store, "young", rollout="young")
    store.clock.now += 5  # type: ignore[attr-defined]  # old: 11 s idle; young: 5 s
    _seed(store, "c", rollout="c")
    assert sorted(store.table.sessions) == ["c", "young"]
    assert list(store.records.evictions) == ["old"]
    with pytest.raises(errors.CapacityExhausted) as full:
        _seed(store, "d", rollout="d")
    assert (full.value.session_id, full.value.message) == (
        "d",
        "the server holds its maximum of 2 sessions",
    )
    assert counted == [1, 0]
    assert sorted(store.table.sessions) == ["c", "young"]
    assert _sent(store, "young") == []  # still live, tables intact


def test_a_seed_with_room_leaves_the_expired_sessions_to_the_sweep(sandbox):
    # Admission only sweeps a full store: below capacity an expired session stays until a sweep.
    store = _store(sandbox, max_sessions=2, idle_ttl_s=10)
    counted = _counted(store)
    _seed(store, "a", rollout="a")
    store.clock.now += 11  # type: ignore[attr-defined]
    _seed(store, "b", rollout="b")
    assert sorted(store.table.sessions) == ["a", "b"]
    assert counted == []
    _seed(store, "c", rollout="c")  # full now: "a" is evicted to admit it
    assert sorted(store.table.sessions) == ["b", "c"]
    assert counted == [1]


def test_a_full_store_evicts_its_expired_sessions_to_admit_a_restore(sandbox):
    # K2 with S7 and X1: a restore counts the expired sessions no more than a seed does; the
    # batch is admitted only when what they free is enough for all of it.
    donor = _store(sandbox)
    for sid in ("x", "y"):
        _seed(donor, sid, rollout=sid)
    snapshots, missing, failed = donor.export(["x", "y"])
    assert (len(snapshots), missing, failed) == (2, [], [])
    store = _store(sandbox, max_sessions=2, idle_ttl_s=10, retry_after_s=3)
    counted = _counted(store)
    _seed(store, "old", rollout="old")
    store.clock.now += 6  # type: ignore[attr-defined]
    _seed(store, "young", rollout="young")
    store.clock.now += 5  # type: ignore[attr-defined]
    with pytest.raises(errors.CapacityExhausted) as full:
        store.restore(snapshots)
    assert (full.value.message, full.value.retry_after_s) == (
        "restoring 2 sessions would pass the maximum of 2",
        3,
    )
    assert sorted(store.table.sessions) == ["young"]  # "old" was evicted all the same
    assert store.restore(snapshots[:1]) == 1
    assert sorted(store.table.sessions) == ["x", "young"]
    store.clock.now += 6  # type: ignore[attr-defined]  # young: 11 s idle; x: 6 s
    assert store.restore(snapshots) == 2  # "x" is installed already; "young" makes room for "y"
    assert sorted(store.table.sessions) == ["x", "y"]
    assert counted == [1, 1]


class CallDuringFirstRelease:
    """Hooks that run ``call`` while the sweep releases the first session it evicts: a request
    arriving in the middle of a sweep, deterministically (no threads)."""

    def __init__(self, call) -> None:
        self.call = call

    def hit(self, point: str, session_id: str) -> None:
        pass

    def take(self, kind: str) -> bool:
        if kind == "release" and self.call is not None:
            call, self.call = self.call, None
            call()
        return False


def test_a_session_used_during_a_sweep_is_kept_and_the_sweep_goes_on(sandbox):
    # X1: the sweep lists idle sessions, then takes each in turn; one used after the listing
    # is no longer idle and stays live, and the sessions after it are still evicted.
    store = _store(sandbox, idle_ttl_s=10)
    for sid in ("a", "b", "c"):
        _seed(store, sid, rollout=sid)
    store.clock.now += 11  # type: ignore[attr-defined]
    store.hooks = CallDuringFirstRelease(lambda: _send(store, "b", "zq"))  # type: ignore[assignment]
    assert store.evict_idle() == 2
    assert sorted(store.table.sessions) == ["b"]
    assert _sent(store, "b") == ["zq"]
    with pytest.raises(errors.SessionExpired):
        _send(store, "c", "zq")


def test_an_evicted_legacy_session_keeps_its_legacy_binding(sandbox):
    # Its record answers as a legacy (cookie) session: a legacy re-seed gets fresh tables, a
    # typed seed of the id conflicts, and a close needs no episode of its own.
    store = _store(sandbox, idle_ttl_s=10)
    store.seed("cookie-ev", None, None, TASK, legacy=True)
    store.clock.now += 11  # type: ignore[attr-defined]
    assert store.evict_idle() == 1
    with pytest.raises(errors.SessionConflict):
        _seed(store, "cookie-ev")
    assert not store.seed("cookie-ev", None, None, TASK, legacy=True).already_seeded
    store.clock.now += 11  # type: ignore[attr-defined]
    assert store.evict_idle() == 1
    assert store.close("cookie-ev", EPISODE) is CloseOutcome.CLOSED


# -- The per-session write bound ---------------------------------------------------------
# The transports' side (status codes, SDK error, HTTP 413, MCP, the setting, checkpoint files)
# is tests/sessions/test_session_write_bound.py's; here, what the store counts and answers.

#: A task whose ground truth is no call: an empty prediction scores 1.0.
NO_WRITES = Task(id="no-writes")


def _write(store: SessionStore, sid: str, arguments: str, call_id: str = "") -> bool:
    """Run email_send_email with ``arguments``; return whether it was replayed."""
    return store.call_tool(sid, "email_send_email", arguments, call_id).replayed


def _bound_sent(store: SessionStore, sid: str) -> int:
    """How many of the write-bound scenarios' emails (subject "bound ...") ``sid`` holds."""
    out = store.call_tool(sid, "email_search_emails", json.dumps(BOUND_SEARCH)).output
    return total_emails(json.loads(out))


def test_a_write_one_byte_over_the_write_bound_is_refused_saying_so(sandbox):
    """SESSION_TOO_LARGE naming the session, the session's total with the call, the bound
    and the call's own bytes; nothing applied. A write taking it exactly to the bound runs."""
    store = _store(sandbox, max_session_write_bytes=BOUND_LIMIT)
    _seed(store, "s")
    _write(store, "s", BOUND_FIRST)
    over = send_args(BOUND_REST + 1, "second")
    with pytest.raises(errors.SessionTooLarge) as refused:
        _write(store, "s", over)
    assert (refused.value.session_id, refused.value.message) == (
        "s",
        f"email_send_email would take the session's writes to {BOUND_LIMIT + 1} bytes, over the "
        f"server's bound of {BOUND_LIMIT} (max_session_write_bytes); nothing was applied",
    )
    assert (refused.value.size_bytes, refused.value.limit_bytes) == (BOUND_LIMIT + 1, BOUND_LIMIT)
    assert refused.value.info == {
        "size_bytes": str(BOUND_LIMIT + 1),
        "limit_bytes": str(BOUND_LIMIT),
        "call_bytes": str(len(over)),
    }
    assert _bound_sent(store, "s") == 1
    _write(store, "s", send_args(BOUND_REST, "second"))
    assert _bound_sent(store, "s") == 2


def test_reads_and_replays_do_not_count_towards_the_write_bound(sandbox):
    store = _store(sandbox, max_session_write_bytes=BOUND_LIMIT)
    _seed(store, "s")
    for _ in range(3):  # each read's arguments alone are over the bound
        store.call_tool("s", "email_search_emails", json.dumps({"query": "y" * BOUND_LIMIT}))
    assert not _write(store, "s", BOUND_FIRST, "first")
    assert all(_write(store, "s", BOUND_FIRST, "first") for _ in range(3))
    _write(store, "s", send_args(BOUND_REST, "second"))  # over, had a read or a replay counted
    assert _write(store, "s", BOUND_FIRST, "first")  # a full session still replays
    assert _bound_sent(store, "s") == 2


def test_a_legacy_reseed_starts_a_fresh_write_count(sandbox):
    store = _store(sandbox, max_session_write_bytes=BOUND_LIMIT)
    for _ in range(2):  # the seed, then a re-seed: fresh tables, and the whole bound again
        store.seed("cookie", None, None, NO_WRITES, legacy=True)
        _write(store, "cookie", BOUND_FIRST)
        _write(store, "cookie", send_args(BOUND_REST, "second"))
        with pytest.raises(errors.SessionTooLarge):
            _write(store, "cookie", "{}")
        assert _bound_sent(store, "cookie") == 2


def test_a_session_restored_over_the_write_bound_serves_reads_and_refuses_writes(sandbox):
    """A checkpoint from a store with a larger bound (here none) carries its count: installed
    (refusing it would lose the episode), it serves reads and verify, but cannot grow here."""
    source = _store(sandbox, max_session_write_bytes=0)
    source.seed("big", EPISODE, TASK_ID, NO_WRITES)
    writes = [send_args(BOUND_REST, f"n{k}") for k in range(3)]
    for arguments in writes:
        _write(source, "big", arguments)
    (snapshot,), _, _ = source.export(["big"])
    assert snapshot.write_bytes == sum(map(len, writes)) > BOUND_LIMIT
    store = _store(sandbox, max_session_write_bytes=BOUND_LIMIT)
    assert store.restore([snapshot]) == 1
    assert _bound_sent(store, "big") == 3  # a read, which claims it
    with pytest.raises(errors.SessionTooLarge) as refused:
        _write(store, "big", "{}")
    assert refused.value.size_bytes == snapshot.write_bytes + 2
    assert store.verify("big", []).reward == 1.0  # replays calls, not tables (V1)
    assert _bound_sent(store, "big") == 3


def test_no_write_bound_when_zero(sandbox):
    """``max_session_write_bytes=0``: a session's writes are counted, never refused."""
    source = _store(sandbox)
    source.seed("free", EPISODE, TASK_ID, NO_WRITES)
    (snapshot,), _, _ = source.export(["free"])
    store = _store(sandbox, max_session_write_bytes=0)
    store.restore([replace(snapshot, write_bytes=2**40)])  # far over any bound
    _write(store, "free", BOUND_FIRST)
    assert _bound_sent(store, "free") == 1
    (again,), _, _ = store.export(["free"])
    assert again.write_bytes == 2**40 + len(BOUND_FIRST)
