"""The verifier's memo of end states is bounded in estimated bytes and never changes a reward
(issue 15)."""

from __future__ import annotations

import json

from workplace_env.config import Settings
from workplace_env.model import FunctionCall
from workplace_env.sessions import SessionStore
from workplace_env.verify import Verifier


def send(i: int) -> FunctionCall:
    args = {"recipient": "a@b.com", "subject": f"s{i}", "body": "b"}
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
