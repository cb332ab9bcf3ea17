"""Bad input never crashes the server: every malformed request gets a known status, not INTERNAL.

Hypothesis draws arbitrary field values for every RPC (odd ids, JSON that is not an object, deeply
nested JSON, unknown tools, missing messages, negative attempts); each answer must be OK or one of
the CONTRACT's codes with an ErrorInfo reason, and the server must still serve afterwards.
"""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import local
from workplace.env.v1 import environment_pb2 as pb
from workplace.env.v1 import environment_pb2_grpc as pb_grpc

ALLOWED = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.FAILED_PRECONDITION,
}

ids = st.one_of(
    st.sampled_from(["s1", "s2", "", "a b", "x" * 257, "ok:id.1-2", "é"]),
    st.text(max_size=12),
)
json_texts = st.one_of(
    st.sampled_from(
        [
            "{}",
            "[]",
            "null",
            "5",
            '"x"',
            "{bad",
            "",
            "[" * 5000 + "]" * 5000,
            '{"a": ' * 3000 + "1" + "}" * 3000,
            '{"query": "C++"}',
            '{"name": null}',
        ]
    ),
    st.text(max_size=30),
)
tools = st.one_of(
    st.sampled_from(
        [
            "email_search_emails",
            "calendar_create_event",
            "customer_relationship_manager_add_customer",
            "nope",
            "",
        ]
    ),
    st.text(max_size=10),
)
calls = st.lists(st.builds(pb.FunctionCall, name=tools, arguments=json_texts), max_size=3)
episodes = st.one_of(
    st.none(), st.builds(pb.EpisodeId, rollout_id=ids, attempt=st.integers(-(2**31), 2**31 - 1))
)
task_ids = st.one_of(st.none(), st.builds(pb.TaskId, taskset=ids, task_id=ids))
tasks = st.one_of(
    st.none(),
    st.builds(
        pb.WorkplaceTask,
        id=ids,
        ground_truth=calls,
        environment_name=st.sampled_from(["", "workplace_assistant", "x"]),
    ),
)


@pytest.fixture(scope="module")
def stub(server):
    with grpc.insecure_channel(local(server.port)) as channel:
        yield pb_grpc.EnvironmentServiceStub(channel)


def _check(fn, request) -> None:
    try:
        fn(request, timeout=30)
    except grpc.RpcError as exc:
        assert exc.code() in ALLOWED, f"{exc.code()}: {exc.details()}"
        status = rpc_status.from_call(exc)
        assert status is not None and any(
            d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR) for d in status.details
        ), "error without ErrorInfo"


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sid=ids, episode=episodes, task_id=task_ids, task=tasks, legacy=st.booleans())
def test_seed_session_never_crashes(stub, sid, episode, task_id, task, legacy):
    request = pb.SeedSessionRequest(resources_session_id=sid, legacy=legacy)
    for field, value in (("episode_id", episode), ("task_id", task_id), ("task", task)):
        if value is not None:
            getattr(request, field).CopyFrom(value)
    _check(stub.SeedSession, request)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sid=ids, tool=tools, arguments=json_texts, call_id=st.sampled_from(["", "c1", "c2"]))
def test_call_tool_never_crashes(stub, sid, tool, arguments, call_id):
    _check(
        stub.CallTool,
        pb.CallToolRequest(
            resources_session_id=sid, tool_name=tool, arguments=arguments, call_id=call_id
        ),
    )


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sid=ids,
    predicted=st.one_of(st.none(), calls, json_texts),
    truth=st.one_of(st.none(), calls, json_texts),
)
def test_verify_never_crashes(stub, sid, predicted, truth):
    request = pb.VerifyRequest(resources_session_id=sid)
    if isinstance(predicted, list):
        request.function_calls.SetInParent()
        request.function_calls.calls.extend(predicted)
    elif isinstance(predicted, str):
        request.response_output_json = predicted
    if isinstance(truth, list):
        request.ground_truth.SetInParent()
        request.ground_truth.calls.extend(truth)
    elif isinstance(truth, str):
        request.ground_truth_json = truth
    _check(stub.Verify, request)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sid=ids, episode=episodes)
def test_close_session_never_crashes(stub, sid, episode):
    request = pb.CloseSessionRequest(resources_session_id=sid)
    if episode is not None:
        request.episode_id.CopyFrom(episode)
    _check(stub.CloseSession, request)


def test_seeded_session_survives_hostile_calls(stub):
    task = pb.WorkplaceTask(id="t")
    stub.SeedSession(
        pb.SeedSessionRequest(
            resources_session_id="hostile",
            episode_id=pb.EpisodeId(rollout_id="r"),
            task_id=pb.TaskId(taskset="a", task_id="t"),
            task=task,
        )
    )
    for arguments in ('{"a": ' * 3000 + "1" + "}" * 3000, "[" * 5000 + "]" * 5000, "{bad"):
        _check(
            stub.CallTool,
            pb.CallToolRequest(
                resources_session_id="hostile", tool_name="email_search_emails", arguments=arguments
            ),
        )
    out = stub.CallTool(
        pb.CallToolRequest(
            resources_session_id="hostile",
            tool_name="company_directory_find_email_address",
            arguments='{"name": "zzzz"}',
        )
    )
    assert out.output == "[]"
