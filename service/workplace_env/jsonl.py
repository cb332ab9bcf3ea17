"""JSONL files of episodes: their JSON objects by line, and which lines are episodes.

The one reading of a JSONL file that ``run`` plays and ``data fetch`` recognises as a task file:
:func:`read_jsonl` / :func:`jsonl_objects` (each object with its physical line number) and
:func:`episode_problem` (a line with none of :data:`EPISODE_KEYS` is no episode).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: The keys of which a line that is an episode has at least one.
EPISODE_KEYS = ("ground_truth", "function_calls", "calls")


def episode_problem(line: Mapping[str, Any], lineno: int) -> str | None:
    """Why line ``lineno`` is no episode (none of :data:`EPISODE_KEYS`), or None; a NeMo Gym
    rollout (``response`` and ``reward``, no ground truth) is named as one."""
    if any(key in line for key in EPISODE_KEYS):
        return None
    why = f"line {lineno} is not an episode: no ground_truth, function_calls or calls"
    if "response" in line and "reward" in line:
        why += (
            " (a NeMo Gym rollout: a model's response and its reward, no ground truth to score "
            "it against); to re-score it, add its row's ground_truth (from the task file or "
            "the run's <stem>_materialized_inputs.jsonl) to the line, or play the task file "
            "itself (--policy oracle, or --policy model)"
        )
    return why


def read_jsonl(path: str) -> list[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSONL file, each with its physical line number (1-based, blank
    lines counted, skipped). Raises ValueError naming the line."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text: {exc}") from exc
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc}") from exc
    return jsonl_objects(text, path)


def jsonl_objects(text: str, name: str) -> list[tuple[int, dict[str, Any]]]:
    """The JSON objects of the JSONL ``text`` with their line numbers, as :func:`read_jsonl`;
    ValueError names ``name`` and the line."""
    out = []
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")  # as open() reads
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError) as exc:  # an integer over 4,300 digits, deep
            raise ValueError(f"{name}:{n}: not JSON: {exc}") from exc
        if not isinstance(value, dict):
            raise ValueError(f"{name}:{n}: not a JSON object")
        out.append((n, value))
    return out
