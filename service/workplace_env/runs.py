"""``workplace-env run``: play a JSONL file's episodes through a server and report them.

* :func:`read_episodes`: the file's lines, refused (exit 2) when unreadable or empty;
* :func:`run_scripted`: the scripted policies (``recorded``, ``oracle``, ``perturbed``) through
  :func:`~workplace_env.runner.run_lines`, a summary table and ``--json-out``; exit status 1 on
  any mismatch with the recordings;
* :func:`run_model_policy`: ``--policy model``, rollouts of an OpenAI-compatible model collected
  by :mod:`workplace_env.model_runs` (resumed on a rerun), a table by category, the summary JSON
  and the pass-rate plot.

Both play against the ``--target`` server or an in-process one
(:func:`workplace_env.server.serve.connect`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from rich.console import Console
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
from workplace_env.runner import FAILURE_KINDS, RunSummary, read_jsonl, run_lines
from workplace_env.server.serve import connect
from workplace_env.terminal import CommandError, console, episode_progress, plain
from workplace_env_client import EnvironmentClient, ModelPolicy, openai_client
from workplace_env_client.rollouts import MODEL_APIS


def read_episodes(file: Path) -> list[dict[str, Any]]:
    """The JSON objects of ``file``. Raises :class:`CommandError` (exit 2) when it cannot be
    read or holds no line."""
    try:
        lines = read_jsonl(str(file))
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    if not lines:
        raise CommandError(f"{file} holds no episodes")
    return lines


def print_summary(summary: RunSummary, title: str) -> None:
    """The run's totals on stdout, one per row (episodes, how many played and failed, the mean
    reward of the played ones or "-" when none, mismatches by kind, episodes/s), the episodes
    that failed by kind under them (apart from the mismatches), then the first 10 mismatches
    and failures."""
    table = Table(title=plain(title), show_header=False)
    table.add_column("total")
    table.add_column("value", justify="right")
    mean = summary.mean_reward
    for name, value in (
        ("episodes", str(summary.episodes)),
        ("played", str(summary.played_episodes)),
        ("failed", str(summary.failed_episodes)),
        ("mean reward (played)", "-" if mean is None else f"{mean:.4f}"),
        ("output mismatches", str(summary.output_mismatches)),
        ("state mismatches", str(summary.state_mismatches)),
        ("reward mismatches", str(summary.reward_mismatches)),
        ("episodes/s", f"{summary.episodes_per_s:.1f}"),
    ):
        table.add_row(name, value)
    Console().print(table)
    for kind, count in summary.failed.items():
        if count:
            Console().print(f"[red]episodes failed ({FAILURE_KINDS[kind]})[/red] {count}")
    for m in summary.mismatches[:10]:
        label = "failed" if m.kind in FAILURE_KINDS else "mismatch"
        Console().print(f"[yellow]{label}[/yellow] {plain(f'{m.case_id} {m.kind}: {m.detail}')}")


def run_scripted(
    lines: Sequence[Mapping[str, Any]],
    policy: str,
    *,
    title: str,
    target: str | None = None,
    data_dir: Path | None = None,
    concurrency: int = 1,
    token: str | None = None,
    json_out: Path | None = None,
    credentials: grpc.ChannelCredentials | None = None,
) -> int:
    """Play ``lines`` with a scripted ``policy`` (one of :data:`~workplace_env.runner.POLICIES`)
    against ``target`` (None: an in-process server over ``data_dir``), ``concurrency`` in
    flight, with a progress bar; print the summary titled ``title`` and write it as JSON to
    ``json_out``. ``token`` is the target's admin token for ``tables_after`` checks;
    ``credentials`` make the connection to ``target`` TLS (None: plaintext). Returns the
    exit status: 1 when an output, state or reward differs from the recording or an episode
    failed (server unavailable, invalid line, error), else 0."""
    with (
        connect(target, data_dir, token, credentials) as (client, admin_token),
        episode_progress() as bars,
    ):
        bar = bars.add_task(f"{policy} episodes", total=len(lines))
        summary = run_lines(
            client,
            lines,
            policy,
            concurrency,
            on_done=lambda _r: bars.advance(bar),
            admin_token=admin_token,
        )
    print_summary(summary, title)
    if json_out is not None:
        json_out.write_text(json.dumps(summary.to_json(), indent=2, default=str) + "\n")
    if (
        summary.output_mismatches
        or summary.state_mismatches
        or summary.reward_mismatches
        or summary.failed_episodes
    ):
        return 1
    return 0


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


def print_model_summary(summary: Sequence[CategorySummary], title: str) -> None:
    """The per-category table of a model run on stdout."""
    table = Table(
        title=plain(title),
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
            plain(short_category(s.category)),
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
    lines: Sequence[Mapping[str, Any]],
    options: ModelRunOptions,
    *,
    target: str | None = None,
    data_dir: Path | None = None,
    model_client: Any = None,
    credentials: grpc.ChannelCredentials | None = None,
) -> None:
    """Collect the rollouts of ``lines`` into ``options.out`` against ``target`` (None: an
    in-process server over ``data_dir``; TLS with ``credentials``), then summarise all of the
    file's lines.

    Raises :class:`CommandError` (exit 2) on a missing option, a missing ``openai`` package or
    an unwritable output; the model's or endpoint's failures are masked episodes, never an
    error of the run.
    """
    if not options.base_url and model_client is None:
        raise CommandError("--policy model needs --base-url (an OpenAI-compatible endpoint)")
    if not options.model:
        raise CommandError("--policy model needs --model (the model name the endpoint serves)")
    if options.api not in MODEL_APIS:
        raise CommandError(f"--api must be one of {', '.join(MODEL_APIS)}")
    if model_client is None:
        try:
            model_client = openai_client(
                str(options.base_url),
                api_key_env=options.api_key_env,
                timeout_s=options.timeout_s,
                max_retries=options.max_retries,
            )
        except ImportError as exc:
            raise CommandError(str(exc)) from exc
    with connect(target, data_dir, credentials=credentials) as (client, _):
        _collect_and_report(client, model_client, lines, options)


def _collect_and_report(
    client: EnvironmentClient,
    model_client: Any,
    lines: Sequence[Mapping[str, Any]],
    options: ModelRunOptions,
) -> None:
    request_options: dict[str, Any] = {}
    if options.temperature is not None:
        request_options["temperature"] = options.temperature
    if options.max_output_tokens is not None:
        request_options["max_output_tokens"] = options.max_output_tokens
    policy = ModelPolicy(
        model=str(options.model),
        api=options.api,  # type: ignore[arg-type]
        max_turns=options.max_turns,
        request_options=request_options,
    )
    with episode_progress() as bars:
        bar = bars.add_task(f"{options.model} episodes", total=None)
        try:
            result = collect_rollouts(
                client,
                model_client,
                lines,
                policy,
                options.out,
                repeats=options.repeats,
                concurrency=options.concurrency,
                on_start=lambda n: bars.update(bar, total=n),
                on_done=lambda _line: bars.advance(bar),
            )
        except OSError as exc:
            raise CommandError(f"cannot write {options.out}: {exc}") from exc
    rollouts = read_rollouts(options.out, result.keys)
    summary = summarise(rollouts)
    print_model_summary(summary, f"{options.model} ({options.api}) on {len(rollouts)} episodes")
    masked = [line for line in rollouts if line.get("mask_sample")]
    for line in masked[:10]:
        console.print(
            "[yellow]masked[/yellow] "
            + plain(
                f"{line.get('id')}#{line.get('_ng_rollout_index')}: "
                f"{line.get('failure_kind')}: {line.get('failure_reason')}"
            )
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
