"""How tool outputs are judged against the goldens (workplace_env.parity): as JSON values, with
integers, floats and booleans kept apart (goldens README: "Integers and floats are distinct in
the files ... e.g. ``20.0``"), objects unordered, arrays ordered unless the call is flagged
``unstable_ties``."""

from __future__ import annotations

import pytest

from workplace_env.parity import json_values_equal, outputs_match

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
