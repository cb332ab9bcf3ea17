"""Dataset rows of the NeMo Gym tests: the recorded episodes of the shared data as NeMo rows.

An episode is a recorded rollout (its function calls and reward, rollouts_public.jsonl) or a
task (its ground truth as the oracle's calls, reward 1.0, tasks_public.jsonl). The stand-in
model (``driver.py model``) replays an episode's calls, keyed by ``metadata.ng_stand_in``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import SANDBOX_CSVS, WORKBENCH, needs, read_jsonl

ROLLOUTS_FILE = WORKBENCH / "rollouts_public.jsonl"
TASKS_FILE = WORKBENCH / "tasks_public.jsonl"
TOOL_SCHEMAS_FILE = WORKBENCH / "tool_schemas.json"
#: Every shared file a test playing the recorded episodes reads: the sandbox's CSVs, then the
#: episodes and the tools' schemas (which only the reference data holds).
needs_recorded = needs(*SANDBOX_CSVS, ROLLOUTS_FILE, TASKS_FILE, TOOL_SCHEMAS_FILE)
ROLLOUTS = read_jsonl(ROLLOUTS_FILE)
TASKS = read_jsonl(TASKS_FILE)
TYPED_TASKSET = "workplace_assistant_typed"


def episodes() -> list[dict[str, Any]]:
    """Every rollout (its recorded calls and reward) and every task (its ground truth as the
    oracle's calls, reward 1.0), as ``{key, row, calls, reward}``."""
    out = [
        {
            "key": r["id"],
            "prompt": r["prompt"],
            "system": r["system"],
            "truth": r["ground_truth"],
            "category": "workplace_assistant_rollout",
            "calls": r["function_calls"],
            "reward": r["reward"],
        }
        for r in ROLLOUTS
    ]
    out += [
        {
            "key": t["id"],
            "prompt": t["prompt"],
            "system": t["system"],
            "truth": t["ground_truth"],
            "category": t["category"],
            "calls": t["ground_truth"],
            "reward": 1.0,
        }
        for t in TASKS
    ]
    return out


def dataset_row(index: int, episode: dict[str, Any], tools: list[Any]) -> dict[str, Any]:
    """A NeMo workplace_assistant dataset row (the shape of its example.jsonl)."""
    return {
        "id": index,
        "category": episode["category"],
        "environment_name": "workplace_assistant",
        "ground_truth": episode["truth"],
        "responses_create_params": {
            "input": [
                {"role": "system", "content": episode["system"]},
                {"role": "user", "content": episode["prompt"]},
            ],
            "tools": tools,
            "parallel_tool_calls": False,
            "metadata": {"ng_stand_in": episode["key"]},  # which recording the model replays
        },
    }


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def typed_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` materialized for the typed protocol (taskset :data:`TYPED_TASKSET`)."""
    return [
        {
            "task_id": {"taskset": TYPED_TASKSET, "task_id": str(row["id"])},
            "task_input": {
                "responses_create_params": row["responses_create_params"],
                "task_data": {k: v for k, v in row.items() if k != "responses_create_params"},
            },
        }
        for row in rows
    ]


def rewards_by_key(output: Path) -> dict[str, float]:
    rows = read_jsonl(output)
    assert all(not r.get("_ng_failure_class") for r in rows), rows[:1]
    return {r["responses_create_params"]["metadata"]["ng_stand_in"]: r["reward"] for r in rows}


def recorded_inputs(workdir: Path) -> dict[str, Any]:
    """The episodes, their recordings file (written in ``workdir``, for the stand-in model),
    their legacy dataset rows and their recorded rewards by key."""
    eps = episodes()
    tools = json.loads(TOOL_SCHEMAS_FILE.read_text())
    recordings = workdir / "recordings.json"
    recordings.write_text(json.dumps({e["key"]: e["calls"] for e in eps}))
    rows = [dataset_row(i, e, tools) for i, e in enumerate(eps)]
    rewards = {e["key"]: e["reward"] for e in eps}
    return {"episodes": eps, "recordings": recordings, "rows": rows, "rewards": rewards}
