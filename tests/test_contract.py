"""CONTRACT.md cases over gRPC: one test per case, named after it, against a real server.

Runs on the embedded default sandbox, so it needs nothing from ../shared. Each test would fail
on the reference's behaviour (which resets state on a repeated seed, answers lost sessions with
400, and has no fences).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from workplace.env.v1 import environment_pb2 as pb
from workplace_env.sandbox.load import load_sandbox
from workplace_env.sandbox.tables import TablesUnavailableError
from workplace_env.server.app import start_server
from workplace_env.server.status import DOMAIN
from workplace_env.sessions import SessionConfig, SessionStore
from workplace_env_client import (
    CallIdReusedError,
    CapacityError,
    EnvironmentClient,
    EpisodeMismatchError,
    InvalidRequestError,
    SessionClosedError,
    SessionConflictError,
    SessionLostError,
    UnavailableError,
)

EP = ("rollout-1", 0)
TID = ("unit", "task-1")
WRITE = ("email_send_email", {"recipient": "a@b.com", "subject": "hello", "body": "hi"})
TASK = {
    "id": "task-1",
    "category": "email",
    "ground_truth": [{"name": WRITE[0], "arguments": json.dumps(WRITE[1])}],
}


class FakeClock:
    """A settable clock so TTL tests need no sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Env:
    client: EnvironmentClient
    store: SessionStore
    clock: FakeClock


@pytest.fixture(scope="module")
def sandbox():
    return load_sandbox(None)


@pytest.fixture
def make_env(sandbox) -> Iterator:
    servers = []

    def make(**config) -> Env:
        clock = FakeClock()
        store = SessionStore(sandbox, SessionConfig(**config), clock=clock)
        server = start_server(store, "127.0.0.1:0")
        client = EnvironmentClient(f"127.0.0.1:{server.port}", timeout_s=10)
        servers.append((server, client))
        return Env(client, store, clock)

    yield make
    for server, client in servers:
        client.close()
        server.stop(grace_s=0.2)


@pytest.fixture
def env(make_env) -> Env:
    return make_env()


def _emails(client: EnvironmentClient, sid: str) -> int:
    out = client.call_tool(sid, "email_search_emails", {"query": "hello", "page_size": 100})
    return 0 if isinstance(out, str) else out["pagination"]["total_emails"]


def _error_info(exc: grpc.RpcError) -> error_details_pb2.ErrorInfo:
    status = rpc_status.from_call(exc)
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    raise AssertionError("no ErrorInfo in the status")


def test_S1_seed_new_id_builds_tables_then_binds(env):
    response = env.client.seed("s1", EP, TID, TASK)
    assert response.state == pb.SESSION_STATE_SEEDED and not response.already_seeded
    assert env.store.live_count() == 1
    assert _emails(env.client, "s1") == 0


def test_S2_repeated_seed_keeps_mutations(env):
    env.client.seed("s2", EP, TID, TASK)
    env.client.call_tool("s2", *WRITE)
    again = env.client.seed("s2", EP, TID, TASK)
    assert again.already_seeded
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
    assert err.value.code == grpc.StatusCode.ALREADY_EXISTS
    assert err.value.reason == "SESSION_CONFLICT" and err.value.session_id == "s3"
    assert _emails(env.client, "s3") == 1  # unchanged


def test_S4_seed_after_close_is_refused(env):
    env.client.seed("s4", EP, TID, TASK)
    env.client.close_session("s4", EP)
    with pytest.raises(SessionClosedError) as err:
        env.client.seed("s4", EP, TID, TASK)
    assert err.value.code == grpc.StatusCode.ALREADY_EXISTS
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
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert field in [v.field for v in err.value.violations]
    assert env.store.live_count() == 0
    if sid == "s5":  # no binding and no fence: a later valid seed succeeds
        assert not env.client.seed("s5", EP, TID, TASK).already_seeded


def test_S5_missing_messages_are_required(env):
    stub = env.client.stub
    with pytest.raises(grpc.RpcError) as err:
        stub.SeedSession(pb.SeedSessionRequest(resources_session_id="s5b"), timeout=5)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    status = rpc_status.from_call(err.value)
    bad = error_details_pb2.BadRequest()
    assert any(d.Unpack(bad) for d in status.details if d.Is(bad.DESCRIPTOR))
    assert {v.field for v in bad.field_violations} == {"episode_id", "task_id", "task"}


def test_S6_table_build_failure_is_unavailable_and_retryable(env):
    real = env.store.table_factory

    def failing():
        env.store.table_factory = real
        raise TablesUnavailableError("EMFILE: too many open files")

    env.store.table_factory = failing
    with pytest.raises(UnavailableError) as err:
        env.client.seed("s6", EP, TID, TASK)
    assert err.value.reason == "TABLES_UNAVAILABLE"
    assert env.store.live_count() == 0
    assert not env.client.seed("s6", EP, TID, TASK).already_seeded


def test_S7_capacity_is_resource_exhausted_with_retry_info(make_env):
    env = make_env(max_sessions=2, retry_after_s=2.5)
    env.client.seed("a", EP, TID, TASK)
    env.client.seed("b", ("rollout-b", 0), TID, TASK)
    with pytest.raises(CapacityError) as err:
        env.client.seed("c", ("rollout-c", 0), TID, TASK)
    assert err.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert err.value.retry_after_s == 2.5
    assert env.store.live_count() == 2


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
    assert err.value.reason == "INVALID_TOOL_ARGUMENTS"


@pytest.mark.parametrize("how", ["never_seeded", "evicted"])
def test_T4_call_on_unheld_session_is_not_found(make_env, how):
    env = make_env(idle_ttl_s=60)
    if how == "evicted":
        env.client.seed("t4", EP, TID, TASK)
        env.clock.now += 61
        assert env.store.evict_idle() == 1
    with pytest.raises(SessionLostError) as err:
        env.client.call_tool("t4", *WRITE)
    assert err.value.code == grpc.StatusCode.NOT_FOUND
    assert err.value.reason == ("SESSION_LOST" if how == "never_seeded" else "SESSION_EXPIRED")
    assert env.store.live_count() == 0


def test_T5_call_on_closed_session_is_not_found_closed(env):
    env.client.seed("t5", EP, TID, TASK)
    env.client.close_session("t5", EP)
    with pytest.raises(SessionClosedError) as err:
        env.client.call_tool("t5", *WRITE)
    assert err.value.code == grpc.StatusCode.NOT_FOUND


def test_T6_repeated_call_id_is_not_executed_twice(env):
    env.client.seed("t6", EP, TID, TASK)
    first = env.client.call_tool("t6", *WRITE, call_id="c-1")
    second = env.client.call_tool("t6", *WRITE, call_id="c-1")
    assert first == second == "Email sent successfully."
    assert _emails(env.client, "t6") == 1


def test_T7_call_id_reused_with_other_arguments(env):
    env.client.seed("t7", EP, TID, TASK)
    env.client.call_tool("t7", *WRITE, call_id="c-1")
    with pytest.raises(CallIdReusedError) as err:
        env.client.call_tool("t7", WRITE[0], {**WRITE[1], "subject": "other"}, call_id="c-1")
    assert err.value.code == grpc.StatusCode.ALREADY_EXISTS
    assert _emails(env.client, "t7") == 1


def test_V1_verify_scores_from_the_request_not_the_live_tables(env):
    env.client.seed("v1", EP, TID, TASK)
    env.client.call_tool("v1", *WRITE)  # the live tables already hold the right state ...
    assert env.client.verify("v1", []).reward == 0.0  # ... but the prediction made no calls
    result = env.client.verify("v1", [WRITE])
    assert result.reward == 1.0 and not result.mask_sample
    assert {t.table for t in result.tables} >= {"email._emails"}
    assert _emails(env.client, "v1") == 1  # tables kept until close


def test_V1_verify_reports_which_table_differs(env):
    env.client.seed("v1b", EP, TID, TASK)
    result = env.client.verify("v1b", [])
    diff = [t for t in result.tables if not t.equal]
    assert [t.table for t in diff] == ["email._emails"]
    assert diff[0].expected_rows == diff[0].predicted_rows + 1


def test_V1_verify_accepts_raw_response_output(env):
    env.client.seed("v1c", EP, TID, TASK)
    output = [
        {"type": "reasoning", "summary": []},
        {
            "type": "function_call",
            "name": WRITE[0],
            "arguments": json.dumps(WRITE[1]),
            "call_id": "x",
        },
        {"type": "function_call_output", "call_id": "x", "output": "Email sent successfully."},
        {"type": "message", "content": [{"type": "output_text", "text": "done"}]},
    ]
    assert env.client.verify("v1c", response_output=output).reward == 1.0


def test_V4_verify_unheld_session_is_masked_session_lost(env):
    result = env.client.verify("never-seeded", [WRITE])
    assert (result.reward, result.mask_sample, result.failure_kind) == (0.0, True, "session_lost")
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
        env.client.stub.Verify(request, timeout=5)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


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


def test_C3_close_never_seeded_records_fence(env):
    assert env.client.close_session("c3", EP) == "NOT_SEEDED"
    with pytest.raises(SessionClosedError):  # a late seed gets S4
        env.client.seed("c3", EP, TID, TASK)


def test_C4_close_with_other_episode_is_failed_precondition(env):
    env.client.seed("c4", EP, TID, TASK)
    with pytest.raises(EpisodeMismatchError) as err:
        env.client.close_session("c4", ("rollout-other", 0))
    assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert env.store.live_count() == 1


def test_errors_carry_error_info_with_domain_and_session(env):
    with pytest.raises(grpc.RpcError) as err:
        env.client.stub.CallTool(
            pb.CallToolRequest(resources_session_id="ghost", tool_name="x", arguments="{}"),
            timeout=5,
        )
    info = _error_info(err.value)
    assert (info.reason, info.domain) == ("SESSION_LOST", DOMAIN)
    assert info.metadata["resources_session_id"] == "ghost"


def test_list_tools_gives_27_schemas(env):
    tools = env.client.list_tools()
    assert len(tools) == 27
    assert tools[0]["name"] == "company_directory_find_email_address"
    assert all(t["type"] == "function" and "parameters" in t for t in tools)


def test_V2_legacy_verify_releases_tables(env):
    env.client.seed_legacy("cookie-1", TASK)
    env.client.call_tool("cookie-1", *WRITE)
    assert env.client.verify("cookie-1", [WRITE]).reward == 1.0
    assert env.store.live_count() == 0
    with pytest.raises(SessionLostError):
        env.client.call_tool("cookie-1", *WRITE)


def test_V3_legacy_verify_resent_inside_window_scores_the_same(make_env):
    env = make_env(retry_window_s=30)
    env.client.seed_legacy("cookie-2", TASK)
    first = env.client.verify("cookie-2", [WRITE])
    env.clock.now += 29
    again = env.client.verify("cookie-2", [WRITE])
    assert (again.reward, again.mask_sample) == (first.reward, False) == (1.0, False)
    env.clock.now += 2  # past the window: the id is forgotten
    assert env.client.verify("cookie-2", [WRITE]).failure_kind == "session_lost"


def test_legacy_reseed_rebuilds_fresh_tables(env):
    env.client.seed_legacy("cookie-3", TASK)
    env.client.call_tool("cookie-3", *WRITE)
    assert env.client.seed_legacy("cookie-3", TASK).rebuilt
    assert _emails(env.client, "cookie-3") == 0
    assert env.store.live_count() == 1


def test_legacy_and_typed_ids_do_not_mix(env):
    env.client.seed("typed-1", EP, TID, TASK)
    with pytest.raises(SessionConflictError):
        env.client.seed_legacy("typed-1", TASK)
    env.client.seed_legacy("cookie-4", TASK)
    with pytest.raises(SessionConflictError):
        env.client.seed("cookie-4", EP, TID, TASK)
