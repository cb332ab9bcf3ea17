"""NeMo Gym 0.7.0's typed resources-session protocol over HTTP (CONTRACT H1-H6).

Shapes only; the routes in :mod:`workplace_env.gateway.routes` use them. Field names and numbers
are NeMo Gym's (``nemo_gym.base_resources_server``, ``nemo_gym.config_types``), the behaviour
was checked against NeMo Gym's own servers, conformance check and clients as black boxes.

* H1 seed: ``ResourcesSeedSessionRequest`` = ``{resources_session_id, episode_id: {rollout_id,
  attempt}, task_id: {taskset, task_id}, task_data: <dataset row>}``, extra keys forbidden at
  every level (422, FastAPI's ``extra_forbidden``). Answer ``ResourcesSeedSessionResponse``:
  ``{resources_session_id, resources_tools?}``; ``resources_tools`` is NeMo's
  ``MCPServerMetadata`` when MCP is served.
* H2 close: ``ResourcesCloseSessionRequest`` ``{resources_session_id, episode_id}`` -> exactly
  ``{"resources_session_id": ...}``.
* H3 ``/aggregate_metrics``: :func:`aggregate_metrics`, from
  :mod:`workplace_env.gateway.aggregate` (NeMo's ``AggregateMetrics`` for its
  ``AggregateMetricsRequest``).
* H4 ``/reverify_mode``: :data:`REVERIFY_MODE`.
"""

from __future__ import annotations

from typing import Any

from workplace_env.gateway.aggregate import aggregate_metrics as aggregate_metrics  # H3
from workplace_env.gateway.translate import Loc, invalid, parse_episode, seed_legacy
from workplace_env.verify import MCP_SERVER_NAME
from workplace_env_client import EnvironmentClient

#: NeMo's MCP session-token header (``NEMO_GYM_MCP_SESSION_TOKEN_HEADER``).
NEMO_TOKEN_HEADER = "X-NeMo-Gym-Session-Token"
#: H4: scoring is a pure replay of the request (REFERENCE.md (c)), so re-verification needs no
#: session state.
REVERIFY_MODE = "stateless"

_SEED_KEYS = ("resources_session_id", "episode_id", "task_id", "task_data")
_CLOSE_KEYS = ("resources_session_id", "episode_id")


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


def replay_verify(
    client: EnvironmentClient, row: dict[str, Any], verify_kwargs: dict[str, Any]
) -> Any:
    """H5: score a ``/verify`` body that names no session (``gym eval reverify``) by replay.

    Seeds a fresh legacy session from the body's own row (the same path as a legacy seed), and
    verifies it with ``verify_kwargs`` (which releases it, CONTRACT V2). Blocking; returns the
    SDK's verify result.
    """
    session_id = seed_legacy(client, None, row)
    return client.verify(session_id, **verify_kwargs)


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
