"""``workplace-env``: serve the environment, run episodes through it, and the tools around them."""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from workplace_env.checkpoint.files import CheckpointFileError, read_checkpoint, write_checkpoint
from workplace_env.config import ConfigError, Settings, describe, load_settings
from workplace_env.runner import POLICIES, RunSummary, read_jsonl, run_lines
from workplace_env.sandbox.load import load_sandbox
from workplace_env.sandbox.tables import TablesUnavailableError
from workplace_env.server.app import RunningServer, start_server
from workplace_env.server.observability import configure_logging
from workplace_env.sessions import SessionStore
from workplace_env.taskgen import CATEGORIES, TEMPLATES, generate_tasks, write_jsonl
from workplace_env_client import (
    AdminClient,
    EnvironmentClient,
    WorkplaceEnvError,
    snapshot_from_json,
    snapshot_to_json,
)

if TYPE_CHECKING:  # the gateway (FastAPI, uvicorn) loads only when a command needs it
    from workplace_env.gateway import GatewaySettings
    from workplace_env.gateway.serve import RunningGateway

app = typer.Typer(
    help="gRPC environment server for the workplace assistant (WorkBench) benchmark.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console(stderr=True, soft_wrap=True)  # messages never wrap mid-path


def _print_version(value: bool) -> None:
    if value:
        from importlib import metadata

        try:
            version = metadata.version("workplace-env")
        except metadata.PackageNotFoundError:  # pragma: no cover - a bare checkout
            version = "unknown"
        print(f"workplace-env {version}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", help="Print the version and exit.", callback=_print_version),
    ] = False,
) -> None:
    """gRPC environment server for the workplace assistant (WorkBench) benchmark."""


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


#: The admin token of the in-process server of `run` (made per process): the `tables_after`
#: comparisons read the sessions through the admin export, which is off without a token (A1).
_IN_PROCESS_ADMIN_TOKEN = secrets.token_urlsafe(24)


@contextmanager
def _in_process_server(data_dir: Path | None) -> Iterator[RunningServer]:
    # Refusals are part of some files (e.g. bodies the reference answered with 422): the
    # run's own table reports mismatches, so the server's per-RPC warnings stay quiet.
    logging.getLogger("workplace_env.rpc").setLevel(logging.ERROR)
    settings = Settings(admin_token=_IN_PROCESS_ADMIN_TOKEN)
    server = start_server(_store(data_dir), "127.0.0.1:0", settings=settings)
    try:
        yield server
    finally:
        server.stop(grace_s=1.0)


Opt = typer.Option
OptStr = Optional[str]  # noqa: UP045  (typer needs Optional at runtime on 3.11)
OptInt = Optional[int]  # noqa: UP045
OptFloat = Optional[float]  # noqa: UP045
ConfigFile = Annotated[
    Optional[Path],  # noqa: UP045
    Opt("--config", help="TOML or YAML settings file (also WORKPLACE_ENV_CONFIG)."),
]


def _model_opt(help: str, **kwargs: object) -> typer.models.OptionInfo:
    """An option of ``run --policy model`` (grouped under its own help panel)."""
    return Opt(help=help, rich_help_panel="--policy model", **kwargs)  # type: ignore[arg-type]


def _settings(flags: dict, config_file: Path | None) -> tuple[Settings, dict[str, str]]:
    try:
        return load_settings(flags, config_file)
    except ConfigError as exc:
        console.print(f"[red]configuration error:[/red] {exc}")
        raise typer.Exit(2) from exc


def _print_settings(settings: Settings, sources: dict[str, str]) -> None:
    table = Table(title="effective configuration")
    for col in ("setting", "value", "source"):
        table.add_column(col)
    for row in describe(settings, sources):
        table.add_row(*row)
    Console().print(table)


@app.command()
def serve(
    config: ConfigFile = None,
    address: Annotated[OptStr, Opt(help="HOST:PORT to listen on [127.0.0.1:50051].")] = None,
    http_address: Annotated[OptStr, Opt(help="Also serve the legacy HTTP gateway here.")] = None,
    metrics_address: Annotated[OptStr, Opt(help="Serve Prometheus /metrics here.")] = None,
    data_dir: DataDir = None,
    workers: Annotated[OptInt, Opt(help="RPCs running at once [4].")] = None,
    max_concurrent_rpcs: Annotated[
        OptInt, Opt(help="RPCs admitted at once, then RESOURCE_EXHAUSTED [256].")
    ] = None,
    max_admin_rpcs: Annotated[OptInt, Opt(help="Admin RPCs admitted at once [16].")] = None,
    grace_s: Annotated[OptFloat, Opt(help="Seconds in-flight calls get on shutdown [5].")] = None,
    drain_delay_s: Annotated[
        OptFloat,
        Opt(
            help="On SIGTERM, seconds to keep serving while health says NOT_SERVING and /ready "
            "503, before the listeners close [0]. 0: they close as soon as in-flight calls "
            "finish, so no client sees the 503 (right when clients connect directly). Behind "
            "a load balancer, set it above the balancer's time to notice (HAProxy recipe: 1; "
            "Kubernetes: the readiness probe's period x failure threshold)."
        ),
    ] = None,
    max_message_bytes: Annotated[OptInt, Opt(help="Largest request/response [64 MiB].")] = None,
    max_sessions: Annotated[
        OptInt, Opt(help="Live sessions before RESOURCE_EXHAUSTED [50,000].")
    ] = None,
    idle_ttl_s: Annotated[
        OptFloat, Opt(help="Idle seconds before a session is evicted [3600].")
    ] = None,
    evict_interval_s: Annotated[OptFloat, Opt(help="Seconds between eviction sweeps [30].")] = None,
    max_fences: Annotated[OptInt, Opt(help="Closed ids remembered at most [200,000].")] = None,
    fence_ttl_s: Annotated[OptFloat, Opt(help="Seconds a closed id is remembered [21600].")] = None,
    max_call_ids: Annotated[OptInt, Opt(help="call_id records kept per session [1024].")] = None,
    session_close_retry_window_seconds: Annotated[
        OptFloat, Opt(help="Seconds a verified legacy session's reward is remembered [300].")
    ] = None,
    max_markers: Annotated[
        OptInt, Opt(help="Verified legacy ids remembered at most [100,000].")
    ] = None,
    verify_cache_mb: Annotated[
        OptFloat, Opt(help="MiB (estimated) of verified end states memoised [64]; 0: none.")
    ] = None,
    tls_cert: Annotated[OptStr, Opt(help="PEM certificate chain: serve TLS.")] = None,
    tls_key: Annotated[OptStr, Opt(help="PEM private key of --tls-cert.")] = None,
    tls_client_ca: Annotated[
        OptStr, Opt(help="PEM CA: require client certificates (mTLS).")
    ] = None,
    admin_token: Annotated[
        OptStr, Opt(help="Bearer token of the admin RPCs; without one they are off.")
    ] = None,
    admin_open: Annotated[
        Optional[bool],  # noqa: UP045
        Opt("--admin-open/--no-admin-open", help="Admin RPCs without a token (loopback only)."),
    ] = None,
    cookie_secret: Annotated[OptStr, Opt(help="HTTP gateway cookie signing key.")] = None,
    log_level: Annotated[OptStr, Opt(help="DEBUG logs every RPC [INFO].")] = None,
    print_config: Annotated[
        bool, Opt("--print-config", help="Print the settings and exit.")
    ] = False,
) -> None:
    """Serve the environment over gRPC (with health and reflection) until SIGTERM/SIGINT.

    Every option can also come from WORKPLACE_ENV_<NAME> or the --config file (flags win).
    """
    flags = {k: v for k, v in locals().items() if k not in ("config", "print_config")}
    if data_dir is not None:
        flags["data_dir"] = str(data_dir)
    settings, sources = _settings(flags, config)
    if print_config:
        _print_settings(settings, sources)
        return
    configure_logging(settings.log_level)
    try:
        store = SessionStore(load_sandbox(settings.data_dir), settings.session_config())
        server = start_server(store, settings=settings)
    except (RuntimeError, TablesUnavailableError, OSError) as exc:
        console.print(f"[red]cannot start:[/red] {exc}")
        raise typer.Exit(2) from exc
    stopping = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    gateway = None
    if settings.http_address:
        from workplace_env.gateway import start_gateway
        from workplace_env.gateway.backend import InProcessBackend

        try:
            gateway = start_gateway(
                None,
                settings.http_address,
                _gateway_settings(settings),
                # co-hosted: the gateway calls this server's servicer in-process (issue 15)
                backend=InProcessBackend.of_server(server, settings.max_message_bytes),
                grace_s=settings.grace_s,
            )
        except RuntimeError as exc:
            server.stop(grace_s=0)
            console.print(f"[red]cannot start the HTTP gateway:[/red] {exc}")
            raise typer.Exit(2) from exc
    host = settings.address.rsplit(":", 1)[0]
    console.print(f"workplace-env serving on {host}:{server.port}")
    if gateway is not None:
        console.print(f"HTTP gateway on {gateway.url}")
    if server.metrics_port:
        console.print(
            f"metrics on {settings.metrics_address.rsplit(':', 1)[0]}:{server.metrics_port}"
        )
    checkpoints = settings.admin_open or bool(settings.admin_token)
    if gateway is not None and checkpoints and not settings.cookie_secret:
        console.print(
            "[yellow]warning:[/yellow] checkpoints are on (admin RPCs) but the cookie secret "
            "is random per process: cookie sessions restored into another process are orphaned "
            "(their cookies do not verify there); set --cookie-secret"
        )
    stopping.wait()
    console.print("draining ...")
    drain_and_stop(server, gateway, settings.grace_s, settings.drain_delay_s)


def drain_and_stop(
    server: RunningServer, gateway: RunningGateway | None, grace_s: float, hold_s: float = 0.0
) -> None:
    """Shut a server (and its co-hosted gateway) down (CONTRACT X2).

    From the first instant both transports report not-ready and refuse new seeds; both keep
    serving what was admitted for ``hold_s`` seconds (``--drain-delay-s``: until a proxy's health
    checks have taken this replica out; stopping earlier cancels RPCs it still sends here); then
    the gateway's in-flight requests finish (they may still need the gRPC service), then gRPC's.
    """
    if gateway is not None:
        gateway.start_draining()
    server.start_draining()
    if hold_s > 0:
        time.sleep(hold_s)
    if gateway is not None:
        gateway.stop(timeout_s=grace_s)
    server.stop(grace_s=grace_s)


def _gateway_settings(settings: Settings) -> GatewaySettings:
    from workplace_env.gateway import GatewaySettings

    if settings.cookie_secret:
        return GatewaySettings(secret_key=settings.cookie_secret)
    return GatewaySettings()


@app.command()
def gateway(
    grpc_target: Annotated[str, Opt(help="HOST:PORT of the gRPC server.")] = "127.0.0.1:50051",
    address: Annotated[str, Opt(help="HOST:PORT to serve HTTP on.")] = "127.0.0.1:8000",
    config: ConfigFile = None,
    cookie_secret: Annotated[OptStr, Opt(help="Cookie signing key [random per process].")] = None,
) -> None:
    """Serve the reference's legacy cookie HTTP routes (and MCP) over a gRPC server."""
    from workplace_env.gateway import run_gateway

    settings, _ = _settings({"cookie_secret": cookie_secret}, config)
    configure_logging(settings.log_level)
    try:
        run_gateway(
            grpc_target,
            address,
            _gateway_settings(settings),
            grace_s=settings.grace_s,
            on_listening=lambda url: console.print(f"HTTP gateway on {url} -> {grpc_target}"),
        )
    except RuntimeError as exc:
        console.print(f"[red]cannot start the HTTP gateway:[/red] {exc}")
        raise typer.Exit(2) from exc


@app.command("config")
def config_command(config: ConfigFile = None) -> None:
    """Print the effective settings (environment and config file over defaults)."""
    settings, sources = _settings({}, config)
    _print_settings(settings, sources)


def _print_summary(summary: RunSummary, title: str) -> None:
    table = Table(title=title)
    columns = ("episodes", "mean reward", "output mismatches", "state mismatches")
    for col in (*columns, "reward mismatches", "episodes/s"):
        table.add_column(col, justify="right")
    table.add_row(
        str(summary.episodes),
        f"{summary.mean_reward:.4f}",
        str(summary.output_mismatches),
        str(summary.state_mismatches),
        str(summary.reward_mismatches),
        f"{summary.episodes_per_s:.1f}",
    )
    Console().print(table)
    for m in summary.mismatches[:10]:
        Console().print(f"[yellow]mismatch[/yellow] {m.case_id} {m.kind}: {m.detail}")


def _run_with_progress(
    client: EnvironmentClient, lines: list, policy: str, concurrency: int, token: str | None = None
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
            client,
            lines,
            policy,
            concurrency,
            on_done=lambda _r: progress.advance(bar),
            admin_token=token or os.environ.get("WORKPLACE_ENV_ADMIN_TOKEN"),
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
    policy: Annotated[
        str, typer.Option(help="recorded | oracle | perturbed | model.")
    ] = "recorded",
    concurrency: Annotated[int, typer.Option(min=1, help="Episodes in flight.")] = 1,
    json_out: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--json-out", help="Write the summary as JSON here."),
    ] = None,
    token: Annotated[
        OptStr,
        Opt(help="Admin token for the tables_after exports (also WORKPLACE_ENV_ADMIN_TOKEN)."),
    ] = None,
    base_url: Annotated[
        OptStr, _model_opt("Model endpoint (OpenAI-compatible), e.g. http://host:8000/v1.")
    ] = None,
    model: Annotated[OptStr, _model_opt("Model name sent to the endpoint.")] = None,
    api: Annotated[
        str, _model_opt("responses | chat (Chat Completions with tools).")
    ] = "responses",
    max_turns: Annotated[int, _model_opt("Model calls per episode at most.", min=1)] = 10,
    api_key_env: Annotated[
        str, _model_opt("Environment variable holding the API key.")
    ] = "OPENAI_API_KEY",
    timeout: Annotated[float, _model_opt("Seconds per model request.", min=0.1)] = 120.0,
    max_retries: Annotated[
        int, _model_opt("Retries with exponential backoff on 429, 5xx, timeouts.", min=0)
    ] = 4,
    temperature: Annotated[OptFloat, _model_opt("Sampling temperature [endpoint default].")] = None,
    max_output_tokens: Annotated[
        OptInt, _model_opt("Tokens per model answer at most [endpoint default].", min=1)
    ] = None,
    repeats: Annotated[int, _model_opt("Rollouts per task.", min=1)] = 1,
    out: Annotated[
        Optional[Path],  # noqa: UP045
        _model_opt(
            "Rollouts JSONL [<file stem>_rollouts.jsonl]; a rerun resumes it.", dir_okay=False
        ),
    ] = None,
) -> None:
    """Run one episode per JSONL line through the gRPC API; exit 1 on any mismatch.

    Lines with ``tables_after`` also have the session's tables compared (an admin export).
    With --policy model, an OpenAI-compatible model plays each task (see README "Evaluate a
    model"): rollouts go to --out (resumed on a rerun), a summary by category is printed and a
    pass-rate plot saved next to it.
    """
    if policy not in (*POLICIES, "model"):
        console.print(f"[red]--policy must be one of {', '.join(POLICIES)}, model[/red]")
        raise typer.Exit(2)
    try:
        lines = read_jsonl(str(file))
    except ValueError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from exc
    if not lines:
        console.print(f"[red]{file} holds no episodes[/red]")
        raise typer.Exit(2)
    if policy == "model":
        from workplace_env.model_cli import ModelRunOptions, run_model_policy

        options = ModelRunOptions(
            base_url,
            model,
            api,
            max_turns,
            api_key_env,
            timeout,
            max_retries,
            temperature,
            max_output_tokens,
            repeats,
            out or Path(f"{file.stem}_rollouts.jsonl"),
            concurrency,
        )
        if target is not None:
            with EnvironmentClient(target) as client:
                run_model_policy(client, lines, options, console)
        else:
            with (
                _in_process_server(data_dir) as server,
                EnvironmentClient(f"127.0.0.1:{server.port}") as client,
            ):
                run_model_policy(client, lines, options, console)
        return
    if target is not None:
        with EnvironmentClient(target) as client:
            summary = _run_with_progress(client, lines, policy, concurrency, token)
    else:
        with (
            _in_process_server(data_dir) as server,
            EnvironmentClient(f"127.0.0.1:{server.port}") as client,
        ):
            summary = _run_with_progress(
                client, lines, policy, concurrency, _IN_PROCESS_ADMIN_TOKEN
            )
    _print_summary(summary, f"{file.name} ({policy})")
    if json_out is not None:
        json_out.write_text(json.dumps(summary.to_json(), indent=2, default=str) + "\n")
    if summary.output_mismatches or summary.state_mismatches or summary.reward_mismatches:
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
    try:
        with out.open("w", encoding="utf-8", newline="\n") as fh:
            write_jsonl(tasks, fh)
    except OSError as exc:
        console.print(f"[red]cannot write {out}:[/red] {exc}")
        raise typer.Exit(2) from exc
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


checkpoint_app = typer.Typer(
    help="Save live sessions to a directory, or restore them into a server.",
    no_args_is_help=True,
)
app.add_typer(checkpoint_app, name="checkpoint")
Target = Annotated[str, Opt(help="HOST:PORT of the server.")]
Token = Annotated[OptStr, Opt(help="Admin bearer token (also WORKPLACE_ENV_ADMIN_TOKEN).")]
CheckpointDir = Annotated[Path, typer.Argument(help="Checkpoint directory.", file_okay=False)]


#: The deadline of a whole checkpoint export or restore stream: it grows with the number and
#: size of the sessions, so it is far above the SDK's per-call 30 s.
CHECKPOINT_TIMEOUT_S = 600.0
CheckpointTimeout = Annotated[
    float,
    Opt(
        help="Deadline in seconds of the whole export or restore (all sessions in one stream).",
        min=0.1,
    ),
]


def _admin(target: str, token: str | None, timeout_s: float) -> AdminClient:
    return AdminClient(
        target, token=token or os.environ.get("WORKPLACE_ENV_ADMIN_TOKEN"), timeout_s=timeout_s
    )


@checkpoint_app.command("save")
def checkpoint_save(
    directory: CheckpointDir,
    target: Target = "127.0.0.1:50051",
    token: Token = None,
    timeout_s: CheckpointTimeout = CHECKPOINT_TIMEOUT_S,
) -> None:
    """Export every live session and write one file each plus a manifest (atomic).

    Exits 1, after saving the others, when a session cannot be exported (each is named).
    """
    try:
        with _admin(target, token, timeout_s) as admin:
            snapshots, _, failures = admin.export_sessions()
    except WorkplaceEnvError as exc:
        console.print(f"[red]export failed:[/red] {exc}")
        raise typer.Exit(1) from exc
    try:
        manifest = write_checkpoint(directory, [snapshot_to_json(s) for s in snapshots])
    except OSError as exc:
        console.print(f"[red]cannot write the checkpoint:[/red] {exc}")
        raise typer.Exit(1) from exc
    console.print(f"saved {len(snapshots)} sessions to {directory} ({manifest['checkpoint_id']})")
    for sid, why in sorted(failures.items()):
        console.print(f"[red]not saved:[/red] session {sid}: {why}")
    if failures:
        raise typer.Exit(1)


@checkpoint_app.command("restore")
def checkpoint_restore(
    directory: CheckpointDir,
    target: Target = "127.0.0.1:50051",
    token: Token = None,
    timeout_s: CheckpointTimeout = CHECKPOINT_TIMEOUT_S,
) -> None:
    """Verify every file's digest, then restore all sessions in one batch (all or nothing)."""
    try:
        _, documents = read_checkpoint(directory)
        snapshots = [snapshot_from_json(d) for d in documents]
    except (CheckpointFileError, ValueError) as exc:
        console.print(f"[red]checkpoint refused, nothing sent:[/red] {exc}")
        raise typer.Exit(1) from exc
    try:
        with _admin(target, token, timeout_s) as admin:
            count = admin.restore_sessions(snapshots)
    except WorkplaceEnvError as exc:
        console.print(f"[red]restore refused, nothing installed:[/red] {exc}")
        raise typer.Exit(1) from exc
    console.print(f"restored {count} sessions from {directory}")


def main() -> None:
    """Console-script entry point."""
    app(prog_name="workplace-env")


if __name__ == "__main__":
    sys.exit(main())
