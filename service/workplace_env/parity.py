"""Comparing tool outputs as JSON values, the way the goldens are judged (goldens README).

Objects compare as unordered maps, arrays in order, and integers, floats and booleans are
distinct types (``20`` is not ``20.0``, ``1`` is not ``true``). For a call flagged
``unstable_ties`` (email search pages whose order among equal timestamps depends on numpy's
unstable sort), the page's emails may come in any order.
"""

from __future__ import annotations

import json
from typing import Any


def json_values_equal(expected: Any, actual: Any) -> bool:
    """Strict JSON value equality: dict keys unordered, lists ordered, int/float/bool distinct."""
    if type(expected) is not type(actual):
        return False
    if isinstance(expected, dict):
        return expected.keys() == actual.keys() and all(
            json_values_equal(expected[k], actual[k]) for k in expected
        )
    if isinstance(expected, list):
        return len(expected) == len(actual) and all(
            json_values_equal(e, a) for e, a in zip(expected, actual, strict=True)
        )
    return bool(expected == actual)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def outputs_match(expected: Any, actual: Any, unstable_ties: bool = False) -> bool:
    """True when ``actual`` (a decoded tool output) matches the recorded ``expected`` value.

    With ``unstable_ties``, the lists inside the output (the search page) are compared as
    multisets of items; everything else must match exactly.
    """
    if json_values_equal(expected, actual):
        return True
    if not unstable_ties or not isinstance(expected, dict) or not isinstance(actual, dict):
        return False
    if expected.keys() != actual.keys():
        return False
    for key in expected:
        e, a = expected[key], actual[key]
        if isinstance(e, list) and isinstance(a, list):
            if sorted(map(_canonical, e)) != sorted(map(_canonical, a)):
                return False
        elif not json_values_equal(e, a):
            return False
    return True
