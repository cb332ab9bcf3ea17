"""Every error fits in gRPC's trailers, whatever the request held.

An error echoes values of the request (the session id in ``ErrorInfo``, ids and texts in its
message and ``BadRequest``). Echoed whole, a 20,000-character id made the trailer larger than a
client accepts, and the answer became ``RESOURCE_EXHAUSTED "Stream removed (received metadata
size exceeds hard limit ...)"`` (the SDK's retryable-looking ``CapacityError``). Each case
here is one such input; the answer must be the error it is, with its field named, and the
whole status must stay under 8 KiB (gRPC's default soft limit on received metadata).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tests.helpers import Served
from workplace.env.v1 import admin_pb2 as admin_pb
from workplace.env.v1 import admin_pb2_grpc as admin_grpc
from workplace.env.v1 import environment_pb2 as pb
from workplace.env.v1 import environment_pb2_grpc as pb_grpc
from workplace_env.config import Settings
from workplace_env.errors import (
    MAX_ECHO_BYTES,
    FieldViolation,
    InvalidRequest,
    SessionError,
    clip,
)
from workplace_env.sessions import SessionStore
from workplace_env_client import InvalidRequestError

LONG = 20_000
TOKEN = "error-bounds-admin-token-0123"
AUTH = (("authorization", f"Bearer {TOKEN}"),)


def _seed(sid: str, rollout: str = "r1", task: pb.WorkplaceTask | None = None) -> Any:
    return pb.SeedSessionRequest(
        resources_session_id=sid,
        episode_id=pb.EpisodeId(rollout_id=rollout),
        task_id=pb.TaskId(taskset="x", task_id="t1"),
        task=task or pb.WorkplaceTask(id="t1"),
    )


def _verify(sid: str, **prediction: Any) -> Any:
    prediction = prediction or {"function_calls": pb.FunctionCallList()}
    return pb.VerifyRequest(resources_session_id=sid, **prediction)


BAD_CALLS = [pb.FunctionCall(name="", arguments="x")] * 1000
#: (name, rpc, request, metadata, code, first violation's field or None)
CASES: list[tuple[str, str, Any, tuple[tuple[str, str], ...], grpc.StatusCode, str | None]] = [
    (
        "seed id",
        "SeedSession",
        _seed("a" * LONG),
        (),
        grpc.StatusCode.INVALID_ARGUMENT,
        "resources_session_id",
    ),
    (
        "call id",
        "CallTool",
        pb.CallToolRequest(resources_session_id="a" * LONG, tool_name="x"),
        (),
        grpc.StatusCode.INVALID_ARGUMENT,
        "resources_session_id",
    ),
    (
        "verify id",
        "Verify",
        _verify("a" * LONG),
        (),
        grpc.StatusCode.INVALID_ARGUMENT,
        "resources_session_id",
    ),
    (
        "close id",
        "CloseSession",
        pb.CloseSessionRequest(
            resources_session_id="a" * LONG, episode_id=pb.EpisodeId(rollout_id="r")
        ),
        (),
        grpc.StatusCode.INVALID_ARGUMENT,
        "resources_session_id",
    ),
    (
        "call_id",
        "CallTool",
        pb.CallToolRequest(
            resources_session_id="live",
            tool_name="email_search_emails",
            arguments="{}",
            call_id="c" * LONG,
        ),
        (),
        grpc.StatusCode.INVALID_ARGUMENT,
        "call_id",
    ),
    (
        "a seed of a long rollout",  # past the id bound: refused before any conflict
        "SeedSession",
        _seed("live", rollout="r" * LONG),
        (),
        grpc.StatusCode.INVALID_ARGUMENT,
        "episode_id.rollout_id",
    ),
    (
        "a close for a long rollout",
        "CloseSession",
        pb.CloseSessionRequest(
            resources_session_id="live", episode_id=pb.EpisodeId(rollout_id="q" * LONG)
        ),
        (),
        grpc.StatusCode.INVALID_ARGUMENT,
        "episode_id.rollout_id",
    ),
    (
        "a conflicting rollout at the id bound",
        "SeedSession",
        _seed("live", rollout="r" * 256),
        (),
        grpc.StatusCode.ALREADY_EXISTS,
        None,
    ),
    (
        "a close for another rollout at the id bound",
        "CloseSession",
        pb.CloseSessionRequest(
            resources_session_id="live", episode_id=pb.EpisodeId(rollout_id="q" * 256)
        ),
        (),
        grpc.StatusCode.FAILED_PRECONDITION,
        None,
    ),
    (
        "1,000 bad ground-truth calls",
        "SeedSession",
        _seed("many", task=pb.WorkplaceTask(id="t", ground_truth=BAD_CALLS)),
        (),
        grpc.StatusCode.INVALID_ARGUMENT,
        "task.ground_truth[0].name",
    ),
    (
        "a header mismatch with a long id",
        "CloseSession",
        pb.CloseSessionRequest(
            resources_session_id="b" * LONG, episode_id=pb.EpisodeId(rollout_id="r")
        ),
        (("x-resources-session-id", "zz"),),
        grpc.StatusCode.INVALID_ARGUMENT,
        "resources_session_id",
    ),
    (
        "an output item of a long type",
        "Verify",
        _verify("live", response_output_json='[{"type": "' + "y" * LONG + '"}]'),
        (),
        grpc.StatusCode.INVALID_ARGUMENT,
        "response_output_json[0]",
    ),
    (
        "2,000 malformed output items",
        "Verify",
        _verify(
            "live", response_output_json="[" + ",".join(['{"type": "function_call"}'] * 2000) + "]"
        ),
        (),
        grpc.StatusCode.INVALID_ARGUMENT,
        "response_output_json[0].function_call.arguments",
    ),
    (
        "retire id",
        "RetireSession",
        admin_pb.RetireSessionRequest(resources_session_id="c" * LONG),
        AUTH,
        grpc.StatusCode.INVALID_ARGUMENT,
        "resources_session_id",
    ),
    (
        "restore of a long id",
        "RestoreSessions",
        admin_pb.RestoreSessionsRequest(
            snapshots=[admin_pb.SessionSnapshot(resources_session_id="c" * LONG, state_json="{")]
        ),
        AUTH,
        grpc.StatusCode.INVALID_ARGUMENT,
        "snapshots[0].state_json",
    ),
]


@pytest.fixture(scope="module")
def served(sandbox) -> Any:
    running = Served.start(SessionStore(sandbox), Settings(admin_token=TOKEN), TOKEN)
    running.client.seed("live", ("r1", 0), ("x", "t1"), {"id": "t1"})
    yield running
    running.stop()


@pytest.fixture(scope="module")
def channel(served: Any) -> Any:
    with grpc.insecure_channel(served.target) as channel:
        yield channel


def _invoke(channel: grpc.Channel, rpc: str) -> Callable[..., Any]:
    if rpc in ("RetireSession", "RestoreSessions"):
        method = getattr(admin_grpc.EnvironmentAdminServiceStub(channel), rpc)
        if rpc == "RestoreSessions":
            return lambda request, **kw: method(iter([request]), **kw)
        return method
    return getattr(pb_grpc.EnvironmentServiceStub(channel), rpc)


@pytest.mark.parametrize(
    ("name", "rpc", "request_", "metadata", "code", "field"), CASES, ids=[c[0] for c in CASES]
)
def test_an_error_echoing_an_over_long_value_still_fits_the_trailers(
    channel, name, rpc, request_, metadata, code, field
):
    with pytest.raises(grpc.RpcError) as err:
        _invoke(channel, rpc)(request_, metadata=metadata, timeout=30)
    assert err.value.code() == code, err.value.details()
    status = rpc_status.from_call(err.value)
    assert status is not None
    # the trailers: grpc-message and the Status (base64, 4/3 of its size)
    assert len(status.SerializeToString()) * 4 // 3 + 3 * len(status.message.encode()) < 8192
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    assert len(info.metadata["resources_session_id"].encode()) <= MAX_ECHO_BYTES
    if field is not None:
        bad = error_details_pb2.BadRequest()
        assert status.details[1].Unpack(bad)
        assert bad.field_violations[0].field == field


def test_the_sdk_gets_invalid_request_naming_the_id_not_capacity(served):
    with pytest.raises(InvalidRequestError) as err:
        served.raw.seed("a" * LONG, ("r", 0), ("ts", "t"), {"id": "t"})
    assert [v.field for v in err.value.violations] == ["resources_session_id"]
    assert err.value.session_id.startswith("a" * 100)
    assert f"...({LONG} characters)..." in err.value.session_id


def test_clip_bounds_utf8_bytes_and_says_how_long_the_value_was():
    assert clip("a" * MAX_ECHO_BYTES) == "a" * MAX_ECHO_BYTES  # fits: unchanged
    clipped = clip("é" * 1000, 64)
    assert len(clipped.encode()) <= 64 and "é...(1000 characters)...é" in clipped
    assert clipped.startswith("é" * 10)  # cut on a character, never inside one
    why = clip("arguments" + ".query" * 200 + ": nested deeper than 128 levels", 128)
    assert why.endswith(": nested deeper than 128 levels")  # the end, which says why, is kept
    assert len(SessionError("x" * 5000, "s" * 5000).message.encode()) <= 512
    # each listed violation costs its bytes and 8 of framing: 11 of 267 fit in 3072
    many = InvalidRequest([FieldViolation(f"f{i:02}", "d" * 900) for i in range(20)], "s")
    assert [v.field for v in many.violations] == [f"f{i:02}" for i in range(11)] + [""]
    assert many.violations[-1].description == "and 9 more violations"
    assert all(len(v.description.encode()) <= 256 for v in many.violations)
