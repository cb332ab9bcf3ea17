"""``workplace-env``: serve the environment, run episodes through it, and the tools around them."""

from __future__ import annotations

import json
import signal
import sys
import threading
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


def main() -> None:
    """Console-script entry point."""
    app(prog_name="workplace-env")


if __name__ == "__main__":
    sys.exit(main())
