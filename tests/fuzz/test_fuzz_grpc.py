"""Fuzz every RPC of the gRPC server: hostile messages never crash it or touch another
session.

Each example sends one request as raw bytes: a message built from hostile values (JSON texts
with lone surrogates, giant integers, NaN, deep nesting), the same with a string field
overridden by ill-formed UTF-8, a byte-mutated or truncated message, or garbage. Every answer
must be OK or a status other than UNKNOWN/INTERNAL (the service's own errors with an
``ErrorInfo``), and a well-behaved session seeded first must keep its exact state and export.
Budget and the long run: :mod:`tests.fuzz_inputs`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2
from grpc_status import rpc_status
from hypothesis import given
from hypothesis import strategies as st

from tests import fuzz_inputs as fz
from tests.helpers import local
from workplace.env.v1 import admin_pb2 as admin_pb
from workplace.env.v1 import environment_pb2 as pb
from workplace_env.config import Settings
from workplace_env.server.app import RunningServer
from workplace_env.sessions import SessionConfig
from workplace_env_client import AdminClient, EnvironmentClient, WorkplaceEnvError

ENV = "/workplace.env.v1.EnvironmentService/"
ADMIN = "/workplace.env.v1.EnvironmentAdminService/"
CRASHES = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}
SEND = ("email_send_email", '{"recipient": "w@b.com", "subject": "well", "body": "behaved"}')


def _identity(data: bytes) -> bytes:
    return data


#: A store big enough for every fuzzed seed; the admin RPCs open (loopback) to watch a session.
pytestmark = pytest.mark.server(
    config=SessionConfig(max_sessions=5000), settings=Settings(admin_open=True)
)


class Target:
    """The fuzzed server, raw callables per method, and the watched session's snapshot."""

    def __init__(self, running: RunningServer) -> None:
        self.running = running
        self.address = local(running.port)
        self.channel = grpc.insecure_channel(self.address)
        self.client = EnvironmentClient(channel=self.channel, timeout_s=30)
        self.admin = AdminClient(channel=self.channel, timeout_s=30)
        self.client.seed(fz.WELL_BEHAVED, ("well", 0), ("fuzz", "w"), {"id": "w"})
        self.client.call_tool_raw(fz.WELL_BEHAVED, *SEND)
        self.call_ids: set[str] | None = None
        self.snapshot = self._watched()
        self.call_ids = {record.call_id for record in self.snapshot.call_records}
        self.started = time.monotonic()

    def _watched(self) -> admin_pb.SessionSnapshot:
        snapshots, missing, failures = self.admin.export_sessions([fz.WELL_BEHAVED])
        assert (missing, list(failures)) == ([], []), (missing, failures)
        (snapshot,) = snapshots
        return fz.stable_snapshot(snapshot, self.call_ids)

    def check_watched(self) -> None:
        """The well-behaved session: same state and export, and it still answers. A run
        longer than the call records' TTL (T6; a long fuzz run) compares it without them."""
        watched, expected = self._watched(), self.snapshot
        if time.monotonic() - self.started >= SessionConfig().call_id_ttl_s:
            del watched.call_records[:]
            expected = type(expected)()
            expected.CopyFrom(self.snapshot)
            del expected.call_records[:]
        assert watched == expected
        out = self.client.call_tool_raw(
            fz.WELL_BEHAVED, "email_search_emails", '{"query": "behaved"}'
        )
        assert '"behaved"' in out

    def unary(self, method: str) -> Any:
        return self.channel.unary_unary(
            method, request_serializer=_identity, response_deserializer=_identity
        )


@pytest.fixture(scope="module")
def target(server) -> Iterator[Target]:
    t = Target(server)
    yield t
    fz.write_report()
    t.check_watched()
    snapshots, _, failures = t.admin.export_sessions()  # one checkpoint of everything
    assert fz.WELL_BEHAVED in {s.resources_session_id for s in snapshots}
    assert fz.WELL_BEHAVED not in failures
    t.client.close()
    t.admin.close()
    t.channel.close()


def _answer_ok(error: grpc.RpcError | None, method: str) -> None:
    fz.seen(method.rsplit("/", 1)[-1], grpc.StatusCode.OK if error is None else error.code())
    if error is None:
        return
    assert error.code() not in CRASHES, f"{method}: {error.code()} {error.details()}"
    if method.startswith((ENV, ADMIN)) and error.code() != grpc.StatusCode.CANCELLED:
        status = rpc_status.from_call(error)
        assert status is not None and any(
            d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR) for d in status.details
        ), f"{method}: {error.code()} without ErrorInfo: {error.details()}"


def _send(target: Target, method: str, data: bytes) -> None:
    fz.count(method.rsplit("/", 1)[-1])
    try:
        target.unary(method)(data, timeout=30)
        error = None
    except grpc.RpcError as exc:
        error = exc
    _answer_ok(error, method)
    if sum(fz.COUNTS.values()) % 97 == 0:
        target.check_watched()


# -- raw message forms ---------------------------------------------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _string_field(number: int, text: str) -> bytes:
    """A length-delimited field ``number`` holding ``text`` as (possibly ill-formed) UTF-8."""
    payload = fz.surrogate_utf8(text)
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def raw_forms(messages: st.SearchStrategy[Any], string_fields: tuple[int, ...]) -> Any:
    """Raw request bytes: the message, with an ill-formed string field, mutated, or garbage."""
    serialized = messages.map(lambda m: m.SerializeToString())
    return st.one_of(
        serialized,
        st.builds(
            lambda data, number, text: data + _string_field(number, text),
            serialized,
            st.sampled_from(string_fields),
            fz.hostile_text,
        ),
        st.builds(fz.mutate, serialized, fz.edits, fz.cuts),
        fz.garbage,
    )


clean_ids = fz.ids.map(fz.clean).filter(lambda s: s != fz.WELL_BEHAVED)
clean_text = fz.hostile_text.map(fz.clean)
json_fields = fz.json_texts.map(fz.clean)
function_calls = st.lists(
    st.builds(pb.FunctionCall, name=fz.tools.map(fz.clean), arguments=json_fields), max_size=3
)
episodes = st.builds(pb.EpisodeId, rollout_id=clean_ids, attempt=st.integers(-(2**31), 2**31 - 1))
task_ids = st.builds(pb.TaskId, taskset=clean_ids, task_id=clean_ids)
tasks = st.builds(
    pb.WorkplaceTask,
    id=clean_text,
    ground_truth=function_calls,
    environment_name=st.sampled_from(["", "workplace_assistant", "x"]),
    prompt=clean_text,
)
seeds = st.builds(
    pb.SeedSessionRequest,
    resources_session_id=clean_ids,
    episode_id=st.one_of(st.none(), episodes),
    task_id=st.one_of(st.none(), task_ids),
    task=st.one_of(st.none(), tasks),
    legacy=st.booleans(),
)
tool_calls = st.builds(
    pb.CallToolRequest,
    resources_session_id=st.one_of(st.sampled_from(["s1", "s2", "fz:1"]), clean_ids),
    tool_name=fz.tools.map(fz.clean),
    arguments=json_fields,
    call_id=st.sampled_from(["", "c1", "c2"]),
)


@st.composite
def verifies(draw: st.DrawFn) -> pb.VerifyRequest:
    request = pb.VerifyRequest(resources_session_id=draw(clean_ids))
    form = draw(st.sampled_from(["calls", "raw", "items", "none"]))
    if form == "calls":
        request.function_calls.SetInParent()
        request.function_calls.calls.extend(draw(function_calls))
    elif form == "raw":
        request.response_output_json = draw(json_fields)
    elif form == "items":
        items = fz.response_items(draw(fz.calls))
        request.response_output_json = fz.clean(fz._dump(items))
    truth = draw(st.sampled_from(["calls", "json", "none"]))
    if truth == "calls":
        request.ground_truth.SetInParent()
        request.ground_truth.calls.extend(draw(function_calls))
    elif truth == "json":
        request.ground_truth_json = draw(json_fields)
    return request


closes = st.builds(
    pb.CloseSessionRequest,
    resources_session_id=clean_ids,
    episode_id=st.one_of(st.none(), episodes),
)


@given(data=raw_forms(seeds, (1, 4)))
@fz.FUZZ
def test_fuzz_seed_session(target, data):
    _send(target, ENV + "SeedSession", data)


@given(data=raw_forms(tool_calls, (1, 2, 3, 4)), seed_first=st.booleans())
@fz.FUZZ
def test_fuzz_call_tool(target, data, seed_first):
    if seed_first:  # tool calls that reach a live session's tables
        for sid in ("s1", "s2", "fz:1"):
            # closed, or bound by an earlier example: fine
            with contextlib.suppress(WorkplaceEnvError):
                target.client.seed(sid, ("fz", 0), ("fuzz", "t"), {"id": "t"})
    _send(target, ENV + "CallTool", data)


@given(data=raw_forms(verifies(), (1, 3, 5)))
@fz.FUZZ
def test_fuzz_verify(target, data):
    _send(target, ENV + "Verify", data)


@given(data=raw_forms(closes, (1,)))
@fz.FUZZ
def test_fuzz_close_session(target, data):
    _send(target, ENV + "CloseSession", data)


@given(data=st.one_of(st.just(b""), fz.garbage))
@fz.FUZZ
def test_fuzz_list_tools(target, data):
    _send(target, ENV + "ListTools", data)


@given(
    data=raw_forms(st.builds(admin_pb.RetireSessionRequest, resources_session_id=clean_ids), (1,))
)
@fz.FUZZ
def test_fuzz_retire_session(target, data):
    _send(target, ADMIN + "RetireSession", data)


@given(
    data=raw_forms(
        st.builds(
            admin_pb.ExportSessionsRequest, resources_session_ids=st.lists(clean_ids, max_size=3)
        ),
        (1,),
    )
)
@fz.FUZZ
def test_fuzz_export_sessions(target, data):
    fz.count("ExportSessions")
    call = target.channel.unary_stream(
        ADMIN + "ExportSessions", request_serializer=_identity, response_deserializer=_identity
    )
    try:
        list(call(data, timeout=30))
        error = None
    except grpc.RpcError as exc:
        error = exc
    _answer_ok(error, ADMIN + "ExportSessions")


@st.composite
def snapshots(draw: st.DrawFn) -> admin_pb.SessionSnapshot:
    return admin_pb.SessionSnapshot(
        resources_session_id=draw(clean_ids),
        episode_id=draw(st.one_of(st.none(), episodes)),
        task_id=draw(st.one_of(st.none(), task_ids)),
        task=draw(st.one_of(st.none(), tasks)),
        legacy=draw(st.booleans()),
        state_json=draw(json_fields),
        state=draw(st.integers(0, 6)),
        state_json_continues=draw(st.booleans()),
    )


@given(
    chunks=st.lists(
        raw_forms(
            st.builds(admin_pb.RestoreSessionsRequest, snapshots=st.lists(snapshots(), max_size=2)),
            (1,),
        ),
        max_size=3,
    ),
    real=st.one_of(st.none(), clean_ids),
)
@fz.FUZZ
def test_fuzz_restore_sessions(target, chunks, real):
    if real is not None:  # a valid snapshot under another id: the install path runs too
        snapshot = admin_pb.SessionSnapshot()
        snapshot.CopyFrom(target.snapshot)
        snapshot.resources_session_id = real
        chunks = [admin_pb.RestoreSessionsRequest(snapshots=[snapshot]).SerializeToString()]
    fz.count("RestoreSessions")
    call = target.channel.stream_unary(
        ADMIN + "RestoreSessions", request_serializer=_identity, response_deserializer=_identity
    )
    try:
        call(iter(chunks), timeout=30)
        error = None
    except grpc.RpcError as exc:
        error = exc
    _answer_ok(error, ADMIN + "RestoreSessions")


@given(
    data=raw_forms(st.builds(health_pb2.HealthCheckRequest, service=clean_text), (1,)),
    reflect=raw_forms(
        st.builds(reflection_pb2.ServerReflectionRequest, file_containing_symbol=clean_text),
        (4,),
    ),
)
@fz.FUZZ
def test_fuzz_health_and_reflection_always_answer(target, data, reflect):
    fz.count("HealthCheck")
    try:
        target.unary("/grpc.health.v1.Health/Check")(data, timeout=30)
        fz.seen("HealthCheck", grpc.StatusCode.OK)
    except grpc.RpcError as exc:
        fz.seen("HealthCheck", exc.code())
        assert exc.code() not in CRASHES | {grpc.StatusCode.DEADLINE_EXCEEDED}, exc.details()
    fz.count("ServerReflectionInfo")
    call = target.channel.stream_stream(
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        request_serializer=_identity,
        response_deserializer=_identity,
    )
    try:
        list(call(iter([reflect]), timeout=30))
        fz.seen("ServerReflectionInfo", grpc.StatusCode.OK)
    except grpc.RpcError as exc:
        fz.seen("ServerReflectionInfo", exc.code())
        assert exc.code() not in CRASHES | {grpc.StatusCode.DEADLINE_EXCEEDED}, exc.details()
