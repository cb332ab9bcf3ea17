"""Parity over the wire: every goldens file, rollout and task through the gRPC API.

The same runner as ``workplace-env run`` (seed, CallTool per call, Verify, CloseSession), against a
real server in this process, must reproduce every recorded output, table state (``tables_after``,
read through the admin export) and reward. The generated tool-call goldens run as a fixed sample
(:data:`FUZZ_SAMPLE`; all of them: ``workplace-env run`` on the file, see docs/evaluating.md).
"""

from __future__ import annotations

import copy
import re

import pytest

from tests.conftest import (
    FUZZ_GOLDENS,
    GOLDENS,
    WORKBENCH,
    fuzz_sample,
    needs_shared,
    read_jsonl,
    shared_file,
)
from workplace_env.run.scripted import run_lines

FUZZ_SAMPLE = fuzz_sample(stride=4)

FILES = {
    "tool_calls": (GOLDENS / "tool_calls_public.jsonl", "recorded"),
    "verify_cases": (GOLDENS / "verify_cases_public.jsonl", "recorded"),
    "rollouts": (WORKBENCH / "rollouts_public.jsonl", "recorded"),
    "episode_mix": (GOLDENS.parent / "bench" / "episode_mix.jsonl", "recorded"),
    "nemo_tasks_oracle": (WORKBENCH / "tasks_public.jsonl", "oracle"),
    "workbench_tasks_oracle": (WORKBENCH / "workbench_original_tasks_public.jsonl", "oracle"),
}


def _truth_a_string(line: dict) -> bool:
    return isinstance(line.get("ground_truth"), str)


@needs_shared
@pytest.mark.parametrize("name", list(FILES))
def test_file_reproduces_reference_over_grpc(name, workbench_client):
    path, policy = FILES[name]
    lines = read_jsonl(shared_file(path))
    assert lines, f"{path} holds no line"
    summary = run_lines(workbench_client, lines, policy=policy, concurrency=4)
    assert summary.episodes == len(lines)
    assert summary.mismatches == []
    if policy == "oracle":
        assert summary.mean_reward == 1.0


@needs_shared
def test_a_golden_with_a_string_ground_truth_is_scored_as_change_nothing(workbench_client):
    """Its recorded reward is the reference's "change nothing" score (REFERENCE.md (c) 2)."""
    lines = [c for c in read_jsonl(shared_file(FILES["verify_cases"][0])) if _truth_a_string(c)]
    assert lines, "the verify goldens hold no string ground truth"
    summary = run_lines(workbench_client, lines, policy="recorded")
    assert summary.played_episodes == len(lines) and summary.mismatches == []
    assert {line["reward"] for line in lines} == {0.0, 1.0}


@needs_shared
def test_generated_tool_calls_reproduce_reference_over_grpc(workbench_client):
    shared_file(FUZZ_GOLDENS)
    summary = run_lines(workbench_client, FUZZ_SAMPLE, policy="recorded", concurrency=4)
    assert summary.episodes == len(FUZZ_SAMPLE)
    assert summary.mismatches == []
    assert summary.output_mismatches == summary.state_mismatches == 0


@needs_shared
def test_a_table_state_that_differs_is_a_state_mismatch(workbench_client):
    shared_file(FUZZ_GOLDENS)
    case = next(c for c in FUZZ_SAMPLE if c["case_id"] == "fuzz-empty-email-send")
    wrong = copy.deepcopy(case)
    wrong["tables_after"]["email._emails"]["sha256"] = "0" * 64
    wrong["tables_after"]["calendar._calendar_events"]["rows"] = 7
    summary = run_lines(workbench_client, [case, wrong], policy="recorded")
    assert summary.output_mismatches == 0 and summary.reward_mismatches == 0
    assert summary.state_mismatches == 2
    details = sorted(m.detail for m in summary.mismatches if m.kind == "state")
    assert details[0] == "calendar._calendar_events: rows 300 (expected 7)"
    # both digests shown, the replayed one first, as the rows are
    assert re.fullmatch(r"email\._emails: sha256 [0-9a-f]{12} \(expected 0{12}\)", details[1])
    assert summary.to_json()["state_mismatches"] == 2


@needs_shared
def test_perturbed_policy_scores_below_oracle(workbench_client):
    lines = [
        t for t in read_jsonl(shared_file(WORKBENCH / "tasks_public.jsonl")) if t["ground_truth"]
    ]
    summary = run_lines(workbench_client, lines, policy="perturbed", concurrency=4)
    assert summary.mean_reward < 0.5
