"""NeMo Gym 0.7.0's typed resources-session protocol over HTTP (CONTRACT H1-H6).

Shapes only; the routes in :mod:`workplace_env.gateway.app` use them. Field names and numbers
are NeMo Gym's (``nemo_gym.base_resources_server``, ``nemo_gym.config_types``), the behaviour
was checked against NeMo Gym's own servers, conformance check and clients as black boxes.

* H1 seed: ``ResourcesSeedSessionRequest`` = ``{resources_session_id, episode_id: {rollout_id,
  attempt}, task_id: {taskset, task_id}, task_data: <dataset row>}``, extra keys forbidden at
  every level (422, FastAPI's ``extra_forbidden``). Answer ``ResourcesSeedSessionResponse``:
  ``{resources_session_id, resources_tools?}``; ``resources_tools`` is NeMo's
  ``MCPServerMetadata`` when MCP is served.
* H2 close: ``ResourcesCloseSessionRequest`` ``{resources_session_id, episode_id}`` -> exactly
  ``{"resources_session_id": ...}``.
* H3 ``/aggregate_metrics``: :func:`aggregate_metrics` (NeMo's ``AggregateMetrics`` for its
  ``AggregateMetricsRequest``).
* H4 ``/reverify_mode``: :data:`REVERIFY_MODE`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from workplace_env.gateway.backend import Backend
from workplace_env.gateway.translate import Loc, invalid, parse_episode, seed_legacy
from workplace_env.verify import MCP_SERVER_NAME

#: NeMo's MCP session-token header (``NEMO_GYM_MCP_SESSION_TOKEN_HEADER``).
NEMO_TOKEN_HEADER = "X-NeMo-Gym-Session-Token"
#: H4: scoring is a pure replay of the request (REFERENCE.md (c)), so re-verification needs no
#: session state.
REVERIFY_MODE = "stateless"

_SEED_KEYS = ("resources_session_id", "episode_id", "task_id", "task_data")
_CLOSE_KEYS = ("resources_session_id", "episode_id")
TASK_INDEX = "_ng_task_index"
ROLLOUT_INDEX = "_ng_rollout_index"


def is_nemo_seed(body: dict[str, Any]) -> bool:
    """H1: a body carrying ``task_data`` is NeMo's typed seed."""
    return "task_data" in body


def _closed_object(
    value: Any, keys: tuple[str, ...], path: Loc, problems: list[tuple[Loc, str]]
) -> None:
    """Problems for the keys of object ``value`` outside ``keys`` (pydantic ``extra="forbid"``)."""
    if isinstance(value, dict):
        for key in value:
            if key not in keys:
                problems.append(((*path, key), "Extra inputs are not permitted"))


def _non_empty(value: Any, path: Loc, problems: list[tuple[Loc, str]]) -> str:
    if not isinstance(value, str) or not value:
        problems.append((path, "required: a non-empty string"))
        return ""
    return value


def parse_nemo_seed(
    body: dict[str, Any],
) -> tuple[str, tuple[str, int], tuple[str, str], dict[str, Any]]:
    """``(session_id, (rollout_id, attempt), (taskset, task_id), row)`` of a
    ``ResourcesSeedSessionRequest``. Raises 422 naming every offending field (H1); the service
    validates the values and the task (S5, 422 with no binding left)."""
    problems: list[tuple[Loc, str]] = []
    _closed_object(body, _SEED_KEYS, (), problems)
    sid = _non_empty(body.get("resources_session_id"), ("resources_session_id",), problems)
    episode_value = body.get("episode_id")
    _closed_object(episode_value, ("rollout_id", "attempt"), ("episode_id",), problems)
    episode = parse_episode(episode_value, problems)
    if episode is not None and not episode[0]:
        problems.append((("episode_id", "rollout_id"), "required: a non-empty string"))
    task_id = body.get("task_id")
    if not isinstance(task_id, dict):
        problems.append((("task_id",), "required: an object {taskset, task_id}"))
        task_id = {}
    _closed_object(task_id, ("taskset", "task_id"), ("task_id",), problems)
    taskset = _non_empty(task_id.get("taskset"), ("task_id", "taskset"), problems)
    tid = _non_empty(task_id.get("task_id"), ("task_id", "task_id"), problems)
    row = body.get("task_data")
    if not isinstance(row, dict):
        problems.append((("task_data",), "required: an object (the dataset row)"))
    else:
        truth = row.get("ground_truth")
        if isinstance(truth, list):
            for i, call in enumerate(truth):
                if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                    problems.append(
                        (("task_data", "ground_truth", i), "must be an object {name, arguments}")
                    )
        elif truth is not None and not isinstance(truth, str):
            problems.append((("task_data", "ground_truth"), "must be a list of calls"))
    if problems:
        raise invalid(problems)
    assert episode is not None and isinstance(row, dict)
    return sid, episode, (taskset, tid), row


def seed_response(session_id: str, mcp: dict[str, Any] | None) -> dict[str, Any]:
    """H1's ``ResourcesSeedSessionResponse`` (``resources_tools`` only when MCP is served)."""
    body: dict[str, Any] = {"resources_session_id": session_id}
    if mcp is not None:
        body["resources_tools"] = mcp
    return body


def mcp_metadata(url_path: str, token: str) -> dict[str, Any]:
    """NeMo's ``MCPServerMetadata`` for one session's token (H6)."""
    return {
        "server_name": MCP_SERVER_NAME,
        "url_path": url_path,
        "transport": "http",
        "headers": {NEMO_TOKEN_HEADER: token},
    }


def replay_verify(backend: Backend, row: dict[str, Any], verify_kwargs: dict[str, Any]) -> Any:
    """H5: score a ``/verify`` body that names no session (``gym eval reverify``) by replay.

    Seeds a fresh legacy session from the body's own row (the same path as a legacy seed), and
    verifies it with ``verify_kwargs`` (which releases it, CONTRACT V2). Blocking; returns the
    SDK's verify result.
    """
    session_id = seed_legacy(backend, None, row)
    return backend.verify(session_id, **verify_kwargs)


def close_problems(body: dict[str, Any]) -> list[tuple[Loc, str]]:
    """H2: keys outside ``ResourcesCloseSessionRequest`` (and its ``episode_id``), each a 422
    problem as pydantic's ``extra="forbid"`` names it; a legacy close sends a subset."""
    problems: list[tuple[Loc, str]] = []
    _closed_object(body, _CLOSE_KEYS, (), problems)
    _closed_object(body.get("episode_id"), ("rollout_id", "attempt"), ("episode_id",), problems)
    return problems


def is_nemo_close(body: dict[str, Any]) -> bool:
    """H2: a close naming its id and episode and nothing else is NeMo's typed close."""
    return set(body) == set(_CLOSE_KEYS)


# --- H3: aggregate metrics -----------------------------------------------------------------


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _std(values: list[float]) -> float:
    """Sample standard deviation (ddof 1, numpy's float arithmetic); 0.0 for one value."""
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def _stats(values: list[float], key: str) -> dict[str, float]:
    array = np.asarray(values, dtype=float)
    return {
        f"mean/{key}": float(array.mean()),
        f"max/{key}": float(array.max()),
        f"min/{key}": float(array.min()),
        f"median/{key}": float(np.median(array)),
        f"std/{key}": _std(values),
    }


def _incomplete_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (continued fraction, modified Lentz)."""
    if x <= 0.0 or x >= 1.0:
        return min(max(x, 0.0), 1.0)
    if x > (a + 1.0) / (a + b + 2.0):  # the fraction converges fast on this side only
        return 1.0 - _incomplete_beta(1.0 - x, b, a)
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-16:
            break
    return front * result / a


def _t_quantile_975(df: int) -> float:
    """Student's t 97.5% quantile for ``df`` degrees of freedom (bisection on the CDF)."""
    lo, hi = 0.0, 1e4
    for _ in range(200):
        mid = (lo + hi) / 2.0
        upper_tail = 0.5 * _incomplete_beta(df / (df + mid * mid), df / 2.0, 0.5)
        lo, hi = (mid, hi) if upper_tail > 0.025 else (lo, mid)
        if hi - lo <= 1e-15 * hi:
            break
    return (lo + hi) / 2.0


def _ci95(mean: float, se: float, n: int) -> tuple[float, float]:
    """The 95% t confidence interval of a mean from ``n`` values."""
    half = _t_quantile_975(n - 1) * se
    return mean - half, mean + half


def _metric_keys(rows: list[dict[str, Any]]) -> list[str]:
    keys: list[str] = []
    for row in rows:
        for key, value in row.items():
            if key not in keys and not key.startswith("_ng_") and _numeric(value):
                keys.append(key)
    return keys


def aggregate_metrics(verify_responses: list[dict[str, Any]]) -> dict[str, Any]:
    """H3: NeMo's ``AggregateMetrics`` for an ``AggregateMetricsRequest``'s verify responses.

    Masked samples (``mask_sample``) are left out of every quality statistic and reported as
    ``coverage/*`` (only when any is masked); per task (``group_level_metrics``, by
    ``_ng_task_index``), over all (``agent_metrics``; ``key_metrics`` = its ``mean/*``), per
    repeat (``repeat_level_metrics``, by ``_ng_rollout_index``).
    """
    empty: dict[str, Any] = {
        "group_level_metrics": [],
        "agent_metrics": {},
        "key_metrics": {},
        "perf_summary": None,
        "repeat_level_metrics": [],
    }
    if not verify_responses:
        return empty
    scored = [r for r in verify_responses if not r.get("mask_sample")]
    masked = len(verify_responses) - len(scored)
    coverage: dict[str, Any] = {}
    if masked:
        all_tasks = {r.get(TASK_INDEX, 0) for r in verify_responses}
        measured_tasks = {r.get(TASK_INDEX, 0) for r in scored}
        coverage = {
            "coverage/measured_rollouts": len(scored),
            "coverage/masked_rollouts": masked,
            "coverage/measured_tasks": len(measured_tasks),
            "coverage/fully_masked_tasks": len(all_tasks - measured_tasks),
        }
    if not scored:
        return {**empty, "agent_metrics": dict(coverage), "key_metrics": dict(coverage)}
    keys = _metric_keys(scored)
    by_task: dict[Any, list[dict[str, Any]]] = {}
    for row in scored:
        by_task.setdefault(row.get(TASK_INDEX, 0), []).append(row)
    groups = []
    for task in sorted(by_task):
        rows = sorted(by_task[task], key=lambda r: r.get(ROLLOUT_INDEX, 0))
        group: dict[str, Any] = {TASK_INDEX: task}
        for key in keys:
            values = [float(r[key]) for r in rows if _numeric(r.get(key))]
            if values:
                group.update(_stats(values, key))
        group.update(
            {
                "sample": {"agent_ref": {"name": "agent"}},
                "num_rollouts": len(rows),
                "expected_num_rollouts": len(rows),
                "missing_num_rollouts": 0,
                "reward_profile_completion_pct": 100.0,
                "rollout_infos": [
                    {
                        "rollout_id": f"{task}:{r.get(ROLLOUT_INDEX, 0)}",
                        TASK_INDEX: task,
                        ROLLOUT_INDEX: r.get(ROLLOUT_INDEX, 0),
                        **{k: r[k] for k in keys if k in r},
                    }
                    for r in rows
                ],
            }
        )
        groups.append(group)
    agent: dict[str, Any] = {}
    for key in keys:
        values = [float(r[key]) for r in scored if _numeric(r.get(key))]
        if values:
            agent.update(_stats(values, key))
    repeats = sorted({r.get(ROLLOUT_INDEX, 0) for r in scored})
    repeat_rows = []
    for repeat in repeats if len(repeats) > 1 else []:  # one repeat: nothing to compare
        rows = [r for r in scored if r.get(ROLLOUT_INDEX, 0) == repeat]
        entry: dict[str, Any] = {
            ROLLOUT_INDEX: repeat,
            "sample_count": len(rows),
            "missing_count": len(by_task) - len({r.get(TASK_INDEX, 0) for r in rows}),
        }
        for key in keys:
            values = [float(r[key]) for r in rows if _numeric(r.get(key))]
            if not values:
                continue
            array = np.asarray(values, dtype=float)
            std = _std(values)
            sem = std / math.sqrt(len(values))
            entry.update(
                {
                    f"mean/{key}": float(array.mean()),
                    f"median/{key}": float(np.median(array)),
                    f"std/{key}": std,
                    f"sem/{key}": sem,
                    f"min/{key}": float(array.min()),
                    f"max/{key}": float(array.max()),
                    f"p25/{key}": float(np.percentile(array, 25)),
                    f"p75/{key}": float(np.percentile(array, 75)),
                }
            )
            if len(values) > 1:
                low, high = _ci95(float(array.mean()), sem, len(values))
                entry.update({f"ci_low_95/{key}": low, f"ci_high_95/{key}": high})
        repeat_rows.append(entry)
    if len(repeats) > 1:
        for key in keys:
            means = [e[f"mean/{key}"] for e in repeat_rows if f"mean/{key}" in e]
            if len(means) < 2:
                continue
            array = np.asarray(means, dtype=float)
            std = _std(means)
            se = std / math.sqrt(len(means))
            low, high = _ci95(float(array.mean()), se, len(means))
            agent.update(
                {
                    f"mean_across_repeats/mean/{key}": float(array.mean()),
                    f"median_across_repeats/mean/{key}": float(np.median(array)),
                    f"std_across_repeats/mean/{key}": std,
                    f"min_across_repeats/mean/{key}": float(array.min()),
                    f"max_across_repeats/mean/{key}": float(array.max()),
                    f"se_across_repeats/mean/{key}": se,
                    f"ci_low_95_across_repeats/mean/{key}": low,
                    f"ci_high_95_across_repeats/mean/{key}": high,
                }
            )
    agent.update(coverage)
    agent["num_repeats"] = len({r.get(ROLLOUT_INDEX, 0) for r in verify_responses})
    key_metrics = {k: v for k, v in agent.items() if k.startswith("mean/")}
    key_metrics.update(coverage)
    return {
        "group_level_metrics": groups,
        "agent_metrics": agent,
        "key_metrics": key_metrics,
        "perf_summary": None,
        "repeat_level_metrics": repeat_rows,
    }
