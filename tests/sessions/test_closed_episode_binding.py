"""A closed id stays bound to its episode (CONTRACT C4), and whole-request errors read cleanly.

CloseSession from another episode on an already-closed id is FAILED_PRECONDITION
``EPISODE_MISMATCH`` (C4: "another episode than the binding"; closing does not unbind), not
ALREADY_CLOSED. The binding's own episode still gets ALREADY_CLOSED (C2); an id closed without
a binding (C3, a legacy session) has no episode to mismatch.
"""

from __future__ import annotations

import uuid

import httpx
import pytest

from workplace_env import errors
from workplace_env.identity import EpisodeId, Task, TaskId
from workplace_env.sandbox.load import load_sandbox
from workplace_env.sessions import SessionConfig, SessionStore
from workplace_env_client import EpisodeMismatchError

TASK = {"id": "c4", "ground_truth": []}


def test_grpc_close_of_a_closed_id_from_another_episode_is_episode_mismatch(sdk):
    sid = f"c4-{uuid.uuid4().hex}"
    sdk.seed(sid, ("r1", 0), ("ts", "c4"), TASK)
    assert sdk.close_session(sid, ("r1", 0)) == "CLOSED"
    for other in (("r2", 0), ("r1", 1)):
        with pytest.raises(EpisodeMismatchError) as err:
            sdk.close_session(sid, other)
        assert err.value.reason == "EPISODE_MISMATCH"
    assert sdk.close_session(sid, ("r1", 0)) == "ALREADY_CLOSED"  # C2, unchanged


def test_ids_closed_without_a_binding_have_no_episode_to_mismatch(sdk):
    sid = f"c3-{uuid.uuid4().hex}"
    assert sdk.close_session(sid, ("r1", 0)) == "NOT_SEEDED"
    assert sdk.close_session(sid, ("r2", 0)) == "ALREADY_CLOSED"
    legacy = f"lg-{uuid.uuid4().hex}"
    sdk.seed_legacy(legacy, TASK)
    assert sdk.close_session(legacy, ("r1", 0)) == "CLOSED"
    assert sdk.close_session(legacy, ("r2", 0)) == "ALREADY_CLOSED"


def test_http_typed_close_of_a_closed_id_from_another_episode_is_409(gateway, sdk):
    sid = f"c4h-{uuid.uuid4().hex}"
    sdk.seed(sid, ("r1", 0), ("ts", "c4"), TASK)
    with httpx.Client(base_url=gateway.url, timeout=30) as http:
        body = {"resources_session_id": sid, "episode_id": {"rollout_id": "r1", "attempt": 0}}
        assert http.post("/close_session", json=body).status_code == 200
        other = {**body, "episode_id": {"rollout_id": "r2", "attempt": 0}}
        answer = http.post("/close_session", json=other)
        assert answer.status_code == 409, answer.text
        assert answer.json()["reason"] == "EPISODE_MISMATCH"


def test_evicted_then_closed_id_keeps_its_episode():
    now = [0.0]
    store = SessionStore(load_sandbox(None), SessionConfig(idle_ttl_s=1), clock=lambda: now[0])
    store.seed("ev", EpisodeId("r1", 0), TaskId("ts", "c4"), Task("c4"))
    now[0] = 5.0
    assert store.evict_idle() == 1
    assert store.close("ev", EpisodeId("r1", 0)).value == "CLOSED"
    with pytest.raises(errors.EpisodeMismatch):
        store.close("ev", EpisodeId("r2", 0))


def test_fence_episodes_are_bounded_with_the_fences():
    store = SessionStore(load_sandbox(None), SessionConfig(max_fences=2))
    for i in range(5):
        store.seed(f"b{i}", EpisodeId("r", i), TaskId("ts", "c4"), Task("c4"))
        store.close(f"b{i}", EpisodeId("r", i))
    assert len(store.records.fence_episodes) <= 2


def test_a_violation_of_the_whole_request_reads_without_an_empty_field_name():
    error = errors.InvalidRequest([errors.FieldViolation("", "not a valid request message: x")])
    assert str(error) == "invalid request: not a valid request message: x"
    both = errors.InvalidRequest(
        [errors.FieldViolation("", "whole"), errors.FieldViolation("task.id", "required")]
    )
    assert str(both) == "invalid request: whole; task.id: required"
