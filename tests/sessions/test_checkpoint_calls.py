"""call_id idempotency across a checkpoint (CONTRACT T6, T7 with K1-K4): a session's call_id
records travel with its snapshot, through the admin RPCs, checkpoint files and the SDK, within
the store's bounds; malformed records are refused (K2); over-long call_ids are refused."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from tests.helpers import Served, error_info, total_emails
from workplace.env.v1 import admin_pb2 as admin_pb
from workplace.env.v1 import environment_pb2 as pb
from workplace_env.checkpoint.files import read_checkpoint, write_checkpoint
from workplace_env.config import Settings
from workplace_env.identity import EpisodeId, Task, TaskId
from workplace_env.server import convert
from workplace_env.server.admin import AdminServicer
from workplace_env.sessions import SessionConfig, SessionStore
from workplace_env_client import (
    ArgumentError,
    CallIdReusedError,
    InvalidRequestError,
    snapshot_from_json,
    snapshot_to_json,
)
from workplace_env_client.admin import (
    CHUNK_BYTES,
    PIECE_OVERHEAD_BYTES,
    chunk_snapshots,
    framed_bytes,
    join_snapshots,
    split_snapshot,
)
from workplace_env_client.id_bounds import MAX_ID_CHARS, id_length_problem

EP = ("rollout-k9", 0)
TID = ("unit", "t1")
SEND_ARGS = json.dumps({"recipient": "a@b.com", "subject": "once only", "body": "b"})
OTHER_ARGS = json.dumps({"recipient": "a@b.com", "subject": "another", "body": "b"})
TASK = {"id": "t1", "ground_truth": [{"name": "email_send_email", "arguments": SEND_ARGS}]}


class Server(Served):
    """A server with the admin RPCs open, and its ``CallTool`` answers as sent."""

    def send(self, sid: str, call_id: str, arguments: str = SEND_ARGS) -> pb.CallToolResponse:
        """CallTool through the raw stub, so ``replayed`` is visible."""
        request = pb.CallToolRequest(
            resources_session_id=sid,
            tool_name="email_send_email",
            arguments=arguments,
            call_id=call_id,
        )
        return self.client.stub.CallTool(request, timeout=20)

    def copies(self, sid: str) -> int:
        return total_emails(
            self.client.call_tool(sid, "email_search_emails", {"query": "once only"})
        )


@pytest.fixture
def servers(make_server) -> Callable[[], Server]:
    def make() -> Server:
        served = make_server(settings=Settings(admin_open=True))
        return Server(served.running, served.client, served.raw, served.admin)

    return make


def test_T6_a_call_retried_after_checkpoint_restore_replays_once(servers, tmp_path):
    """The fresh-user repro: send, checkpoint to files, lose the server, restore into a new
    one, claim, resend the same call_id: replayed, one email; other arguments: T7."""
    a = servers()
    a.client.seed("K9", EP, TID, TASK)
    first = a.send("K9", "send-1")
    assert not first.replayed
    snapshots, _, _ = a.admin.export_sessions()
    write_checkpoint(tmp_path, [snapshot_to_json(s) for s in snapshots])
    a.stop()  # the server that ran the call is gone

    b = servers()
    _, documents = read_checkpoint(tmp_path)
    assert b.admin.restore_sessions([snapshot_from_json(d) for d in documents]) == 1
    assert b.client.seed("K9", EP, TID, TASK).restored  # K4
    again = b.send("K9", "send-1")
    assert (again.output, again.replayed) == (first.output, True)
    assert b.copies("K9") == 1  # not executed twice
    with pytest.raises(CallIdReusedError) as err:
        b.client.call_tool_raw("K9", "email_send_email", OTHER_ARGS, "send-1")
    assert (err.value.code, err.value.reason) == (grpc.StatusCode.ALREADY_EXISTS, "CALL_ID_REUSED")
    assert b.copies("K9") == 1


def test_T6_sdk_checkpoint_and_recover_keep_the_call_records(servers):
    a, b = servers(), servers()
    with a.client.session(TASK, episode=EP, task_id=TID, admin=a.admin) as s:
        s.call_tool("email_send_email", SEND_ARGS, call_id="sdk-1")
        checkpoint = s.checkpoint()
        assert [r.call_id for r in checkpoint.snapshot.call_records] == ["sdk-1"]
        s.client, s.admin = b.client, b.admin  # the session's server went away
        recovery = s.recover("checkpoint")
        assert recovery.restored and recovery.replayed == 0
        assert b.send(s.id, "sdk-1").replayed
        assert b.copies(s.id) == 1
    b.admin.retire_session(s.id)


def test_K3_a_snapshot_without_call_records_still_restores(servers):
    """Checkpoints written before call records existed restore as before (no records)."""
    a, b = servers(), servers()
    a.client.seed("old", EP, TID, TASK)
    a.send("old", "send-1")
    (snapshot,), _, _ = a.admin.export_sessions()
    document = snapshot_to_json(snapshot)
    assert len(document.pop("call_records")) == 1
    assert b.admin.restore_sessions([snapshot_from_json(document)]) == 1
    b.client.seed("old", EP, TID, TASK)
    assert not b.send("old", "send-1").replayed  # nothing remembered: it runs (old behaviour)
    assert b.copies("old") == 2


def _record(**changes) -> admin_pb.CallRecord:
    record = admin_pb.CallRecord(call_id="c", call_digest=bytes(16), output='"ok"')
    record.age.seconds = 1
    for name, value in changes.items():
        if name == "age_seconds":
            record.age.seconds = value
        elif name == "no_age":
            record.ClearField("age")
        else:
            setattr(record, name, value)
    return record


@pytest.mark.parametrize(
    ("records", "field"),
    [
        ([_record(call_id="")], "call_records[0].call_id"),
        ([_record(call_id="x" * (MAX_ID_CHARS + 1))], "call_records[0].call_id"),
        ([_record(), _record()], "call_records[1].call_id"),
        ([_record(call_digest=b"abc")], "call_records[0].call_digest"),
        ([_record(output="not json")], "call_records[0].output"),
        ([_record(age_seconds=-1)], "call_records[0].age"),
        ([_record(no_age=True)], "call_records[0].age"),
    ],
)
def test_K2_a_malformed_call_record_is_refused_and_nothing_installed(servers, records, field):
    a, b = servers(), servers()
    a.client.seed("fine", ("r1", 0), TID, TASK)
    a.client.seed("bad", ("r2", 0), TID, TASK)
    snapshots, _, _ = a.admin.export_sessions()  # id order: bad, fine
    del snapshots[0].call_records[:]
    snapshots[0].call_records.extend(records)
    with pytest.raises(InvalidRequestError) as err:
        b.admin.restore_sessions(snapshots)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert f"snapshots[0].{field}" in [v.field for v in err.value.violations]
    assert b.running.store.live_count() == 0


def test_call_id_longer_than_the_bound_is_refused_and_nothing_runs(servers):
    a = servers()
    a.client.seed("long", EP, TID, TASK)
    with pytest.raises(InvalidRequestError) as err:
        a.client.call_tool_raw("long", "email_send_email", SEND_ARGS, "x" * 100_000)
    violations = [(v.field, v.description) for v in err.value.violations]
    assert violations == [("call_id", id_length_problem("x" * 100_000))]
    assert a.copies("long") == 0
    assert not a.send("long", "x" * MAX_ID_CHARS).replayed  # the bound itself is fine
    assert a.send("long", "x" * MAX_ID_CHARS).replayed


def _args(i: int) -> str:
    return json.dumps({"recipient": "a@b.com", "subject": f"mail {i}", "body": "b"})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_restored_call_records_keep_the_receivers_count_and_age_bounds(sandbox):
    clock = Clock()
    source = SessionStore(sandbox, SessionConfig(call_id_ttl_s=100.0), clock=clock)
    task = Task(id="t1")
    source.seed("b", EpisodeId("r", 0), TaskId("unit", "t1"), task)
    for i in range(4):  # ages at export: 30, 20, 10, 0 s
        source.call_tool("b", "email_send_email", _args(i), f"c{i}")
        clock.now += 10
    clock.now -= 10
    snapshots, _, _ = source.export()
    assert [c.call_id for c in snapshots[0].calls] == ["c0", "c1", "c2", "c3"]
    assert [c.age_s for c in snapshots[0].calls] == [30.0, 20.0, 10.0, 0.0]

    target = SessionStore(sandbox, SessionConfig(call_id_ttl_s=25.0, max_call_ids=2), clock=Clock())
    target.restore(snapshots)
    target.seed("b", EpisodeId("r", 0), TaskId("unit", "t1"), task)
    session = target.table.sessions["b"]
    assert list(session.calls) == ["c2", "c3"]  # c0 past the TTL, c1 over the count
    target.clock.now += 16  # c2 is now 26 s old: past the 25 s TTL; c3 is 16 s old
    assert target.call_tool("b", "email_send_email", _args(3), "c3").replayed
    assert not target.call_tool("b", "email_send_email", _args(2), "c2").replayed


def test_split_snapshot_spreads_call_records_over_chunks_and_join_restores_them():
    snapshot = admin_pb.SessionSnapshot(resources_session_id="big", state_json="{}")
    output = json.dumps("x" * 300_000)
    for i in range(12):  # about 3.6 MB of records: more than one chunk
        record = snapshot.call_records.add(call_id=f"c{i}", call_digest=bytes(16), output=output)
        record.age.seconds = i
    pieces = split_snapshot(snapshot)
    assert len(pieces) > 1
    assert all(p.ByteSize() <= CHUNK_BYTES + 64 for p in pieces)
    assert [p.state_json_continues for p in pieces] == [True] * (len(pieces) - 1) + [False]
    (joined,) = join_snapshots(pieces)
    assert joined == snapshot


def test_split_snapshot_splits_a_record_larger_than_a_chunk_and_join_restores_it():
    """One call record larger than a chunk travelled whole, so an output
    over the message limit made every export fail. Its output now travels in pieces."""
    snapshot = admin_pb.SessionSnapshot(resources_session_id="big", state_json="{}")
    small = snapshot.call_records.add(call_id="a", call_digest=bytes(16), output='"a"')
    big = snapshot.call_records.add(
        call_id="b", call_digest=bytes(range(16)), output='"' + "\u00e9" * 1_500_000 + '"'
    )
    big.age.seconds = 7
    snapshot.call_records.add(call_id="c", call_digest=bytes(16), output='"c"')
    pieces = split_snapshot(snapshot)
    assert all(p.ByteSize() <= CHUNK_BYTES + 64 for p in pieces)
    records = [r for p in pieces for r in p.call_records]
    assert [r.call_id for r in records if r.call_id == "b"] == ["b"] * 3
    assert [r.output_continues for r in records] == [False, True, True, False, False]
    chunks = list(chunk_snapshots([snapshot]))
    assert all(sum(p.ByteSize() for p in chunk) <= CHUNK_BYTES + 64 for chunk in chunks)
    (joined,) = join_snapshots(pieces)
    assert joined == snapshot and joined.call_records[0] == small
    assert "output_continues" not in json.dumps(snapshot_to_json(joined))


def _cut_record(second: admin_pb.CallRecord | None) -> list[admin_pb.SessionSnapshot]:
    """One snapshot whose record ``b`` continues into ``second`` (None: into nothing)."""
    first = admin_pb.SessionSnapshot(resources_session_id="s", state_json="{}")
    first.call_records.add(call_id="b", call_digest=bytes(16), output='"', output_continues=True)
    if second is not None:
        first.call_records.append(second)
    return [first]


def _cut_snapshot(second: admin_pb.SessionSnapshot | None) -> list[admin_pb.SessionSnapshot]:
    """A whole snapshot, then one whose state continues into ``second`` (None: into nothing)."""
    pieces = [
        admin_pb.SessionSnapshot(resources_session_id="w", state_json="{}"),
        admin_pb.SessionSnapshot(
            resources_session_id="s", state_json="{", state_json_continues=True
        ),
    ]
    return pieces + ([second] if second is not None else [])


@pytest.mark.parametrize(
    "pieces, error",
    [
        (
            _cut_record(admin_pb.CallRecord(call_id="other", output='"!"')),
            "snapshots[0].call_records[0].output_continues: the next piece names call_id "
            "'other', not 'b'",
        ),
        (
            _cut_record(None),
            "snapshots[0].call_records[0].output_continues: the snapshot ended inside the output "
            "of call_id 'b'",
        ),
        (
            _cut_snapshot(admin_pb.SessionSnapshot(resources_session_id="t", state_json="}")),
            "snapshots[1].state_json_continues: the next piece names resources_session_id 't', "
            "not 's'",
        ),
        (
            _cut_snapshot(None),
            "snapshots[1].state_json_continues: the stream ended inside the state_json of "
            "resources_session_id 's'",
        ),
    ],
    ids=["record-other-call", "record-cut-short", "snapshot-other-session", "snapshot-cut-short"],
)
def test_join_refuses_a_piece_of_another_message_or_a_message_cut_short(pieces, error):
    """Snapshots and call records are joined by one rule, so both refuse the same two faults
    with the same shape of error: the field path, then why."""
    with pytest.raises(ValueError) as err:
        list(join_snapshots(pieces))
    assert str(err.value) == error


#: A small message limit, so outputs over it stay a few MB in the tests.
SMALL_LIMIT = 3 * 1024 * 1024


def _big_output_session(server: Server, sid: str) -> None:
    """A session whose search for "aaaa" answers an output over :data:`SMALL_LIMIT`."""
    server.client.seed(sid, EP, TID, TASK)
    subject = json.dumps({"recipient": "a@b.com", "subject": "a" * 1_100_000, "body": "x"})
    for _ in range(3):
        server.client.call_tool_raw(sid, "email_send_email", subject)


def _search(server: Server, sid: str, call_id: str) -> pb.CallToolResponse:
    request = pb.CallToolRequest(
        resources_session_id=sid,
        tool_name="email_search_emails",
        arguments='{"query": "aaaa"}',
        call_id=call_id,
    )
    return server.client.stub.CallTool(request, timeout=60)


def test_F5_an_output_over_the_limit_is_refused_typed_and_every_session_still_exports(
    make_server,
):
    """An output over the message limit failed with grpcio's bare
    RESOURCE_EXHAUSTED, yet its call_id record kept the output, and from then on the export
    of every session failed. Now the refusal is typed (RESPONSE_TOO_LARGE, the limit and the
    size), a retry with the call_id gets it again without running twice, every session
    exports, and after a restore the record is whole (a server with a larger limit replays
    it)."""

    def server(limit: int) -> Server:
        served = make_server(settings=Settings(admin_open=True, max_message_bytes=limit))
        return Server(served.running, served.client, served.raw, served.admin)

    a = server(SMALL_LIMIT)
    _big_output_session(a, "big")
    a.client.seed("small", ("r2", 0), TID, TASK)
    answers = []
    for _ in range(2):  # the first call and its retry
        with pytest.raises(grpc.RpcError) as err:
            _search(a, "big", "c1")
        info = error_info(err.value)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert (
            info.reason == "RESPONSE_TOO_LARGE" and info.metadata["resources_session_id"] == "big"
        )
        assert info.metadata["limit_bytes"] == str(SMALL_LIMIT)
        answers.append((int(info.metadata["size_bytes"]), err.value.details()))
    # the retry's refusal is the first one's: the same size (the replay's `replayed` flag is
    # not counted; it made the size 2 bytes larger) and the same message
    assert answers[0] == answers[1] and answers[0][0] > SMALL_LIMIT
    recorded = a.running.store.table.sessions["big"].calls["c1"].output  # the call's, kept once
    snapshots, missing, failures = a.admin.export_sessions()
    assert sorted(s.resources_session_id for s in snapshots) == ["big", "small"]
    assert (missing, failures) == ([], {})

    b = server(64 * 1024 * 1024)  # large enough to answer the output
    assert b.admin.restore_sessions(snapshots) == 2
    b.client.seed("big", EP, TID, TASK)
    replayed = _search(b, "big", "c1")
    assert replayed.replayed and replayed.output == recorded


def _seed_at_the_limit(field: str, limit: int) -> pb.SeedSessionRequest:
    """A seed request of exactly ``limit`` bytes (the largest a server of that limit accepts)
    whose ``field`` holds nearly all of it."""
    request = pb.SeedSessionRequest(
        resources_session_id="huge",
        episode_id=pb.EpisodeId(rollout_id="r3"),
        task_id=pb.TaskId(taskset="unit", task_id="t1"),
        task=pb.WorkplaceTask(id="t1"),
    )
    holder, name = {
        "task.prompt": (request.task, "prompt"),
        "task_id.task_id": (request.task_id, "task_id"),
    }[field]
    length = limit
    for _ in range(5):  # the length prefixes shrink with the text: converge on the limit
        setattr(holder, name, "r" * length)
        length += limit - request.ByteSize()
    assert request.ByteSize() == limit
    return request


@pytest.mark.parametrize("field", ["task.prompt", "task_id.task_id"])
def test_K1_a_session_seeded_at_the_message_limit_exports_and_restores(make_server, field):
    """(``rollout_id`` is bounded at 256 characters, far below.) A session whose task (or id)
    comes within ~64 KiB + its first piece of tables of the
    message limit exports whole, not named in ``failures``: a header over a chunk travels as
    ``header_encoding`` in pieces (carried whole beside up to 2 MiB of ``state_json`` in the
    first piece, it would pass the limit), so a seed of exactly the limit exports in messages
    of about 2 MiB, restores on a server of the same limit, and its own seed claims it."""
    settings = Settings(admin_open=True, max_message_bytes=SMALL_LIMIT)
    source = make_server(settings=settings)
    request = _seed_at_the_limit(field, SMALL_LIMIT)
    source.client.stub.SeedSession(request, timeout=60)
    source.client.seed("fine", EP, TID, TASK)
    source.client.call_tool_raw("huge", "email_send_email", SEND_ARGS)
    stub = source.admin.stub
    messages = list(stub.ExportSessions(admin_pb.ExportSessionsRequest(), timeout=60))
    assert max(m.ByteSize() for m in messages) <= CHUNK_BYTES + PIECE_OVERHEAD_BYTES
    assert any(s.header_encoding for m in messages for s in m.snapshots)
    snapshots, missing, failures = source.admin.export_sessions()
    assert [s.resources_session_id for s in snapshots] == ["fine", "huge"]
    assert (missing, failures) == ([], {})
    huge = snapshots[1]
    assert (huge.episode_id, huge.task_id) == (request.episode_id, request.task_id)
    assert huge.task == request.task and not huge.header_encoding
    assert "header_encoding" not in snapshot_to_json(huge)

    target = make_server(settings=settings)
    assert target.admin.restore_sessions(snapshots) == 2
    assert target.client.stub.SeedSession(request, timeout=60).restored
    found = target.client.call_tool("huge", "email_search_emails", {"query": "once only"})
    assert total_emails(found) == 1  # the tables came along: the email sent before the export


def test_K1_under_a_small_message_limit_every_message_of_an_export_fits_it(sandbox):
    """The pieces follow the server's limit when it is under 2 MiB (each message at most the
    limit), and a piece that alone cannot fit a limit of a few KiB (ids and call_id of
    hundreds of bytes beside a piece of output) names its session in ``failures`` while the
    others export."""
    store = SessionStore(sandbox)
    store.seed("a", EpisodeId("r", 0), TaskId("unit", "t1"), Task(id="t1", prompt="p" * 50_000))
    store.seed("b" * 256, EpisodeId("r", 1), TaskId("unit", "t1"), Task(id="t1"))
    store.call_tool("b" * 256, "email_send_email", SEND_ARGS, "\U0001f600" * 256)
    for limit, exported, failed in [(64 * 1024, ["a", "b" * 256], []), (1024, ["a"], ["b" * 256])]:
        servicer = AdminServicer(store, Settings(max_message_bytes=limit))
        live = SimpleNamespace(is_active=lambda: True)  # a client still reading
        messages = list(servicer.ExportSessions(admin_pb.ExportSessionsRequest(), live))
        assert max(m.ByteSize() for m in messages) <= limit
        whole = list(join_snapshots(s for m in messages for s in m.snapshots))
        assert [s.resources_session_id for s in whole] == exported
        assert [f.resources_session_id for m in messages for f in m.failures] == failed
        assert whole[0].task.prompt == "p" * 50_000
        assert json.loads(whole[0].state_json) == json.loads(
            convert.snapshot_message(store.export(["a"])[0][0]).state_json
        )
    (failure,) = [f for m in messages for f in m.failures]
    assert "over the server's message limit of 1024 bytes" in failure.reason


@pytest.mark.parametrize("length", [0, 1, 120, 125, 126, 16_370, 16_390, 2_097_140, 2_097_160])
def test_framed_bytes_is_the_size_of_a_message_carrying_only_that_piece(length):
    """The export's check against the limit counts a piece's tag and length prefix exactly
    (around each varint boundary), not a fixed reserve."""
    piece = admin_pb.SessionSnapshot(state_json="x" * length)
    assert framed_bytes(piece) == admin_pb.ExportSessionsResponse(snapshots=[piece]).ByteSize()


@pytest.mark.parametrize(
    "encoding, error",
    [
        (b"\xff", "snapshots[0].header_encoding: not the encoding of a SessionSnapshot"),
        (
            admin_pb.SessionSnapshot(state_json="{}").SerializeToString(),
            "snapshots[0].header_encoding: carries state_json, which is not a header field",
        ),
        (
            admin_pb.SessionSnapshot(legacy=True).SerializeToString(),
            "snapshots[0].header_encoding: set beside task",
        ),
    ],
)
def test_join_refuses_a_header_encoding_that_is_no_header(encoding, error):
    piece = admin_pb.SessionSnapshot(resources_session_id="s", header_encoding=encoding)
    if "beside" in error:
        piece.task.id = "t1"
    with pytest.raises(ValueError, match=re.escape(error)):
        list(join_snapshots([piece]))


def test_K1_an_export_naming_many_missing_ids_still_fits_the_limit(make_server):
    """The last message of an export carries the missing ids and the failures beside the last
    snapshots: with many ids named they go in a message of their own, so the export of a
    request the server accepted never exceeds its limit."""
    served = make_server(settings=Settings(admin_open=True, max_message_bytes=SMALL_LIMIT))
    _big_output_session(Server(served.running, served.client, served.raw, served.admin), "big")
    absent = [f"gone-{i:0200d}" for i in range(12_000)]  # about 2.5 MB of ids
    snapshots, missing, failures = served.admin.export_sessions(["big", *absent])
    assert [s.resources_session_id for s in snapshots] == ["big"]
    assert (missing, failures) == (absent, {})


class _RecordingStub:
    """An admin stub whose ``RestoreSessions`` records each attempt: its largest message and
    whether the target already held the session named ``watch`` when it was sent."""

    def __init__(self, stub: Any, store: SessionStore, watch: str) -> None:
        self._stub, self._store, self._watch = stub, store, watch
        self.attempts: list[tuple[int, bool]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stub, name)

    def RestoreSessions(self, requests: Any, **options: Any) -> Any:
        sent = list(requests)
        held = self._watch in self._store.table.sessions
        self.attempts.append((max(r.ByteSize() for r in sent), held))
        return self._stub.RestoreSessions(iter(sent), **options)


def test_the_sdk_restore_fits_a_receiving_server_with_a_smaller_message_limit(make_server):
    """Left open last stop: the SDK's restore sent pieces of ~2 MiB whatever the receiving
    server's limit, so a server started with a smaller ``--max-message-bytes`` refused a large
    session exported from one with the default. Now the refused stream (gRPC's own "larger
    than max", which installs nothing: the server joins and validates the whole stream first,
    K2) is sent again in pieces that limit takes, learned from the refusal; the session arrives
    whole, once; ``chunk_bytes=`` chooses the pieces up front."""
    limit = 64 * 1024
    source = make_server(settings=Settings(admin_open=True))
    source.client.seed("big", EP, TID, TASK)
    body = json.dumps({"recipient": "a@b.com", "subject": "once only", "body": "b" * 300_000})
    source.client.call_tool_raw("big", "email_send_email", body, call_id="c-big")
    source.client.seed("small", ("r2", 0), TID, TASK)
    snapshots, _, _ = source.admin.export_sessions()
    assert max(s.ByteSize() for s in snapshots) > 4 * limit  # several of the target's messages

    target = make_server(settings=Settings(admin_open=True, max_message_bytes=limit))
    stub = target.admin.stub = _RecordingStub(target.admin.stub, target.store, "big")
    assert target.admin.restore_sessions(snapshots) == 2
    (first, held_first), (second, held_second) = stub.attempts  # learned in one step
    assert first > limit >= second  # refused whole, then every message within the limit
    assert not held_first and not held_second  # the refused stream installed nothing
    [arrived], _, _ = target.admin.export_sessions(["big"])  # in the target's own pieces
    [sent] = [s for s in snapshots if s.resources_session_id == "big"]
    assert arrived.state_json == sent.state_json
    records = [
        [(r.call_id, r.call_digest, r.output) for r in s.call_records] for s in (arrived, sent)
    ]
    assert records[0] == records[1] and records[0]  # the call records too (ages aside)
    assert target.client.seed("big", EP, TID, TASK).restored  # claimed

    chosen = make_server(settings=Settings(admin_open=True, max_message_bytes=limit))
    stub = chosen.admin.stub = _RecordingStub(chosen.admin.stub, chosen.store, "big")
    assert chosen.admin.restore_sessions(snapshots, chunk_bytes=32 * 1024) == 2
    assert [held for _, held in stub.attempts] == [False] and stub.attempts[0][0] <= limit


@pytest.mark.parametrize("chunk_bytes", [0, 255, 2**26 + 1, 1.5, "2048", True])
def test_restore_refuses_a_chunk_size_it_cannot_send_with(make_server, chunk_bytes):
    served = make_server(settings=Settings(admin_open=True))
    with pytest.raises(ArgumentError, match="chunk_bytes"):
        served.admin.restore_sessions([], chunk_bytes=chunk_bytes)
