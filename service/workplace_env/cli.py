"""``workplace-env``: serve the environment, run episodes through it, and the tools around them."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from workplace_env.runner import POLICIES, RunSummary, read_jsonl, run_lines
from workplace_env.sandbox.load import load_sandbox
from workplace_env.sandbox.tables import TablesUnavailableError
from workplace_env.server.app import RunningServer, start_server
from workplace_env.sessions import SessionStore
from workplace_env.taskgen import CATEGORIES, TEMPLATES, generate_tasks, write_jsonl
from workplace_env_client import EnvironmentClient

app = typer.Typer(
    help="gRPC environment server for the workplace assistant (WorkBench) benchmark.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console(stderr=True)

DataDir = Annotated[
    Optional[Path],  # noqa: UP045  (typer needs Optional at runtime on 3.11)
    typer.Option(
        "--data-dir",
        help="WorkBench CSV directory; default: the embedded generated sandbox (seed 0).",
        exists=True,
        file_okay=False,
    ),
]


def _store(data_dir: Path | None) -> SessionStore:
    try:
        return SessionStore(load_sandbox(data_dir))
    except TablesUnavailableError as exc:
        console.print(f"[red]cannot load the sandbox:[/red] {exc}")
        raise typer.Exit(2) from exc


@contextmanager
def _in_process_server(data_dir: Path | None) -> Iterator[RunningServer]:
    server = start_server(_store(data_dir), "127.0.0.1:0")
    try:
        yield server
    finally:
        server.stop(grace_s=1.0)


@app.command()
def serve(
    data_dir: DataDir = None,
    address: Annotated[str, typer.Option(help="HOST:PORT to listen on.")] = "127.0.0.1:50051",
    workers: Annotated[int, typer.Option(help="RPC worker threads.")] = 16,
    grace: Annotated[float, typer.Option(help="Seconds in-flight calls get on shutdown.")] = 5.0,
) -> None:
    """Serve the environment over gRPC (with health and reflection) until SIGTERM/SIGINT."""
    try:
        server = start_server(_store(data_dir), address, max_workers=workers)
    except RuntimeError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from exc
    stopping = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    console.print(f"workplace-env serving on {address.rsplit(':', 1)[0]}:{server.port}")
    stopping.wait()
    console.print("draining ...")
    server.stop(grace_s=grace)


def _print_summary(summary: RunSummary, title: str) -> None:
    table = Table(title=title)
    for col in ("episodes", "mean reward", "output mismatches", "reward mismatches", "episodes/s"):
        table.add_column(col, justify="right")
    table.add_row(
        str(summary.episodes),
        f"{summary.mean_reward:.4f}",
        str(summary.output_mismatches),
        str(summary.reward_mismatches),
        f"{summary.episodes_per_s:.1f}",
    )
    Console().print(table)
    for m in summary.mismatches[:10]:
        Console().print(f"[yellow]mismatch[/yellow] {m.case_id} {m.kind}: {m.detail}")


def _run_with_progress(
    client: EnvironmentClient, lines: list, policy: str, concurrency: int
) -> RunSummary:
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        bar = progress.add_task(f"{policy} episodes", total=len(lines))
        return run_lines(
            client, lines, policy, concurrency, on_done=lambda _r: progress.advance(bar)
        )


@app.command()
def run(
    file: Annotated[
        Path,
        typer.Argument(help="JSONL of tasks, rollouts or goldens.", exists=True, dir_okay=False),
    ],
    data_dir: DataDir = None,
    target: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="HOST:PORT of a running server; default: an in-process server."),
    ] = None,
    policy: Annotated[str, typer.Option(help="recorded | oracle | perturbed.")] = "recorded",
    concurrency: Annotated[int, typer.Option(min=1, help="Episodes in flight.")] = 1,
    json_out: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--json-out", help="Write the summary as JSON here."),
    ] = None,
) -> None:
    """Run one episode per JSONL line through the gRPC API; exit 1 on any mismatch."""
    if policy not in POLICIES:
        console.print(f"[red]--policy must be one of {', '.join(POLICIES)}[/red]")
        raise typer.Exit(2)
    try:
        lines = read_jsonl(str(file))
    except ValueError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from exc
    if target is not None:
        with EnvironmentClient(target) as client:
            summary = _run_with_progress(client, lines, policy, concurrency)
    else:
        with (
            _in_process_server(data_dir) as server,
            EnvironmentClient(f"127.0.0.1:{server.port}") as client,
        ):
            summary = _run_with_progress(client, lines, policy, concurrency)
    _print_summary(summary, f"{file.name} ({policy})")
    if json_out is not None:
        json_out.write_text(json.dumps(summary.to_json(), indent=2, default=str) + "\n")
    if summary.output_mismatches or summary.reward_mismatches:
        raise typer.Exit(1)


@app.command("generate-tasks")
def generate_tasks_command(
    count: Annotated[int, typer.Option(min=0, help="How many tasks to generate.")] = 100,
    seed: Annotated[int, typer.Option(help="Seed of the draw: same seed, same tasks.")] = 0,
    data_dir: DataDir = None,
    out: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--out", help="JSONL file to write; default: stdout.", dir_okay=False),
    ] = None,
) -> None:
    """Generate WorkBench-style tasks whose ground truths are computed from the sandbox (JSONL)."""
    base = _store(data_dir).base
    try:
        tasks = generate_tasks(base, count, seed)
    except ValueError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from exc
    if out is None:
        write_jsonl(tasks, sys.stdout)
        sys.stdout.flush()
        return
    with out.open("w", encoding="utf-8", newline="\n") as fh:
        write_jsonl(tasks, fh)
    console.print(f"wrote {len(tasks)} tasks to {out}")


_DEMO_POLICIES = ("oracle", "perturbed")
_SHORT_CATEGORY = {
    "project_management": "project mgmt",
    "customer_relationship_manager": "crm",
    "multi_domain": "multi-domain",
}


def _demo_runs(
    client: EnvironmentClient, tasks: list, concurrency: int, seed: int
) -> dict[str, dict[str, RunSummary]]:
    """Run every category's tasks with each demo policy; one progress bar per policy."""
    groups = {c: [t for t in tasks if t["category"] == c] for c in CATEGORIES}
    groups = {c: lines for c, lines in groups.items() if lines}
    results: dict[str, dict[str, RunSummary]] = {}
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        for policy in _DEMO_POLICIES:
            bar = progress.add_task(f"{policy} episodes", total=len(tasks))
            results[policy] = {
                category: run_lines(
                    client,
                    lines,
                    policy,
                    concurrency,
                    seed=seed,
                    on_done=lambda _r, bar=bar: progress.advance(bar),
                )
                for category, lines in groups.items()
            }
    return results


def _print_demo(results: dict[str, dict[str, RunSummary]], title: str) -> None:
    table = Table(
        title=title,
        caption="oracle: the ground-truth calls; perturbed: one of them dropped, or a spurious "
        "write when the answer is to change nothing",
    )
    table.add_column("category", no_wrap=True)
    table.add_column("episodes", justify="right")
    for policy in _DEMO_POLICIES:
        table.add_column(f"{policy}\nmean reward", justify="right")
        table.add_column(f"{policy}\nepisodes/s", justify="right")
    first = results[_DEMO_POLICIES[0]]
    totals = {p: [0, 0.0, 0.0] for p in _DEMO_POLICIES}  # episodes, reward sum, seconds
    for category, summary in first.items():
        short = category.removeprefix("workplace_assistant_")
        row = [_SHORT_CATEGORY.get(short, short), str(summary.episodes)]
        for policy in _DEMO_POLICIES:
            s = results[policy][category]
            row += [f"{s.mean_reward:.3f}", f"{s.episodes_per_s:.0f}"]
            totals[policy][0] += s.episodes
            totals[policy][1] += s.mean_reward * s.episodes
            totals[policy][2] += s.episodes / s.episodes_per_s if s.episodes_per_s else 0.0
        table.add_row(*row)
    row = ["all", str(totals[_DEMO_POLICIES[0]][0])]
    for policy in _DEMO_POLICIES:
        n, reward, seconds = totals[policy]
        row += [f"{reward / n:.3f}" if n else "-", f"{n / seconds:.0f}" if seconds else "-"]
    table.add_section()
    table.add_row(*row, style="bold")
    Console().print(table)


@app.command()
def demo(
    count: Annotated[int, typer.Option(min=1, help="How many tasks to generate.")] = 200,
    seed: Annotated[int, typer.Option(help="Seed of the task draw.")] = 0,
    concurrency: Annotated[int, typer.Option(min=1, help="Episodes in flight.")] = 8,
    data_dir: DataDir = None,
) -> None:
    """Generate tasks, run them through the gRPC API as the oracle and a perturbed policy.

    The oracle makes each task's ground-truth calls and should score 1.0; the perturbed policy
    drops one of them (or makes a spurious write when the answer is to change nothing). Exit
    status 1 when an episode fails or the oracle scores below 1.0.
    """
    started = time.perf_counter()
    with (
        _in_process_server(data_dir) as server,
        EnvironmentClient(f"127.0.0.1:{server.port}") as client,
    ):
        base = server.store.base
        generated = time.perf_counter()
        tasks = generate_tasks(base, count, seed)
        console.print(
            f"generated {len(tasks)} tasks from {len(TEMPLATES)} templates (seed {seed}) in "
            f"{time.perf_counter() - generated:.2f} s on the sandbox {base.origin or '(unnamed)'}"
        )
        results = _demo_runs(client, tasks, concurrency, seed)
    _print_demo(results, f"{len(tasks)} generated tasks through the gRPC API")
    errors = [m for by in results.values() for s in by.values() for m in s.mismatches]
    for m in errors[:10]:
        console.print(f"[yellow]{m.kind}[/yellow] {m.case_id}: {m.detail}")
    console.print(f"done in {time.perf_counter() - started:.1f} s")
    if errors or any(s.mean_reward < 1.0 for s in results["oracle"].values()):
        raise typer.Exit(1)


def main() -> None:
    """Console-script entry point."""
    app(prog_name="workplace-env")


if __name__ == "__main__":
    sys.exit(main())
