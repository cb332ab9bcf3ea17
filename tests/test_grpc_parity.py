"""Parity over the wire: every goldens file, rollout and task through the gRPC API.

The same runner as ``workplace-env run`` (seed, CallTool per call, Verify, CloseSession), against a
real server in this process, must reproduce every recorded output and reward.
"""

from __future__ import annotations

import pytest

from tests.conftest import GOLDENS, WORKBENCH, needs_shared, read_jsonl
from workplace_env.runner import run_lines

FILES = {
    "tool_calls": (GOLDENS / "tool_calls_public.jsonl", "recorded"),
    "verify_cases": (GOLDENS / "verify_cases_public.jsonl", "recorded"),
    "rollouts": (WORKBENCH / "rollouts_public.jsonl", "recorded"),
    "episode_mix": (GOLDENS.parent / "bench" / "episode_mix.jsonl", "recorded"),
    "nemo_tasks_oracle": (WORKBENCH / "tasks_public.jsonl", "oracle"),
    "workbench_tasks_oracle": (WORKBENCH / "workbench_original_tasks_public.jsonl", "oracle"),
}


@needs_shared
@pytest.mark.parametrize("name", list(FILES))
def test_file_reproduces_reference_over_grpc(name, workbench_client):
    path, policy = FILES[name]
    lines = read_jsonl(path)
    assert lines, f"{path} is empty"
    summary = run_lines(workbench_client, lines, policy=policy, concurrency=4)
    assert summary.episodes == len(lines)
    assert summary.mismatches == []
    if policy == "oracle":
        assert summary.mean_reward == 1.0


@needs_shared
def test_perturbed_policy_scores_below_oracle(workbench_client):
    lines = [t for t in read_jsonl(WORKBENCH / "tasks_public.jsonl") if t["ground_truth"]]
    summary = run_lines(workbench_client, lines, policy="perturbed", concurrency=4)
    assert summary.mean_reward < 0.5
