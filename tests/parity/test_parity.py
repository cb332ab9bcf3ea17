"""How outputs and table states are judged against the goldens (workplace_env.parity).

Outputs as JSON values, with integers, floats and booleans kept apart (goldens README: "Integers
and floats are distinct in the files ... e.g. ``20.0``"), objects unordered, arrays ordered
unless the call is flagged ``unstable_ties``. Table states by ``tables_after``: rows and the
SHA-256 of ``DataFrame.to_csv(index=True)``, whose text the goldens README spells out.
"""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest

from tests.conftest import GOLDENS, needs_shared, read_jsonl, shared_file
from workplace_env.parity import (
    json_values_equal,
    outputs_match,
    state_digests,
    state_mismatches,
    table_digest,
)

#: Values Python's ``==`` calls equal that JSON keeps apart (1 == 1.0 == True, 0 == False).
APART = [(1, 1.0), (1, True), (1.0, True), (0, False), (0.0, False), (20, 20.0)]


@pytest.mark.parametrize("unstable_ties", [False, True])
@pytest.mark.parametrize(("a", "b"), APART)
def test_integers_floats_and_booleans_never_match_each_other(a, b, unstable_ties):
    for expected, actual in ((a, b), (b, a)):
        assert not outputs_match(expected, actual, unstable_ties)
        assert not outputs_match({"count": expected}, {"count": actual}, unstable_ties)
        assert not outputs_match({"page": [expected]}, {"page": [actual]}, unstable_ties)
        assert not outputs_match([expected, 2], [actual, 2], unstable_ties)
        assert not json_values_equal({"x": [{"y": expected}]}, {"x": [{"y": actual}]})
    assert outputs_match({"count": a, "page": [a]}, {"count": a, "page": [a]}, unstable_ties)


def test_objects_are_unordered_and_arrays_ordered():
    assert outputs_match({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1})
    assert not outputs_match([1, 2], [2, 1])
    assert not outputs_match({"a": 1}, {"a": 1, "b": None})
    assert not outputs_match([1, 2], [1, 2, 3])
    assert not outputs_match("Email sent successfully.", "email sent successfully.")


def test_unstable_ties_let_a_pages_items_come_in_any_order_and_nothing_else():
    expected = {"emails": [{"id": "1"}, {"id": "2"}], "pagination": {"page": 1}}
    shuffled = {"emails": [{"id": "2"}, {"id": "1"}], "pagination": {"page": 1}}
    assert not outputs_match(expected, shuffled)
    assert outputs_match(expected, shuffled, unstable_ties=True)
    # the items must still be the same multiset, and the other keys equal
    assert not outputs_match(expected, {**shuffled, "emails": [{"id": "2"}]}, True)
    assert not outputs_match(
        expected, {"emails": [{"id": "1"}, {"id": "1"}], "pagination": {"page": 1}}, True
    )
    assert not outputs_match(expected, {**shuffled, "pagination": {"page": 2}}, True)
    assert not outputs_match(expected, {**shuffled, "extra": 1}, True)
    assert not outputs_match([1, 2], [2, 1], unstable_ties=True)  # only an object's arrays
    # items are JSON values too: their objects unordered, their numbers typed
    page = {"emails": [{"id": "1", "read": True}, {"id": "2", "read": False}]}
    reordered = {"emails": [{"read": False, "id": "2"}, {"read": True, "id": "1"}]}
    assert outputs_match(page, reordered, unstable_ties=True)
    # an array matches an array only, and an object an object
    assert not outputs_match({"emails": ["x"]}, {"emails": "x"}, unstable_ties=True)
    assert not outputs_match({"emails": "x"}, {"emails": ["x"]}, unstable_ties=True)
    assert not outputs_match({"emails": []}, [], unstable_ties=True)
    assert not outputs_match([], {"emails": []}, unstable_ties=True)


def test_a_tables_digest_is_the_sha256_of_its_csv_text_with_the_index():
    frame = pd.DataFrame(
        {"a": [1.5, None], "b": ['x,"y"', True]}, index=pd.Index([0, 5]), dtype=object
    )
    text = ',a,b\n0,1.5,"x,""y"""\n5,,True\n'
    assert table_digest(frame) == hashlib.sha256(text.encode("utf-8")).hexdigest()
    empty = pd.DataFrame({"file_path": []}, dtype=object)
    assert table_digest(empty) == hashlib.sha256(b",file_path\n").hexdigest()


def test_state_mismatches_name_each_table_that_differs_and_how():
    expected = {
        "a": {"rows": 2, "sha256": "1" * 64},
        "b": {"rows": 3, "sha256": "2" * 64},
        "c": {"rows": 0, "sha256": "3" * 64},
        "d": {"rows": 1, "sha256": "4" * 64},
    }
    actual = {"a": (2, "1" * 64), "b": (4, "2" * 64), "c": (0, "f" * 64), "e": (1, "4" * 64)}
    assert state_mismatches(expected, actual) == [
        "b: rows 4 (expected 3)",
        "c: sha256 ffffffffffff (expected 333333333333)",
        "d: missing",
    ]
    assert (
        state_mismatches(expected, {k: (v["rows"], v["sha256"]) for k, v in expected.items()}) == []
    )


@needs_shared
def test_an_exported_session_matches_the_goldens_tables_after_and_a_changed_one_does_not(
    workbench_client,
):
    case = next(
        c
        for c in read_jsonl(shared_file(GOLDENS / "tool_calls_public.jsonl"))
        if c["case_id"] == ("rand-email-forward-0")
    )
    sid = "parity-state"
    workbench_client.seed(sid, ("parity", 0), ("parity", "t"), {"id": "t"})
    admin = workbench_client.admin()

    def digests() -> dict[str, tuple[int, str]]:
        return state_digests(admin.export_sessions([sid]).snapshots[0].state_json)

    try:
        for call in case["calls"]:
            workbench_client.call_tool(sid, call["name"], json.loads(call["arguments"]))
        assert state_mismatches(case["tables_after"], digests()) == []
        workbench_client.call_tool(
            sid, case["calls"][0]["name"], json.loads(case["calls"][0]["arguments"])
        )
        assert state_mismatches(case["tables_after"], digests()) == [
            "email._emails: rows 502 (expected 501)"
        ]
    finally:
        workbench_client.close_session(sid, ("parity", 0))
