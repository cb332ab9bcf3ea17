"""Counts in the service's texts agree with their number: one episode, two episodes."""

from __future__ import annotations

import logging

import pytest

from workplace_env.plurals import counted, some_of
from workplace_env.server.serve import drain_and_stop


@pytest.mark.parametrize(
    ("count", "noun", "plural", "words"),
    [
        (0, "episode", "", "0 episodes"),
        (1, "episode", "", "1 episode"),
        (2, "session", "", "2 sessions"),
        (1, "whole task", "", "1 whole task"),
        (3, "entry", "entries", "3 entries"),
        (1, "entry", "entries", "1 entry"),
    ],
)
def test_counted_takes_the_singular_for_one_only(count, noun, plural, words):
    assert counted(count, noun, plural) == words


@pytest.mark.parametrize(
    ("part", "whole", "words"),
    [
        (1, 1, "1 of the 1 line is"),
        (1, 4, "1 of the 4 lines is"),
        (2, 4, "2 of the 4 lines are"),
        (0, 4, "0 of the 4 lines are"),
        (1_000, 2_000, "1,000 of the 2,000 lines are"),
    ],
)
def test_some_of_agrees_the_noun_with_the_whole_and_the_verb_with_the_part(part, whole, words):
    assert some_of(part, whole, "line", "is", "are") == words


def test_the_drain_log_says_one_episode_in_the_singular(make_server, caplog):
    served = make_server()
    served.client.seed("drain-one", ("rollout-d", 0), ("ops", "t"), {"id": "t"})
    with caplog.at_level(logging.INFO, logger="workplace_env"):
        drain_and_stop(served.running, None, grace_s=0.0)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("drain: ")]
    assert "drain: 1 episode still open; refusing every new RPC" in said
