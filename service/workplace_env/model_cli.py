"""The ``run --policy model`` command's front end: check options, build the model client, show
progress, print the summary table, save the summary JSON and the pass-rate plot."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from workplace_env.model_runs import (
    CategorySummary,
    collect_rollouts,
    materialized_inputs_path,
    read_rollouts,
    short_category,
    summarise,
    write_plot,
    write_summary,
)
from workplace_env_client import EnvironmentClient, ModelPolicy, openai_client
from workplace_env_client.rollouts import MODEL_APIS


@dataclass(frozen=True)
class ModelRunOptions:
    """The ``run`` options of the model policy (see ``workplace-env run --help``)."""

    base_url: str | None
    model: str | None
    api: str
    max_turns: int
    api_key_env: str
    timeout_s: float
    max_retries: int
    temperature: float | None
    max_output_tokens: int | None
    repeats: int
    out: Path
    concurrency: int


def _fail(console: Console, message: str) -> typer.Exit:
    console.print(f"[red]{message}[/red]")
    return typer.Exit(2)


def print_summary(summary: Sequence[CategorySummary], title: str) -> None:
    """The per-category table on stdout."""
    table = Table(
        title=title,
        caption="pass rate and side effects over unmasked episodes; valid calls: share of the "
        "model's tool calls that ran; side effects: a table no ground-truth call writes ends "
        "different",
    )
    table.add_column("category", no_wrap=True)
    for col in ("episodes", "masked", "pass\nrate", "mean\nturns", "tool\ncalls", "valid\ncalls"):
        table.add_column(col, justify="right")
    table.add_column("side\neffects", justify="right")
    for s in summary:
        if s.category == "all":
            table.add_section()
        table.add_row(
            short_category(s.category),
            str(s.episodes),
            str(s.masked),
            f"{s.pass_rate:.3f}",
            f"{s.mean_turns:.2f}",
            str(s.tool_calls),
            f"{s.tool_call_validity:.3f}",
            f"{s.side_effect_rate:.3f}",
            style="bold" if s.category == "all" else None,
        )
    Console().print(table)


def run_model_policy(
    client: EnvironmentClient,
    lines: Sequence[Mapping[str, Any]],
    options: ModelRunOptions,
    console: Console,
    model_client: Any = None,
) -> None:
    """Collect the rollouts of ``lines`` into ``options.out``, then summarise all of its lines.

    Exit 2 on a missing option or a missing ``openai`` package; the model's or endpoint's
    failures are masked episodes, never an error of the run.
    """
    if not options.base_url and model_client is None:
        raise _fail(console, "--policy model needs --base-url (an OpenAI-compatible endpoint)")
    if not options.model:
        raise _fail(console, "--policy model needs --model (the model name the endpoint serves)")
    if options.api not in MODEL_APIS:
        raise _fail(console, f"--api must be one of {', '.join(MODEL_APIS)}")
    if model_client is None:
        try:
            model_client = openai_client(
                str(options.base_url),
                api_key_env=options.api_key_env,
                timeout_s=options.timeout_s,
                max_retries=options.max_retries,
            )
        except ImportError as exc:
            raise _fail(console, str(exc)) from exc
    request_options: dict[str, Any] = {}
    if options.temperature is not None:
        request_options["temperature"] = options.temperature
    if options.max_output_tokens is not None:
        request_options["max_output_tokens"] = options.max_output_tokens
    policy = ModelPolicy(
        model=options.model,
        api=options.api,  # type: ignore[arg-type]
        max_turns=options.max_turns,
        request_options=request_options,
    )
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        bar = progress.add_task(f"{options.model} episodes", total=None)
        try:
            result = collect_rollouts(
                client,
                model_client,
                lines,
                policy,
                options.out,
                repeats=options.repeats,
                concurrency=options.concurrency,
                on_start=lambda n: progress.update(bar, total=n),
                on_done=lambda _line: progress.advance(bar),
            )
        except OSError as exc:
            raise _fail(console, f"cannot write {options.out}: {exc}") from exc
    rollouts = read_rollouts(options.out, result.keys)
    summary = summarise(rollouts)
    print_summary(summary, f"{options.model} ({options.api}) on {len(rollouts)} episodes")
    masked = [line for line in rollouts if line.get("mask_sample")]
    for line in masked[:10]:
        console.print(
            f"[yellow]masked[/yellow] {line.get('id')}#{line.get('_ng_rollout_index')}: "
            f"{line.get('failure_kind')}: {line.get('failure_reason')}"
        )
    if len(masked) > 10:
        console.print(f"[yellow]masked[/yellow] ... {len(masked) - 10} more")
    summary_file = write_summary(summary, options.out)
    plot = write_plot(summary, options.out, f"{options.model}: pass rate by category")
    console.print(
        f"played {result.played}, skipped {result.skipped} finished, of {result.total}; "
        f"rollouts {options.out}, inputs {materialized_inputs_path(options.out)}, "
        f"summary {summary_file}"
        + (f", plot {plot}" if plot else " (no plot: pip install 'workplace-env[model]')")
    )
