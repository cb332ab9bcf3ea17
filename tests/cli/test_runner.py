"""The main job's input handling: files that are not episodes are refused, not run."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import warnings

import grpc
import pytest

from tests.dying_server import dying_server
from tests.helpers import local, table_rows
from workplace_env.config import Settings
from workplace_env.interrupts import StopRequest
from workplace_env.jsonl import read_jsonl
from workplace_env.run.command import session_warnings_printed
from workplace_env.run.report import print_summary
from workplace_env.run.scripted import (
    FAILURE_KINDS,
    SHOWN_VALUE_BYTES,
    Mismatch,
    admin_refusal,
    run_lines,
)
from workplace_env.taskgen import generate_tasks
from workplace_env_client import (
    CapacityError,
    DeadlineError,
    SessionHeaderMismatchError,
    SessionLeftOpenWarning,
    SessionLostError,
    UnavailableError,
)
from workplace_env_client.admin import ExportResult
from workplace_env_client.checks import ROW_ID_SHAPE
from workplace_env_client.messages import VerifyResult

LOOKUP = "company_directory_find_email_address"
NONE_FAILED = dict.fromkeys(FAILURE_KINDS, 0)
EMAILS = "email._emails"


def _run(path, *options: str) -> subprocess.CompletedProcess:
    """``workplace-env run PATH OPTIONS`` in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "workplace_env.cli", "run", str(path), *options],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_lines_that_are_not_episodes_are_refused_before_anything_is_played(tmp_path):
    path = tmp_path / "not_tasks.jsonl"
    path.write_text('{"foo": 1}\n')
    proc = _run(path)
    assert proc.returncode == 2
    said = " ".join(proc.stderr.split())
    assert "1 of the 1 line is no episode; nothing was played: line 1 is not an episode" in said


def test_a_rollout_without_ground_truth_is_refused_saying_how_to_re_score_it(tmp_path):
    path = tmp_path / "nemo_rollouts.jsonl"
    output = [{"type": "function_call", "name": LOOKUP, "arguments": "{}", "call_id": "c"}]
    path.write_text(json.dumps({"response": {"output": output}, "reward": 1.0}) + "\n")
    proc = _run(path)
    said = " ".join(proc.stderr.split())
    assert proc.returncode == 2, said
    assert "line 1 is not an episode" in said and "a NeMo Gym rollout" in said
    assert "add its row's ground_truth" in said and "_materialized_inputs.jsonl" in said


def test_a_rollout_whose_response_output_is_no_array_is_refused_naming_the_field(tmp_path):
    path = tmp_path / "rollouts.jsonl"
    path.write_text(json.dumps({"ground_truth": [], "response": {"output": "text"}}) + "\n")
    proc = _run(path)
    said = " ".join(proc.stderr.split())
    assert proc.returncode == 2, said
    assert "line 1: response.output: must be an array of output items" in said


def test_lines_keep_their_physical_numbers_blank_lines_counted(tmp_path):
    path = tmp_path / "numbered.jsonl"
    path.write_text('\n{"id": "a"}\n\n\n{"ground_truth": []}\n\n')
    assert read_jsonl(str(path)) == [(2, {"id": "a"}), (5, {"ground_truth": []})]
    summary = run_lines(_GoneServer(), [{"ground_truth": []}], line_numbers=[5])  # type: ignore[arg-type]
    assert [m.case_id for m in summary.mismatches] == ["line-5"]  # a line with no id


def test_line_numbers_count_as_open_reads_lines(tmp_path):
    """CRLF and CR end a line; U+2028 inside a JSON string does not (str.splitlines would)."""
    path = tmp_path / "endings.jsonl"
    path.write_bytes('{"id": "a"}\r\n\r{"id": "b\u2028c"}\n'.encode())
    assert read_jsonl(str(path)) == [(1, {"id": "a"}), (3, {"id": "b\u2028c"})]


def test_an_empty_file_is_refused(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    proc = _run(path)
    assert proc.returncode == 2 and "no episodes" in proc.stderr


@pytest.mark.parametrize("content", [b"\xff\xfe\x00garbage", b"[1, 2]\n", b"{bad\n"])
def test_unreadable_files_name_the_file(tmp_path, content):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(ValueError) as err:
        read_jsonl(str(path))
    assert str(path) in str(err.value)


class _GoneServer:
    """A client whose server has gone away: every call is UNAVAILABLE (as after a SIGTERM)."""

    def __getattr__(self, name):
        def gone(*args, **kwargs):
            raise UnavailableError(
                "failed to connect to all addresses", grpc.StatusCode.UNAVAILABLE
            )

        return gone


def test_a_server_gone_is_a_failure_of_its_own_kind_not_a_reward_mismatch(capsys):
    lines = [
        {"id": f"t{i}", "ground_truth": [], "function_calls": [], "reward": 1.0} for i in range(5)
    ]
    summary = run_lines(_GoneServer(), lines)  # type: ignore[arg-type]
    assert summary.reward_mismatches == 0 and summary.output_mismatches == 0
    assert summary.failed == {**NONE_FAILED, "server_unavailable": 5}
    assert (summary.played_episodes, summary.mean_reward) == (0, None)  # no mean, not 0
    document = summary.to_json()
    assert document["reward_mismatches"] == 0
    assert document["failed_episodes"]["server_unavailable"] == 5
    assert (document["played_episodes"], document["mean_reward"]) == (0, None)
    assert {m["kind"] for m in document["mismatches"]} == {"server_unavailable"}
    print_summary(summary, "gone")
    shown = capsys.readouterr().out
    assert "episodes failed (server unavailable) 5" in shown
    assert "mismatch " not in shown
    rows = table_rows(shown)
    assert (rows["episodes"], rows["played"], rows["failed"]) == (["5"], ["0"], ["5"])
    assert rows["mean reward (played)"] == ["-"]


@pytest.mark.parametrize("columns", ["20", "80"])
def test_summary_numbers_stay_whole_in_a_narrow_pipe(capsys, monkeypatch, columns):
    """In a pipe (no terminal) at any width, no number of the summary is cut."""
    monkeypatch.setenv("COLUMNS", columns)
    lines = [{"id": f"t{i}", "ground_truth": []} for i in range(3)]
    summary = run_lines(_GoneServer(), lines)  # type: ignore[arg-type]
    summary.episodes_per_s = 123456789.0
    print_summary(summary, "a title longer than the narrowest terminal it is printed on")
    shown = capsys.readouterr().out
    cells = {cell for row in table_rows(shown).values() for cell in row}
    assert {"123456789.0", "-", "3"} <= cells  # labels may fold; numbers never do
    assert "…" not in shown


class _GoneFor:
    """The module's client, but UNAVAILABLE for the seeds of the cases named ``gone...``."""

    def __init__(self, client):
        self.client = client

    def __getattr__(self, name):
        return getattr(self.client, name)

    def seed(self, session_id, episode, task_id, task):
        if task_id[1].startswith("gone"):
            return _GoneServer().seed()
        return self.client.seed(session_id, episode, task_id, task)


def test_the_mean_reward_is_over_the_played_episodes_the_failed_ones_counted_apart(sdk, capsys):
    """The mean reward is over the played episodes, shown beside how many played and failed:
    episodes that could not be played (server unavailable, invalid line, error) do not count
    as reward 0 (2 passed and 2 unplayed show 1.0, not 0.5)."""
    lines = [
        {"id": name, "ground_truth": [], "function_calls": [], "category": "c"}
        for name in ("ok-1", "gone-1", "ok-2", "gone-2")
    ]
    summary = run_lines(_GoneFor(sdk), lines)  # type: ignore[arg-type]
    assert (summary.episodes, summary.played_episodes, summary.failed_episodes) == (4, 2, 2)
    assert summary.mean_reward == 1.0
    assert summary.by_category == {"c": (2, 1.0)}
    document = summary.to_json()
    assert (document["episodes"], document["played_episodes"], document["mean_reward"]) == (
        4,
        2,
        1.0,
    )
    assert document["failed_episodes"] == {**NONE_FAILED, "server_unavailable": 2}
    print_summary(summary, "half gone")
    shown = capsys.readouterr().out
    rows = table_rows(shown)
    assert (rows["episodes"], rows["played"], rows["failed"]) == (["4"], ["2"], ["2"])
    assert rows["mean reward (played)"] == ["1.0000"]  # not 0.5000
    assert "episodes failed (server unavailable) 2" in shown


@pytest.mark.parametrize(
    "line,named",
    [
        ({"ground_truth": 5}, "line 4: ground_truth: must be a"),
        ({"ground_truth": None}, "line 4: ground_truth: must be a"),
        ({"ground_truth": [5]}, "line 4: ground_truth[0]: must be an object"),
        ({"ground_truth": [{"name": 5, "arguments": "{}"}]}, "line 4: ground_truth[0].name: "),
        ({"ground_truth": [], "function_calls": 5}, "line 4: function_calls: must be an array"),
        ({"ground_truth": [], "calls": [3]}, "line 4: calls[0]: must be an object"),
        ({"ground_truth": [], "reward": "1"}, "line 4: reward: must be a number, not str"),
        ({"ground_truth": [], "tables_after": 1}, "line 4: tables_after: must be an object"),
        ({}, "line 4 is not an episode: no ground_truth"),
        (
            {"ground_truth": [{"name": "email_delete_email", "arguments": "not json"}]},
            "line 4: ground_truth[0].arguments: must be JSON text",
        ),
        ({"ground_truth": [], "id": [1]}, f"line 4: id: must be {ROW_ID_SHAPE}, not array"),
        ({"ground_truth": [], "id": True}, f"line 4: id: must be {ROW_ID_SHAPE}, not boolean"),
    ],
    ids=[
        "truth_a_number", "truth_null", "truth_item_a_number", "name_a_number",
        "calls_a_number", "call_3", "reward_a_string", "tables_a_number", "not_an_episode",
        "arguments_not_json", "id_an_array", "id_a_boolean",
    ],
)  # fmt: skip
@pytest.mark.parametrize("policy", ["recorded", "oracle"])
def test_a_malformed_line_is_refused_up_front_naming_its_line_and_field(
    tmp_path, line, named, policy
):
    """A line of a malformed field is refused as a line that is not JSON is (exit 2, nothing
    played, no summary written), naming the file's own field (``ground_truth``, not the wire's
    ``ground_truth_json``) and the physical line number (two blank lines before it count)."""
    path = tmp_path / "lines.jsonl"
    good = {"id": "fine", "ground_truth": []}
    path.write_text(json.dumps(good) + "\n\n  \n" + json.dumps({"id": "bad", **line}) + "\n")
    out = tmp_path / "summary.json"
    proc = _run(path, "--policy", policy, "--json-out", str(out))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = " ".join(proc.stderr.split())
    assert f"1 of the 2 lines is no episode; nothing was played: {named}" in said
    assert "_json" not in said and "task." not in said
    assert not out.exists() and proc.stdout == ""


@pytest.mark.parametrize(
    ("truth", "policy", "calls", "reward"),
    [
        (json.dumps([{"name": "email_delete_email", "arguments": '{"email_id": "00000001"}'}]),
         "recorded", [], 1.0),
        ("abc", "recorded", [{"name": "email_delete_email",
                              "arguments": '{"email_id": "00000001"}'}], 0.0),
        ("abc", "oracle", [], 1.0),
        ("abc", "perturbed", [], 0.0),
    ],
    ids=["json_text_no_calls", "text_a_write", "oracle", "perturbed"],
)  # fmt: skip
def test_a_string_ground_truth_is_an_episode_scored_as_change_nothing(
    tmp_path, truth, policy, calls, reward
):
    """As Verify scores it (REFERENCE.md (c) 2): 1.0 exactly when the calls write nothing,
    the string never decoded into calls; the run says how many lines have one."""
    path = tmp_path / "lines.jsonl"
    line = {"id": "s", "ground_truth": truth, "function_calls": calls, "reward": reward}
    path.write_text(json.dumps(line) + "\n")
    out = tmp_path / "summary.json"
    proc = _run(path, "--policy", policy, "--json-out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    document = json.loads(out.read_text())
    assert (document["played_episodes"], document["mean_reward"]) == (1, reward)
    assert document["failed_episodes"] == NONE_FAILED and document["reward_mismatches"] == 0
    said = " ".join(proc.stderr.split())
    assert "1 of the 1 line has a ground_truth written as a string" in said


@pytest.mark.parametrize(
    ("field", "named"),
    [
        ({"tables_after": {"email._emails": 5}}, "tables_after.email._emails: must be an object"),
        ({"tables_after": "abc"}, "tables_after: must be an object of tables, not str"),
        ({"tables_after": [1]}, "tables_after: must be an object of tables, not list"),
        ({"tables_after": {"emails": {"rows": 1, "sha256": "x"}}}, "tables_after.emails: not a"),
        ({"tables_after": {EMAILS: {"rows": "1", "sha256": "x"}}}, f"tables_after.{EMAILS}.rows: "),
        ({"tables_after": {EMAILS: {"rows": True, "sha256": "x"}}}, f"tables_after.{EMAILS}.rows"),
        ({"tables_after": {EMAILS: {"rows": 1}}}, f"tables_after.{EMAILS}.sha256: "),
        ({"reward": "1.0"}, "reward: must be a number, not str"),
        ({"reward": True}, "reward: must be a number, not bool"),
        ({"ground_truth": [{"name": "email_nuke"}]}, "ground_truth[0].name: 'email_nuke' is not a"),
        (
            {"ground_truth": [{"name": "email_delet_email", "arguments": "{}"}]},
            "ground_truth[0].name: 'email_delet_email' is not a tool of this environment; "
            "did you mean 'email_delete_email'?",
        ),
    ],
    ids=[
        "tables_a_number", "tables_a_string", "tables_a_list", "unknown_table", "rows_a_string",
        "rows_a_bool", "no_sha256", "reward_a_string", "reward_a_bool", "unknown_tool",
        "misspelled_tool",
    ],
)  # fmt: skip
@pytest.mark.parametrize("policy", ["recorded", "oracle"])
def test_a_malformed_field_is_an_invalid_line_naming_it(sdk, field, named, policy):
    """Under every policy, before any call: never an episode error (AttributeError) nor a
    state or reward mismatch."""
    line = {"id": "bad", "ground_truth": [], "calls": [], **field}
    summary = run_lines(sdk, [line], policy, line_numbers=[7])
    assert summary.failed == {**NONE_FAILED, "invalid_input": 1}
    assert (summary.state_mismatches, summary.reward_mismatches) == (0, 0)
    [failure] = summary.mismatches
    assert failure.detail.startswith(f"line 7: {named}"), failure.detail


def test_tables_after_under_another_policy_is_warned_about_once(tmp_path):
    path = tmp_path / "checked.jsonl"
    line = {"id": "t", "ground_truth": [], "tables_after": {}}
    path.write_text((json.dumps(line) + "\n") * 2)
    oracle = subprocess.run(
        [sys.executable, "-m", "workplace_env.cli", "run", str(path), "--policy", "oracle"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert oracle.returncode == 0, oracle.stdout + oracle.stderr
    said = " ".join(oracle.stderr.split())
    assert said.count("2 of the 2 lines have tables_after") == 1
    assert "--policy oracle does not check" in said


# -- An infrastructure error is a failure by kind, never a parity mismatch -------------------

CHECKED = {"id": "x", "ground_truth": [], "calls": [], "tables_after": {}, "reward": 1.0}


@pytest.mark.parametrize("token", [None, "wrong"])
def test_an_export_refused_for_its_token_is_a_failure_naming_the_token_not_a_state_mismatch(
    make_server, token
):
    """A server with an admin token, run without it (or with a wrong one): every tables_after
    line was a state mismatch 'cannot export the session's tables: UNAUTHENTICATED ...'."""
    served = make_server(settings=Settings(admin_token="right"))
    summary = run_lines(served.client, [CHECKED, CHECKED], admin_token=token)
    assert (summary.state_mismatches, summary.output_mismatches) == (0, 0)
    assert summary.failed["admin_unauthenticated"] == 2 and summary.failed_episodes == 2
    reason = "ADMIN_TOKEN_REQUIRED" if token is None else "ADMIN_TOKEN_INVALID"
    for failure in summary.mismatches:
        assert failure.kind == "admin_unauthenticated"
        assert "--token" in failure.detail and reason in failure.detail
    assert admin_refusal(served.client, token) is not None
    assert admin_refusal(served.client, "right") is None
    right = run_lines(served.client, [CHECKED], admin_token="right")
    assert (right.played_episodes, right.failed_episodes, right.mean_reward) == (1, 0, 1.0)


class _Failing:
    """The module's client, with one of its RPCs answering ``error`` (or the export's, or a
    verify answering the masked sample of a session the server lost, V4)."""

    def __init__(self, client, where, error):
        self.client, self.where, self.error = client, where, error

    def __getattr__(self, name):
        return getattr(self.client, name)

    def _fail(self, *args, **kwargs):
        raise self.error

    def seed(self, *args, **kwargs):
        if self.where == "seed":
            self._fail()
        return self.client.seed(*args, **kwargs)

    def call_tool(self, *args, **kwargs):
        if self.where == "call_tool":
            self._fail()
        return self.client.call_tool(*args, **kwargs)

    def verify(self, *args, **kwargs):
        if self.where == "verify" and self.error is None:
            return VerifyResult(0.0, True, "session_lost", "the server does not hold it", ())
        if self.where == "verify":
            self._fail()
        return self.client.verify(*args, **kwargs)

    def admin(self, token=None):
        admin = self.client.admin(token)
        if self.where == "export":
            admin.export_sessions = self._fail
        if self.where == "export-missing":
            admin.export_sessions = lambda ids: ExportResult([], list(ids), {})
        if self.where == "export-unencodable":
            admin.export_sessions = lambda ids: ExportResult([], [], {ids[0]: "inf in a cell"})
        return admin


def _status(cls, code, reason):
    return cls(f"{code.name} {reason}: refused", code, reason=reason)


UNAVAILABLE = _status(UnavailableError, grpc.StatusCode.UNAVAILABLE, "DRAINING")
BUSY = _status(CapacityError, grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_RPCS")
LOST = _status(SessionLostError, grpc.StatusCode.NOT_FOUND, "SESSION_LOST")
DEADLINE = _status(DeadlineError, grpc.StatusCode.DEADLINE_EXCEEDED, "")
HEADER = _status(
    SessionHeaderMismatchError, grpc.StatusCode.INVALID_ARGUMENT, "SESSION_HEADER_MISMATCH"
)


@pytest.mark.parametrize(
    ("where", "error", "kind"),
    [
        ("export", UNAVAILABLE, "server_unavailable"),
        ("export", BUSY, "server_capacity"),
        ("export", DEADLINE, "server_unavailable"),
        ("export-missing", None, "session_lost"),
        ("export-unencodable", None, "error"),
        ("call_tool", BUSY, "server_capacity"),
        ("call_tool", LOST, "session_lost"),
        ("call_tool", HEADER, "error"),
        ("verify", None, "session_lost"),
        ("verify", HEADER, "error"),
        ("seed", HEADER, "error"),
        ("seed", BUSY, "server_capacity"),
        ("seed", UNAVAILABLE, "server_unavailable"),
    ],
    ids=[
        "export-unavailable", "export-busy", "export-deadline", "export-missing",
        "export-unencodable", "call-busy", "call-lost", "call-header", "verify-masked",
        "verify-header", "seed-header", "seed-busy", "seed-unavailable",
    ],
)  # fmt: skip
def test_no_infrastructure_error_is_counted_as_a_mismatch(sdk, where, error, kind):
    """Before, a failed export was a state mismatch, a CallTool refused for its routing header
    an output mismatch, and a verify of a lost session (masked, reward 0) a reward mismatch."""
    line = {**CHECKED, "calls": [{"name": LOOKUP, "arguments": "{}", "output": []}]}
    if where in ("verify", "seed"):
        del line["tables_after"]  # the module's server has its admin RPCs off
    summary = run_lines(_Failing(sdk, where, error), [line], admin_token=None)  # type: ignore[arg-type]
    assert (summary.output_mismatches, summary.state_mismatches, summary.reward_mismatches) == (
        0,
        0,
        0,
    )
    assert summary.failed[kind] == 1 and summary.failed_episodes == 1
    assert (summary.played_episodes, summary.mean_reward) == (0, None)
    [failure] = summary.mismatches
    assert failure.kind == kind


class _Unclosable:
    """The module's client whose ``close_session`` fails with ``close_error`` and whose
    ``where`` RPC (``seed`` or ``call_tool``) fails with ``error`` first, when given."""

    def __init__(self, client, close_error, where=None, error=None):
        self.client, self.close_error, self.where, self.error = client, close_error, where, error
        self.closing: list[str] = []

    def __getattr__(self, name):
        return getattr(self.client, name)

    def seed(self, session_id, *args, **kwargs):
        self.client.seed(session_id, *args, **kwargs)
        if self.where == "seed":  # seeded, then the answer lost: the outcome is unknown
            raise self.error

    def call_tool(self, *args, **kwargs):
        if self.where == "call_tool":
            raise self.error
        return self.client.call_tool(*args, **kwargs)

    def close_session(self, session_id, episode):
        self.closing.append(session_id)
        raise self.close_error


@pytest.mark.parametrize(
    ("where", "error", "played"),
    [(None, None, 1), ("call_tool", DEADLINE, 0), ("seed", DEADLINE, 0)],
    ids=["after-a-played-episode", "after-a-failed-call", "after-a-seed-of-unknown-outcome"],
)
def test_a_session_run_could_not_close_is_named_as_left_open(sdk, where, error, played):
    """An episode's close that fails (a server that stopped answering) is a warning naming
    the session and how long it may stay open, whatever ended the episode; a seed whose
    outcome is unknown is closed too."""
    line = {**CHECKED, "calls": [{"name": LOOKUP, "arguments": "{}", "output": []}]}
    del line["tables_after"]
    client = _Unclosable(sdk, DEADLINE, where, error)
    with pytest.warns(SessionLeftOpenWarning) as warned:
        summary = run_lines(client, [line], admin_token=None)  # type: ignore[arg-type]
    [session_id] = client.closing
    [warning] = [w for w in warned if issubclass(w.category, SessionLeftOpenWarning)]
    assert repr(session_id) in str(warning.message) and "idle TTL" in str(warning.message)
    assert (summary.played_episodes, summary.failed_episodes) == (played, 1 - played)


def test_every_failure_kind_is_shown_by_name(capsys):
    summary = run_lines(_GoneServer(), [{"ground_truth": []}])  # type: ignore[arg-type]
    summary.failed = dict.fromkeys(FAILURE_KINDS, 1)
    print_summary(summary, "kinds")
    shown = " ".join(capsys.readouterr().out.split())
    for label in FAILURE_KINDS.values():
        assert f"episodes failed ({label}) 1" in shown


def test_a_stop_starts_no_further_line_and_counts_the_lines_left(sdk, capsys):
    """Once the stop is requested (here after the first episode ends), no line starts: the
    summary counts the played one and the lines never started, in the table and the JSON."""
    lines = [{"id": f"s{i}", "ground_truth": []} for i in range(4)]
    ended: list[object] = []
    summary = run_lines(sdk, lines, "oracle", on_done=ended.append, stop=lambda: bool(ended))
    assert (summary.episodes, summary.played_episodes, summary.not_started) == (1, 1, 3)
    assert summary.to_json()["not_started"] == 3
    print_summary(summary, "stopped")
    assert table_rows(capsys.readouterr().out)["not started"] == ["3"]


def _tasks_on_the_embedded_sandbox(sandbox, path, count: int) -> None:
    path.write_text("".join(json.dumps(t) + "\n" for t in generate_tasks(sandbox, count, 3)))


@pytest.mark.parametrize("concurrency", [1, 3])
def test_a_run_whose_server_dies_stops_starting_episodes_and_says_how_to_resume(
    sandbox, server, tmp_path, concurrency
):
    """The server is killed when the 3rd Verify arrives: the episodes in flight fail
    (server_unavailable), none starts after the failed health check, the summary and the
    command that plays the file again are printed, and the run exits 1. That command, each
    option once with its latest value and --overwrite for the --json-out just written, plays
    every line when pasted (against a live server)."""
    tasks, summary_file = tmp_path / "tasks.jsonl", tmp_path / "summary.json"
    _tasks_on_the_embedded_sandbox(sandbox, tasks, 12)
    with dying_server(verifies=3) as (target, dying):
        proc = subprocess.run(
            [sys.executable, "-m", "workplace_env.cli", "run", str(tasks), "--policy", "oracle",
             "--concurrency", "8", "--target", target, "--concurrency", str(concurrency),
             "--json-out", str(summary_file)],
            capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"},
        )  # fmt: skip
        assert dying.wait(timeout=30) == -signal.SIGKILL
    said = " ".join(proc.stderr.split())
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    summary = json.loads(summary_file.read_text())
    failed = summary["failed_episodes"]["server_unavailable"]
    assert 1 <= failed <= concurrency and sum(summary["failed_episodes"].values()) == failed
    # Each of the 3 episodes whose Verify arrived is played or failed; with several in flight
    # the kill may come before the first two answers are sent.
    assert summary["played_episodes"] + failed >= 3
    assert summary["played_episodes"] >= (2 if concurrency == 1 else 0)
    assert summary["played_episodes"] + failed + summary["not_started"] == 12
    assert table_rows(proc.stdout)["not started"] == [str(summary["not_started"])]
    assert "server lost: the server does not answer a health check (UNAVAILABLE" in said
    assert "stopped: server lost" in said and "not started" in said
    again = shlex.split(said.split("to play every line again: ", 1)[1])
    assert again[:3] == ["workplace-env", "run", str(tasks)] and target in again
    assert again.count("--concurrency") == 1
    assert again[again.index("--concurrency") + 1] == str(concurrency)
    assert again.count("--overwrite") == 1
    again[again.index("--target") + 1] = local(server.port)  # the dead one's replacement
    pasted = _run(*again[2:])
    assert pasted.returncode == 0, pasted.stderr
    assert json.loads(summary_file.read_text())["played_episodes"] == 12


def test_an_unavailable_episode_with_a_server_that_answers_goes_on(sdk):
    """UNAVAILABLE from one episode while the server still answers its health check is no
    stop: every line is played."""
    failing = [True]

    class OnceUnavailable:
        channel = sdk.channel

        def __getattr__(self, name):
            return getattr(sdk, name)

        def seed(self, *args, **kwargs):
            if failing and failing.pop():
                raise UnavailableError("blip", grpc.StatusCode.UNAVAILABLE)
            return sdk.seed(*args, **kwargs)

    stop = StopRequest()
    lines = [{"id": f"u{i}", "ground_truth": []} for i in range(3)]
    summary = run_lines(OnceUnavailable(), lines, "oracle", stop=stop)  # type: ignore[arg-type]
    assert not stop() and stop.exit_status == 0
    assert (summary.played_episodes, summary.failed["server_unavailable"]) == (2, 1)
    assert summary.not_started == 0


@pytest.mark.parametrize(
    ("mismatch", "shown"),
    [
        (Mismatch("c", "reward", "reward differs", 1.0, 0.0), "recorded 1.0, replayed 0.0"),
        (Mismatch("c", "output", "call 0 f", '"a"', '"b"'), 'call 0 f: recorded "a", replayed "b"'),
        (
            Mismatch("c", "output", "call 0 f: refused", "[]", None),
            "call 0 f: refused: recorded []",
        ),
        (Mismatch("c", "state", "t: rows 2 (expected 1)"), "t: rows 2 (expected 1)"),
    ],
)
def test_a_mismatch_line_shows_the_recorded_and_the_replayed_value(mismatch, shown):
    assert mismatch.text().endswith(shown)


def test_a_mismatch_line_clips_a_long_value():
    said = Mismatch("c", "output", "call 0 f", "x" * 10_000, "y").text()
    assert len(said) < 2 * SHOWN_VALUE_BYTES and said.endswith("replayed y")


def test_a_session_warning_during_a_run_is_printed_as_a_run_message(capsys):
    """A SessionLeftOpenWarning raised on an episode's thread is one of run's messages on
    stderr, not a Python warning naming the SDK's source line; other warnings pass through."""

    def left_open() -> None:
        warnings.warn("session 's-1' was not closed (cancelled)", SessionLeftOpenWarning, 2)

    with session_warnings_printed():
        episode = threading.Thread(target=left_open)
        episode.start()
        episode.join()
        with pytest.warns(DeprecationWarning):
            warnings.warn("other", DeprecationWarning, 1)
    said = capsys.readouterr().err
    assert "warning: session 's-1' was not closed (cancelled)" in said
    assert "SessionLeftOpenWarning" not in said and "threading.py" not in said
