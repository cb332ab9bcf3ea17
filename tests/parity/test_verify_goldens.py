"""Parity of rewards with the reference verifier: every public verify case, in-process.

Source: data/goldens/verify_cases_public.jsonl (``reward`` is the reference under pandas 2.3.2),
and the recorded rewards of the real rollouts in data/workbench/rollouts_public.jsonl.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import GOLDENS, WORKBENCH, needs, needs_shared, read_jsonl
from workplace_env.identity import FunctionCall
from workplace_env.sandbox.table import Table
from workplace_env.sandbox.tables import COMPARED_TABLES
from workplace_env.verify import Verifier, normal_form

CASES_FILE = GOLDENS / "verify_cases_public.jsonl"
ROLLOUTS_FILE = WORKBENCH / "rollouts_public.jsonl"
CASES = read_jsonl(CASES_FILE)
ROLLOUTS = read_jsonl(ROLLOUTS_FILE)


@pytest.fixture(scope="module")
def verifier(workbench_tables):
    return Verifier(workbench_tables)


def _calls(raw):
    if isinstance(raw, list):
        return [FunctionCall(c["name"], c["arguments"]) for c in raw]
    return raw  # a ground truth sent as a JSON string scores as "change nothing"


@needs_shared
@needs(CASES_FILE)
@pytest.mark.parametrize("case", CASES, ids=[c["case_id"] for c in CASES])
def test_verify_reward_matches_reference(case, verifier):
    result = verifier.score(_calls(case["function_calls"]), _calls(case["ground_truth"]))
    assert result.reward == case["reward"], json.dumps(
        [(t.table, t.equal, t.predicted_rows, t.expected_rows) for t in result.tables]
    )


@needs_shared
@needs(ROLLOUTS_FILE)
@pytest.mark.parametrize("rollout", ROLLOUTS, ids=[r["id"] for r in ROLLOUTS])
def test_rollout_reward_matches_recorded(rollout, verifier):
    result = verifier.score(_calls(rollout["function_calls"]), _calls(rollout["ground_truth"]))
    assert result.reward == rollout["reward"]


def test_every_compared_table_is_reported_with_both_row_counts(sandbox):
    # VerifyResponse.tables: one comparison per compared table, in order, each naming its table
    # and both row counts, whether or not either side wrote it.
    send = FunctionCall("email_send_email", '{"recipient": "a@b.com", "subject": "s", "body": "b"}')
    result = Verifier(sandbox).score([send], [])
    assert [t.table for t in result.tables] == list(COMPARED_TABLES)
    for t in result.tables:
        rows = len(sandbox.tables[t.table])
        written = t.table == "email._emails"
        assert (t.equal, t.predicted_rows, t.expected_rows) == (
            not written,
            rows + written,
            rows,
        )


def _table(columns: tuple[str, ...], data: dict, dtypes: tuple[str, ...]) -> Table:
    return Table(columns, data, list(range(len(data[columns[0]]))), dtypes, None)


def test_missing_cells_of_an_exempt_column_are_one_missing_value():
    # REFERENCE c.5/c.6: None and NaN in the same place of an object column count as equal,
    # also in the columns left as they are (status, list_name, board).
    columns = ("status", "name")
    with_none = _table(columns, {"status": [None], "name": ["A"]}, ("object", "object"))
    with_nan = _table(columns, {"status": [float("nan")], "name": ["a"]}, ("object", "object"))
    assert normal_form(with_none) == normal_form(with_nan)


def test_a_column_that_is_not_object_fails_as_the_reference_does():
    # REFERENCE c.6: ``.str`` on a non-object column raises, with pandas' text.
    table = _table(("count",), {"count": [1]}, ("int64",))
    with pytest.raises(AttributeError) as raised:
        normal_form(table)
    assert str(raised.value) == "Can only use .str accessor with string values!"
