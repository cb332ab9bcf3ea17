"""``workplace-env run --policy model``: collect model rollouts into a file, resumably; summarise.

Each (task, rollout index) pair is one episode played by :func:`workplace_env_client.run_rollout`
(the SDK's model loop) with ``concurrency`` episodes in flight. Lines are appended to the
rollouts JSONL as episodes finish (NeMo Gym's rollout shape plus ``workplace_env``
diagnostics), next to NeMo Gym's ``<stem>_materialized_inputs.jsonl`` (every pair's row with its
``responses_create_params``, ``_ng_task_index`` and ``_ng_rollout_index``), so NeMo Gym can
train on the file or re-verify it.

Resume: a rerun of the same plan with the same output file keeps the lines of finished episodes
and plays only the others. Finished means scored (not masked) or failed by the model itself
(``agent_run_error``); episodes masked by the endpoint or the environment (``provider_*``,
``session_*``) are played again. The plan is the list of materialized inputs (each row as sent
with its request, the sampling overrides merged into its ``responses_create_params`` as NeMo
Gym merges them, and its task and rollout indices) and the run's own settings (:func:`run_plan`:
model, API, base URL, sampling, max turns, the sandbox's digest and the server's tools); each
rollout line records the SHA-256 of its input's canonical JSON (``workplace_env.input_sha256``),
the settings (``workplace_env.plan``) and the sandbox (``workplace_env.sandbox``). Lines are
strict JSON (:func:`json_line`); one that cannot be is replaced by the model's failure
(``agent_run_error``). When the existing files describe another plan (another setting, other
rows at the same indices, other ``repeats``, another count, or lines without that digest),
:func:`collect_rollouts` raises :class:`PlanMismatch` before playing or writing anything,
unless ``overwrite`` deletes them first, naming what changed: the rollouts, materialized inputs,
summary and plot always describe the same episodes. An endpoint that refuses a request for its
configuration (:data:`~workplace_env_client.rollouts.MODEL_CONFIG_ERROR`) stops the collection:
no episode starts after it.

One run writes an output file at a time: the CLI holds :func:`only_run_into` for the whole
run, so a second run into the same file is refused instead of appending the same episodes.

Rows are kept as sent, their values' JSON types included (an ``id`` of ``0`` stays ``0``); the
case id (``case_id``, else ``id``, else ``line-<n>``) only names the episode's rollout and task
ids.

Summary by category (:func:`summarise`): the pass rate is reward 1.0 among the episodes that
count, that is all but those masked by the endpoint or the environment (``masked``: no score of
the model, reported apart); the model's own failures (``agent_run_error``, ``model_failures``)
count as failures. Also mean model turns, tool-call validity (share of the model's calls that
ran), and WorkBench's side-effect rate: the share of scored (unmasked) episodes whose end state
differs from the expected one in a table that no ground-truth call writes (so the model changed
a table the task did not ask for).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from itertools import zip_longest
from pathlib import Path
from typing import Any, cast

from workplace_env.interrupts import StopRequest
from workplace_env.locks import only_writer
from workplace_env.run.scripted import case_id_of
from workplace_env.sandbox.tools import TOOLS
from workplace_env_client import (
    EnvironmentClient,
    ModelPolicy,
    Rollout,
    WorkplaceEnvError,
    checks,
    create_params_for,
    run_rollout,
)
from workplace_env_client.rollouts import (
    ENVIRONMENT_ERROR,
    MASK_KINDS,
    MODEL_CONFIG_ERROR,
    episode_for,
    failed_rollout,
)
from workplace_env_client.rows import CategoryFigures, ModelRunSummary, RunPlan, SandboxIdentity

#: Masked failures that the model caused; resume does not play these again.
FINISHED_FAILURES = frozenset(kind for kind, what in MASK_KINDS.items() if what.model_own)


def materialized_inputs_path(out: Path) -> Path:
    """NeMo Gym's companion file: ``rollouts.jsonl`` -> ``rollouts_materialized_inputs.jsonl``."""
    return out.with_name(out.stem + "_materialized_inputs.jsonl")


def plot_path(out: Path) -> Path:
    """Where the pass-rate plot goes: ``rollouts.jsonl`` -> ``rollouts_pass_rate.png``."""
    return out.with_name(out.stem + "_pass_rate.png")


def summary_path(out: Path) -> Path:
    """Where the summary JSON goes: ``rollouts.jsonl`` -> ``rollouts_summary.json``."""
    return out.with_name(out.stem + "_summary.json")


def _key(line: Mapping[str, Any]) -> tuple[int, int, str]:
    # the id as JSON: an id of 0 and one of "0" are different rows
    return (
        int(line.get("_ng_task_index", -1)),
        int(line.get("_ng_rollout_index", -1)),
        json.dumps(line.get("id"), sort_keys=True, default=str),
    )


def is_finished(line: Mapping[str, Any]) -> bool:
    """True when a rollout line needs no replay (see the module docstring)."""
    return not line.get("mask_sample") or line.get("failure_kind") in FINISHED_FAILURES


def read_finished(out: Path) -> list[dict[str, Any]]:
    """The finished lines of an existing output file (the last line of a key wins); a line cut
    short by a crash is dropped."""
    if not out.exists():
        return []
    kept: dict[tuple[int, int, str], dict[str, Any]] = {}
    with out.open("rb") as fh:
        for text in fh:
            try:
                line = json.loads(text)
            except ValueError:  # not JSON, or not UTF-8 text
                continue  # an append interrupted mid-line
            if isinstance(line, dict):
                kept[_key(line)] = line
    return [line for line in kept.values() if is_finished(line)]


class PlanMismatch(ValueError):
    """The output files hold rollouts of another plan; the message names the file, how many
    lines differ and the way out (a new ``--out`` or ``--overwrite``)."""


def input_digest(item: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of a materialized input's canonical JSON (sorted keys, no spaces): the row
    as sent, its ``responses_create_params`` and its ``_ng_task_index``/``_ng_rollout_index``."""
    text = json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _line_digest(line: Mapping[str, Any]) -> Any:
    diagnostics = line.get("workplace_env")
    return diagnostics.get("input_sha256") if isinstance(diagnostics, Mapping) else None


def _json_lines(path: Path, *, keep_bad: bool) -> list[Any]:
    """The JSON values of a file's lines; a line that is not JSON is ``None`` when
    ``keep_bad``, else skipped (an append cut short by a crash)."""
    values: list[Any] = []
    with path.open("rb") as fh:
        for text in fh:
            if not text.strip():
                continue
            try:
                values.append(json.loads(text))
            except ValueError:  # not JSON, or not UTF-8 text
                if keep_bad:
                    values.append(None)
    return values


def lock_path(out: Path) -> Path:
    """The lock file of a collection into ``out``: ``rollouts.jsonl`` -> ``rollouts.jsonl.lock``."""
    return out.with_name(out.name + ".lock")


def only_run_into(out: Path) -> contextlib.AbstractContextManager[None]:
    """Hold ``out``'s lock file (:func:`lock_path`, its directory created when missing) for a
    whole collection: one run writes ``out`` at a time. Entering raises
    :class:`~workplace_env.locks.WriterBusy` at once when another run holds it (the message names
    the lock file, ``out`` and the holder's pid), OSError when the lock file cannot be written."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return only_writer(lock_path(out), f"another run is writing {out}")


def output_files(out: Path) -> list[Path]:
    """The files a collection into ``out`` writes: rollouts, materialized inputs, summary, plot."""
    return [out, materialized_inputs_path(out), summary_path(out), plot_path(out)]


def plan_changes(recorded: Any, plan: Mapping[str, Any]) -> list[str]:
    """What differs between a rollout line's recorded plan and ``plan``: ``"key: old -> new"``
    per differing key (a line that records no plan: ``"plan: none recorded"``)."""
    if not isinstance(recorded, Mapping):
        return ["plan: none recorded"]
    keys = [*plan, *(k for k in recorded if k not in plan)]
    return [
        f"{key}: {json.dumps(recorded.get(key))} -> {json.dumps(plan.get(key))}"
        for key in keys
        if recorded.get(key) != plan.get(key)
    ]


def check_plan(
    out: Path, inputs: Sequence[Mapping[str, Any]], plan: Mapping[str, Any] | None = None
) -> None:
    """Raise :class:`PlanMismatch` unless every existing line of ``out`` and of its materialized
    inputs belongs to the plan ``inputs``: the inputs file identical line for line, each rollout
    line carrying the digest of the input at its (task, rollout) indices and (when given) the
    run-level ``plan`` (:func:`run_plan`). The message names what changed."""
    digests = [input_digest(i) for i in inputs]
    changes: dict[str, None] = {}
    want = {
        (i["_ng_task_index"], i["_ng_rollout_index"]): d
        for i, d in zip(inputs, digests, strict=True)
    }
    found: list[str] = []
    materialized = materialized_inputs_path(out)
    if materialized.exists():
        old = _json_lines(materialized, keep_bad=True)
        differ = sum(
            1
            for line, digest in zip_longest(old, digests)
            if not isinstance(line, dict) or digest is None or input_digest(line) != digest
        )
        if differ:
            found.append(
                f"{differ} of the {len(old)} lines of {materialized.name} "
                f"(this run has {len(inputs)} episodes)"
            )
    if out.exists():
        lines = _json_lines(out, keep_bad=False)
        differ = sum(
            1
            for line in lines
            if not isinstance(line, dict)
            # the plan first: every line's changes are named
            or (plan is not None and bool(_note_changes(line, plan, changes)))
            or want.get((line.get("_ng_task_index"), line.get("_ng_rollout_index")))
            != _line_digest(line)
            or _line_digest(line) is None
        )
        if differ:
            found.append(f"{differ} of the {len(lines)} lines of {out.name}")
    if found:
        changed = f" (changed: {'; '.join(list(changes)[:6])})" if changes else ""
        raise PlanMismatch(
            f"{out} holds rollouts of another plan (another model, API, base URL, sampling, "
            f"--max-turns, sandbox or tool set, other rows at the same indices, other --repeats "
            f"or another count){changed}: {' and '.join(found)} differ from this run; nothing "
            f"played. Use a new --out, or --overwrite to delete the files of {out.parent} for "
            f"this --out ({', '.join(p.name for p in output_files(out))}) and start again."
        )


def _note_changes(line: Any, plan: Mapping[str, Any], changes: dict[str, None]) -> list[str]:
    diagnostics = line.get("workplace_env") if isinstance(line, Mapping) else None
    recorded = diagnostics.get("plan") if isinstance(diagnostics, Mapping) else None
    found = plan_changes(recorded, plan)
    changes.update(dict.fromkeys(found))
    return found


def run_plan(
    policy: ModelPolicy,
    tools: Sequence[Mapping[str, Any]],
    sampling: Mapping[str, Any],
    *,
    base_url: str | None,
    sandbox: Mapping[str, Any] | None,
) -> RunPlan:
    """What makes two collections the same experiment beyond their rows (each rollout line
    records it as ``workplace_env.plan``): ``model``, ``api``, ``base_url``, ``sampling`` (the
    ``responses_create_params`` overrides given: temperature, top_p, max_output_tokens, seed),
    ``max_turns``, the ``sandbox`` digest (None: unknown) and ``tools_sha256`` (SHA-256 of the
    server's tool schemas' canonical JSON)."""
    tools_text = json.dumps(list(tools), sort_keys=True, separators=(",", ":"))
    return {
        "model": policy.model,
        "api": policy.api,
        "base_url": base_url,
        "sampling": dict(sampling),
        "max_turns": policy.max_turns,
        "sandbox": sandbox.get("digest") if sandbox else None,
        "tools_sha256": hashlib.sha256(tools_text.encode("utf-8")).hexdigest(),
    }


def json_line(line: Mapping[str, Any]) -> str:
    """``line`` as one line of strict JSON (UTF-8 text, no NaN or infinities, no integer
    beyond a float's range), ending in ``\\n``. Raises ValueError naming the first part that
    cannot be written so (:func:`~workplace_env_client.checks.json_problem`)."""
    problem = checks.json_problem(line, "line", strict=True)
    if problem is not None:
        raise ValueError(f"{problem[0]}: {problem[1]}")
    return json.dumps(line, ensure_ascii=False, allow_nan=False) + "\n"


def _write_lines(path: Path, lines: Iterable[Mapping[str, Any]]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(json_line(line))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


@dataclass
class CollectResult:
    """What a collection did: episodes played now, skipped as already finished, in total
    (``total`` - ``played`` - ``skipped`` were not started after a configuration error);
    ``keys`` identify this run's episodes among the file's lines (see :func:`read_rollouts`)."""

    played: int
    skipped: int
    total: int
    keys: frozenset[tuple[int, int, str]]
    #: Why the endpoint refused a model request for its configuration (the first such
    #: episode's reason); no episode started after it. None when none was refused so.
    config_error: str | None = None

    @property
    def not_started(self) -> int:
        """Episodes of the plan neither played now nor kept (a stop, a configuration error)."""
        return self.total - self.played - self.skipped


def collect_rollouts(
    client: EnvironmentClient,
    model_client: Any,
    rows: Sequence[Mapping[str, Any]],
    policy: ModelPolicy,
    out: Path,
    *,
    repeats: int = 1,
    concurrency: int = 1,
    overwrite: bool = False,
    sampling: Mapping[str, Any] | None = None,
    base_url: str | None = None,
    sandbox: Mapping[str, Any] | None = None,
    on_start: Callable[[int], None] | None = None,
    on_done: Callable[[dict[str, Any]], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> CollectResult:
    """Play every (row, rollout index < ``repeats``) not finished in ``out``; append each line.

    ``sampling`` (temperature, top_p, max_output_tokens, seed) overrides each row's
    ``responses_create_params`` as NeMo Gym's ``responses_create_params`` overrides do;
    ``base_url`` and ``sandbox`` (``{"digest", "origin"}``, None: unknown) go into the plan
    (:func:`run_plan`) with the policy and the server's tools; every line records the plan and
    the sandbox under ``workplace_env``. ``on_start(n)`` gets the number of episodes to play,
    ``on_done(line)`` each written line; once ``stop()`` is true no further episode starts
    (those in flight end and are written). A :class:`~workplace_env.interrupts.StopRequest`
    ``stop`` is also raised when an episode is masked ``workplace_env:environment_error`` and
    the server does not answer a health check
    (:meth:`~workplace_env.interrupts.StopRequest.check_server`). Raises
    :class:`PlanMismatch` (nothing played or written) when the existing files hold another
    plan (:func:`check_plan`), unless ``overwrite`` deletes them (:func:`output_files`);
    :class:`OSError` when a file cannot be written.
    """
    tools = client.list_tools()
    overrides = dict(sampling or {})
    plan = run_plan(policy, tools, overrides, base_url=base_url, sandbox=sandbox)
    pairs = [
        (task_index, rollout_index, dict(row))
        for task_index, row in enumerate(rows)
        for rollout_index in range(repeats)
    ]
    inputs = []
    for task_index, rollout_index, row in pairs:
        inputs.append(
            {
                **row,
                "responses_create_params": create_params_for(row, tools) | overrides,
                "_ng_task_index": task_index,
                "_ng_rollout_index": rollout_index,
            }
        )
    digests = {(i["_ng_task_index"], i["_ng_rollout_index"]): input_digest(i) for i in inputs}
    if overwrite:
        for path in output_files(out):
            path.unlink(missing_ok=True)
    else:
        check_plan(out, inputs, plan)
    out.parent.mkdir(parents=True, exist_ok=True)
    _write_lines(materialized_inputs_path(out), inputs)
    finished = read_finished(out)
    done_keys = {_key(line) for line in finished}
    todo = [i for i in inputs if _key(i) not in done_keys]
    _write_lines(out, finished)  # drops the lines about to be played again
    if on_start is not None:
        on_start(len(todo))
    lock = threading.Lock()

    played: list[int] = []
    config_errors: list[str] = []  # the first; no episode starts after it

    def one(item: dict[str, Any]) -> None:
        if config_errors or (stop is not None and stop()):
            return
        row = {
            k: v
            for k, v in item.items()
            if k not in ("responses_create_params", "_ng_task_index", "_ng_rollout_index")
        }
        task_index, rollout_index = item["_ng_task_index"], item["_ng_rollout_index"]
        params = item["responses_create_params"]
        case = case_id_of(row, task_index + 1)
        try:
            rollout = run_rollout(
                client,
                model_client,
                {**row, "responses_create_params": params},
                policy,
                tools=tools,
                episode=episode_for({"id": case}, rollout_index),
                task_id=("model", case),
            )
        except WorkplaceEnvError as exc:  # seed or close refused: masked, played again on resume
            rollout = failed_rollout(
                {**row, "responses_create_params": params},
                params,
                policy,
                ENVIRONMENT_ERROR,
                f"{type(exc).__name__}: {exc}",
            )
        line = _stamped(rollout, task_index, rollout_index)
        try:
            text = json_line(line)
        except ValueError as exc:  # not strict JSON: the model's failure, its answer left out
            why = f"the rollout line cannot be written as strict JSON: {exc}"
            rollout = failed_rollout(rollout.row, params, policy, "agent_run_error", why)
            line = _stamped(rollout, task_index, rollout_index)
            text = json_line(line)
        with lock:
            with out.open("a", encoding="utf-8") as fh:
                fh.write(text)
            played.append(1)
            if rollout.failure_kind == MODEL_CONFIG_ERROR and not config_errors:
                config_errors.append(str(rollout.failure_reason))
        if rollout.failure_kind == ENVIRONMENT_ERROR and isinstance(stop, StopRequest):
            stop.check_server(client.channel)
        if on_done is not None:
            on_done(line)

    def _stamped(rollout: Rollout, task_index: int, rollout_index: int) -> dict[str, Any]:
        line = rollout.to_json(task_index, rollout_index)
        line["workplace_env"]["input_sha256"] = digests[(task_index, rollout_index)]
        line["workplace_env"]["plan"] = plan
        line["workplace_env"]["sandbox"] = sandbox
        return line

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for future in [pool.submit(one, item) for item in todo]:
            future.result()
    return CollectResult(
        played=len(played),
        skipped=len(inputs) - len(todo),
        total=len(inputs),
        keys=frozenset(_key(i) for i in inputs),
        config_error=config_errors[0] if config_errors else None,
    )


# -- summary ----------------------------------------------------------------------------------


def side_effect_tables(line: Mapping[str, Any]) -> list[str]:
    """Tables where the episode's end state differs from the expected one although no
    ground-truth call writes them (WorkBench's side effects)."""
    truth = line.get("ground_truth")
    asked: set[str] = set()
    for call in truth if isinstance(truth, list) else []:
        tool = TOOLS.get(str(call.get("name", ""))) if isinstance(call, Mapping) else None
        if tool is not None:
            asked |= tool.writes
    tables = (line.get("workplace_env") or {}).get("tables") or []
    return [t["table"] for t in tables if not t.get("equal", True) and t["table"] not in asked]


_SHORT_CATEGORY = {
    "customer_relationship_manager": "crm",
    "project_management": "project mgmt",
    "multi_domain": "multi-domain",
}


def short_category(category: str) -> str:
    """A category's name in tables and plots (``customer_relationship_manager`` -> ``crm``)."""
    return _SHORT_CATEGORY.get(category, category)


@dataclass
class CategorySummary:
    """One category's figures: ``episodes`` in all; ``masked`` by the endpoint or the
    environment (no score of the model, left out of every rate); ``model_failures``, the
    model's own failures (``agent_run_error``, counted as failures); ``pass_rate`` =
    ``passed`` / (``episodes`` - ``masked``); ``side_effect_rate`` over the scored (unmasked)
    episodes; ``tool_call_validity`` over the model's tool calls. A rate over none is None
    (``null`` in JSON, ``-`` in tables: 0/0 is no rate)."""

    category: str
    episodes: int
    masked: int
    model_failures: int
    passed: int
    pass_rate: float | None
    mean_turns: float
    tool_calls: int
    tool_call_validity: float | None
    side_effect_rate: float | None


def _category_summary(category: str, lines: list[Mapping[str, Any]]) -> CategorySummary:
    counted = [line for line in lines if is_finished(line)]
    scored = [line for line in counted if not line.get("mask_sample")]
    passed = sum(1 for line in scored if line.get("reward") == 1.0)
    diag = [line.get("workplace_env") or {} for line in lines]
    calls = sum(int(d.get("tool_calls", 0)) for d in diag)
    invalid = sum(int(d.get("invalid_tool_calls", 0)) for d in diag)
    effects = sum(1 for line in scored if side_effect_tables(line))
    return CategorySummary(
        category=category,
        episodes=len(lines),
        masked=len(lines) - len(counted),
        model_failures=len(counted) - len(scored),
        passed=passed,
        pass_rate=passed / len(counted) if counted else None,
        mean_turns=sum(int(d.get("turns", 0)) for d in diag) / len(lines) if lines else 0.0,
        tool_calls=calls,
        tool_call_validity=(calls - invalid) / calls if calls else None,
        side_effect_rate=effects / len(scored) if scored else None,
    )


def summarise(lines: Iterable[Mapping[str, Any]]) -> list[CategorySummary]:
    """Per-category figures, sorted by category, then the row ``all``."""
    items = list(lines)
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for line in items:
        category = str(line.get("category") or "uncategorised")
        groups.setdefault(category.removeprefix("workplace_assistant_"), []).append(line)
    rows = [_category_summary(c, groups[c]) for c in sorted(groups)]
    return [*rows, _category_summary("all", items)]


def read_rollouts(
    out: Path, keys: frozenset[tuple[int, int, str]] | None = None
) -> list[dict[str, Any]]:
    """The rollout lines of ``out`` (the last line of a key wins), only those of ``keys`` when
    given."""
    kept: dict[tuple[int, int, str], dict[str, Any]] = {}
    with out.open("rb") as fh:
        for text in fh:
            try:
                line = json.loads(text)
            except ValueError:  # blank, cut short by a crash, or not UTF-8 text
                continue
            if isinstance(line, dict) and (keys is None or _key(line) in keys):
                kept[_key(line)] = line
    return list(kept.values())


def write_summary(
    summary: list[CategorySummary], out: Path, sandbox: Mapping[str, Any] | None = None
) -> Path:
    """Write the summary JSON next to ``out``
    (:class:`~workplace_env_client.rows.ModelRunSummary`: ``{"sandbox": {"digest", "origin"}
    (null: unknown), "categories": [each category's figures, then "all"]}``); return its
    path."""
    path = summary_path(out)
    document: ModelRunSummary = {
        "sandbox": cast("SandboxIdentity | None", sandbox),
        "categories": [cast(CategoryFigures, asdict(s)) for s in summary],
    }
    path.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return path


def write_plot(summary: list[CategorySummary], out: Path, title: str) -> Path | None:
    """Save a bar chart of pass rate by category next to ``out``; None when matplotlib is not
    installed (the ``plot`` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    path = plot_path(out)
    names = [short_category(s.category) for s in summary]
    rates = [s.pass_rate or 0.0 for s in summary]  # no rate: no bar (its label says 0/0)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(names)), 3.6))
    bars = ax.bar(names, rates, color=["#4c72b0"] * (len(names) - 1) + ["#55a868"])
    for bar, s in zip(bars, summary, strict=True):
        ax.annotate(
            f"{s.passed}/{s.episodes - s.masked}",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("pass rate (reward 1.0)")
    ax.set_title(title, fontsize=10)
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
