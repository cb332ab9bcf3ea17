"""``workplace-env demo``: generated tasks played through the gRPC API by two policies.

The oracle makes each task's ground-truth calls and should score 1.0; the perturbed policy drops
one of them (or makes a spurious write when the answer is to change nothing). Both play every
category's tasks against an in-process server; a table by category shows mean reward and
episodes per second.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from workplace_env.interrupts import StopRequest, stop_on_signals
from workplace_env.plurals import counted
from workplace_env.run.scripted import RunSummary, run_lines
from workplace_env.sandbox.load import describe_sandbox
from workplace_env.server.serve import local_server
from workplace_env.taskgen import CATEGORIES, TEMPLATES, generate_tasks
from workplace_env.terminal import console, episode_progress, plain, print_table
from workplace_env_client import EnvironmentClient

DEMO_POLICIES = ("oracle", "perturbed")
_SHORT_CATEGORY = {
    "project_management": "project mgmt",
    "customer_relationship_manager": "crm",
    "multi_domain": "multi-domain",
}


def run_demo(count: int, seed: int, concurrency: int, data_dir: Path | None = None) -> int:
    """Generate ``count`` tasks (``seed``) on the sandbox of ``data_dir``, play them with each
    of :data:`DEMO_POLICIES` (``concurrency`` in flight), print the table. Returns the exit status:
    1 when an episode fails or the oracle scores below 1.0 in a category, else 0; after a
    stop signal (:func:`~workplace_env.interrupts.stop_on_signals`) or once the server is
    found gone (:meth:`~workplace_env.interrupts.StopRequest.check_server`), what was played
    is shown and the status is ``128 + signal`` (1 for the lost server)."""
    started = time.perf_counter()
    with (
        local_server(data_dir) as server,
        EnvironmentClient(f"127.0.0.1:{server.port}") as client,
    ):
        base = server.store.base
        generated = time.perf_counter()
        tasks = generate_tasks(base, count, seed)
        console.print(
            f"generated {counted(len(tasks), 'task')} from {counted(len(TEMPLATES), 'template')}"
            f" (seed {seed}) in "
            f"{time.perf_counter() - generated:.2f} s on the sandbox: "
            f"{plain(describe_sandbox(base))}"
        )
        with stop_on_signals() as stop:
            results = _play(client, tasks, concurrency, seed, stop)
    print_demo(results, f"{len(tasks)} generated tasks through the gRPC API")
    errors = [m for by in results.values() for s in by.values() for m in s.mismatches]
    for m in errors[:10]:
        console.print(f"[yellow]{plain(m.kind)}[/yellow] {plain(m.case_id)}: {plain(m.text())}")
    console.print(f"done in {time.perf_counter() - started:.1f} s")
    if stop():
        left = sum(s.not_started for by in results.values() for s in by.values())
        console.print(f"{stop.stopped_text()}: {counted(left, 'episode')} not started")
        return stop.exit_status
    if errors or any(s.mean_reward != 1.0 for s in results["oracle"].values()):
        return 1
    return 0


def _play(
    client: EnvironmentClient,
    tasks: Sequence[Mapping[str, Any]],
    concurrency: int,
    seed: int,
    stop: StopRequest,
) -> dict[str, dict[str, RunSummary]]:
    """Run every category's tasks with each policy, none started once ``stop()``; one
    progress bar per policy."""
    groups = {c: [t for t in tasks if t["category"] == c] for c in CATEGORIES}
    groups = {c: lines for c, lines in groups.items() if lines}
    results: dict[str, dict[str, RunSummary]] = {}
    with episode_progress() as bars:
        for policy in DEMO_POLICIES:
            bar = bars.add_task(f"{policy} episodes", total=len(tasks))
            results[policy] = {
                category: run_lines(
                    client,
                    lines,
                    policy,
                    concurrency,
                    seed=seed,
                    on_done=lambda _r, bar=bar: bars.advance(bar),
                    stop=stop,
                )
                for category, lines in groups.items()
            }
    return results


def print_demo(results: Mapping[str, Mapping[str, RunSummary]], title: str) -> None:
    """Mean reward (over the episodes played: a failed one is listed under the table, never
    a reward of 0) and episodes/s by category and policy, with an ``all`` row, on stdout."""
    table = Table(
        title=plain(title),
        caption="oracle: the ground-truth calls; perturbed: one of them dropped, or a spurious "
        "write when the answer is to change nothing",
    )
    table.add_column("category", no_wrap=True)
    table.add_column("episodes", justify="right")
    for policy in DEMO_POLICIES:
        table.add_column(f"{policy}\nmean reward", justify="right")
        table.add_column(f"{policy}\nepisodes/s", justify="right")
    first = results[DEMO_POLICIES[0]]
    totals = {p: [0, 0, 0.0, 0.0] for p in DEMO_POLICIES}  # episodes, played, reward sum, seconds
    for category, summary in first.items():
        short = category.removeprefix("workplace_assistant_")
        row = [plain(_SHORT_CATEGORY.get(short, short)), str(summary.episodes)]
        for policy in DEMO_POLICIES:
            s = results[policy][category]
            mean = "-" if s.mean_reward is None else f"{s.mean_reward:.3f}"
            row += [mean, f"{s.episodes_per_s:.0f}"]
            totals[policy][0] += s.episodes
            totals[policy][1] += s.played_episodes
            totals[policy][2] += (s.mean_reward or 0.0) * s.played_episodes
            totals[policy][3] += s.episodes / s.episodes_per_s if s.episodes_per_s else 0.0
        table.add_row(*row)
    row = ["all", str(totals[DEMO_POLICIES[0]][0])]
    for policy in DEMO_POLICIES:
        n, played, reward, seconds = totals[policy]
        row += [
            f"{reward / played:.3f}" if played else "-",
            f"{n / seconds:.0f}" if seconds else "-",
        ]
    table.add_section()
    table.add_row(*row, style="bold")
    print_table(table)
