"""The rows a user reads have the shapes ``workplace_env_client.rows`` types: every rollout line,
model-run summary and ``--json-out`` document ``run`` writes holds each field its TypedDict
requires, no field it does not declare, and each nested row in its own shape."""

from __future__ import annotations

import json
import typing
from typing import Any

from tests.cli.test_model_rollouts import _run_cli
from tests.helpers import local
from tests.model_standin import Fail, StandInModel, Text
from workplace_env_client.rows import (
    ROWS,
    ModelRunSummary,
    RolloutLine,
    RunTotals,
)


def _row_type(hint: object) -> type | None:
    """The TypedDict a field's type names (directly, in ``X | None`` or a list), else None."""
    while typing.get_origin(hint) in (typing.Annotated, typing.NotRequired):
        hint = typing.get_args(hint)[0]
    if typing.is_typeddict(hint):
        return hint  # type: ignore[return-value]
    for arg in typing.get_args(hint):
        if (inner := _row_type(arg)) is not None:
            return inner
    return None


def shape_problems(value: Any, row: type, where: str = "", open_keys: bool = False) -> list[str]:
    """How ``value`` differs from the TypedDict ``row``: required fields missing, fields not
    declared (unless ``open_keys``: a rollout line carries its task row's own fields), and the
    same of each nested row (an object, or each object of a list)."""
    if not isinstance(value, dict):
        return [f"{where or row.__name__}: not an object"]
    hints = typing.get_type_hints(row, include_extras=True)
    found = [f"{where}{k}: missing" for k in row.__required_keys__ if k not in value]  # type: ignore[attr-defined]
    if not open_keys:
        found += [f"{where}{k}: not declared by {row.__name__}" for k in value if k not in hints]
    for name, hint in hints.items():
        inner = _row_type(hint)
        if inner is None or value.get(name) is None:
            continue
        items = value[name] if isinstance(value[name], list) else [value[name]]
        for i, item in enumerate(items):
            found += shape_problems(item, inner, f"{where}{name}[{i}].")
    return found


def test_the_shape_check_finds_a_missing_and_an_undeclared_field():
    totals: dict[str, Any] = {k: 0 for k in RunTotals.__required_keys__}
    totals["mismatches"] = [{"case_id": "c", "kind": "output", "detail": "", "expected": 1}]
    totals["extra"] = 1
    assert sorted(shape_problems(totals, RunTotals)) == [
        "extra: not declared by RunTotals",
        "mismatches[0].actual: missing",
    ]


def test_every_row_type_documents_each_field():
    for row in ROWS:
        for name, hint in typing.get_type_hints(row, include_extras=True).items():
            while typing.get_origin(hint) is typing.NotRequired:
                hint = typing.get_args(hint)[0]
            assert typing.get_origin(hint) is typing.Annotated, f"{row.__name__}.{name}"


def test_a_model_run_writes_rows_of_their_types(server, tmp_path):
    """One scored and one masked (endpoint down) episode: each rollout line is a
    RolloutLine over its task row, the summary a ModelRunSummary."""
    calm = {"id": "calm", "category": "workplace_assistant_email", "ground_truth": []}
    tasks = [{**calm, "prompt": "Nothing to do."}, {**calm, "id": "down", "prompt": "down"}]
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    out = tmp_path / "run" / "rollouts.jsonl"
    out.parent.mkdir()  # an output's directory is the user's to make
    scripts = {tasks[0]["prompt"]: [Text("Nothing to change.")], "down": [Fail(500, 9)]}
    with StandInModel(scripts) as standin:
        result = _run_cli(
            ["run", str(tasks_file), "--policy", "model", "--model", "stand-in", "--api-key-env",
             "STANDIN_KEY", "--max-retries", "0", "--target", local(server.port), "--out",
             str(out), "--base-url", standin.base_url]
        )  # fmt: skip
    assert result.exit_code == 1, result.output  # the masked episode is not finished
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(line["mask_sample"] for line in lines) == [False, True]
    for line in lines:
        assert shape_problems(line, RolloutLine, open_keys=True) == []
        assert set(line) - set(RolloutLine.__annotations__) == set(tasks[0])
        assert {"input_sha256", "plan", "sandbox"} <= set(line["workplace_env"])
    summary = json.loads((tmp_path / "run" / "rollouts_summary.json").read_text())
    assert shape_problems(summary, ModelRunSummary) == []


def test_a_scripted_run_writes_totals_of_their_type(server, tmp_path):
    """``--json-out`` of a run with mismatches (a malformed line is refused before any
    episode, so none fails here) is a RunTotals."""
    tasks_file, totals_file = tmp_path / "tasks.jsonl", tmp_path / "totals.json"
    rows = [
        {"id": "ok", "ground_truth": [], "function_calls": [], "reward": 0.0},
        {"id": "other", "ground_truth": "change nothing", "function_calls": [], "reward": 0.5},
    ]
    tasks_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = _run_cli(
        ["run", str(tasks_file), "--target", local(server.port), "--json-out", str(totals_file)]
    )
    assert result.exit_code == 1, result.output
    totals = json.loads(totals_file.read_text())
    assert totals["mismatches"] and totals["sandbox"]
    assert shape_problems(totals, RunTotals) == []
