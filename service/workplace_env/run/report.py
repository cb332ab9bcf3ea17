"""What a run reports: its tables on the terminal, and a model run's figures by category.

* :func:`print_summary`: a scripted run's totals
  (:class:`~workplace_env.run.scripted.RunSummary`);
* :func:`summarise`, :func:`print_model_summary`, :func:`print_masked`, :func:`write_summary`,
  :func:`write_plot` (:func:`plot_labels`): a model run's figures by category, their table,
  what was masked, the summary JSON and the pass-rate plot.

Figures by category: the pass rate is reward 1.0 among the episodes that count, that is all but
those masked by the endpoint or the environment (``masked``: no score of the model, reported
apart); the model's own failures (``agent_run_error``, ``model_failures``) count as failures.
Also mean model turns, tool-call validity (share of the model's calls that ran), and
WorkBench's side-effect rate: the share of scored (unmasked) episodes whose end state differs
from the expected one in a table that no ground-truth call writes (so the model changed a table
the task did not ask for).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

from rich import box
from rich.table import Table

from workplace_env.run.rollout_files import is_finished, plot_path, summary_path
from workplace_env.run.scripted import FAILURE_KINDS, RunSummary
from workplace_env.sandbox.tools import TOOLS
from workplace_env.terminal import Terminal, console, plain, print_table
from workplace_env_client.rollouts import mask_kind
from workplace_env_client.rows import CategoryFigures, ModelRunSummary, SandboxIdentity


def rate_text(rate: float | None, digits: int = 3) -> str:
    """A rate or mean for a table: ``digits`` decimals, ``-`` for None (over no episode)."""
    return "-" if rate is None else f"{rate:.{digits}f}"


def print_summary(summary: RunSummary, title: str) -> None:
    """The run's totals on stdout, one per row (episodes, how many played and failed, the mean
    reward of the played ones or "-" when none, mismatches by kind, episodes/s), the episodes
    that failed by kind under them (apart from the mismatches), then the first 10 mismatches
    and failures."""
    table = Table(title=plain(title), show_header=False)
    table.add_column("total")
    table.add_column("value", justify="right")
    for name, value in (
        ("episodes", str(summary.episodes)),
        ("played", str(summary.played_episodes)),
        ("failed", str(summary.failed_episodes)),
        ("mean reward (played)", rate_text(summary.mean_reward, 4)),
        ("output mismatches", str(summary.output_mismatches)),
        ("state mismatches", str(summary.state_mismatches)),
        ("reward mismatches", str(summary.reward_mismatches)),
        ("episodes/s", f"{summary.episodes_per_s:.1f}"),
        *([("not started", str(summary.not_started))] if summary.not_started else []),
    ):
        table.add_row(name, value)
    print_table(table)
    for kind, count in summary.failed.items():
        if count:
            Terminal().print(f"[red]episodes failed ({FAILURE_KINDS[kind]})[/red] {count}")
    for m in summary.mismatches[:10]:
        label = "failed" if m.kind in FAILURE_KINDS else "mismatch"
        Terminal().print(f"[yellow]{label}[/yellow] {plain(f'{m.case_id} {m.kind}: {m.text()}')}")


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


def print_model_summary(summary: Sequence[CategorySummary], title: str) -> None:
    """The per-category table of a model run on stdout."""
    table = Table(
        title=plain(title),
        box=box.SIMPLE_HEAD,
        padding=(0, 0),
        caption="pass rate: passed / (episodes - masked); model failures (agent_run_error) count "
        "as failures, masked episodes (endpoint or environment) are left out; valid calls: share "
        "of the model's tool calls that ran; side effects (over scored episodes): a table no "
        "ground-truth call writes ends different",
    )
    table.add_column("category")
    for col in (
        "episodes",
        "masked",
        "model\nfailures",
        "passed",
        "pass\nrate",
        "mean\nturns",
        "tool\ncalls",
        "valid\ncalls",
    ):
        table.add_column(col, justify="right")
    table.add_column("side\neffects", justify="right")
    for s in summary:
        if s.category == "all":
            table.add_section()
        table.add_row(
            plain(short_category(s.category)),
            str(s.episodes),
            str(s.masked),
            str(s.model_failures),
            str(s.passed),
            rate_text(s.pass_rate),
            f"{s.mean_turns:.2f}",
            str(s.tool_calls),
            rate_text(s.tool_call_validity),
            rate_text(s.side_effect_rate),
            style="bold" if s.category == "all" else None,
        )
    print_table(table)


def masked_counts(
    masked: Sequence[Mapping[str, Any]], total: CategorySummary, fail_on_masked: bool
) -> list[str]:
    """One line per ``failure_kind`` of the ``masked`` rollout lines: how many, who masked them
    and what it means (:data:`~workplace_env_client.rollouts.MASK_KINDS`, each kind its own);
    the model's own kinds ``failed by`` it (the table's model failures, not masked) with the
    pass rate of ``total`` (the ``all`` row) they count in."""
    said = []
    for kind, count in sorted(Counter(str(m.get("failure_kind")) for m in masked).items()):
        what = mask_kind(kind)
        verb = "failed" if what.model_own else "masked"  # as the table counts them
        line = f"{count} {verb} by {what.by} ({kind}): {what.meaning}"
        if what.model_own:
            line += (
                f" ({total.passed}/{total.episodes - total.masked} = "
                f"{rate_text(total.pass_rate)})"
                + ("; exit 1 (--fail-on-masked)" if fail_on_masked else "")
            )
        said.append(line)
    return said


def print_masked(
    masked: Sequence[Mapping[str, Any]], total: CategorySummary, fail_on_masked: bool
) -> None:
    """The ``masked`` rollout lines on stderr: the first 10 by id, rollout index, kind and
    reason (how many more after them), then :func:`masked_counts`."""
    for line in masked[:10]:
        console.print(
            f"[yellow]{'model failure' if is_finished(line) else 'masked'}[/yellow] "
            + plain(
                f"{line.get('id')}#{line.get('_ng_rollout_index')}: "
                f"{line.get('failure_kind')}: {line.get('failure_reason')}"
            )
        )
    if len(masked) > 10:
        console.print(f"[yellow]masked or model failures[/yellow] ... {len(masked) - 10} more")
    for said in masked_counts(masked, total, fail_on_masked):
        console.print(plain(said))


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


def plot_labels(summary: Sequence[CategorySummary], title: str) -> tuple[list[str], str]:
    """The pass-rate plot's texts: each bar's label (``passed/counted``, and ``N masked`` under
    it when the category has masked episodes) and the title (``title``, then how many episodes
    were masked and left out, and ``no scored episode`` when none counts), so a run the
    endpoint or the environment masked never reads as a model scoring 0."""
    labels = [
        f"{s.passed}/{s.episodes - s.masked}" + (f"\n{s.masked} masked" if s.masked else "")
        for s in summary
    ]
    total = summary[-1]
    notes = []
    if total.episodes == total.masked:
        notes.append("no scored episode")
    if total.masked:
        notes.append(f"{total.masked} of {total.episodes} masked (endpoint or environment)")
    return labels, title + (f"\n{'; '.join(notes)}" if notes else "")


def write_plot(summary: list[CategorySummary], out: Path, title: str) -> Path | None:
    """Save a bar chart of pass rate by category next to ``out``, labelled by
    :func:`plot_labels`; None when matplotlib is not installed (the ``plot`` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    path = plot_path(out)
    names = [short_category(s.category) for s in summary]
    rates = [s.pass_rate or 0.0 for s in summary]  # no rate: no bar (its label says 0/0)
    labels, full_title = plot_labels(summary, title)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(names)), 3.6))
    bars = ax.bar(names, rates, color=["#4c72b0"] * (len(names) - 1) + ["#55a868"])
    for bar, label in zip(bars, labels, strict=True):
        ax.annotate(
            label,
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_ylim(0, 1.25)
    ax.set_ylabel("pass rate (reward 1.0)")
    ax.set_title(full_title, fontsize=10)
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
