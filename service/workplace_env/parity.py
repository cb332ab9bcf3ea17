"""Comparing tool outputs as JSON values, the way the goldens are judged (goldens README).

Objects compare as unordered maps, arrays in order, and integers, floats and booleans are
distinct types (``20`` is not ``20.0``, ``1`` is not ``true``). For a call flagged
``unstable_ties`` (email search pages whose order among equal timestamps depends on numpy's
unstable sort), the page's emails may come in any order.

Table state is judged by :func:`table_digest` (the goldens' ``tables_after`` hash) over the
tables a session exports (:func:`state_digests`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from workplace_env.checkpoint.codec import decode_state
from workplace_env.sandbox.table import Table
from workplace_env.sandbox.tables import COLUMNS, TABLE_KEYS


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


# -- table state (``tables_after``) -----------------------------------------------------------


def table_digest(frame: pd.DataFrame) -> str:
    """SHA-256 (hex) of ``frame.to_csv(index=True)`` in UTF-8: the goldens' table hash.

    Source: goldens README, ``tables_after`` (index labels, missing cells, float and bool forms
    are all part of the text, so of the hash).
    """
    return hashlib.sha256(frame.to_csv(index=True).encode("utf-8")).hexdigest()


def _shape_only(key: str) -> Table:
    """An empty table with ``key``'s columns: all the state decoder needs to check columns."""
    columns = COLUMNS[key]
    return Table(columns, {c: [] for c in columns}, [], ("object",) * len(columns), None)


def state_digests(state_json: str) -> dict[str, tuple[int, str]]:
    """``{table key: (rows, sha256)}`` of an exported session (``SessionSnapshot.state_json``).

    Raises ValueError (``CodecError``) when the state does not decode.
    """
    state = json.loads(state_json)
    tables = decode_state(state, {key: _shape_only(key) for key in TABLE_KEYS})
    return {key: (len(table), table_digest(table.to_frame())) for key, table in tables.items()}


def state_mismatches(
    expected: Mapping[str, Mapping[str, Any]], actual: Mapping[str, tuple[int, str]]
) -> list[str]:
    """The tables of ``expected`` (``{key: {"rows", "sha256"}}``) that ``actual`` does not match,
    each as ``"<key>: rows R (expected E)"`` or ``"<key>: sha256 S (expected E)"`` (rows equal;
    digests shortened to their first 12 hex digits)."""
    out = []
    for key, want in expected.items():
        got = actual.get(key)
        if got is None:
            out.append(f"{key}: missing")
        elif got[0] != want.get("rows"):
            out.append(f"{key}: rows {got[0]} (expected {want.get('rows')})")
        elif got[1] != want.get("sha256"):
            out.append(f"{key}: sha256 {got[1][:12]} (expected {str(want.get('sha256'))[:12]})")
    return out
