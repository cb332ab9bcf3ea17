"""Checkpoint and restore over gRPC (CONTRACT K1-K6), one test per case, plus the
on-disk commands and a crash test: SIGKILL mid-episode, restore, finish, same results."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable

import grpc
import pytest

from tests.helpers import HANG_S, FakeClock, Served, ServeProcess, total_emails
from workplace.env.v1 import admin_pb2 as admin_pb
from workplace_env import errors
from workplace_env.checkpoint.files import write_checkpoint
from workplace_env.checkpoint.snapshot import FenceSnapshot
from workplace_env.config import Settings
from workplace_env.identity import EpisodeId, Task, TaskId
from workplace_env.sandbox.generate import generate_sandbox
from workplace_env.sandbox.tables import BaseTables
from workplace_env.sessions import SessionConfig, SessionStore
from workplace_env.taskgen import generate_tasks
from workplace_env.testing.faults import Faults
from workplace_env_client import (
    AdminClient,
    EnvironmentClient,
    InvalidRequestError,
    SandboxMismatchError,
    SessionClaimedError,
    SessionClosedError,
    SessionConflictError,
    SessionLiveError,
    SessionLostError,
    UnauthenticatedError,
    WorkplaceEnvError,
    snapshot_to_json,
)

EP = ("rollout-1", 0)
TID = ("unit", "t1")
SEND = ("email_send_email", {"recipient": "a@b.com", "subject": "kept", "body": "b"})
TASK = {"id": "t1", "ground_truth": [{"name": SEND[0], "arguments": json.dumps(SEND[1])}]}
SEARCH = ("email_search_emails", {"query": "kept"})


#: Deadlines far above what these tests take on an idle machine (seconds), where the deadline
#: is not what is tested: a loaded machine (CI beside other jobs) may be many times slower.
LOADED_RPC_S, LOADED_PROCESS_S = 120.0, 900.0


@pytest.fixture
def servers(make_server) -> Callable[..., Served]:
    """Start a server with the admin RPCs open (loopback), or behind ``token``."""

    def make(token: str | None = None) -> Served:
        settings = Settings(admin_token=token, admin_open=token is None)
        return make_server(settings=settings, admin_token=token)

    return make


def _found(client, sid) -> int:
    return total_emails(client.call_tool(sid, *SEARCH))


def test_K1_export_snapshots_live_sessions_and_reports_missing(servers):
    a = servers()
    a.client.seed("k1", EP, TID, TASK)
    a.client.call_tool("k1", *SEND)
    a.client.seed_legacy("cookie", TASK)
    a.client.seed("gone", ("r2", 0), TID, TASK)
    a.client.close_session("gone", ("r2", 0))
    snapshots, missing, _ = a.admin.export_sessions(["k1", "cookie", "gone", "never"])
    assert [s.resources_session_id for s in snapshots] == ["k1", "cookie"]
    assert missing == ["gone", "never"]
    typed, legacy = snapshots
    assert (typed.episode_id.rollout_id, typed.task_id.task_id, typed.task.id) == (
        "rollout-1",
        "t1",
        "t1",
    )
    assert legacy.legacy and not legacy.HasField("episode_id")
    state = json.loads(typed.state_json)
    assert state["schema_version"] == 1
    emails = json.loads(state["containers"]["email"]["_emails"])
    assert (
        len(emails["data"])
        == len(json.loads(json.loads(legacy.state_json)["containers"]["email"]["_emails"])["data"])
        + 1
    )
    assert _found(a.client, "k1") == 1  # unchanged by the export


def test_K2_one_invalid_snapshot_installs_nothing_and_names_it(servers):
    a, b = servers(), servers()
    for i in range(3):
        a.client.seed(f"s{i}", (f"r{i}", 0), TID, TASK)
    snapshots, _, _ = a.admin.export_sessions()
    state = json.loads(snapshots[1].state_json)
    table = json.loads(state["containers"]["calendar"]["_calendar_events"])
    table["nan_cells"] = [[0, 0]]  # a NaN over a non-null cell
    state["containers"]["calendar"]["_calendar_events"] = json.dumps(table)
    snapshots[1].state_json = json.dumps(state)
    with pytest.raises(InvalidRequestError) as err:
        b.admin.restore_sessions(snapshots)
    fields = [v.field for v in err.value.violations]
    assert fields == ["snapshots[1].state_json.containers.calendar._calendar_events.nan_cells[0]"]
    assert b.running.store.live_count() == 0


@pytest.mark.parametrize(
    ("table", "column", "value"),
    [
        ("email._emails", "email_id", {"x": [1, 2]}),  # a dict email id
        ("email._emails", "sender/recipient", 7),
        ("email._emails", "sent_datetime", ["2023-11-30"]),
        ("calendar._calendar_events", "event_id", 12345678),
        ("company_directory._emails", "email_address", True),
        ("analytics._analytics_data", "visitor_id", 1.5),
        # Text UTF-8 cannot carry: the session's calls then failed, and its export
        ("email._emails", "subject", "\ud800"),
        ("email._emails", "email_id", "id-\udfff"),
        ("calendar._calendar_events", "event_name", ["ok", {"k": "\ud83d"}]),
        ("calendar._calendar_events", "duration", {"\udc00": 1}),
    ],
)
def test_K2_a_cell_its_column_never_holds_is_refused_naming_session_table_row_column(
    servers, table, column, value
):
    """The codec checked a table's columns, not its cells' types, so a dict email id
    restored and every later send failed. A column only the loader and the tools' generated
    values fill holds text (or a bool, a float where the loader or a tool puts one)."""
    a, b = servers(), servers()
    for sid in ("fine", "poisoned"):
        a.client.seed(sid, (sid, 0), TID, TASK)
    snapshots, _, _ = a.admin.export_sessions()
    i = [s.resources_session_id for s in snapshots].index("poisoned")
    container, attribute = table.split(".", 1)
    state = json.loads(snapshots[i].state_json)
    document = json.loads(state["containers"][container][attribute])
    col = document["columns"].index(column)
    document["data"][2][col] = value
    state["containers"][container][attribute] = json.dumps(document)
    snapshots[i].state_json = json.dumps(state)
    with pytest.raises(InvalidRequestError) as err:
        b.admin.restore_sessions(snapshots)
    [violation] = err.value.violations
    assert violation.field == f"snapshots[{i}].state_json.containers.{table}.data[2][{col}]"
    assert f"session 'poisoned', table {table}, row 2, column {column!r}" in violation.description
    assert err.value.session_id == "poisoned"
    assert b.running.store.live_count() == 0


def test_K1_a_session_protobuf_cannot_hold_is_a_failure_of_its_own(servers):
    """A session holding a lone surrogate made the whole ExportSessions fail with
    UNKNOWN. Tools and restores refuse such text, so only a fault can put it there; the
    export then names that session in ``failures`` and exports the others."""
    a = servers()
    for sid in ("fine", "poisoned", "also-fine"):
        a.client.seed(sid, (sid, 0), TID, TASK)
        a.client.call_tool(sid, *SEND)
    session = a.store.table.sessions["poisoned"]
    session.tables.writable("email._emails").data["subject"][0] = "\ud800"
    result = a.admin.export_sessions()
    assert sorted(s.resources_session_id for s in result.snapshots) == ["also-fine", "fine"]
    assert list(result.failures) == ["poisoned"]
    assert "cannot be encoded" in result.failures["poisoned"]


def test_K1_an_export_its_client_gave_up_on_stops_being_built(servers):
    """An export whose client's deadline passed went on snapshotting every session.
    Now the server stops before the next session once the RPC has ended (the hook sees one
    session of three)."""
    a = servers()
    for i in range(3):
        a.client.seed(f"s{i}", (f"r{i}", 0), TID, TASK)
    snapshotted: list[str] = []

    def client_gone(session_id: str) -> None:
        snapshotted.append(session_id)
        # the RPC's end (its deadline) gives its admission slot back
        assert a.running.admission.wait_idle(HANG_S), "hang guard: the RPC never ended"

    Faults.of(a.store).on("export", client_gone)
    try:
        stream = a.admin.stub.ExportSessions(admin_pb.ExportSessionsRequest(), timeout=0.5)
        with pytest.raises(grpc.RpcError) as err:
            list(stream)
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert a.running.admission.wait_idle(HANG_S)
        assert snapshotted == ["s0"]
    finally:
        Faults.of(a.store).clear()
    assert len(a.admin.export_sessions().snapshots) == 3


def test_K3_cells_a_tool_stores_as_sent_restore_whatever_their_type(servers):
    """The other side of the cell-type check: an email's subject and body, an event's duration,
    a task's id are stored as the model sent them (any JSON value), and such sessions restore
    and answer alike."""
    a, b = servers(), servers()
    a.client.seed("odd", EP, TID, TASK)
    odd = {"recipient": "a@b.com", "subject": {"x": [1, 2]}, "body": [1, None]}
    assert a.client.call_tool("odd", "email_send_email", odd) == "Email sent successfully."
    assert b.admin.restore_sessions(a.admin.export_sessions()[0]) == 1
    b.client.seed("odd", EP, TID, TASK)
    page = {"query": "", "page": 1}
    assert b.client.call_tool("odd", "email_search_emails", page) == a.client.call_tool(
        "odd", "email_search_emails", page
    )
    assert b.client.call_tool("odd", *SEND) == "Email sent successfully."


@pytest.mark.parametrize("field", ["episode_id", "state_json"])
def test_K2_invalid_identity_or_json_is_refused(servers, field):
    a, b = servers(), servers()
    a.client.seed("s", EP, TID, TASK)
    snapshots, _, _ = a.admin.export_sessions()
    if field == "episode_id":
        snapshots[0].episode_id.rollout_id = "-bad"
    else:
        snapshots[0].state_json = "{not json"
    with pytest.raises(InvalidRequestError) as err:
        b.admin.restore_sessions(snapshots)
    assert err.value.violations[0].field.startswith(f"snapshots[0].{field}")
    assert b.running.store.live_count() == 0


def test_K3_restore_installs_tables_and_identities_unclaimed(servers):
    a, b = servers(), servers()
    a.client.seed("k3", EP, TID, TASK)
    a.client.call_tool("k3", *SEND)
    snapshots, _, _ = a.admin.export_sessions()
    assert b.admin.restore_sessions(snapshots) == 1
    assert b.running.store.state_counts() == {"restored_unclaimed": 1}
    again, _, _ = b.admin.export_sessions()
    # Equal but for the call records' ages, which count on from the restore.
    assert [_ageless(s) for s in again] == [_ageless(s) for s in snapshots]
    ages = [r.age.ToTimedelta() for s in (snapshots[0], again[0]) for r in s.call_records]
    assert len(ages) == 2 and ages[0] <= ages[1]


def _ageless(snapshot: admin_pb.SessionSnapshot) -> dict:
    document = snapshot_to_json(snapshot)
    for record in document["call_records"]:
        del record["age"]
    return document


def test_K3_restore_over_live_ids_is_refused(servers):
    a = servers()
    a.client.seed("live", EP, TID, TASK)
    snapshots, _, _ = a.admin.export_sessions()
    a.client.seed("other", ("r9", 0), TID, TASK)
    snapshots += a.admin.export_sessions(["other"])[0]
    a.client.close_session("other", ("r9", 0))
    with pytest.raises(SessionLiveError) as err:
        a.admin.restore_sessions(snapshots)
    assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert a.running.store.live_count() == 1  # "other" was not installed either


def test_K3_a_retried_restore_of_the_same_snapshots_counts_them_restored(servers):
    """A restore whose answer was lost (its deadline passed) had installed
    everything, and the retry was refused SESSION_LIVE. A snapshot identical to one restored
    here and not claimed yet counts as restored again; a different snapshot of that id, or one
    already claimed, stays refused, and nothing of the batch is installed."""
    a, b = servers(), servers()
    for sid in ("k3r-1", "k3r-2"):
        a.client.seed(sid, (sid, 0), TID, TASK)
        a.client.call_tool(sid, *SEND)
    snapshots, _, _ = a.admin.export_sessions()
    assert b.admin.restore_sessions(snapshots) == 2
    assert b.admin.restore_sessions(snapshots) == 2  # the retry: same answer, nothing doubled
    a.client.seed("k3r-3", ("k3r-3", 0), TID, TASK)
    more = snapshots + a.admin.export_sessions(["k3r-3"])[0]
    assert b.admin.restore_sessions(more) == 3  # a batch overlapping an installed one
    assert b.running.store.state_counts() == {"restored_unclaimed": 3}
    a.client.call_tool("k3r-1", *SEARCH)  # the session moved on: another snapshot of k3r-1
    changed = a.admin.export_sessions(["k3r-1"])[0]
    with pytest.raises(SessionLiveError):
        b.admin.restore_sessions(changed)
    b.client.seed("k3r-2", ("k3r-2", 0), TID, TASK)  # claimed (K4)
    with pytest.raises(SessionLiveError) as err:
        b.admin.restore_sessions(snapshots)
    assert err.value.session_id == "k3r-2"
    assert b.running.store.state_counts() == {"restored_unclaimed": 2, "seeded": 1}
    assert _found(b.client, "k3r-2") == 1  # the claimant's tables, untouched


@pytest.fixture(scope="module")
def other_sandbox():
    """A sandbox with other data than the default one (another generator seed)."""
    return generate_sandbox(seed=1)


def _open_admin(make_server, tables=None) -> Served:
    return make_server(settings=Settings(admin_open=True), tables=tables)


def test_K3_a_restore_into_another_sandbox_is_refused_naming_both(
    make_server, sandbox, other_sandbox
):
    """A server over another --data-dir restored a checkpoint silently, and Verify replayed
    the ground truth on other base tables than the sessions' (wrong rewards). Every snapshot
    records the sandbox it was exported on; another one is FAILED_PRECONDITION
    SANDBOX_MISMATCH naming both, and nothing is installed."""
    a, b = _open_admin(make_server), _open_admin(make_server, other_sandbox)
    for sid in ("live-1", "live-2"):
        a.client.seed(sid, (sid, 0), TID, TASK)
    snapshots, _, _ = a.admin.export_sessions()
    assert {s.sandbox.digest for s in snapshots} == {sandbox.digest}
    assert snapshot_to_json(snapshots[0])["sandbox"] == {
        "digest": sandbox.digest,
        "origin": "generated:seed=0,scale=1.0",
    }
    with pytest.raises(SandboxMismatchError) as err:
        b.admin.restore_sessions(snapshots)
    assert (err.value.code, err.value.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "SANDBOX_MISMATCH",
    )
    for named in (sandbox.digest, other_sandbox.digest, "generated:seed=1,scale=1.0"):
        assert named in err.value.message
    assert b.running.store.live_count() == 0


def test_K3_the_same_data_loaded_elsewhere_is_the_same_sandbox(make_server, sandbox):
    """The identity is the tables' content, not where they were loaded from."""
    same = BaseTables.from_csv_texts(sandbox.to_csv_texts(), origin="/somewhere/else")
    assert same.digest == sandbox.digest
    a, b = _open_admin(make_server), _open_admin(make_server, same)
    a.client.seed("live-s", EP, TID, TASK)
    a.client.call_tool("live-s", *SEND)
    assert b.admin.restore_sessions(a.admin.export_sessions()[0]) == 1


def test_K3_a_snapshot_without_a_sandbox_is_checked_by_its_directory(
    make_server, sandbox, other_sandbox
):
    """Snapshots written before they carried a sandbox: the company directory (no tool writes
    it) tells another sandbox apart; over the same one they restore as before."""
    a = _open_admin(make_server)
    a.client.seed("live-o", EP, TID, TASK)
    snapshots, _, _ = a.admin.export_sessions()
    for snapshot in snapshots:
        snapshot.ClearField("sandbox")
    b = _open_admin(make_server, other_sandbox)
    with pytest.raises(SandboxMismatchError) as err:
        b.admin.restore_sessions(snapshots)
    assert "records no sandbox" in err.value.message and other_sandbox.digest in err.value.message
    assert b.running.store.live_count() == 0
    assert _open_admin(make_server).admin.restore_sessions(snapshots) == 1


def test_K3_a_retried_restore_after_a_claim_says_it_was_restored_already(servers):
    """A retry of a restore whose sessions are all installed, one claimed since, is
    SESSION_LIVE (the claimed session is not reset), marked ``already_restored`` and saying so,
    not "nothing was restored" (the first attempt installed everything); a batch with an id
    live for another reason stays "nothing was restored"."""
    a, b = servers(), servers()
    for sid in ("again-1", "again-2"):
        a.client.seed(sid, (sid, 0), TID, TASK)
    snapshots, _, _ = a.admin.export_sessions()
    assert b.admin.restore_sessions(snapshots) == 2
    b.client.seed("again-2", ("again-2", 0), TID, TASK)  # claimed (K4)
    b.client.call_tool("again-2", *SEND)
    with pytest.raises(SessionLiveError) as err:
        b.admin.restore_sessions(snapshots)
    assert err.value.metadata["already_restored"] == "true"
    assert "restored here already" in err.value.message and "again-2" in err.value.message
    assert b.running.store.state_counts() == {"restored_unclaimed": 1, "seeded": 1}
    assert _found(b.client, "again-2") == 1  # not reset
    b.client.seed("again-3", ("again-3", 0), TID, TASK)
    a.client.seed("again-3", ("again-3", 0), TID, TASK)
    with pytest.raises(SessionLiveError) as err:
        b.admin.restore_sessions(snapshots + a.admin.export_sessions(["again-3"])[0])
    assert "already_restored" not in err.value.metadata
    assert "['again-3'] are live here" in err.value.message
    assert "nothing was restored" in err.value.message


def test_cli_restore_retried_after_a_claim_exits_0_saying_so(servers, tmp_path):
    a, b = servers(CLI_TOKEN), servers(CLI_TOKEN)
    for sid in ("c12-1", "c12-2"):
        a.client.seed(sid, (sid, 0), TID, TASK)
    target_b = ("--target", f"127.0.0.1:{b.running.port}")
    saved = _cli("checkpoint", "save", str(tmp_path), "--target", f"127.0.0.1:{a.running.port}")
    assert saved.returncode == 0, saved.stderr
    first = _cli("checkpoint", "restore", str(tmp_path), *target_b)
    assert first.returncode == 0 and "restored 2 sessions" in first.stderr, first.stderr
    b.client.call_tool("c12-1", *SEND)  # a call claims an unclaimed restored session too
    retry = _cli("checkpoint", "restore", str(tmp_path), *target_b)
    assert retry.returncode == 0, retry.stderr
    assert "already restored, nothing changed" in retry.stderr and "c12-1" in retry.stderr
    assert _found(b.client, "c12-1") == 1


@pytest.mark.parametrize("use", ["call_tool", "verify"])
def test_K4_a_call_or_verify_on_an_unclaimed_restored_session_claims_it(servers, use):
    """CallTool and Verify carry no episode, so on a typed session they answer whoever
    names the id; on restored state they claim it, as a legacy request does
    (docs/operations/checkpoints.md)."""
    a, b = servers(), servers()
    a.client.seed("claimed", EP, TID, TASK)
    b.admin.restore_sessions(a.admin.export_sessions()[0])
    if use == "call_tool":
        b.client.call_tool("claimed", *SEARCH)
    else:
        b.client.verify("claimed", [])
    assert b.running.store.state_counts() in ({"seeded": 1}, {"verified": 1})
    with pytest.raises(SessionClaimedError):
        b.client.seed("claimed", ("intruder", 0), TID, TASK)
    assert not b.client.seed("claimed", EP, TID, TASK).restored  # its own seed: a plain retry


def test_K4_matching_seed_claims_restored_tables_without_rebuild(servers):
    a, b = servers(), servers()
    a.client.seed("k4", EP, TID, TASK)
    a.client.call_tool("k4", *SEND)
    b.admin.restore_sessions(a.admin.export_sessions()[0])
    response = b.client.seed("k4", EP, TID, TASK)
    assert response.restored and not response.rebuilt
    assert _found(b.client, "k4") == 1  # the mutation survived: nothing was rebuilt


def test_K4_seed_with_another_task_than_the_snapshot_conflicts_not_claims(servers):
    a, b = servers(), servers()
    a.client.seed("k4t", EP, TID, TASK)
    a.client.call_tool("k4t", *SEND)
    b.admin.restore_sessions(a.admin.export_sessions()[0])
    with pytest.raises(SessionConflictError) as err:
        b.client.seed("k4t", EP, TID, {**TASK, "ground_truth": []})
    assert err.value.reason == "SESSION_CONFLICT" and "task data differs" in err.value.message
    assert b.running.store.state_counts() == {"restored_unclaimed": 1}  # not claimed
    response = b.client.seed("k4t", EP, TID, TASK)  # the snapshot's own task still claims
    assert response.restored and not response.rebuilt
    assert _found(b.client, "k4t") == 1


def test_K4_legacy_request_claims_restored_legacy_session(servers):
    a, b = servers(), servers()
    a.client.seed_legacy("cookie", TASK)
    a.client.call_tool("cookie", *SEND)
    b.admin.restore_sessions(a.admin.export_sessions()[0])
    assert _found(b.client, "cookie") == 1
    assert b.running.store.state_counts() == {"seeded": 1}


def test_K5_other_episode_after_claim_is_session_claimed(servers):
    a, b = servers(), servers()
    a.client.seed("k5", EP, TID, TASK)
    b.admin.restore_sessions(a.admin.export_sessions()[0])
    with pytest.raises(SessionConflictError) as before:
        b.client.seed("k5", ("intruder", 0), TID, TASK)
    assert not isinstance(before.value, SessionClaimedError)  # unclaimed: a plain conflict
    b.client.seed("k5", EP, TID, TASK)
    with pytest.raises(SessionClaimedError) as err:
        b.client.seed("k5", ("intruder", 0), TID, TASK)
    assert (err.value.code, err.value.reason) == (grpc.StatusCode.ALREADY_EXISTS, "SESSION_CLAIMED")


def test_K6_retire_is_idempotent_and_later_calls_are_not_found(servers):
    a = servers()
    a.client.seed("k6", EP, TID, TASK)
    assert a.admin.retire_session("k6") is True
    assert a.admin.retire_session("k6") is False
    assert a.running.store.live_count() == 0
    with pytest.raises(SessionLostError):
        a.client.call_tool("k6", *SEARCH)


def test_K6_retire_records_no_fence_the_id_is_free_again(servers):
    """After RetireSession another episode could seed the id. That is the contract: K6
    discards the attempt and records no fence (fences are C1/C3's, for ended episodes), so the
    id is free: a seed of any episode starts fresh tables, a restore of it is accepted (a
    session moved away and back). A closed id stays fenced (S4), for contrast."""
    a = servers()
    a.client.seed("retired", EP, TID, TASK)
    a.client.call_tool("retired", *SEND)
    snapshots, _, _ = a.admin.export_sessions()
    assert a.admin.retire_session("retired") is True
    with pytest.raises(SessionLostError):
        a.client.call_tool("retired", *SEARCH)
    a.client.seed("retired", ("another", 0), TID, TASK)
    assert _found(a.client, "retired") == 0  # fresh tables: nothing of the retired attempt
    assert a.admin.retire_session("retired") is True
    assert a.admin.restore_sessions(snapshots) == 1  # moved back
    assert _found(a.client, "retired") == 1
    a.client.close_session("retired", EP)
    with pytest.raises(SessionClosedError):
        a.client.seed("retired", ("another", 1), TID, TASK)


def test_admin_rpcs_need_the_bearer_token(servers):
    secured = servers(token="s3cret")
    target = f"127.0.0.1:{secured.running.port}"
    for token in (None, "wrong"):
        with AdminClient(target, token=token) as admin, pytest.raises(UnauthenticatedError) as e:
            admin.export_sessions()
        # what an SDK user types to fix it: a note under the traceback, and .hint
        assert "AdminClient(token=" in e.value.hint and "admin_token=" in e.value.hint
        assert f"fix: {e.value.hint}" in e.value.__notes__
    assert secured.admin.export_sessions() == ([], [], {})
    # The scheme is case-insensitive (RFC 6750), the token is not.
    stub = secured.admin.stub
    lower = (("authorization", "bearer s3cret"),)
    asked = admin_pb.ExportSessionsRequest(resources_session_ids=["ghost"])
    answer = list(stub.ExportSessions(asked, metadata=lower, timeout=10))
    assert [list(chunk.missing_session_ids) for chunk in answer] == [["ghost"]]
    wrong_case = (("authorization", "Bearer S3CRET"),)
    with pytest.raises(grpc.RpcError) as err:
        list(stub.ExportSessions(admin_pb.ExportSessionsRequest(), metadata=wrong_case, timeout=10))
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert len(secured.client.list_tools()) == 27  # the environment service stays open


# -- on disk and across a crash --------------------------------------------------------------------


#: The admin token of the ``serve`` process; the checkpoint commands read it from the
#: environment (an open in-process admin ignores it).
CLI_TOKEN = "checkpoint-admin"
CHECKPOINT = (sys.executable, "-m", "workplace_env.cli", "checkpoint")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "workplace_env.cli", *args],
        capture_output=True,
        text=True,
        timeout=LOADED_PROCESS_S,
        env={**os.environ, "WORKPLACE_ENV_ADMIN_TOKEN": CLI_TOKEN},
    )


def test_cli_save_then_restore_with_a_corrupted_file_installs_nothing(servers, tmp_path):
    a, b = servers(), servers()
    for i in range(3):
        a.client.seed(f"f{i}", (f"r{i}", 0), TID, TASK)
    saved = _cli("checkpoint", "save", str(tmp_path), "--target", f"127.0.0.1:{a.running.port}")
    assert saved.returncode == 0, saved.stderr
    victim = sorted(tmp_path.glob("session-*.json"))[1]
    victim.write_text(victim.read_text().replace('"t1"', '"t2"', 1))
    restored = _cli(
        "checkpoint", "restore", str(tmp_path), "--target", f"127.0.0.1:{b.running.port}"
    )
    assert restored.returncode == 1 and victim.name in restored.stderr
    assert b.running.store.live_count() == 0


def _serve_process() -> tuple[subprocess.Popen, int]:
    serve = ServeProcess("--admin-token", CLI_TOKEN).ready()
    return serve.proc, serve.port


def _play(client: EnvironmentClient, task: dict, calls: list[dict], sid: str) -> list[str]:
    return [client.call_tool_raw(sid, c["name"], c["arguments"], f"{sid}-{i}") for i, c in calls]


def test_crash_restore_finishes_every_episode_identically(tmp_path, sandbox, servers):
    tasks = [t for t in generate_tasks(sandbox, count=200, seed=7)]
    plans = []
    for n, task in enumerate(tasks):
        calls = list(enumerate(task["ground_truth"]))
        plans.append((f"crash-{n}", (f"r{n}", 0), ("gen", task["id"]), task, calls))

    def finish(client, plan, start, stop):
        sid, _, _, _, calls = plan
        return _play(client, plan[3], calls[start:stop], sid)

    # Uninterrupted reference run, in this process.
    ref = servers()
    expected = []
    try:
        for plan in plans:
            sid, ep, tid, task, calls = plan
            ref.client.seed(sid, ep, tid, task)
            outputs = finish(ref.client, plan, 0, len(calls))
            expected.append((outputs, ref.client.verify(sid, task["ground_truth"]).reward))
    finally:
        ref.stop()

    # Interrupted run: half the calls, checkpoint, SIGKILL, new process, restore, the rest.
    proc, port = _serve_process()
    got_first = []
    try:
        with EnvironmentClient(f"127.0.0.1:{port}", timeout_s=LOADED_RPC_S) as client:
            for plan in plans:
                sid, ep, tid, task, calls = plan
                client.seed(sid, ep, tid, task)
                got_first.append(finish(client, plan, 0, len(calls) // 2))
        saved = _cli("checkpoint", "save", str(tmp_path / "ckpt"), "--target", f"127.0.0.1:{port}")
        assert saved.returncode == 0, saved.stderr
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=LOADED_RPC_S)
    proc, port = _serve_process()
    try:
        restored = _cli(
            "checkpoint", "restore", str(tmp_path / "ckpt"), "--target", f"127.0.0.1:{port}"
        )
        assert restored.returncode == 0, restored.stderr
        with EnvironmentClient(f"127.0.0.1:{port}", timeout_s=LOADED_RPC_S) as client:
            for plan, first, (want_outputs, want_reward) in zip(
                plans, got_first, expected, strict=True
            ):
                sid, ep, tid, task, calls = plan
                assert client.seed(sid, ep, tid, task).restored
                rest = finish(client, plan, len(calls) // 2, len(calls))
                assert first + rest == want_outputs, sid
                assert client.verify(sid, task["ground_truth"]).reward == want_reward
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=LOADED_RPC_S)
    assert os.path.exists(tmp_path / "ckpt" / "manifest.json")


def test_checkpoint_commands_wait_for_a_slow_server_as_long_as_told(tmp_path):
    """``checkpoint save/restore`` bound the whole stream by ``--timeout-s`` (default 600 s),
    not by the SDK's 30 s per call: a 200-session save under heavy load once ran out of those
    30 s (DEADLINE_EXCEEDED in the crash test above). A frozen server (SIGSTOP, what a loaded
    machine looks like from outside) fails a 1 s deadline, and a save started while it is
    frozen completes once it runs again."""
    proc, port = _serve_process()
    target = ("--target", f"127.0.0.1:{port}")
    try:
        with EnvironmentClient(f"127.0.0.1:{port}", timeout_s=LOADED_RPC_S) as client:
            client.seed("slow-1", EP, TID, TASK)
        proc.send_signal(signal.SIGSTOP)
        try:
            failed = _cli("checkpoint", "save", str(tmp_path / "a"), *target, "--timeout-s", "1")
            assert failed.returncode == 1 and "export failed" in failed.stderr, failed
            assert "DEADLINE_EXCEEDED" in failed.stderr, failed.stderr
            waiting = subprocess.Popen(
                [*CHECKPOINT, "save", str(tmp_path / "b"), *target],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, "WORKPLACE_ENV_ADMIN_TOKEN": CLI_TOKEN},
            )
        finally:
            proc.send_signal(signal.SIGCONT)
        out, err = waiting.communicate(timeout=LOADED_PROCESS_S)
        assert waiting.returncode == 0 and "saved 1 session " in out + err, (out, err)
        restored = _cli("checkpoint", "restore", str(tmp_path / "b"), *target, "--timeout-s", "60")
        assert restored.returncode == 1 and "SESSION_LIVE" in restored.stdout + restored.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=LOADED_RPC_S)


class _AnswerDroppingProxy:
    """A TCP proxy to a server's ``port`` that passes the HTTP/2 handshake both ways, then
    drops every byte the server sends once the client has sent a request: the restore
    arrives and is installed, its answer is lost."""

    #: Bytes a gRPC client sends before its first request (preface, SETTINGS, their ACK).
    HANDSHAKE_BYTES = 200

    def __init__(self, port: int) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, args=(port,), daemon=True).start()

    def _accept(self, port: int) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", port))
            self._open += [client, server]
            sent = [0]
            threading.Thread(
                target=self._pipe, args=(client, server, sent, None), daemon=True
            ).start()
            threading.Thread(
                target=self._pipe, args=(server, client, None, sent), daemon=True
            ).start()

    def _pipe(self, src, dst, counted, muted_by) -> None:  # type: ignore[no-untyped-def]
        try:
            while data := src.recv(65536):
                if counted is not None:
                    counted[0] += len(data)
                if muted_by is None or muted_by[0] <= self.HANDSHAKE_BYTES:
                    dst.sendall(data)
        except OSError:
            return

    def close(self) -> None:
        for sock in [self.listener, *self._open]:
            sock.close()


def test_a_restore_without_an_answer_says_the_outcome_is_unknown_and_a_retry_works(tmp_path):
    """``checkpoint restore`` printed "restore refused, nothing installed"
    on DEADLINE_EXCEEDED although the server installed everything, inviting a restore
    elsewhere (sessions live twice). The server installs the restore but its answer is lost
    (a proxy drops it) until the 2 s deadline passes; the message says the outcome is unknown
    and that a retry is safe, and the retry succeeds (the sessions were installed)."""
    source, port = _serve_process()
    try:
        with EnvironmentClient(f"127.0.0.1:{port}", timeout_s=LOADED_RPC_S) as client:
            for n in range(3):
                client.seed(f"lost-{n}", (f"lost-{n}", 0), TID, TASK)
                client.call_tool(f"lost-{n}", *SEND)
        saved = _cli("checkpoint", "save", str(tmp_path / "c"), "--target", f"127.0.0.1:{port}")
        assert saved.returncode == 0, saved.stderr
    finally:
        source.send_signal(signal.SIGKILL)
        source.wait(timeout=LOADED_RPC_S)
    proc, port = _serve_process()
    target = ("--target", f"127.0.0.1:{port}")
    proxy = _AnswerDroppingProxy(port)
    try:
        lost = _cli(
            "checkpoint", "restore", str(tmp_path / "c"), "--target", f"127.0.0.1:{proxy.port}",
            "--timeout-s", "2",
        )  # fmt: skip
        said = " ".join((lost.stdout + lost.stderr).split())
        assert lost.returncode == 1 and "DEADLINE_EXCEEDED" in said, said
        assert "outcome unknown" in said and "nothing installed" not in said, said
        assert "Retrying the same checkpoint" in said and "is safe" in said, said
        retried = _cli("checkpoint", "restore", str(tmp_path / "c"), *target)
        assert retried.returncode == 0 and "restored 3 sessions" in retried.stderr, retried
        with EnvironmentClient(f"127.0.0.1:{port}", timeout_s=LOADED_RPC_S) as client:
            for n in range(3):
                assert client.seed(f"lost-{n}", (f"lost-{n}", 0), TID, TASK).restored
                assert _found(client, f"lost-{n}") == 1
    finally:
        proxy.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=LOADED_RPC_S)


def _closed_port() -> int:
    with socket.socket() as probe:  # bound, never listening, then closed: nobody answers there
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("target", ["nohost.invalid:1", "closed"])
def test_a_restore_that_never_connects_says_nothing_was_installed(servers, tmp_path, target):
    """``checkpoint restore`` to a server it cannot reach (a name that does not resolve, a
    closed port) says nothing was installed, not "restore outcome unknown ... some or all
    sessions may be installed": nothing was sent, which is told apart from a lost answer."""
    a = servers()
    a.client.seed("k1", EP, TID, TASK)
    saved = _cli("checkpoint", "save", str(tmp_path), "--target", f"127.0.0.1:{a.running.port}")
    assert saved.returncode == 0, saved.stderr
    target = f"127.0.0.1:{_closed_port()}" if target == "closed" else target
    failed = _cli("checkpoint", "restore", str(tmp_path), "--target", target)
    said = " ".join((failed.stdout + failed.stderr).split())
    assert failed.returncode == 1 and "nothing installed" in said, said
    assert "outcome unknown" not in said and f"cannot connect to {target}" in said, said


def test_K1_a_session_the_codec_cannot_encode_is_reported_and_the_others_export(servers):
    a = servers()
    a.client.seed("fine", EP, TID, TASK)
    a.client.seed("inf", ("r-inf", 0), TID, TASK)
    # JSON 1e999 is an infinite float; the tool stores it as given, as the reference does.
    add = (
        '{"customer_name": "A", "assigned_to_email": "a@b.com", "status": "Lead",'
        ' "customer_phone": 1e999}'
    )
    assert (
        a.client.call_tool("inf", "customer_relationship_manager_add_customer", add) == "00000200"
    )
    snapshots, missing, failures = a.admin.export_sessions()
    assert [s.resources_session_id for s in snapshots] == ["fine"] and missing == []
    assert (
        list(failures) == ["inf"] and "customer_relationship_manager._crm_data" in failures["inf"]
    )


def test_K3_restore_of_an_id_closed_here_is_refused(servers):
    a = servers()
    a.client.seed("once", EP, TID, TASK)
    snapshots = a.admin.export_sessions()[0]
    a.client.close_session("once", EP)
    with pytest.raises(WorkplaceEnvError) as err:
        a.admin.restore_sessions(snapshots)
    assert (err.value.code, err.value.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "SESSION_CLOSED",
    )
    assert a.running.store.live_count() == 0


# -- fences travel with a checkpoint (S4 and C4 after a restart) ------------------------------


def test_S4_a_closed_id_stays_fenced_after_save_kill_and_restore(servers, tmp_path):
    """Five sessions, one closed, ``checkpoint save``, a new server,
    ``checkpoint restore``: a late seed of the closed id is ALREADY_EXISTS SESSION_CLOSED (not
    fresh tables), a close from another episode EPISODE_MISMATCH (C4); the others restore."""
    a, b = servers(CLI_TOKEN), servers(CLI_TOKEN)
    sids = [f"ck-{i}" for i in range(5)]
    for sid in sids:
        a.client.seed(sid, (sid, 0), TID, TASK)
    a.client.close_session(sids[4], (sids[4], 0))
    saved = _cli("checkpoint", "save", str(tmp_path), "--target", f"127.0.0.1:{a.running.port}")
    assert saved.returncode == 0 and "1 fence)" in saved.stderr, saved.stderr
    a.running.stop()
    restored = _cli(
        "checkpoint", "restore", str(tmp_path), "--target", f"127.0.0.1:{b.running.port}"
    )
    assert restored.returncode == 0, restored.stderr
    assert "restored 4 sessions from" in restored.stderr and "(1 fence)" in restored.stderr
    with pytest.raises(SessionClosedError) as err:
        b.client.seed(sids[4], (sids[4], 0), TID, TASK)
    assert err.value.code == grpc.StatusCode.ALREADY_EXISTS
    with pytest.raises(WorkplaceEnvError) as mismatch:
        b.client.close_session(sids[4], ("other", 0))
    assert mismatch.value.reason == "EPISODE_MISMATCH"
    assert b.running.store.live_count() == 4


def test_a_checkpoint_without_fences_restores_and_a_malformed_one_is_refused(servers, tmp_path):
    """A manifest written before fences travelled (no ``fences``) restores as before; one whose
    ``fences`` is not a list of objects is not a checkpoint (exit 2) before anything is sent."""
    a, b = servers(CLI_TOKEN), servers(CLI_TOKEN)
    a.client.seed("old", EP, TID, TASK)
    a.client.seed("shut", ("shut", 0), TID, TASK)
    a.client.close_session("shut", ("shut", 0))
    assert _cli("checkpoint", "save", str(tmp_path), "--target", f"127.0.0.1:{a.running.port}")
    manifest_path = tmp_path / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    assert [f["resources_session_id"] for f in manifest["fences"]] == ["shut"]
    target_b = ("--target", f"127.0.0.1:{b.running.port}")
    manifest_path.write_text(json.dumps({**manifest, "fences": ["shut"]}))
    refused = _cli("checkpoint", "restore", str(tmp_path), *target_b)
    assert refused.returncode == 2 and "fences is not a list of objects" in refused.stderr
    del manifest["fences"]
    manifest_path.write_text(json.dumps(manifest))
    restored = _cli("checkpoint", "restore", str(tmp_path), *target_b)
    assert restored.returncode == 0 and "(0 fences)" in restored.stderr
    b.client.seed("shut", ("shut", 0), TID, TASK)  # no fence came: the id is free


def test_K2_a_batch_with_an_invalid_fence_installs_nothing(servers):
    a, b = servers(), servers()
    a.client.seed("k2f", EP, TID, TASK)
    (snapshots, _, _), _ = a.admin.export_checkpoint()
    fine = admin_pb.SessionFence(resources_session_id="closed-ok")
    fine.age.seconds = 1
    bad = admin_pb.SessionFence(resources_session_id="closed-bad")  # no age
    with pytest.raises(InvalidRequestError) as err:
        b.admin.restore_sessions(snapshots, [fine, bad])
    assert [v.field for v in err.value.violations] == ["fences[1].age"]
    assert b.running.store.live_count() == 0
    b.client.seed("closed-ok", EP, TID, TASK)  # the valid fence was not installed either


# Store level: the fences a restore installs, under the receiving store's bounds.

FEP = EpisodeId("fr", 0)
FTID = TaskId("ts", "t1")


@pytest.fixture
def fclock() -> FakeClock:
    return FakeClock()


def _store(sandbox, fclock, **config) -> SessionStore:
    return SessionStore(sandbox, SessionConfig(fence_ttl_s=100, **config), clock=fclock)


def _fenced(store: SessionStore, sid: str) -> bool:
    """Whether a seed of ``sid`` is refused as closed (S4); a seed that passes is retired at
    once (K6: no fence), which leaves the store as it was."""
    try:
        store.seed(sid, FEP, FTID, Task("t1"))
    except errors.SessionClosed:
        return True
    assert store.retire(sid)
    return False


def test_an_export_gives_each_fence_its_age_and_episode(sandbox, fclock):
    store = _store(sandbox, fclock)
    store.seed("typed", FEP, FTID, Task("t1"))
    store.close("typed", FEP)
    fclock.now += 30
    store.close("never", EpisodeId("x", 1))  # C3: fenced, no binding
    fclock.now += 20
    store.close("gone", FEP)
    fclock.now += 50  # "typed" is exactly the TTL old: still a fence
    assert store.export_checkpoint().fences == [
        FenceSnapshot("typed", 100.0, FEP),
        FenceSnapshot("never", 70.0, None),
        FenceSnapshot("gone", 50.0, None),
    ]
    assert store.export_checkpoint(["gone", "live"]).fences == [FenceSnapshot("gone", 50.0, None)]
    fclock.now += 1  # "typed" is past the TTL: not exported
    assert [f.session_id for f in store.export_checkpoint().fences] == ["never", "gone"]


def test_a_restored_fence_ends_when_the_original_would_have(sandbox, fclock):
    store = _store(sandbox, fclock)
    store.restore(
        [],
        [
            FenceSnapshot("at-ttl", 100.0),
            FenceSnapshot("over", 100.5),
            FenceSnapshot("young", 40.0),
        ],
    )
    assert not _fenced(store, "over")  # older than this store's TTL: skipped
    assert _fenced(store, "at-ttl")  # exactly the TTL old: still a fence
    fclock.now += 0.5
    assert not _fenced(store, "at-ttl")
    fclock.now += 59.5  # "young" is 100 s old
    assert _fenced(store, "young")
    fclock.now += 1
    assert not _fenced(store, "young")


def test_restored_fences_keep_time_order_and_the_newest_max_fences(sandbox, fclock):
    """Fences merge with this store's by when they were closed, so the oldest expire first
    and ``max_fences`` keeps the newest (an older restored one is the first dropped)."""
    store = _store(sandbox, fclock, max_fences=3)
    store.close("own-old", FEP)
    fclock.now += 50
    store.close("own-new", FEP)
    store.restore([], [FenceSnapshot("oldest", 70.0), FenceSnapshot("mid", 20.0)])
    assert [s.session_id for s in store.export_checkpoint().fences] == ["own-old", "mid", "own-new"]
    assert not _fenced(store, "oldest")
    fclock.now += 51  # "own-old" expired; "mid" (closed 20 s before the restore) not yet
    assert not _fenced(store, "own-old")
    assert _fenced(store, "mid") and _fenced(store, "own-new")


def test_a_restored_fence_replaces_an_older_one_never_a_newer_one(sandbox, fclock):
    store = _store(sandbox, fclock)
    for sid in ("newer-here", "older-here"):  # fenced here bound to FEP (C4)
        store.seed(sid, FEP, FTID, Task("t1"))
        store.close(sid, FEP)
    fclock.now += 80
    store.restore(
        [],
        [
            FenceSnapshot("newer-here", 90.0, EpisodeId("other", 0)),
            FenceSnapshot("older-here", 10.0),  # no episode: a close by any episode is C2
        ],
    )
    assert store.close("older-here", EpisodeId("any", 3)).value == "ALREADY_CLOSED"
    with pytest.raises(errors.EpisodeMismatch):  # this store's own, newer fence kept
        store.close("newer-here", EpisodeId("other", 0))
    assert store.close("newer-here", FEP).value == "ALREADY_CLOSED"
    fclock.now += 30  # this store's fences (110 s old) expired; the restored one (40 s) not
    assert _fenced(store, "older-here") and not _fenced(store, "newer-here")


def test_a_restored_fence_never_ends_a_live_session(sandbox, fclock):
    store = _store(sandbox, fclock)
    store.seed("live", FEP, FTID, Task("t1"))
    store.restore([], [FenceSnapshot("live", 1.0, FEP)])
    assert store.export_checkpoint().fences == []
    assert store.seed("live", FEP, FTID, Task("t1")).already_seeded


@pytest.mark.parametrize(
    ("fence", "field"),
    [
        (FenceSnapshot("bad id!", 1.0), "fences[1].resources_session_id"),
        (FenceSnapshot("snap", 1.0), "fences[1].resources_session_id"),
        (FenceSnapshot("f0", 1.0), "fences[1].resources_session_id"),
        (FenceSnapshot("f1", -1.0), "fences[1].age"),
        (FenceSnapshot("f1", math.inf), "fences[1].age"),
        (FenceSnapshot("f1", 1.0, EpisodeId("-x", 0)), "fences[1].episode_id.rollout_id"),
    ],
)
def test_K2_an_invalid_fence_installs_nothing_naming_it(sandbox, fclock, fence, field):
    source = _store(sandbox, fclock)
    source.seed("snap", FEP, FTID, Task("t1"))
    snapshots = source.export()[0]
    store = _store(sandbox, fclock)
    with pytest.raises(errors.InvalidRequest) as err:
        store.restore(snapshots, [FenceSnapshot("f0", 1.0), fence])
    assert [v.field for v in err.value.violations] == [field]
    assert store.live_count() == 0 and store.export_checkpoint().fences == []


def test_a_refused_batch_installs_none_of_its_fences(sandbox, fclock):
    source = _store(sandbox, fclock)
    source.seed("snap", FEP, FTID, Task("t1"))
    store = _store(sandbox, fclock)
    store.seed("snap", FEP, FTID, Task("t1"))
    with pytest.raises(errors.SessionLive):
        store.restore(source.export()[0], [FenceSnapshot("f0", 1.0)])
    assert store.export_checkpoint().fences == []


# -- a save under load: each id is a snapshot or a fence, never both (K1) ----------------------


def _close_during_export(store: SessionStore, closing: str, at: str) -> None:
    """Make ``store`` close ``closing`` when its export reaches ``at``: ``closing`` sorts
    before ``at``, so it was snapshotted already and is fenced before the fences are read."""
    store_faults = Faults.of(store)

    def close(sid: str) -> None:
        if sid == at:
            store_faults.on("export", None)
            store.close(closing, EpisodeId(closing, 0))

    store_faults.on("export", close)


def test_K1_a_session_closed_during_the_export_is_a_fence_and_the_batch_restores(servers):
    a, b = servers(), servers()
    for sid in ("race-a", "race-b"):
        a.client.seed(sid, (sid, 0), TID, TASK)
    _close_during_export(a.running.store, "race-a", at="race-b")
    (snapshots, missing, failures), fences = a.admin.export_checkpoint()
    assert [s.resources_session_id for s in snapshots] == ["race-b"]
    assert [f.resources_session_id for f in fences] == ["race-a"]
    assert (missing, failures) == (["race-a"], {})
    assert b.admin.restore_sessions(snapshots, fences) == 1
    with pytest.raises(SessionClosedError):  # closed at the end of the save: not resurrected
        b.client.seed("race-a", ("race-a", 0), TID, TASK)
    assert b.client.seed("race-b", ("race-b", 0), TID, TASK).restored


def test_cli_save_while_a_session_closes_then_restore_keeps_it_closed(servers, tmp_path):
    a, b = servers(CLI_TOKEN), servers(CLI_TOKEN)
    for sid in ("busy-a", "busy-b", "busy-c"):
        a.client.seed(sid, (sid, 0), TID, TASK)
    _close_during_export(a.running.store, "busy-a", at="busy-c")
    saved = _cli("checkpoint", "save", str(tmp_path), "--target", f"127.0.0.1:{a.running.port}")
    assert saved.returncode == 0 and "saved 2 sessions" in saved.stderr, saved.stderr
    restored = _cli(
        "checkpoint", "restore", str(tmp_path), "--target", f"127.0.0.1:{b.running.port}"
    )
    assert restored.returncode == 0, restored.stderr
    assert b.running.store.live_count() == 2
    with pytest.raises(SessionClosedError):
        b.client.seed("busy-a", ("busy-a", 0), TID, TASK)


def test_cli_restore_of_an_id_both_live_and_fenced_keeps_the_fence(servers, tmp_path):
    """A checkpoint written by a build that saved a session closing during the save twice
    restores: the fence wins (the session had closed by the end of the save), the note names
    it; the server itself still refuses such a batch, naming the snapshot."""
    a, b = servers(CLI_TOKEN), servers(CLI_TOKEN)
    for sid in ("twice", "kept"):
        a.client.seed(sid, (sid, 0), TID, TASK)
    snapshots = a.admin.export_sessions().snapshots
    a.client.close_session("twice", ("twice", 0))
    (_, _, _), fences = a.admin.export_checkpoint()
    write_checkpoint(
        tmp_path,
        [snapshot_to_json(s) for s in snapshots],
        fences=[{"resources_session_id": f.resources_session_id, "age": "1s"} for f in fences],
    )
    with pytest.raises(InvalidRequestError) as err:
        b.admin.restore_sessions(snapshots, fences)
    [violation] = err.value.violations
    assert violation.field == "fences[0].resources_session_id"
    assert "snapshots[1]" in violation.description
    restored = _cli(
        "checkpoint", "restore", str(tmp_path), "--target", f"127.0.0.1:{b.running.port}"
    )
    assert restored.returncode == 0, restored.stderr
    assert "restored 1 session from" in restored.stderr and "twice" in restored.stderr
    assert b.running.store.live_count() == 1
    with pytest.raises(SessionClosedError):
        b.client.seed("twice", ("twice", 0), TID, TASK)


def test_export_checkpoint_is_the_picture_at_its_end(sandbox, fclock):
    """A snapshot whose session left during the export is dropped: closed, it is a fence and
    missing; retired, missing; retired and seeded again, a failure (export it again)."""
    store = _store(sandbox, fclock)
    for sid in ("a-closed", "z-last", "b-reseeded", "c-retired"):
        store.seed(sid, EpisodeId(sid, 0), FTID, Task("t1"))
    faults = Faults.of(store)

    def leave(sid: str) -> None:
        if sid == "z-last":
            faults.on("export", None)
            store.close("a-closed", EpisodeId("a-closed", 0))
            store.retire("c-retired")
            store.retire("b-reseeded")
            store.seed("b-reseeded", EpisodeId("b-reseeded", 1), FTID, Task("t1"))

    faults.on("export", leave)
    snapshots, missing, failures, fences = store.export_checkpoint()
    assert [s.session_id for s in snapshots] == ["z-last"]
    assert missing == ["a-closed", "c-retired"]
    assert [sid for sid, _ in failures] == ["b-reseeded"]
    assert [f.session_id for f in fences] == ["a-closed"]
    target = _store(sandbox, fclock)
    assert target.restore(snapshots, fences) == 1
    assert _fenced(target, "a-closed")
