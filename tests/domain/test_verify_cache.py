"""The verifier's memo of end states is bounded in estimated bytes and never changes a reward."""

from __future__ import annotations

import gc
import json
import tracemalloc

import pytest

from workplace_env import verify
from workplace_env.config import Settings
from workplace_env.identity import FunctionCall
from workplace_env.memo import BoundedMemo
from workplace_env.sessions import SessionStore
from workplace_env.verify import Verifier


def send(i: int, body: str = "b") -> FunctionCall:
    args = {"recipient": "a@b.com", "subject": f"s{i}", "body": body}
    return FunctionCall("email_send_email", json.dumps(args))


def test_the_memo_stays_within_its_bytes_and_drops_the_oldest(sandbox):
    probe = Verifier(sandbox)
    probe.end_state([send(0)])
    one = probe.cached_bytes
    assert one > 10_000  # an email table's normal form, estimated
    verifier = Verifier(sandbox, cache_bytes=5 * one + one // 2)
    for i in range(40):
        verifier.end_state([send(i)])
        assert verifier.cached_bytes <= verifier.cache_bytes
    assert verifier.cached_states() == 5
    assert verifier.end_state([send(39)]) is verifier.end_state([send(39)])  # kept: the newest
    first = verifier.end_state([send(0)])  # dropped long ago: replayed again, equal state
    assert first == probe.end_state([send(0)]) and first is not probe.end_state([send(0)])


def test_rewards_are_the_same_without_a_memo(sandbox):
    cached, uncached = Verifier(sandbox), Verifier(sandbox, cache_bytes=0)
    cases = [([send(1)], [send(1)]), ([send(1)], [send(2)]), ([], []), ([send(3)], [])]
    for predicted, truth in cases * 2:
        assert cached.score(predicted, truth) == uncached.score(predicted, truth)
    assert uncached.cached_states() == 0 and uncached.cached_bytes == 0


def test_the_bound_is_a_setting(sandbox):
    settings = Settings(verify_cache_mb=1.5)
    store = SessionStore(sandbox, settings.session_config())
    assert store.verifier.cache_bytes == int(1.5 * 2**20)


def test_the_estimate_counts_the_replayed_writes_kept_as_the_key(sandbox):
    # The memo's key holds every replayed write's arguments: a long body costs its length, so
    # a few huge writes cannot hold memory past the bound.
    small, large = Verifier(sandbox), Verifier(sandbox)
    short = send(0)
    long = FunctionCall(
        "email_send_email",
        json.dumps({"recipient": "a@b.com", "subject": "s0", "body": "x" * 200_000}),
    )
    small.end_state([short])
    large.end_state([long])
    grown = len(long.arguments) - len(short.arguments)
    assert large.cached_bytes - small.cached_bytes >= grown


# -- the memos are used and bounded (the mutation run: a memo that never answers, or
# grows without its bound, scores the same; these tests notice) ----------------------------


def test_a_state_exactly_the_bound_in_size_is_kept(sandbox):
    one = Verifier(sandbox)
    one.end_state([send(0)])
    exact = Verifier(sandbox, cache_bytes=one.cached_bytes)
    state = exact.end_state([send(0)])
    assert exact.cached_states() == 1 and exact.cached_bytes == exact.cache_bytes
    assert exact.end_state([send(0)]) is state


def test_a_repeated_pair_is_answered_from_the_memo(sandbox):
    verifier = Verifier(sandbox)
    first = verifier.score([send(1)], [send(2)])
    assert verifier.score([send(1)], [send(2)]) is first
    # a bound of one byte keeps no end state (each is larger) but remembers results
    tiny = Verifier(sandbox, cache_bytes=1)
    assert tiny.score([send(1)], [send(1)]) is tiny.score([send(1)], [send(1)])
    assert tiny.cached_states() == 0


def _chars(calls: list[FunctionCall]) -> int:
    """The characters a write sequence adds to the result memo's key (tool + canonical args)."""
    return sum(
        len(c.name) + len(json.dumps(json.loads(c.arguments), sort_keys=True)) for c in calls
    )


def test_a_pair_exactly_the_key_bound_long_is_remembered(sandbox):
    base = _chars([send(0, "")])
    at_bound = [send(0, "x" * (verify._RESULT_KEY_CHARS - base))]
    over = [send(0, "x" * (verify._RESULT_KEY_CHARS - base + 1))]
    assert _chars(at_bound) == verify._RESULT_KEY_CHARS
    verifier = Verifier(sandbox)
    assert verifier.score(at_bound, []) is verifier.score(at_bound, [])
    assert verifier.score(over, []) is not verifier.score(over, [])
    assert verifier.score(over, []) == verifier.score(over, [])


def test_the_result_memo_starts_over_when_full(sandbox, monkeypatch):
    monkeypatch.setattr(verify, "_RESULT_ENTRIES", 3)
    verifier = Verifier(sandbox)
    first = [verifier.score([send(i)], []) for i in range(3)]
    assert [verifier.score([send(i)], []) for i in range(3)] == first  # equal ...
    assert all(verifier.score([send(i)], []) is first[i] for i in range(3))  # ... and remembered
    verifier.score([send(3)], [])  # the fourth pair empties the memo first
    assert verifier.score([send(0)], []) is not first[0]
    assert verifier.score([send(0)], []) == first[0]


class CountingEncoder(json.JSONEncoder):
    """The canonical encoder, counting the arguments it encodes (each is a parse, then this)."""

    def __init__(self) -> None:
        super().__init__(sort_keys=True)
        self.count = 0

    def encode(self, o):
        self.count += 1
        return super().encode(o)


def test_a_canonical_form_is_computed_once_per_text_up_to_the_length_bound(monkeypatch):
    encoder = CountingEncoder()
    monkeypatch.setattr(verify, "_CANONICAL", encoder)
    monkeypatch.setattr(verify, "_CANONICAL_MEMO", BoundedMemo(2048))
    limit = verify._CANONICAL_MEMO_CHARS
    at_limit = '{"a": "' + "x" * (limit - 9) + '"}'
    over = at_limit[:-2] + 'x"}'
    assert len(at_limit) == limit and len(over) == limit + 1
    for text, computed in ((at_limit, 1), (over, 2)):
        encoder.count = 0
        assert verify._canonical_arguments(text) == verify._canonical_arguments(text)
        assert encoder.count == computed


def test_the_canonical_form_memo_starts_over_when_full(monkeypatch):
    encoder = CountingEncoder()
    monkeypatch.setattr(verify, "_CANONICAL", encoder)
    monkeypatch.setattr(verify, "_CANONICAL_MEMO", BoundedMemo(3))
    texts = [json.dumps({"n": i}) for i in range(4)]
    for text in texts[:3]:
        verify._canonical_arguments(text)
    for text in texts[:3]:
        verify._canonical_arguments(text)
    assert encoder.count == 3  # all three remembered
    verify._canonical_arguments(texts[3])  # the fourth empties the memo first
    verify._canonical_arguments(texts[0])
    assert encoder.count == 5  # forgotten: computed again


# One write to each large compared table (the plots and project tables are a few rows).
LARGE_TABLE_WRITES = {
    "email._emails": ("email_send_email", {"recipient": "a@b.com", "subject": "s", "body": "b"}),
    "calendar._calendar_events": (
        "calendar_create_event",
        {
            "event_name": "x",
            "participant_email": "a@b.com",
            "event_start": "2023-11-01 09:00:00",
            "duration": "60",
        },
    ),
    "customer_relationship_manager._crm_data": (
        "customer_relationship_manager_add_customer",
        {"customer_name": "x", "assigned_to_email": "a@b.com", "status": "Lead"},
    ),
}


@pytest.mark.parametrize("table", sorted(LARGE_TABLE_WRITES))
def test_the_estimate_is_near_the_memory_a_state_holds(sandbox, table, monkeypatch):
    # The bound is in estimated bytes: the estimate must follow what a state really holds
    # (traced allocations that outlive the replay), or the bound means nothing. A fresh
    # canonical-form memo: a full one would be emptied during the measure.
    monkeypatch.setattr(verify, "_CANONICAL_MEMO", BoundedMemo(2048))
    tool, args = LARGE_TABLE_WRITES[table]
    verifier = Verifier(sandbox)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        state = verifier.end_state([FunctionCall(tool, json.dumps(args))])
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert list(state) == [table]
    assert 0.8 * held <= verifier.cached_bytes <= 1.35 * held


# -- which calls are replayed (REFERENCE.md c.2) --------------------------------------------


def test_a_call_of_another_shape_is_skipped_and_the_rest_replayed(sandbox):
    # A value that is no call (a number, a string, a list), or a call whose name is no string
    # (even an unhashable one), is skipped as the reference skips it; the calls after it count.
    write = {"name": "email_send_email", "arguments": send(0).arguments}
    odd = [7, "text", ["email_send_email"], {"name": ["email_send_email"], "arguments": "{}"}]
    verifier = Verifier(sandbox, cache_bytes=0)
    assert verifier.score([*odd, write], [write]).reward == 1.0
    assert verifier.score([*odd, write], []).reward == 0.0


def test_a_read_call_does_not_count_as_a_write(sandbox):
    # A tool that writes no compared table is not replayed: the prediction with it is the
    # same pair of writes, answered from the memo.
    read = FunctionCall("email_search_emails", '{"query": "x"}')
    verifier = Verifier(sandbox)
    assert verifier.score([read, send(0)], [send(0)]) is verifier.score([send(0)], [send(0)])
