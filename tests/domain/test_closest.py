"""The one "did you mean" rule: the closest name, or none; a huge word costs no more than 200
characters."""

from __future__ import annotations

import difflib
from typing import Any

import pytest

from workplace_env.errors import closest
from workplace_env.identity import tool_name_problem
from workplace_env.sandbox.tools import TOOLS


def test_the_closest_candidate_or_none() -> None:
    assert closest("/helth", ["/health", "/ready", "/metrics"]) == "/health"
    assert closest("email_serch_emails", TOOLS) == "email_search_emails"
    assert closest("zzzz", ["/health", "/ready"]) is None
    assert closest("anything", []) is None


def test_a_huge_word_is_compared_on_its_first_200_characters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compared: list[int] = []
    real = difflib.get_close_matches

    def recording(word: str, *args: Any, **kwargs: Any) -> list[str]:
        compared.append(len(word))
        return real(word, *args, **kwargs)

    monkeypatch.setattr(difflib, "get_close_matches", recording)
    huge = "email_search_emails" + "x" * 1_000_000
    assert closest(huge, TOOLS) is None
    problem = tool_name_problem(huge)
    assert problem is not None and "did you mean" not in problem
    assert compared == [200, 200]
