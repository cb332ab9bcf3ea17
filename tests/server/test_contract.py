"""docs/contract.md cases over gRPC: one test per case, named after it, against a real server (the
HTTP cases H1-H6 through the gateway over it; NeMo Gym's own clients judge them in
tests/nemo/test_nemo_gym.py).

Runs on the embedded default sandbox, so it needs nothing from ../shared. Each test would fail
on the reference's behaviour (which resets state on a repeated seed, leaks abandoned sessions,
answers lost sessions with 400, and has no fences). Every error case checks the status code and
the ``ErrorInfo`` (reason, domain, ``resources_session_id``). Races are staged with the store's
test-only :class:`~workplace_env.testing.faults.Faults` hooks and ``threading.Event``; no sleeps.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from typing import Any

import anyio
import grpc
import httpx
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests import aggregate_cases
from tests.helpers import (
    EP,
    HANG_S,
    REPO,
    TASK,
    TID,
    WRITE,
    Env,
    FakeClock,
    assert_refused,
    gateway_on,
)
from tests.helpers import emails as _emails
from tests.helpers import error_info as _error_info
from tests.helpers import wait as _wait
from workplace.env.v1 import environment_pb2 as pb
from workplace_env.config import Settings
from workplace_env.gateway import start_gateway
from workplace_env.gateway.cookies import CookieCodec
from workplace_env.gateway.settings import COOKIE_NAME, GatewaySettings
from workplace_env.server.app import start_server
from workplace_env.server.in_process import in_process_client
from workplace_env.server.status import DOMAIN
from workplace_env.session_header import SessionHeaderMismatch, check_ids_against_header
from workplace_env.sessions import SessionConfig, SessionStore
from workplace_env.testing.faults import Faults
from workplace_env_client import (
    CallIdReusedError,
    CapacityError,
    EnvironmentClient,
    EpisodeMismatchError,
    InvalidRequestError,
    ReleaseFailedError,
    SessionClosedError,
    SessionConflictError,
    SessionExpiredError,
    SessionLostError,
    UnavailableError,
)
from workplace_env_client.id_bounds import id_length_problem
from workplace_env_client.messages import seed_request

# -- SeedSession ------------------------------------------------------------------------------


def test_S1_seed_new_id_builds_tables_then_binds(env):
    during_build: list[Any] = []

    def probe(sid: str) -> None:  # while the tables are being built, nothing is bound yet
        during_build.append(env.store.live_count())
        try:
            env.store.call_tool(sid, "email_search_emails", "{}")
        except Exception as exc:
            during_build.append(exc.reason)

    Faults.of(env.store).on("build", probe)
    response = env.client.seed("s1", EP, TID, TASK)
    assert response.state == pb.SESSION_STATE_SEEDED and not response.already_seeded
    assert during_build == [0, "SESSION_LOST"]
    assert env.store.live_count() == 1
    assert _emails(env.client, "s1") == 0


def test_S2_repeated_seed_keeps_mutations(env):
    first = env.client.seed("s2", EP, TID, TASK)
    env.client.call_tool("s2", *WRITE)
    builds = []
    Faults.of(env.store).on("build", builds.append)
    again = env.client.seed("s2", EP, TID, TASK)
    assert again.already_seeded and again.state == first.state
    assert builds == []  # nothing rebuilt
    assert _emails(env.client, "s2") == 1  # the reference would have reset the tables
    assert env.store.live_count() == 1


@pytest.mark.parametrize(
    "episode,task_id", [(("rollout-2", 0), TID), (("rollout-1", 1), TID), (EP, ("unit", "other"))]
)
def test_S3_seed_bound_to_other_episode_or_task_conflicts(env, episode, task_id):
    env.client.seed("s3", EP, TID, TASK)
    env.client.call_tool("s3", *WRITE)
    with pytest.raises(SessionConflictError) as err:
        env.client.seed("s3", episode, task_id, TASK)
    assert_refused(err.value, grpc.StatusCode.ALREADY_EXISTS, "SESSION_CONFLICT", "s3")
    assert _emails(env.client, "s3") == 1  # unchanged
    assert env.client.close_session("s3", EP) == "CLOSED"  # still bound to the first episode


def test_S3_seed_of_the_same_identity_with_another_task_conflicts(env):
    env.client.seed("s3t", EP, TID, TASK)
    env.client.call_tool("s3t", *WRITE)
    other = {**TASK, "ground_truth": []}  # same id, episode and task_id; another task
    with pytest.raises(SessionConflictError) as err:
        env.client.seed("s3t", EP, TID, other)
    assert_refused(err.value, grpc.StatusCode.ALREADY_EXISTS, "SESSION_CONFLICT", "s3t")
    assert "task data differs" in err.value.message
    assert _emails(env.client, "s3t") == 1  # unchanged
    # Verify still scores the first task's ground truth (the write it asks for was made).
    assert env.client.verify("s3t", [(WRITE[0], json.dumps(WRITE[1]))]).reward == 1.0


def test_S4_seed_after_close_is_refused(env):
    env.client.seed("s4", EP, TID, TASK)
    env.client.close_session("s4", EP)
    with pytest.raises(SessionClosedError) as err:
        env.client.seed("s4", EP, TID, TASK)
    assert_refused(err.value, grpc.StatusCode.ALREADY_EXISTS, "SESSION_CLOSED", "s4")
    assert env.store.live_count() == 0


@pytest.mark.parametrize(
    "sid,episode,task_id,task,field",
    [
        ("bad id", EP, TID, TASK, "resources_session_id"),
        ("x" * 257, EP, TID, TASK, "resources_session_id"),
        ("s5", ("-bad", 0), TID, TASK, "episode_id.rollout_id"),
        ("s5", ("r", -1), TID, TASK, "episode_id.attempt"),
        ("s5", EP, ("", "t"), TASK, "task_id.taskset"),
        ("s5", EP, ("u", ""), TASK, "task_id.task_id"),
        ("s5", EP, TID, {**TASK, "environment_name": "other_env"}, "task.environment_name"),
        (
            "s5",
            EP,
            TID,
            {**TASK, "ground_truth": [{"name": "", "arguments": "{}"}]},
            "task.ground_truth[0].name",
        ),
        (
            "s5",
            EP,
            TID,
            {**TASK, "ground_truth": [{"name": "x", "arguments": "{bad"}]},
            "task.ground_truth[0].arguments",
        ),
    ],
)
def test_S5_invalid_seed_names_the_field_and_leaves_nothing(
    env, sid, episode, task_id, task, field
):
    with pytest.raises(InvalidRequestError) as err:
        env.client.seed(sid, episode, task_id, task)
    assert_refused(err.value, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST", sid)
    assert field in [v.field for v in err.value.violations]
    assert env.store.live_count() == 0
    if sid == "s5":  # no binding and no fence: a later valid seed succeeds
        assert not env.client.seed("s5", EP, TID, TASK).already_seeded


@pytest.mark.parametrize("rpc", ["SeedSession", "CloseSession"])
def test_S5_a_rollout_id_past_the_id_bound_is_invalid_naming_it(env, rpc):
    """``rollout_id`` is bounded as ``resources_session_id`` is (256 characters), on every RPC
    that carries an episode; 256 is taken."""
    for length, code in ((256, grpc.StatusCode.OK), (257, grpc.StatusCode.INVALID_ARGUMENT)):
        sid = f"s5-long-{rpc}-{length}"
        episode = pb.EpisodeId(rollout_id="r" * length, attempt=0)
        if rpc == "SeedSession":
            request: Any = seed_request(sid, EP, TID, TASK)
            request.episode_id.CopyFrom(episode)
        else:
            request = pb.CloseSessionRequest(resources_session_id=sid, episode_id=episode)
        if code == grpc.StatusCode.OK:
            getattr(env.client.stub, rpc)(request, timeout=HANG_S)
            continue
        with pytest.raises(grpc.RpcError) as err:
            getattr(env.client.stub, rpc)(request, timeout=HANG_S)
        assert err.value.code() == code
        bad = error_details_pb2.BadRequest()
        status = rpc_status.from_call(err.value)
        assert any(d.Unpack(bad) for d in status.details if d.Is(bad.DESCRIPTOR))
        assert [(v.field, v.description) for v in bad.field_violations] == [
            ("episode_id.rollout_id", id_length_problem("x" * 257))
        ]
    assert env.store.live_count() == (1 if rpc == "SeedSession" else 0)


def test_S5_ground_truth_call_must_name_a_tool_of_this_environment(env):
    task = {**TASK, "ground_truth": [{"name": "email_delet_email", "arguments": "{}"}]}
    with pytest.raises(InvalidRequestError) as err:
        env.client.seed("s5n", EP, TID, task)
    assert_refused(err.value, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST", "s5n")
    (violation,) = err.value.violations
    assert violation.field == "task.ground_truth[0].name"
    assert violation.description == (
        "'email_delet_email' is not a tool of this environment; did you mean 'email_delete_email'?"
    )
    assert env.store.live_count() == 0


def test_S5_tool_names_are_not_checked_in_a_verify_ground_truth_override(env):
    env.client.seed("s5o", EP, TID, TASK)
    override = [("email_delet_email", "{}")]
    assert env.client.verify("s5o", [], ground_truth=override).reward == 1.0


def test_S5_missing_messages_are_required(env):
    stub = env.client.stub
    with pytest.raises(grpc.RpcError) as err:
        stub.SeedSession(pb.SeedSessionRequest(resources_session_id="s5b"), timeout=HANG_S)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert _error_info(err.value).metadata["resources_session_id"] == "s5b"
    status = rpc_status.from_call(err.value)
    bad = error_details_pb2.BadRequest()
    assert any(d.Unpack(bad) for d in status.details if d.Is(bad.DESCRIPTOR))
    assert {v.field for v in bad.field_violations} == {"episode_id", "task_id", "task"}


def test_S6_table_build_failure_is_unavailable_and_retryable(env):
    Faults.of(env.store).fail_next_build()
    with pytest.raises(UnavailableError) as err:
        env.raw.seed("s6", EP, TID, TASK)  # one attempt, no SDK retry
    assert_refused(err.value, grpc.StatusCode.UNAVAILABLE, "TABLES_UNAVAILABLE", "s6")
    assert env.store.live_count() == 0
    with pytest.raises(SessionLostError):  # no binding
        env.raw.call_tool("s6", *WRITE)
    assert not env.raw.seed("s6", EP, TID, TASK).already_seeded  # the retry builds and binds
    assert env.store.live_count() == 1


def test_S6_os_error_in_build_is_unavailable(env):
    real = env.store.table_factory

    def failing():
        env.store.table_factory = real
        raise OSError(24, "Too many open files")  # EMFILE

    env.store.table_factory = failing
    with pytest.raises(UnavailableError) as err:
        env.raw.seed("s6b", EP, TID, TASK)
    assert_refused(err.value, grpc.StatusCode.UNAVAILABLE, "TABLES_UNAVAILABLE", "s6b")
    assert not env.raw.seed("s6b", EP, TID, TASK).already_seeded


def test_S6_sdk_retries_a_failed_build_transparently(env):
    builds: list[str] = []
    Faults.of(env.store).on("build", builds.append)
    Faults.of(env.store).fail_next_build()
    response = env.client.seed("s6c", EP, TID, TASK)  # the retry policy's second attempt wins
    assert not response.already_seeded
    assert builds == ["s6c", "s6c"] and env.store.live_count() == 1


def test_S6_failed_legacy_rebuild_keeps_the_old_tables(env):
    env.client.seed_legacy("cookie-s6", TASK)
    env.client.call_tool("cookie-s6", *WRITE)
    Faults.of(env.store).fail_next_build()
    with pytest.raises(UnavailableError) as err:
        env.raw.seed_legacy("cookie-s6", TASK)
    assert_refused(err.value, grpc.StatusCode.UNAVAILABLE, "TABLES_UNAVAILABLE", "cookie-s6")
    assert _emails(env.client, "cookie-s6") == 1


def test_S7_capacity_is_resource_exhausted_with_retry_info(make_env):
    env = make_env(max_sessions=2, retry_after_s=2.5)
    env.client.seed("a", EP, TID, TASK)
    env.client.seed("b", ("rollout-b", 0), TID, TASK)
    with pytest.raises(CapacityError) as err:
        env.client.seed("c", ("rollout-c", 0), TID, TASK)
    assert_refused(err.value, grpc.StatusCode.RESOURCE_EXHAUSTED, "CAPACITY_EXHAUSTED", "c")
    assert err.value.retry_after_s == 2.5
    assert env.store.live_count() == 2
    with pytest.raises(SessionLostError):  # nothing created
        env.client.call_tool("c", *WRITE)
    env.client.close_session("a", EP)
    assert not env.client.seed("c", ("rollout-c", 0), TID, TASK).already_seeded


@pytest.mark.parametrize("channel", ["grpc", "in_process"])
def test_S7_X1_a_store_full_of_expired_sessions_admits_a_seed(make_env, channel):
    """A session past its idle TTL holds no place: a seed finding the store full of them is
    admitted before any periodic sweep ran, and the evicted ids answer as after one (NOT_FOUND
    SESSION_EXPIRED), counted in the evictions metric."""
    env = make_env(max_sessions=2, idle_ttl_s=10)
    client = env.client if channel == "grpc" else in_process_client(env.server)
    client.seed("a", EP, TID, TASK)
    client.seed("b", ("rollout-b", 0), TID, TASK)
    env.clock.now += 11
    assert not client.seed("c", ("rollout-c", 0), TID, TASK).already_seeded
    assert env.store.live_count() == 1
    evictions = env.server.metrics.registry.get_sample_value("workplace_env_evictions_total")
    assert evictions == 2
    for sid in ("a", "b"):
        with pytest.raises(SessionExpiredError) as err:
            client.call_tool(sid, *WRITE)
        assert_refused(err.value, grpc.StatusCode.NOT_FOUND, "SESSION_EXPIRED", sid)
    assert _emails(client, "c") == 0


def test_S8_racing_identical_seeds_build_one_table_set(env):
    builds: list[str] = []
    building, second_waiting, go = threading.Event(), threading.Event(), threading.Event()

    def hold_build(sid: str) -> None:
        builds.append(sid)
        building.set()
        _wait(go)

    Faults.of(env.store).on("build", hold_build)
    Faults.of(env.store).on("seed_wait", lambda sid: second_waiting.set())
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(env.client.seed, "s8", EP, TID, TASK)
        _wait(building)  # the first seed is inside its build ...
        second = pool.submit(env.client.seed, "s8", EP, TID, TASK)
        _wait(second_waiting)  # ... and the second waits for it rather than building
        go.set()
        responses = [first.result(HANG_S), second.result(HANG_S)]
    assert builds == ["s8"]
    assert sorted(r.already_seeded for r in responses) == [False, True]
    assert all(r.state == pb.SESSION_STATE_SEEDED for r in responses)
    assert env.store.live_count() == 1


def test_S8_second_seed_builds_when_the_racing_build_fails(env):
    building, second_waiting, go = threading.Event(), threading.Event(), threading.Event()
    calls: list[str] = []

    def hold_first_build(sid: str) -> None:
        calls.append(sid)
        if len(calls) == 1:
            building.set()
            _wait(go)

    Faults.of(env.store).on("build", hold_first_build)
    Faults.of(env.store).on("seed_wait", lambda sid: second_waiting.set())
    Faults.of(env.store).fail_next_build()
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(env.raw.seed, "s8b", EP, TID, TASK)
        _wait(building)
        second = pool.submit(env.raw.seed, "s8b", EP, TID, TASK)
        _wait(second_waiting)
        go.set()
        with pytest.raises(UnavailableError):
            first.result(HANG_S)
        assert not second.result(HANG_S).already_seeded
    assert calls == ["s8b", "s8b"] and env.store.live_count() == 1


# -- CallTool ---------------------------------------------------------------------------------


def test_T1_tool_call_mutates_only_its_session(env):
    env.client.seed("t1a", EP, TID, TASK)
    env.client.seed("t1b", ("rollout-b", 0), TID, TASK)
    assert env.client.call_tool("t1a", *WRITE) == "Email sent successfully."
    assert _emails(env.client, "t1a") == 1
    assert _emails(env.client, "t1b") == 0


@pytest.mark.parametrize(
    "name,arguments,expected",
    [
        ("no_such_tool", {}, "Error executing tool 'no_such_tool': 'no_such_tool'"),
        (
            "email_send_email",
            {"recipient": "a@b.com", "subject": "s", "body": "b", "cc": "x"},
            "Error executing tool 'email_send_email': EmailTool.send_email() got an unexpected "
            "keyword argument 'cc'",
        ),
        ("email_send_email", {"recipient": "nope"}, "Recipient, subject, or body not provided."),
    ],
)
def test_T2_tool_failures_are_model_visible_outputs(env, name, arguments, expected):
    env.client.seed("t2", EP, TID, TASK)
    assert env.client.call_tool("t2", name, arguments) == expected
    assert _emails(env.client, "t2") == 0


@pytest.mark.parametrize("arguments", ["[1, 2]", '"x"', "5", "null", "{bad json", ""])
def test_T3_arguments_not_a_json_object_is_invalid_argument(env, arguments):
    env.client.seed("t3", EP, TID, TASK)
    with pytest.raises(InvalidRequestError) as err:
        env.client.call_tool("t3", "email_search_emails", arguments)
    assert_refused(err.value, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_TOOL_ARGUMENTS", "t3")
    assert _emails(env.client, "t3") == 0


@pytest.mark.parametrize("how", ["never_seeded", "released", "lost_in_restart", "failed_seed"])
def test_T4_call_on_unheld_session_is_not_found(make_env, how):
    env = make_env()
    if how == "released":  # a verified legacy session's tables are released (V2)
        env.client.seed_legacy("t4", TASK)
        env.client.verify("t4", [])
    elif how == "lost_in_restart":  # held by another server process, not by this one
        make_env().client.seed("t4", EP, TID, TASK)
    elif how == "failed_seed":
        Faults.of(env.store).fail_next_build()
        with pytest.raises(UnavailableError):
            env.raw.seed("t4", EP, TID, TASK)
    with pytest.raises(SessionLostError) as err:
        env.client.call_tool("t4", *WRITE)
    # NOT_FOUND, not the reference's 400 (INVALID_ARGUMENT): the request was fine
    assert_refused(err.value, grpc.StatusCode.NOT_FOUND, "SESSION_LOST", "t4")
    assert env.store.live_count() == 0


def test_T5_call_on_closed_session_is_not_found_closed(env):
    env.client.seed("t5", EP, TID, TASK)
    env.client.close_session("t5", EP)
    with pytest.raises(SessionClosedError) as err:
        env.client.call_tool("t5", *WRITE)
    assert_refused(err.value, grpc.StatusCode.NOT_FOUND, "SESSION_CLOSED", "t5")
    assert env.store.live_count() == 0


def test_T6_repeated_call_id_is_not_executed_twice(env):
    env.client.seed("t6", EP, TID, TASK)
    first = env.client.call_tool("t6", *WRITE, call_id="c-1")
    second = env.client.call_tool("t6", *WRITE, call_id="c-1")
    assert first == second == "Email sent successfully."
    assert _emails(env.client, "t6") == 1
    replay = env.client.stub.CallTool(
        pb.CallToolRequest(
            resources_session_id="t6",
            tool_name=WRITE[0],
            arguments=json.dumps(WRITE[1], ensure_ascii=False),
            call_id="c-1",
        ),
        timeout=HANG_S,
    )
    assert replay.replayed and json.loads(replay.output) == first
    assert _emails(env.client, "t6") == 1


def test_T6_lost_response_is_retried_by_the_sdk_without_running_twice(env):
    env.client.seed("t6b", EP, TID, TASK)
    ran: list[str] = []
    Faults.of(env.store).on("tool", ran.append)
    Faults.of(env.store).lose_next_response()
    # No call_id given: the SDK generates one, so gRPC's retry replays instead of re-running.
    assert env.client.call_tool("t6b", *WRITE) == "Email sent successfully."
    assert ran == ["t6b"]
    assert _emails(env.client, "t6b") == 1


def test_T7_call_id_reused_with_other_arguments(env):
    env.client.seed("t7", EP, TID, TASK)
    env.client.call_tool("t7", *WRITE, call_id="c-1")
    with pytest.raises(CallIdReusedError) as err:
        env.client.call_tool("t7", WRITE[0], {**WRITE[1], "subject": "other"}, call_id="c-1")
    assert_refused(err.value, grpc.StatusCode.ALREADY_EXISTS, "CALL_ID_REUSED", "t7")
    with pytest.raises(CallIdReusedError):
        env.client.call_tool("t7", "email_search_emails", WRITE[1], call_id="c-1")
    assert _emails(env.client, "t7") == 1


# -- Verify -----------------------------------------------------------------------------------


def test_V1_verify_scores_from_the_request_not_the_live_tables(env):
    env.client.seed("v1", EP, TID, TASK)
    env.client.call_tool("v1", *WRITE)  # the live tables already hold the right state ...
    assert env.client.verify("v1", []).reward == 0.0  # ... but the prediction made no calls
    result = env.client.verify("v1", [WRITE])
    assert result.reward == 1.0 and not result.mask_sample
    assert {t.table for t in result.tables} >= {"email._emails"}
    assert _emails(env.client, "v1") == 1  # tables kept until close
    assert env.client.seed("v1", EP, TID, TASK).state == pb.SESSION_STATE_VERIFIED


def test_V1_verify_reports_which_table_differs(env):
    env.client.seed("v1b", EP, TID, TASK)
    result = env.client.verify("v1b", [])
    diff = [t for t in result.tables if not t.equal]
    assert [t.table for t in diff] == ["email._emails"]
    assert diff[0].expected_rows == diff[0].predicted_rows + 1


def test_V1_verify_accepts_raw_response_output(env):
    env.client.seed("v1c", EP, TID, TASK)
    output = [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "function_call",
            "name": WRITE[0],
            "arguments": json.dumps(WRITE[1]),
            "call_id": "x",
        },
        {"type": "function_call_output", "call_id": "x", "output": "Email sent successfully."},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "done", "annotations": []}],
        },
    ]
    assert env.client.verify("v1c", response_output=output).reward == 1.0


def test_V2_legacy_verify_releases_tables(env):
    env.client.seed_legacy("cookie-1", TASK)
    env.client.call_tool("cookie-1", *WRITE)
    assert env.client.verify("cookie-1", [WRITE]).reward == 1.0
    assert env.store.live_count() == 0
    with pytest.raises(SessionLostError) as err:
        env.client.call_tool("cookie-1", *WRITE)
    assert_refused(err.value, grpc.StatusCode.NOT_FOUND, "SESSION_LOST", "cookie-1")


def test_V3_legacy_verify_resent_inside_window_scores_the_same(make_env):
    env = make_env(retry_window_s=30)
    env.client.seed_legacy("cookie-2", TASK)
    first = env.client.verify("cookie-2", [WRITE])
    env.clock.now += 29
    again = env.client.verify("cookie-2", [WRITE])
    assert (again.reward, again.mask_sample) == (first.reward, False) == (1.0, False)
    assert env.store.live_count() == 0  # unchanged: nothing rebuilt to answer
    env.clock.now += 2  # past the window: the id is forgotten
    assert env.client.verify("cookie-2", [WRITE]).failure_kind == "session_lost"


def test_V4_verify_unheld_session_is_masked_session_lost(env):
    result = env.client.verify("never-seeded", [WRITE])
    assert (result.reward, result.mask_sample, result.failure_kind) == (0.0, True, "session_lost")
    assert result.tables == ()
    assert env.store.live_count() == 0


@pytest.mark.parametrize("field", ["prediction", "response_output_json", "ground_truth_json"])
def test_V5_malformed_verify_is_invalid_argument(env, field):
    env.client.seed("v5", EP, TID, TASK)
    request = pb.VerifyRequest(resources_session_id="v5")
    if field == "response_output_json":
        request.response_output_json = '{"not": "a list"}'
    elif field == "ground_truth_json":
        request.function_calls.SetInParent()
        request.ground_truth_json = "{bad"
    with pytest.raises(grpc.RpcError) as err:
        env.client.stub.Verify(request, timeout=HANG_S)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    info = _error_info(err.value)
    assert (info.domain, info.metadata["resources_session_id"]) == (DOMAIN, "v5")
    assert env.client.seed("v5", EP, TID, TASK).state == pb.SESSION_STATE_SEEDED  # unchanged


# -- CloseSession -----------------------------------------------------------------------------


def test_C1_close_releases_tables_and_fences(env):
    env.client.seed("c1", EP, TID, TASK)
    assert env.client.close_session("c1", EP) == "CLOSED"
    assert env.store.live_count() == 0
    with pytest.raises(SessionClosedError):
        env.client.call_tool("c1", *WRITE)


def test_C2_repeated_close_is_already_closed(env):
    env.client.seed("c2", EP, TID, TASK)
    env.client.close_session("c2", EP)
    assert env.client.close_session("c2", EP) == "ALREADY_CLOSED"
    assert env.store.live_count() == 0


def test_C3_close_never_seeded_records_fence(env):
    assert env.client.close_session("c3", EP) == "NOT_SEEDED"
    with pytest.raises(SessionClosedError) as err:  # a late seed gets S4
        env.client.seed("c3", EP, TID, TASK)
    assert_refused(err.value, grpc.StatusCode.ALREADY_EXISTS, "SESSION_CLOSED", "c3")
    assert env.store.live_count() == 0


def test_C4_close_with_other_episode_is_failed_precondition(env):
    env.client.seed("c4", EP, TID, TASK)
    env.client.call_tool("c4", *WRITE)
    with pytest.raises(EpisodeMismatchError) as err:
        env.client.close_session("c4", ("rollout-other", 0))
    assert_refused(err.value, grpc.StatusCode.FAILED_PRECONDITION, "EPISODE_MISMATCH", "c4")
    assert "belongs to episode rollout-1/0" in str(err.value)  # the binding it has
    assert env.store.live_count() == 1
    assert _emails(env.client, "c4") == 1  # unchanged


def test_C5_failed_release_is_internal_and_not_recorded(env):
    env.client.seed("c5", EP, TID, TASK)
    env.client.call_tool("c5", *WRITE)
    Faults.of(env.store).fail_next_release()
    with pytest.raises(ReleaseFailedError) as err:
        env.client.close_session("c5", EP)
    assert_refused(err.value, grpc.StatusCode.INTERNAL, "RELEASE_FAILED", "c5")
    # not recorded as closed: the session still works and a seed retry is still S2
    assert env.store.live_count() == 1
    assert _emails(env.client, "c5") == 1
    assert env.client.seed("c5", EP, TID, TASK).already_seeded
    assert env.client.close_session("c5", EP) == "CLOSED"  # the retry succeeds
    with pytest.raises(SessionClosedError):
        env.client.call_tool("c5", *WRITE)


# -- Eviction and draining --------------------------------------------------------------------


def test_X1_idle_session_is_evicted_and_answers_expired(make_env):
    env = make_env(idle_ttl_s=60)
    env.client.seed("x1", EP, TID, TASK)
    env.client.call_tool("x1", *WRITE)
    env.client.seed("x1-busy", ("rollout-2", 0), TID, TASK)
    env.clock.now += 45
    env.client.call_tool("x1-busy", *WRITE)  # used 15 s before the sweep: not idle
    env.clock.now += 16
    assert env.store.evict_idle() == 1  # the reference would keep it forever
    assert env.store.live_count() == 1
    with pytest.raises(SessionExpiredError) as err:
        env.client.call_tool("x1", *WRITE)
    assert_refused(err.value, grpc.StatusCode.NOT_FOUND, "SESSION_EXPIRED", "x1")
    result = env.client.verify("x1", [WRITE])
    assert (result.mask_sample, result.failure_kind) == (True, "session_lost")
    assert _emails(env.client, "x1-busy") == 1
    with pytest.raises(SessionConflictError):  # the evicted id keeps its binding
        env.client.seed("x1", ("rollout-other", 0), TID, TASK)
    assert env.client.close_session("x1", EP) == "CLOSED"
    with pytest.raises(SessionClosedError):
        env.client.seed("x1", EP, TID, TASK)


def test_X1_a_late_seed_of_an_evicted_id_answers_expired_not_fresh_tables(make_env):
    """A retried or late seed after eviction used to rebuild fresh tables,
    silently dropping the episode's tool calls. While the eviction record lasts the same
    binding is NOT_FOUND SESSION_EXPIRED; past ``fence_ttl_s`` the id is free again."""
    env = make_env(idle_ttl_s=60)
    env.client.seed("x1b", EP, TID, TASK)
    env.client.call_tool("x1b", *WRITE)
    env.clock.now += 61
    assert env.store.evict_idle() == 1
    for _ in range(2):  # and again: the refusal leaves the record in place
        with pytest.raises(SessionExpiredError) as err:
            env.client.seed("x1b", EP, TID, TASK)
        assert_refused(err.value, grpc.StatusCode.NOT_FOUND, "SESSION_EXPIRED", "x1b")
    assert env.store.live_count() == 0
    env.clock.now += env.store.config.fence_ttl_s + 1
    again = env.client.seed("x1b", EP, TID, TASK)
    assert not again.already_seeded  # fresh tables, and the answer says so
    assert _emails(env.client, "x1b") == 0


def test_X2_draining_server_refuses_seeds_and_finishes_in_flight_calls(make_server):
    served = make_server(evict_interval_s=3600)
    store, running, target, client = served.store, served.running, served.target, served.client
    channel = grpc.insecure_channel(target)
    health = health_pb2_grpc.HealthStub(channel)
    in_tool, release_tool = threading.Event(), threading.Event()
    draining, stop_now = threading.Event(), threading.Event()

    def hold_tool(sid: str) -> None:
        if sid == "x2-busy":
            in_tool.set()
            _wait(release_tool)

    def hold_drain(_: str) -> None:
        draining.set()
        _wait(stop_now)

    Faults.of(store).on("tool", hold_tool)
    Faults.of(store).on("drain", hold_drain)
    try:
        client.seed("x2-busy", EP, TID, TASK)
        client.seed("x2-idle", ("rollout-2", 0), TID, TASK)
        with ThreadPoolExecutor(2) as pool:
            in_flight: Future = pool.submit(client.call_tool, "x2-busy", *WRITE)
            _wait(in_tool)
            stopping = pool.submit(running.stop, HANG_S)
            _wait(draining)  # health is already NOT_SERVING; the gRPC server still runs
            check = health.Check(health_pb2.HealthCheckRequest(), timeout=HANG_S)
            assert check.status == health_pb2.HealthCheckResponse.NOT_SERVING
            with pytest.raises(UnavailableError) as err:
                client.seed("x2-new", ("rollout-3", 0), TID, TASK)
            assert_refused(err.value, grpc.StatusCode.UNAVAILABLE, "DRAINING", "x2-new")
            assert client.call_tool("x2-idle", *WRITE) == "Email sent successfully."
            stop_now.set()  # the server stops taking RPCs and waits for the one in flight
            release_tool.set()
            assert in_flight.result(HANG_S) == "Email sent successfully."
            stopping.result(HANG_S)
    finally:
        Faults.of(store).clear()
        release_tool.set()
        stop_now.set()
        channel.close()


# -- Error details ----------------------------------------------------------------------------


def test_errors_carry_error_info_with_domain_and_session(env):
    with pytest.raises(grpc.RpcError) as err:
        env.client.stub.CallTool(
            pb.CallToolRequest(resources_session_id="ghost", tool_name="x", arguments="{}"),
            timeout=HANG_S,
        )
    info = _error_info(err.value)
    assert (info.reason, info.domain) == ("SESSION_LOST", DOMAIN)
    assert dict(info.metadata) == {"resources_session_id": "ghost", "rpc": "CallTool"}


def test_list_tools_gives_27_schemas(env):
    tools = env.client.list_tools()
    assert len(tools) == 27
    assert tools[0]["name"] == "company_directory_find_email_address"
    assert all(t["type"] == "function" and "parameters" in t for t in tools)


# -- Legacy (cookie) sessions -----------------------------------------------------------------


def test_legacy_reseed_rebuilds_fresh_tables(env):
    env.client.seed_legacy("cookie-3", TASK)
    env.client.call_tool("cookie-3", *WRITE)
    again = env.client.seed_legacy("cookie-3", TASK)
    assert (again.rebuilt, again.already_seeded, again.state) == (
        True,
        False,
        pb.SESSION_STATE_SEEDED,
    )
    assert _emails(env.client, "cookie-3") == 0
    assert env.store.state_counts() == {"seeded": 1}


def test_legacy_and_typed_ids_do_not_mix(env):
    env.client.seed("typed-1", EP, TID, TASK)
    with pytest.raises(SessionConflictError):
        env.client.seed_legacy("typed-1", TASK)
    env.client.seed_legacy("cookie-4", TASK)
    with pytest.raises(SessionConflictError) as err:
        env.client.seed("cookie-4", EP, TID, TASK)
    assert "legacy (cookie) session" in str(err.value)


def test_legacy_session_is_seeded_again_after_verify(env):
    env.client.seed_legacy("cookie-5", TASK)
    env.client.verify("cookie-5", [])
    assert not env.client.seed_legacy("cookie-5", TASK).rebuilt  # a new session, fresh tables
    assert env.store.live_count() == 1
    assert env.client.verify("cookie-5", [WRITE]).reward == 1.0  # scored anew, not the marker


def test_legacy_close_after_verify_is_closed_and_fenced(env):
    env.client.seed_legacy("cookie-6", TASK)
    env.client.verify("cookie-6", [])
    assert env.client.close_session("cookie-6", EP) == "CLOSED"
    with pytest.raises(SessionClosedError):
        env.client.seed_legacy("cookie-6", TASK)


def test_legacy_verify_keeps_the_session_when_the_release_fails(env):
    env.client.seed_legacy("cookie-7", TASK)
    Faults.of(env.store).fail_next_release()
    assert env.client.verify("cookie-7", [WRITE]).reward == 1.0
    assert env.store.live_count() == 1  # still held: a resent verify scores it again
    assert env.client.verify("cookie-7", [WRITE]).reward == 1.0
    assert env.store.live_count() == 0


# -- X4 and the HTTP cases H1-H6 (NeMo Gym's typed protocol over the gateway) --------------


@contextmanager
def _raw_write(env: Env, sid: str) -> Iterator[Callable[..., Any]]:
    """A CallTool of WRITE on ``sid`` over a bare channel: call it with ``metadata=``."""
    with grpc.insecure_channel(f"127.0.0.1:{env.server.port}") as channel:
        call = channel.unary_unary(
            "/workplace.env.v1.EnvironmentService/CallTool",
            request_serializer=pb.CallToolRequest.SerializeToString,
            response_deserializer=pb.CallToolResponse.FromString,
        )
        request = pb.CallToolRequest(
            resources_session_id=sid, tool_name=WRITE[0], arguments=json.dumps(WRITE[1])
        )
        yield partial(call, request, timeout=HANG_S)


def test_X4_header_naming_another_session_is_invalid_argument(env):
    env.client.seed("x4-a", EP, TID, TASK)
    with _raw_write(env, "x4-a") as call, pytest.raises(grpc.RpcError) as err:
        call(metadata=(("x-resources-session-id", "x4-b"),))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert _error_info(err.value).reason == "SESSION_HEADER_MISMATCH"
    assert _emails(env.client, "x4-a") == 0  # nothing ran


HTTP_SECRET = "contract-test-secret"


@pytest.fixture
def http(env) -> Iterator[httpx.Client]:
    """An HTTP client of a gateway over ``env``'s service (cookies kept, like an agent)."""
    gateway = start_gateway(client=env.client, settings=GatewaySettings(secret_key=HTTP_SECRET))
    with httpx.Client(base_url=gateway.url, timeout=HANG_S) as client:
        yield client
    gateway.stop()


def nemo_seed(sid: str, rollout: str = "r-h", **over: Any) -> dict[str, Any]:
    """A NeMo Gym ``ResourcesSeedSessionRequest`` body."""
    return {
        "resources_session_id": sid,
        "episode_id": {"rollout_id": rollout, "attempt": 0},
        "task_id": {"taskset": "unit", "task_id": "task-1"},
        "task_data": TASK,
        **over,
    }


def test_H1_typed_seed_answers_nemo_response_and_binds_the_cookie(env, http):
    bad_extra = http.post("/seed_session", json=nemo_seed("h1", extra=1))
    assert bad_extra.status_code == 422 and bad_extra.json()["detail"][0]["loc"] == [
        "body",
        "extra",
    ]
    not_a_task = http.post("/seed_session", json=nemo_seed("h1", task_data={"ground_truth": [5]}))
    assert not_a_task.status_code == 422
    seeded = http.post("/seed_session", json=nemo_seed("h1"))  # no binding was left above
    assert seeded.status_code == 200
    body = seeded.json()
    assert set(body) == {"resources_session_id", "resources_tools"}
    assert body["resources_session_id"] == "h1"
    tools = body["resources_tools"]
    assert (tools["server_name"], tools["url_path"], tools["transport"]) == (
        "workplace_assistant",
        "/mcp",
        "http",
    )
    assert list(tools["headers"]) == ["X-NeMo-Gym-Session-Token"]
    assert http.post(f"/{WRITE[0]}", json=WRITE[1]).status_code == 200  # the cookie names h1
    assert _emails(env.client, "h1") == 1
    again = http.post("/seed_session", json=nemo_seed("h1"))  # S2: a retry keeps the write
    assert again.status_code == 200 and again.json()["resources_session_id"] == "h1"
    assert _emails(env.client, "h1") == 1
    conflict = http.post("/seed_session", json=nemo_seed("h1", rollout="r-other"))
    assert conflict.status_code == 409 and conflict.json()["reason"] == "SESSION_CONFLICT"
    env.client.close_session("h1", ("r-h", 0))
    closed = http.post("/seed_session", json=nemo_seed("h1"))
    assert closed.status_code == 409 and closed.json()["reason"] == "SESSION_CLOSED"


def test_H1_typed_seed_with_another_task_is_a_conflict_not_a_retry(env, http):
    junk = nemo_seed("h1j", task_data={"id": "task-1"})  # parsable, but not the row
    assert http.post("/seed_session", json=junk).status_code == 200
    real = http.post("/seed_session", json=nemo_seed("h1j"))
    assert real.status_code == 409 and real.json()["reason"] == "SESSION_CONFLICT"
    assert "task data differs" in real.json()["detail"]
    again = http.post("/seed_session", json=junk)  # the identical seed is still a retry
    assert again.status_code == 200


@pytest.mark.parametrize(
    "task_data",
    [
        {"ground_truth": [{"name": "x", "arguments": "{not json"}]},
        {"id": "t", "environment_name": "other_env"},
    ],
)
def test_H1_typed_seed_422_names_task_data_as_sent(env, http, task_data):
    response = http.post("/seed_session", json=nemo_seed("h1l", task_data=task_data))
    assert response.status_code == 422
    locs = [problem["loc"] for problem in response.json()["detail"]]
    assert locs and all(loc[:2] == ["body", "task_data"] for loc in locs), locs


def test_H2_typed_close_answers_exactly_the_id(env, http):
    http.post("/seed_session", json=nemo_seed("h2"))
    close = {"resources_session_id": "h2", "episode_id": {"rollout_id": "r-h", "attempt": 0}}
    other = {**close, "episode_id": {"rollout_id": "r-other", "attempt": 0}}
    assert http.post("/close_session", json=other).status_code == 409  # C4
    for _ in range(2):  # C1, then C2
        response = http.post("/close_session", json=close)
        assert response.status_code == 200 and response.json() == {"resources_session_id": "h2"}
    never = {**close, "resources_session_id": "h2-never"}
    assert http.post("/close_session", json=never).json() == {"resources_session_id": "h2-never"}
    assert http.post("/seed_session", json=nemo_seed("h2-never")).status_code == 409  # C3 fence


def test_H3_aggregate_metrics_answers_nemo_aggregate_metrics(http):
    rows = [
        {"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0},
        {"_ng_task_index": 1, "_ng_rollout_index": 0, "reward": 0.0},
        {"_ng_task_index": 2, "_ng_rollout_index": 0, "reward": 1.0, "mask_sample": True},
    ]
    response = http.post("/aggregate_metrics", json={"verify_responses": rows})
    assert response.status_code == 200  # never taken by the tool route
    out = response.json()
    assert set(out) == {
        "group_level_metrics",
        "agent_metrics",
        "key_metrics",
        "perf_summary",
        "repeat_level_metrics",
    }
    assert out["key_metrics"] == {
        "mean/reward": 0.5,
        "coverage/measured_rollouts": 2,
        "coverage/masked_rollouts": 1,
        "coverage/measured_tasks": 2,
        "coverage/fully_masked_tasks": 1,
    }
    assert out["agent_metrics"]["std/reward"] == pytest.approx(0.7071067811865476)
    assert [g["_ng_task_index"] for g in out["group_level_metrics"]] == [0, 1]
    empty = http.post("/aggregate_metrics", json={"verify_responses": []}).json()
    assert empty["agent_metrics"] == {} and empty["perf_summary"] is None
    assert http.post("/aggregate_metrics", json={"verify_responses": 3}).status_code == 422


def test_H3_aggregate_metrics_over_http_as_the_reference_answered(http):
    """Through the route and its JSON rendering (an integer stays ``1``, not ``1.0``): the
    bodies of tests/aggregate_cases.py (NaN and Infinity as Python's JSON spells them: the
    route parses them) answer what the reference answered them."""
    recorded = aggregate_cases.reference_answers()
    for name, rows in aggregate_cases.CASES.items():
        response = http.post("/aggregate_metrics", **aggregate_cases.request_body(rows))
        assert response.status_code == 200, name
        assert aggregate_cases.same_metrics(response.json(), recorded[name]) == [], name
    refused = {**aggregate_cases.REFUSED, **aggregate_cases.NOT_AGGREGATED}
    for name, (rows, loc) in refused.items():
        response = http.post("/aggregate_metrics", **aggregate_cases.request_body(rows))
        assert response.status_code == 422, name
        assert [p["loc"] for p in response.json()["detail"]] == [loc], name


def test_H4_reverify_mode_is_stateless(http):
    response = http.get("/reverify_mode")
    assert response.status_code == 200 and response.json() == "stateless"


def _verify_body(calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    output = [
        {"type": "function_call", "call_id": f"c{i}", "name": n, "arguments": json.dumps(a)}
        for i, (n, a) in enumerate(calls)
    ]
    return {**TASK, "responses_create_params": {}, "response": {"output": output}}


def test_H5_verify_without_a_cookie_is_scored_by_replay(http):
    right = http.post("/verify", json=_verify_body([WRITE])).json()
    assert (right["reward"], right["mask_sample"], right["failure_kind"]) == (1.0, False, None)
    wrong = http.post("/verify", json=_verify_body([])).json()
    assert (wrong["reward"], wrong["mask_sample"]) == (0.0, False)
    # a cookie naming a session the service does not hold stays V4
    lost = CookieCodec(HTTP_SECRET, 3600).encode({"session_id": "h5-never-seeded"})
    http.cookies.set(COOKIE_NAME, lost)
    masked = http.post("/verify", json=_verify_body([WRITE])).json()
    assert (masked["reward"], masked["mask_sample"], masked["failure_kind"]) == (
        0.0,
        True,
        "session_lost",
    )


def test_H6_mcp_found_through_the_seed_metadata(env, http):
    tools = http.post("/seed_session", json=nemo_seed("h6")).json()["resources_tools"]
    url = str(http.base_url).rstrip("/") + tools["url_path"]

    async def main() -> list[Any]:
        async with (
            httpx.AsyncClient(headers=tools["headers"], timeout=HANG_S) as client,
            streamable_http_client(url, http_client=client) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return [
                await session.call_tool(WRITE[0], WRITE[1]),
                await session.call_tool("no_such_tool", {}),
            ]

    sent, unknown = anyio.run(main)
    assert not sent.isError
    assert [c.text for c in sent.content] == ['{"output":"Email sent successfully."}']
    assert sent.structuredContent == {"output": "Email sent successfully."}
    assert _emails(env.client, "h6") == 1  # on the seeded session
    assert unknown.isError and unknown.content[0].text.startswith("Unknown tool: 'no_such_tool'.")


# -- coverage of the contract -----------------------------------------------------------------

#: Every docs/contract.md case this service implements (K1-K6, checkpointing, are tested elsewhere).
CASES = (
    *(f"S{i}" for i in range(1, 9)),
    *(f"T{i}" for i in range(1, 8)),
    *(f"V{i}" for i in range(1, 6)),
    *(f"C{i}" for i in range(1, 6)),
    "X1",
    "X2",
    "X4",
    *(f"H{i}" for i in range(1, 7)),
    "X3",
    "A1",
)
#: Contract cases not implemented yet, and what they wait for (none now).
PENDING: dict[str, str] = {}
#: Contract cases whose tests live in a file of their own layer, not named after the case.
ELSEWHERE = {"V6": "tests/server/test_verify_body_bound.py"}
CONTRACT = REPO / "docs" / "contract.md"


def test_every_contract_case_has_a_test_named_after_it():
    from tests.server import test_contract_ops  # X2 on both transports, X3 and A1

    names = [name for name in (*globals(), *vars(test_contract_ops)) if name.startswith("test_")]
    missing = [case for case in CASES if not any(n.startswith(f"test_{case}_") for n in names)]
    assert missing == []
    # and the list above is the contract page's, checkpointing aside
    listed = re.findall(r"^\| ([A-Z]\d+) \|", CONTRACT.read_text(encoding="utf-8"), re.M)
    expected = sorted([*CASES, *PENDING, *ELSEWHERE])
    assert sorted(c for c in listed if not c.startswith("K")) == expected


@pytest.mark.parametrize(
    ("truth", "fields"),
    [
        ("1", ["ground_truth_json"]),
        ("true", ["ground_truth_json"]),
        ("1.5", ["ground_truth_json"]),
        ("null", ["ground_truth_json"]),
        # An object scored 1.0; items are typed as the reference types
        # them over HTTP (an array of objects whose values are strings)
        ('{"a": 1}', ["ground_truth_json"]),
        ("{}", ["ground_truth_json"]),
        ('["x"]', ["ground_truth_json[0]"]),
        ('[{"name": "email_send_email", "arguments": {}}]', ["ground_truth_json[0].arguments"]),
        (
            '[{"name": 1, "arguments": "{}"}, null]',
            ["ground_truth_json[0].name", "ground_truth_json[1]"],
        ),
    ],
)
def test_V5_ground_truth_json_of_another_shape_is_invalid_argument(env, truth, fields):
    env.client.seed("v5s", EP, TID, TASK)
    with pytest.raises(InvalidRequestError) as err:
        env.client.verify("v5s", [], ground_truth_json=truth)
    assert [v.field for v in err.value.violations] == fields
    # a JSON string (the reference's "change nothing") and a well-typed array are taken
    assert env.client.verify("v5s", [], ground_truth_json='"[]"').reward == 1.0
    odd = '[{"name": "email_send_email"}, {"arguments": "{}", "x": "y"}]'  # typed right: scored
    assert env.client.verify("v5s", [], ground_truth_json=odd).mask_sample is False


def test_V5_too_many_calls_is_invalid_argument(env):
    env.client.seed("v5big", EP, TID, TASK)
    with pytest.raises(InvalidRequestError) as err:
        env.client.verify("v5big", [WRITE] * 2001)
    assert [v.field for v in err.value.violations] == ["function_calls"]
    assert env.client.verify("v5big", [WRITE] * 3).reward == 0.0  # many is fine, too many not


# -- boundaries (each kills a one-line mutation of the service the suite once let through) ----

#: A tool that writes no compared table: a verify skips it without replaying it, so a long list
#: of them costs little.
READ = ("company_directory_find_email_address", {"name": "a"})


def _verify_with(client: EnvironmentClient, sid: str, side: str, calls: list[Any]) -> Any:
    """Verify ``calls`` on ``side`` of the request; the other side is the task's one write."""
    if side == "function_calls":
        return client.verify(sid, calls)
    if side == "response_output_json":
        items: list[dict[str, Any]] = [
            {"type": "function_call", "name": n, "arguments": json.dumps(a), "call_id": f"c{i}"}
            for i, (n, a) in enumerate(calls)
        ]
        # Not a call: the bound counts the function_call items only.
        done = {"type": "output_text", "text": "done", "annotations": []}
        items.append({"type": "message", "id": "m1", "role": "assistant", "content": [done]})
        return client.verify(sid, response_output=items)
    if side == "ground_truth":
        return client.verify(sid, [WRITE], ground_truth=calls)
    truth = [{"name": n, "arguments": json.dumps(a)} for n, a in calls]
    return client.verify(sid, [WRITE], ground_truth_json=json.dumps(truth))


@pytest.mark.parametrize(
    "side", ["function_calls", "response_output_json", "ground_truth", "ground_truth_json"]
)
def test_V5_a_verify_replays_at_most_2000_calls_on_each_side(env, side):
    # environment.proto, Verify: INVALID_ARGUMENT for more than 2,000 calls on either side.
    env.client.seed("v5edge", EP, TID, TASK)
    at_bound = [READ] * 1999 + [WRITE]
    assert _verify_with(env.client, "v5edge", side, at_bound).reward == 1.0
    with pytest.raises(InvalidRequestError) as err:
        _verify_with(env.client, "v5edge", side, [READ, *at_bound])
    assert_refused(err.value, grpc.StatusCode.INVALID_ARGUMENT, None, "v5edge")
    fields = [v.field for v in err.value.violations]
    assert fields in ([side], [side.removesuffix("_json")])  # the side that is too long
    assert env.client.verify("v5edge", [WRITE]).reward == 1.0  # the session is unchanged


@pytest.mark.parametrize("bound", [0, 2001])
def test_V5_a_raised_verify_bound_scores_2001_calls_on_grpc_and_the_co_hosted_gateway(
    make_server, bound
):
    """The bound is the ``max_verify_calls`` setting (0: none, as the reference, which scored
    2,001 read-only calls 1.0 where the default bound refuses them); the co-hosted gateway's
    in-process servicer applies the server's setting too."""
    served = make_server(None, Settings(max_verify_calls=bound))
    calls = [READ] * 2000 + [WRITE]
    for name, client in (
        ("grpc", served.client),
        ("in_process", in_process_client(served.running)),
    ):
        sid = f"v5raised-{name}"
        client.seed(sid, EP, TID, TASK)
        for side in ("function_calls", "ground_truth"):
            assert _verify_with(client, sid, side, calls).reward == 1.0, (name, side)


@pytest.mark.parametrize("backend", ["remote", "in_process"])
def test_V5_a_seeded_ground_truth_over_the_verify_bound_is_refused_at_every_seed(
    make_server, backend
):
    """A verify without a ground truth of its own replays the seeded task's, so the bound
    applies where the task enters: a typed or legacy gRPC seed, both HTTP seeds (legacy row,
    NeMo's typed body) of both gateway backends, and a restore, all refused INVALID_ARGUMENT
    (HTTP 422) naming the task's ground truth and the bound; nothing is bound. It was
    accepted, and the verify then replayed 20,000 calls (seconds of one core)."""
    served = make_server(None, Settings(max_verify_calls=3))
    over = {**TASK, "ground_truth": [TASK["ground_truth"][0]] * 4}
    at_bound = {**TASK, "ground_truth": [TASK["ground_truth"][0]] * 3}
    for sid, seed in (
        ("v5typed", lambda sid, task: served.raw.seed(sid, EP, TID, task)),
        ("v5legacy", served.raw.seed_legacy),
    ):
        with pytest.raises(InvalidRequestError) as err:
            seed(sid, over)
        assert_refused(err.value, grpc.StatusCode.INVALID_ARGUMENT, None, sid)
        [violation] = err.value.violations
        assert violation.field == "task.ground_truth"
        assert "at most 3 calls" in violation.description and "got 4" in violation.description
        seed(sid, at_bound)  # nothing was bound by the refusal
    gateway = gateway_on(backend, served.running)
    try:
        with httpx.Client(base_url=gateway.url, timeout=HANG_S) as http:
            legacy = http.post("/seed_session", json=over)
            assert legacy.status_code == 422, legacy.text
            [problem] = legacy.json()["detail"]
            assert problem["loc"][-1] == "ground_truth" and "at most 3" in problem["msg"]
            typed = http.post("/seed_session", json=nemo_seed("v5h", task_data=over))
            assert typed.status_code == 422, typed.text
            [problem] = typed.json()["detail"]
            assert problem["loc"] == ["body", "task_data", "ground_truth"]
            assert "at most 3" in problem["msg"]
            assert http.post("/seed_session", json=nemo_seed("v5h", task_data=at_bound)).is_success
    finally:
        gateway.stop()


def test_V5_a_restored_ground_truth_over_the_verify_bound_is_refused_and_0_is_no_bound(
    make_server,
):
    token = "v5-restore-token-0123456789"
    unbounded = make_server(
        None, Settings(max_verify_calls=0, admin_token=token), admin_token=token
    )
    bounded = make_server(None, Settings(max_verify_calls=3, admin_token=token), admin_token=token)
    long_task = {**TASK, "ground_truth": [TASK["ground_truth"][0]] * 4}
    unbounded.client.seed("v5r", EP, TID, long_task)  # 0: no bound
    assert unbounded.client.verify("v5r", [WRITE] * 4).reward == 1.0
    [snapshot] = unbounded.admin.export_sessions(["v5r"]).snapshots
    with pytest.raises(InvalidRequestError) as err:
        bounded.admin.restore_sessions([snapshot])
    assert [v.field for v in err.value.violations] == ["snapshots[0].task.ground_truth"]
    assert bounded.store.export(["v5r"])[0] == []  # nothing installed


def test_V5_a_response_output_that_is_not_an_array_is_named_and_why(env):
    env.client.seed("v5arr", EP, TID, TASK)
    with pytest.raises(InvalidRequestError) as err:
        env.client.verify("v5arr", response_output='{"type": "function_call"}')
    assert [(v.field, v.description) for v in err.value.violations] == [
        ("response_output_json", "not a JSON array: response output must be a JSON array")
    ]


def test_V3_a_resent_verify_that_differs_in_any_call_or_its_truth_is_scored_afresh(make_env):
    # V3: only an identical resend gets the remembered answer; any other is scored by replay.
    env = make_env(retry_window_s=30)
    env.client.seed_legacy("cookie-v3", TASK)
    assert env.client.verify("cookie-v3", [WRITE]).reward == 1.0
    assert env.client.verify("cookie-v3", [READ]).reward == 0.0  # another call, same count
    assert env.client.verify("cookie-v3", [WRITE], ground_truth=[]).reward == 0.0
    assert env.client.verify("cookie-v3", []).reward == 0.0
    again = env.client.verify("cookie-v3", [WRITE])
    assert (again.reward, again.mask_sample) == (1.0, False)


def test_V2_a_verified_legacy_id_is_remembered_for_exactly_the_retry_window(make_env):
    # V2/V3: remembered for the window, so at its last instant an identical resend answers the
    # same and a close finds a verified session (CLOSED); an instant later the id is forgotten.
    env = make_env(retry_window_s=30)
    for sid in ("cookie-edge", "cookie-past"):
        env.client.seed_legacy(sid, TASK)
        assert env.client.verify(sid, [WRITE]).reward == 1.0
    env.clock.now += 30
    again = env.client.verify("cookie-edge", [WRITE])
    assert (again.reward, again.mask_sample) == (1.0, False)
    assert env.client.close_session("cookie-edge", EP) == "CLOSED"
    env.clock.now += 0.5
    late = env.client.verify("cookie-past", [WRITE])
    assert (late.mask_sample, late.failure_kind) == (True, "session_lost")
    assert env.client.close_session("cookie-past", EP) == "NOT_SEEDED"


def test_X1_the_servers_own_sweep_evicts_idle_sessions(sandbox):
    # X1 through the server's background sweep (not a direct evict_idle() call): the idle
    # session is evicted and answers SESSION_EXPIRED, the one used within the TTL is kept, and
    # the eviction is counted in the metrics.
    clock = FakeClock()
    store = SessionStore(sandbox, SessionConfig(idle_ttl_s=60), clock=clock)
    running = start_server(store, "127.0.0.1:0", evict_interval_s=0.01)
    try:
        with EnvironmentClient(f"127.0.0.1:{running.port}", timeout_s=HANG_S) as client:
            client.seed("sweep-idle", EP, TID, TASK)
            client.seed("sweep-busy", ("rollout-2", 0), TID, TASK)
            clock.now += 45
            client.call_tool("sweep-busy", *WRITE)
            clock.now += 16  # sweep-idle: 61 s idle; sweep-busy: 16 s
            evictions = "workplace_env_evictions_total"
            deadline = time.monotonic() + HANG_S
            while running.metrics.registry.get_sample_value(evictions) != 1:
                # a condition, polled; the deadline only guards against a hang
                assert time.monotonic() < deadline, "the sweep never evicted the idle session"
                threading.Event().wait(0.01)
            assert store.live_count() == 1
            with pytest.raises(SessionExpiredError) as err:
                client.call_tool("sweep-idle", *WRITE)
            assert_refused(err.value, grpc.StatusCode.NOT_FOUND, "SESSION_EXPIRED", "sweep-idle")
            assert _emails(client, "sweep-busy") == 1
    finally:
        running.stop(grace_s=0)


# -- X4 over HTTP, and a repeated header on both transports ---------

X4_HEADER = "x-resources-session-id"


def _x4_refused(answer: httpx.Response) -> None:
    assert answer.status_code == 422, answer.text
    assert answer.json()["reason"] == "SESSION_HEADER_MISMATCH", answer.text
    assert answer.json()["failure_kind"] == "invalid_request"
    assert [d["loc"] for d in answer.json()["detail"]] == [["body", "resources_session_id"]]


@pytest.mark.parametrize(
    "headers",
    [
        [(X4_HEADER, "other")],
        [(X4_HEADER, "x4h"), (X4_HEADER, "other")],  # each value must name the body's id
        [(X4_HEADER, "other"), (X4_HEADER, "x4h")],
    ],
)
def test_X4_over_http_typed_seed_and_close_naming_another_session_change_nothing(
    env, http, headers
):
    own_form = {**nemo_seed("x4h")}
    own_form["task"] = own_form.pop("task_data")
    for body in (nemo_seed("x4h"), own_form):
        _x4_refused(http.post("/seed_session", json=body, headers=headers))
    # nothing was bound: another episode seeds the id
    env.client.seed("x4h", ("r-other", 0), TID, TASK)
    close = {"resources_session_id": "x4h", "episode_id": {"rollout_id": "r-other", "attempt": 0}}
    _x4_refused(http.post("/close_session", json=close, headers=headers))
    env.client.call_tool("x4h", *WRITE)  # still live: nothing was closed
    _x4_refused(http.post("/session_token", json={"resources_session_id": "x4h"}, headers=headers))
    # an unseeded id is not fenced by a refused close
    ghost = {"resources_session_id": "x4h-ghost", "episode_id": {"rollout_id": EP[0]}}
    _x4_refused(http.post("/close_session", json={**ghost}, headers=headers))
    env.client.seed("x4h-ghost", EP, TID, TASK)
    # the header naming the body's id, once or twice, passes
    both = [(X4_HEADER, "x4h"), (X4_HEADER, "x4h")]
    answer = http.post("/close_session", json=close, headers=both)
    assert answer.status_code == 200 and answer.headers["x-workplace-close-outcome"] == "CLOSED"


def test_X4_a_repeated_grpc_header_must_name_the_session_in_every_value(env):
    env.client.seed("x4-rep", EP, TID, TASK)
    with _raw_write(env, "x4-rep") as call:
        for metadata in (
            ((X4_HEADER, "x4-rep"), (X4_HEADER, "x4-other")),
            ((X4_HEADER, "x4-other"), (X4_HEADER, "x4-rep")),
        ):
            with pytest.raises(grpc.RpcError) as err:
                call(metadata=metadata)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert _error_info(err.value).reason == "SESSION_HEADER_MISMATCH"
        assert _emails(env.client, "x4-rep") == 0  # nothing ran
        call(metadata=((X4_HEADER, "x4-rep"), (X4_HEADER, "x4-rep")))
    assert _emails(env.client, "x4-rep") == 1


def test_X4_the_rule_checks_every_named_id_against_every_header_value():
    check_ids_against_header([], ["a", "b"])  # no header: nothing checked
    check_ids_against_header(["a", "a"], ["a"])
    check_ids_against_header(["a"], [])  # a request naming no session
    for headers, ids, bad in (
        (["b"], ["a"], ("b", "a")),
        (["a", "b"], ["a"], ("b", "a")),
        (["b", "a"], ["a"], ("b", "a")),
        (["a"], ["a", "c", "d"], ("a", "c")),  # the first id that differs
    ):
        with pytest.raises(SessionHeaderMismatch) as err:
            check_ids_against_header(headers, ids)
        assert (err.value.header, err.value.session_id) == bad
        assert err.value.reason == "SESSION_HEADER_MISMATCH"


def test_X4_both_transports_answer_the_rule_s_refusal_with_its_text(env, http):
    """One rule, two answers: gRPC's status (message, ErrorInfo, BadRequest) and HTTP's 422."""
    text = f"is 'x4-t' but the {X4_HEADER} header is 'x4-u'"
    env.client.seed("x4-t", EP, TID, TASK)
    with _raw_write(env, "x4-t") as call, pytest.raises(grpc.RpcError) as err:
        call(metadata=((X4_HEADER, "x4-u"),))
    assert err.value.details() == f"invalid request: resources_session_id: {text}"
    info = _error_info(err.value)
    assert (info.reason, dict(info.metadata)) == (
        "SESSION_HEADER_MISMATCH",
        {"resources_session_id": "x4-t", "rpc": "CallTool"},
    )
    bad = error_details_pb2.BadRequest()
    status = rpc_status.from_call(err.value)
    assert [d.Unpack(bad) for d in status.details if d.Is(bad.DESCRIPTOR)] == [True]
    assert [(v.field, v.description) for v in bad.field_violations] == [
        ("resources_session_id", text)
    ]
    answer = http.post(
        "/session_token", json={"resources_session_id": "x4-t"}, headers={X4_HEADER: "x4-u"}
    )
    assert answer.json() == {
        "detail": [{"type": "value_error", "loc": ["body", "resources_session_id"], "msg": text}],
        "failure_kind": "invalid_request",
        "reason": "SESSION_HEADER_MISMATCH",
    }
