"""The task generator: format, sound ground truths, determinism, the CLI commands and the demo."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from datetime import date, timedelta
from random import Random

import pandas as pd
import pytest
from typer.testing import CliRunner

from tests.conftest import WORKBENCH, needs_shared, shared_file
from tests.helpers import REPO
from workplace_env.cli import app
from workplace_env.plurals import counted
from workplace_env.sandbox.load import load_sandbox
from workplace_env.sandbox.tables import BaseTables
from workplace_env.sandbox.tools import TOOLS
from workplace_env.taskgen import (
    CATEGORIES,
    MAX_TASK_COUNT,
    SYSTEM_PROMPT,
    TEMPLATES,
    World,
    core,
    generate_tasks,
    is_failure_output,
    replay,
)
from workplace_env.taskgen.base import threshold
from workplace_env.taskgen.world import TODAY, TOMORROW
from workplace_env.verify import Verifier

SEEDS = (0, 1, 2, 3)
PER_SEED = 500  # 2,000 tasks in all
EXPECTED_SYSTEM = (
    "Today's date is Thursday, 2023-11-30 and the current time is 23:59:00. Remember the current "
    "date and time when answering queries. Meetings must not start before 9am or end after 6pm."
)

# Every refusal and error text the tools can answer with (REFERENCE.md f), and outputs that are
# not failures: the helper must tell them apart.
FAILURES = (
    "Error executing tool 'x': 'x'",
    "Error sending email: boom",
    "Email not found.",
    "Event not found.",
    "Task not found.",
    "Customer not found.",
    "Visitor not found.",
    "Field not found.",
    "Field 'x' not found. Available fields: email_id, inbox/outbox",
    "Field not valid.",
    "List not valid. Please choose from: 'Backlog', 'In Progress', 'In Review', 'Completed'.",
    "Board not valid. Please choose from: 'Back end', 'Front end', 'Design'.",
    "Assignee email not valid. Please choose from the list of team members.",
    "Status not valid. Please choose from: 'Qualified', 'Won', 'Lost', 'Lead', 'Proposal'",
    "Invalid recipient email address.",
    "Invalid event ID format. Expected 8-digit ID.",
    "Invalid event_start format. Expected YYYY-MM-DD HH:MM:SS.",
    "Invalid duration format. Expected a number of minutes.",
    "Duration must be a positive number of minutes.",
    "Value to plot must be one of 'total_visits', 'session_duration_seconds'",
    "Plot type must be one of 'bar', 'line', 'scatter', or 'histogram'",
    "Email ID not provided.",
    "Recipient, subject, or body not provided.",
    "Event ID, field, or new value not provided.",
    "Missing task details.",
    "Please provide all required fields: customer_name, assigned_to_email, status.",
    "No search parameters provided.",
    "No search parameters provided. Please provide at least one parameter.",
)
SUCCESSES = (
    "Email sent successfully.",
    "Email forwarded successfully.",
    "Event deleted successfully.",
    "Customer updated successfully.",
    "00000301",
    "plots/2023-10-01_2023-11-30_total_visits_bar.png",
    "No emails found.",
    "No events found.",
    "No customers found.",
    {"emails": []},
    ["sam@atlas.com"],
    [],
)


@pytest.fixture(scope="module")
def default_base() -> BaseTables:
    """The embedded generated sandbox (what a fresh machine serves)."""
    return load_sandbox()


@pytest.fixture(scope="module")
def default_tasks(default_base) -> list[dict]:
    """2,000 tasks: 500 for each of four seeds, against the default sandbox."""
    return [t for seed in SEEDS for t in generate_tasks(default_base, PER_SEED, seed)]


def _check_sound(base: BaseTables, tasks: list[dict]) -> None:
    """Every ground truth executes cleanly in order and the oracle scores 1.0."""
    verifier = Verifier(base)
    for task in tasks:
        outputs = replay(base, task["ground_truth"])
        failed = [out for out in outputs if is_failure_output(out)]
        assert not failed, (task["id"], task["prompt"], failed)
        assert verifier.score(task["ground_truth"], task["ground_truth"]).reward == 1.0, task["id"]


def _check_prompts(tasks: list[dict]) -> None:
    truths: dict[str, list] = {}
    for task in tasks:
        known = truths.setdefault(task["prompt"], task["ground_truth"])
        assert known == task["ground_truth"], task["prompt"]


# ------------------------------------------------------------------------------------------------
# The helper that recognises failures


@pytest.mark.parametrize("output", FAILURES)
def test_failure_outputs_are_recognised(output):
    assert is_failure_output(output)


@pytest.mark.parametrize("output", SUCCESSES, ids=repr)
def test_results_are_not_failures(output):
    assert not is_failure_output(output)


# ------------------------------------------------------------------------------------------------
# Templates


def test_templates_cover_every_category():
    assert len(TEMPLATES) >= 25
    ids = [t.id for t in TEMPLATES]
    assert len(set(ids)) == len(ids)
    per_category = Counter(t.category for t in TEMPLATES)
    assert set(per_category) == set(CATEGORIES)
    assert min(per_category.values()) >= 4, per_category
    for spec in TEMPLATES:
        assert spec.summary and spec.summary != spec.id, spec.id


def test_threshold_keeps_clear_of_the_values():
    rng = Random(5)
    for _ in range(300):
        values = [rng.uniform(0, 60) for _ in range(rng.randint(1, 20))]
        more, want = rng.random() < 0.5, rng.random() < 0.5
        n = threshold(rng, values, more, want)
        if n is None:
            continue
        assert all(abs(v - n) >= 0.5 for v in values)
        assert any((v > n) if more else (v < n) for v in values) == want


# ------------------------------------------------------------------------------------------------
# 2,000 tasks against the default sandbox


def test_task_format(default_tasks):
    assert len(default_tasks) == len(SEEDS) * PER_SEED
    template_ids = {t.id: t.category for t in TEMPLATES}
    for seed in SEEDS:
        ids = [t["id"] for t in default_tasks if t["id"].startswith(f"gen-s{seed}-")]
        assert ids == [f"gen-s{seed}-{n}" for n in range(1, PER_SEED + 1)]
    for task in default_tasks:
        assert list(task) == [
            "id",
            "category",
            "environment_name",
            "prompt",
            "system",
            "ground_truth",
            "template",
            "sandbox",
        ]
        assert task["sandbox"]["digest"].startswith("sha256:")
        assert task["environment_name"] == "workplace_assistant"
        assert task["system"] == SYSTEM_PROMPT == EXPECTED_SYSTEM
        assert task["category"] == template_ids[task["template"]]
        assert task["prompt"] and task["prompt"] == task["prompt"].strip()
        for call in task["ground_truth"]:
            assert list(call) == ["name", "arguments"]
            assert isinstance(json.loads(call["arguments"]), dict)
            # WorkBench's ground truths hold only writes.
            assert not TOOLS[call["name"]].read_only, call


def test_every_template_and_category_is_used(default_tasks):
    used = Counter(t["template"] for t in default_tasks)
    assert set(used) == {t.id for t in TEMPLATES}
    # Templates take turns, so they appear about equally often.
    assert min(used.values()) >= 0.8 * max(used.values()), used
    empty = sum(1 for t in default_tasks if not t["ground_truth"])
    assert 0.05 * len(default_tasks) < empty < 0.4 * len(default_tasks)


def test_ground_truths_execute_and_the_oracle_scores_one(default_base, default_tasks):
    _check_sound(default_base, default_tasks)


def test_every_ground_truth_call_matters(default_base, default_tasks):
    """Dropping any one call changes the end state; an empty ground truth changes nothing."""
    verifier = Verifier(default_base)
    for task in default_tasks[::4]:
        truth = task["ground_truth"]
        assert verifier.score([], truth).reward == (0.0 if truth else 1.0), task["id"]
        for i in range(len(truth)):
            dropped = truth[:i] + truth[i + 1 :]
            assert verifier.score(dropped, truth).reward == 0.0, (task["id"], i)


def test_prompts_repeat_only_with_equal_ground_truths(default_tasks):
    _check_prompts(default_tasks)
    for seed in SEEDS:
        prompts = [t["prompt"] for t in default_tasks if t["id"].startswith(f"gen-s{seed}-")]
        assert len(set(prompts)) > 0.9 * len(prompts)


def test_same_seed_same_bytes(default_base):
    first = json.dumps(generate_tasks(default_base, 300, 11))
    assert json.dumps(generate_tasks(default_base, 300, 11)) == first
    assert json.dumps(generate_tasks(default_base, 300, 12)) != first
    # A shorter run is a prefix of a longer one with the same seed.
    assert generate_tasks(default_base, 50, 11) == json.loads(first)[:50]


def test_same_bytes_across_processes_and_hash_seeds(default_base):
    expected = "".join(
        json.dumps(t, ensure_ascii=False) + "\n" for t in generate_tasks(default_base, 120, 7)
    )
    for hash_seed in ("1", "2"):
        command = ["generate-tasks", "--count", "120", "--seed", "7"]
        proc = subprocess.run(
            [sys.executable, "-m", "workplace_env.cli", *command],
            cwd=REPO,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        assert proc.stdout == expected


def test_bad_requests_raise(default_base):
    with pytest.raises(ValueError, match="count"):
        generate_tasks(default_base, -1, 0)
    assert generate_tasks(default_base, 0, 0) == []
    empty = BaseTables(frames={key: frame.iloc[0:0] for key, frame in default_base.frames.items()})
    sending = [t for t in TEMPLATES if t.id == "email_send"]
    with pytest.raises(ValueError, match="no template"):
        generate_tasks(empty, 5, 0, templates=sending)
    # With no rows at all, only rule-based tasks remain, and their right answer is to do nothing.
    tasks = generate_tasks(empty, 5, 0)
    assert [t["ground_truth"] for t in tasks] == [[]] * 5


def test_outbox_subjects_are_left_alone(default_base):
    """In a sandbox with sent mail, "the emails about S" never means only the inbox ones."""
    frames = dict(default_base.frames)
    emails = frames["email._emails"].copy()
    emails.loc[emails.index[:40], "inbox/outbox"] = "outbox"
    frames["email._emails"] = emails
    base = BaseTables(frames=frames, origin="with-outbox")
    sent = set(emails["subject"].iloc[:40])
    subject_templates = [t for t in TEMPLATES if "subject" in t.id or "about" in t.id]
    tasks = generate_tasks(base, 200, 0, templates=subject_templates)
    for task in tasks:
        quoted = re.findall(r"'([^']*)'", task["prompt"])
        assert not sent & set(quoted), task["prompt"]
    _check_sound(base, tasks)


def test_conditions_read_the_sandbox(default_base):
    """The world's readings that conditional templates rest on, checked against pandas."""
    world = World(default_base)
    frames = default_base.frames
    visits = frames["analytics._analytics_data"]
    since = date(2023, 11, 1)
    recent = visits[visits["date_of_visit"] >= since.isoformat()]
    per_day = recent.groupby("date_of_visit").size().tolist()
    assert world.daily("total_visits", since) == per_day
    means = recent["session_duration_seconds"].astype(float).groupby(recent["date_of_visit"])
    assert world.daily("session_duration_seconds", since) == pytest.approx(means.mean().tolist())
    events = frames["calendar._calendar_events"]
    tomorrow = events[events["event_start"].str.startswith(TOMORROW.isoformat())]
    start = world.first_free(TOMORROW, 30)
    if start is not None:
        for _, row in tomorrow.iterrows():
            begin = pd.Timestamp(row["event_start"])
            end = begin + timedelta(minutes=int(row["duration"]))
            assert end <= start or begin >= start + timedelta(minutes=30)


# ------------------------------------------------------------------------------------------------
# The real WorkBench sandbox


@needs_shared
def test_tasks_generate_on_the_workbench_sandbox(workbench_tables):
    tasks = [t for seed in (0, 1) for t in generate_tasks(workbench_tables, 400, seed)]
    assert {t["template"] for t in tasks} == {t.id for t in TEMPLATES}
    _check_sound(workbench_tables, tasks)
    _check_prompts(tasks)


@needs_shared
def test_readings_agree_with_nemo_ground_truths(workbench_tables):
    """The generator reads the sandbox as NeMo's tasks do (ids from tasks_public.jsonl)."""
    world = World(workbench_tables)
    person = {p.name: p for p in world.people}

    def latest_from(name: str) -> str:
        mail = world.latest(world.mails_from(person[name].email))
        assert mail is not None
        return mail.id

    assert latest_from("leila") == "00000052"  # nemo-validation-296
    assert latest_from("santiago") == "00000348"  # nemo-validation-428
    assert latest_from("sofia") == "00000438"  # nemo-validation-325
    subject = [m for m in world.mails if m.subject == "Update on Creative Thinking Workshop"]
    assert world.latest(subject).id == "00000429"  # nemo-validation-266
    assert world.first_free(TOMORROW, 30).strftime("%H:%M") == "13:00"  # nemo-validation-444
    four_weeks = TODAY - timedelta(weeks=4)
    lost = [
        c.id
        for c in world.customers
        if c.status == "Proposal" and c.product == "Hardware" and c.last_contact < four_weeks
    ]
    assert lost == ["00000037", "00000195", "00000058", "00000132", "00000088"]  # nemo-example-4
    sources = ("direct", "referral", "search engine", "social media")
    totals = [world.source_total(s, date(2023, 9, 2)) for s in sources]
    assert sources[totals.index(max(totals))] == "direct"  # nemo-validation-179


@needs_shared
def test_workbench_prompts_look_like_workbench():
    """Sanity: WorkBench's own task files use the clock and format the generator copies."""
    lines = [
        json.loads(x)
        for x in shared_file(WORKBENCH / "tasks_public.jsonl").read_text().splitlines()
    ]
    assert {t["system"] for t in lines} == {EXPECTED_SYSTEM}
    assert {t["category"] for t in lines} <= set(CATEGORIES)


# ------------------------------------------------------------------------------------------------
# CLI


def test_cli_generate_tasks(tmp_path, default_base):
    runner = CliRunner()
    result = runner.invoke(app, ["generate-tasks", "--count", "25", "--seed", "4"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in result.stdout.splitlines()]
    assert lines == generate_tasks(default_base, 25, 4)
    printed = result.stdout
    out = tmp_path / "tasks.jsonl"
    result = runner.invoke(app, ["generate-tasks", "--count", "25", "--seed", "4", "--out", out])
    assert result.exit_code == 0, result.output
    assert result.stdout == ""  # the tasks go to the file only
    assert "wrote 25 tasks" in result.stderr
    assert out.read_text(encoding="utf-8") == printed  # the very text stdout got
    assert [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()] == lines


def test_cli_demo_runs_both_policies():
    result = CliRunner().invoke(app, ["demo", "--count", "40", "--concurrency", "4"])
    assert result.exit_code == 0, result.output
    assert re.search(r"all\s*│\s*40\s*│\s*1\.000\s*│", result.output), result.output
    assert "perturbed" in result.output


def test_the_count_is_bounded_with_a_usage_error_naming_the_maximum(tmp_path):
    out = tmp_path / "tasks.jsonl"
    runner = CliRunner()
    over = runner.invoke(
        app, ["generate-tasks", "--count", str(MAX_TASK_COUNT + 1), "--out", str(out)]
    )
    assert over.exit_code == 2 and str(MAX_TASK_COUNT) in over.output, over.output
    assert not out.exists()
    shown = runner.invoke(app, ["generate-tasks", "--help"], env={"COLUMNS": "200"})
    assert f"at most {MAX_TASK_COUNT:,}" in shown.output


def test_lines_are_written_as_made_and_an_interrupt_leaves_whole_lines():
    """The largest run writes its first line at once (stdout, a pipe); Ctrl-C then stops it
    with exit 130 naming how many whole lines were written, and every line parses."""
    command = [sys.executable, "-m", "workplace_env.cli", "generate-tasks"]
    proc = subprocess.Popen(
        [*command, "--count", str(MAX_TASK_COUNT)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,  # unbuffered: readline takes the first line only, communicate the rest
    )
    try:
        first = json.loads(proc.stdout.readline())  # written before the run is done
        proc.send_signal(signal.SIGINT)
        rest, err = (part.decode() for part in proc.communicate(timeout=120))
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = [first, *(json.loads(line) for line in rest.splitlines())]
    assert proc.returncode == 130, err
    assert len(lines) < MAX_TASK_COUNT and first["id"] == "gen-s0-1"
    assert f"interrupted: {counted(len(lines), 'whole task')} written to stdout" in " ".join(
        err.split()
    )


def test_an_interrupted_run_into_a_file_keeps_the_lines_written(tmp_path, monkeypatch):
    """Ctrl-C while the third task is made: the run ends after writing it whole (exit 130)."""
    real = core.iter_tasks

    def interrupted(*args):
        for n, task in enumerate(real(*args), 1):
            if n == 3:
                signal.raise_signal(signal.SIGINT)
            yield task

    monkeypatch.setattr(core, "iter_tasks", interrupted)
    out = tmp_path / "tasks.jsonl"
    wakeup = signal.set_wakeup_fd(-1)  # an earlier test's event loop may have left a closed one
    try:
        result = CliRunner().invoke(app, ["generate-tasks", "--count", "10", "--out", str(out)])
    finally:
        with contextlib.suppress(OSError, ValueError):  # a closed or blocking one stays out
            signal.set_wakeup_fd(wakeup)
    assert result.exit_code == 130, result.output
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == [
        "gen-s0-1",
        "gen-s0-2",
        "gen-s0-3",
    ]
    assert f"interrupted: 3 whole tasks written to {out}" in " ".join(result.output.split())
