"""Parity of rewards with the reference verifier: every public verify case, in-process.

Source: data/goldens/verify_cases_public.jsonl (``reward`` is the reference under pandas 2.3.2),
and the recorded rewards of the real rollouts in data/workbench/rollouts_public.jsonl.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import GOLDENS, WORKBENCH, needs_shared, read_jsonl
from workplace_env.model import FunctionCall
from workplace_env.sandbox.tables import COMPARED_TABLES
from workplace_env.verify import Verifier

CASES = read_jsonl(GOLDENS / "verify_cases_public.jsonl")
ROLLOUTS = read_jsonl(WORKBENCH / "rollouts_public.jsonl")


@pytest.fixture(scope="module")
def verifier(workbench_tables):
    return Verifier(workbench_tables)


def _calls(raw):
    if isinstance(raw, list):
        return [FunctionCall(c["name"], c["arguments"]) for c in raw]
    return raw  # a ground truth sent as a JSON string scores as "change nothing"


@needs_shared
@pytest.mark.parametrize("case", CASES, ids=[c["case_id"] for c in CASES])
def test_verify_reward_matches_reference(case, verifier):
    result = verifier.score(_calls(case["function_calls"]), _calls(case["ground_truth"]))
    assert result.reward == case["reward"], json.dumps(
        [(t.table, t.equal, t.predicted_rows, t.expected_rows) for t in result.tables]
    )


@needs_shared
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
