"""Benchmark: episodes through the gRPC API from separate client processes; server CPU and RSS.

Usage (README): ``.venv/bin/python bench/bench.py [--data-dir DIR] [--episodes N] [--out FILE]``

Starts ``workplace-env serve`` as a subprocess, then for each concurrency (1, 8, 32, 128) runs
episodes (seed, the recorded calls, verify, close) from client processes and reports:
episodes/s, p50/p99 latency per RPC and per episode (client side, ms), **server CPU ms per
episode** (from ``/proc/<server>/stat``, so it holds on a noisy machine) and server RSS.
Then RSS with 1,000 and 10,000 live seeded sessions (untouched, then after one write each),
and the in-process cost of each operation without transport (the "server time" per RPC).

The episode mix is ``../shared/data/bench/episode_mix.jsonl`` when present (with ``--data-dir``
defaulting to ``../shared/data/workbench``), else oracle episodes of generated tasks on the
embedded default sandbox. Results go to ``bench/results/latest.json``.

Scale-out mode: ``--servers 1,2`` runs the levels against 1, then 2 server processes
(the SDK given the list of their targets, ring_hash affinity on the session header in every
case), and reports episodes/s, server CPU per episode (summed over the processes) and the
client processes' CPU per episode for each count (on a 2-core machine both compete for the same
cores); the memory and in-process runs are skipped. Results go to
``bench/results/scale_out.json`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
#: Where every bench prints: a terminal's width, or 160 columns when the output goes to a file or
#: a log (rich's 80 would cut the tables' columns).
console = Console(width=None if sys.stdout.isatty() else 160)


# -- the server process ------------------------------------------------------------------------


class ServerProcess:
    """``workplace-env serve`` in a subprocess on a free loopback port."""

    def __init__(self, data_dir: str | None, workers: int = 4) -> None:
        cmd = [sys.executable, "-m", "workplace_env.cli", "serve", "--address", "127.0.0.1:0"]
        cmd += ["--workers", str(workers)]
        if data_dir:
            cmd += ["--data-dir", data_dir]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline() if self.proc.stderr else ""
        if "serving on" not in line:
            self.proc.kill()
            raise RuntimeError(f"server did not start: {line!r}")
        self.port = int(json.loads(line)["port"])  # serve writes JSON lines
        self.target = f"127.0.0.1:{self.port}"

    def cpu_s(self) -> float:
        """User + system CPU seconds of the server process so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def rss_mb(self) -> float:
        """Resident set size of the server process, in MB."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class ServerGroup:
    """``count`` server processes seen as one server by :func:`run_level`: ``target`` is the
    list of their targets, CPU and RSS are summed over them."""

    def __init__(self, data_dir: str | None, count: int) -> None:
        self.servers: list[ServerProcess] = []
        try:
            for _ in range(count):
                self.servers.append(ServerProcess(data_dir))
        except BaseException:
            self.stop()
            raise
        self.target = [s.target for s in self.servers]

    def cpu_s(self) -> float:
        return sum(s.cpu_s() for s in self.servers)

    def rss_mb(self) -> float:
        return sum(s.rss_mb() for s in self.servers)

    def stop(self) -> None:
        for s in self.servers:
            s.stop()


# -- client processes --------------------------------------------------------------------------


def run_threads(target: Callable[..., Any], threads: int, *args: Any) -> None:
    """Run ``target(*args)`` on ``threads`` threads at once and wait for them all."""
    pool = [threading.Thread(target=target, args=args) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()


def _client_worker(
    target: str | list[str],
    episodes: list[dict[str, Any]],
    threads: int,
    affinity: bool | None = None,
) -> dict[str, list]:
    """Run ``episodes`` on ``threads`` threads of this process; return latency samples (s).

    ``target`` is one ``host:port`` or a list of them (the SDK's session affinity)."""
    from workplace_env_client import EnvironmentClient

    samples: dict[str, list[float]] = {}
    lock = threading.Lock()
    queue = list(reversed(episodes))

    def record(name: str, seconds: float) -> None:
        with lock:
            samples.setdefault(name, []).append(seconds)

    def timed(name: str, fn, *args, **kwargs):
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        record(name, time.perf_counter() - start)
        return out

    def loop(client: EnvironmentClient) -> None:
        while True:
            with lock:
                if not queue:
                    return
                line = queue.pop()
            sid = f"bench-{uuid.uuid4().hex}"
            episode = (f"r{uuid.uuid4().hex[:12]}", 0)
            calls = line["calls"]
            start = time.perf_counter()
            timed("SeedSession", client.seed, sid, episode, ("bench", str(line["id"])), line)
            for call in calls:
                timed("CallTool", client.call_tool_raw, sid, call["name"], call["arguments"])
            timed("Verify", client.verify, sid, calls)
            timed("CloseSession", client.close_session, sid, episode)
            record("episode", time.perf_counter() - start)

    with EnvironmentClient(target, timeout_s=120, affinity=affinity) as client:
        run_threads(loop, threads, client)
    return samples


def _children_cpu_s() -> float:
    """User + system CPU seconds of this process's finished, waited-for children (the client
    processes; the servers still run, so they are not in it)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_level(
    server: ServerProcess | ServerGroup,
    episodes: list[dict[str, Any]],
    concurrency: int,
    affinity: bool | None = None,
) -> dict[str, Any]:
    """Run ``episodes`` at ``concurrency`` from client processes; measure server CPU (summed
    over a group's processes). ``affinity`` is passed to the clients' EnvironmentClient."""
    processes = 1 if concurrency == 1 else 2
    threads = max(1, concurrency // processes)
    shards = [episodes[i::processes] for i in range(processes)]
    cpu0, wall0 = server.cpu_s(), time.perf_counter()
    client0 = _children_cpu_s()
    with ProcessPoolExecutor(max_workers=processes) as pool:
        parts = list(
            pool.map(
                _client_worker,
                [server.target] * processes,
                shards,
                [threads] * processes,
                [affinity] * processes,
            )
        )
    wall, cpu = time.perf_counter() - wall0, server.cpu_s() - cpu0
    client_cpu = _children_cpu_s() - client0  # the pool's processes, joined by now
    samples: dict[str, list[float]] = {}
    for part in parts:
        for name, values in part.items():
            samples.setdefault(name, []).extend(values)

    def pct(name: str, q: float) -> float:
        values = sorted(samples.get(name, [0.0]))
        return values[min(len(values) - 1, int(q * len(values)))] * 1e3

    return {
        "concurrency": concurrency,
        "episodes": len(episodes),
        "episodes_per_s": len(episodes) / wall,
        "server_cpu_ms_per_episode": cpu / len(episodes) * 1e3,
        "client_cpu_ms_per_episode": client_cpu / len(episodes) * 1e3,
        "server_rss_mb": server.rss_mb(),
        "latency_ms": {
            name: {"p50": pct(name, 0.5), "p99": pct(name, 0.99)}
            for name in ("SeedSession", "CallTool", "Verify", "CloseSession", "episode")
        },
    }


# -- memory with many live sessions --------------------------------------------------------------


def _seed_many(target: str, count: int, write: bool) -> None:
    from workplace_env_client import EnvironmentClient

    task = {"id": "mem", "ground_truth": []}
    with EnvironmentClient(target, timeout_s=120) as client:
        for i in range(count):
            sid = f"mem-{i}"
            client.seed(sid, (f"mem{i}", 0), ("bench", "mem"), task)
            if write:
                client.call_tool_raw(
                    sid, "email_send_email", '{"recipient": "a@b.com", "subject": "s", "body": "b"}'
                )


def memory_levels(data_dir: str | None) -> list[dict[str, Any]]:
    """RSS of a fresh server holding N untouched sessions, then after one write in each."""
    out = []
    for count in (1_000, 10_000):
        server = ServerProcess(data_dir)
        try:
            idle = server.rss_mb()
            _seed_many(server.target, count, write=False)
            seeded = server.rss_mb()
            # One write each on fresh sessions of a second server, so the two figures are apart.
        finally:
            server.stop()
        server = ServerProcess(data_dir)
        try:
            idle_w = server.rss_mb()
            _seed_many(server.target, count, write=True)
            written = server.rss_mb()
        finally:
            server.stop()
        out.append(
            {
                "sessions": count,
                "rss_idle_mb": idle,
                "rss_untouched_mb": seeded,
                "kb_per_untouched_session": (seeded - idle) * 1024 / count,
                "rss_after_one_write_mb": written,
                "kb_per_written_session": (written - idle_w) * 1024 / count,
            }
        )
    return out


# -- in-process operation costs ------------------------------------------------------------------


def operation_costs(data_dir: str | None, episodes: list[dict[str, Any]], reps: int) -> dict:
    """p50 of each store operation without transport (ms): seed, each tool, verify, close."""
    from workplace_env.identity import EpisodeId, FunctionCall, Task, TaskId
    from workplace_env.sandbox.load import load_sandbox
    from workplace_env.sessions import SessionStore

    store = SessionStore(load_sandbox(data_dir))
    times: dict[str, list[float]] = {}

    def timed(name: str, fn, *args):
        start = time.perf_counter()
        fn(*args)
        times.setdefault(name, []).append(time.perf_counter() - start)

    n = 0
    for _ in range(reps):
        for line in episodes:
            n += 1
            sid, ep = f"op{n}", EpisodeId("r", 0)
            truth = tuple(FunctionCall(c["name"], c["arguments"]) for c in line["ground_truth"])
            task = Task(id=str(line["id"]), ground_truth=truth)
            timed("seed", store.seed, sid, ep, TaskId("bench", str(line["id"])), task)
            for c in line["calls"]:
                timed(c["name"], store.call_tool, sid, c["name"], c["arguments"])
            calls = [FunctionCall(c["name"], c["arguments"]) for c in line["calls"]]
            timed("verify", store.verify, sid, calls)
            timed("close", store.close, sid, ep)
    return {k: statistics.median(v) * 1e3 for k, v in sorted(times.items())}


# -- main ----------------------------------------------------------------------------------------


def load_episodes(data_dir: str | None, count: int) -> tuple[list[dict[str, Any]], str]:
    """The episodes to run (each with ``calls``), repeated to ``count``; and their source.

    With ``data_dir`` and the reference data's episode mix next to the checkout
    (``../shared``, the project's test data, absent from a clone), the mix's recorded calls;
    else 200 generated tasks played by their ground truth, on ``data_dir``'s tables or the
    embedded default sandbox (cheaper episodes: figures not comparable with the mix's)."""
    mix = SHARED / "bench" / "episode_mix.jsonl"
    if data_dir is not None and mix.exists():
        lines = [json.loads(t) for t in mix.read_text().splitlines() if t.strip()]
        for line in lines:
            line["calls"] = line["function_calls"]
        source = f"the reference data's episode mix ({mix}) on {data_dir}"
    else:
        from workplace_env.sandbox.load import load_sandbox
        from workplace_env.taskgen import generate_tasks

        lines = generate_tasks(load_sandbox(data_dir), count=200, seed=0)
        for line in lines:
            line["calls"] = line["ground_truth"]
        tables = "the embedded default sandbox" if data_dir is None else data_dir
        source = f"generated tasks (oracle) on {tables}"
    return [dict(lines[i % len(lines)]) for i in range(count)], source


def add_data_dir_option(parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` the ``--data-dir`` every bench takes: a directory of WorkBench CSVs
    (``workplace-env data fetch`` prints one); a path that is no directory is a usage error."""

    def directory(text: str) -> str:
        if not Path(text).is_dir():
            raise argparse.ArgumentTypeError(
                f"{text!r} is no directory (the WorkBench CSVs: `workplace-env data fetch` "
                "prints where it put them)"
            )
        return text

    parser.add_argument(
        "--data-dir",
        type=directory,
        default=None,
        help="a directory of WorkBench CSVs (default: ../shared's when present, else the "
        "embedded default sandbox)",
    )


def default_data_dir(data_dir: str | None) -> str | None:
    """``data_dir``, else the WorkBench CSVs of ../shared when they are there (else None: the
    embedded default sandbox)."""
    if data_dir is None and (SHARED / "workbench" / "emails.csv").exists():
        return str(SHARED / "workbench")
    return data_dir


def write_results(report: dict[str, Any], out: str | None, default_name: str) -> Path:
    """Write ``report`` as indented JSON to ``out`` (default: ``bench/results/<default_name>``),
    making its directory; print where; return the path."""
    path = Path(out or REPO / "bench" / "results" / default_name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    console.print(f"results: {path}")
    return path


def machine_info() -> dict[str, Any]:
    """What a result file says of the machine (the cores are shared: the load at the start)."""
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_at_start": os.getloadavg(),
    }


def print_report(report: dict[str, Any]) -> None:
    table = Table(title=f"episodes: {report['source']}")
    for col in (
        "conc.",
        "ep/s",
        "CPU ms/ep",
        "RSS MB",
        "episode p50/p99",
        "seed p50/p99",
        "tool p50/p99",
        "verify p50/p99",
        "close p50/p99",
    ):
        table.add_column(col, justify="right")
    for lv in report["levels"]:
        lat = lv["latency_ms"]
        cells = [
            f"{lat[k]['p50']:.2f}/{lat[k]['p99']:.2f}"
            for k in ("episode", "SeedSession", "CallTool", "Verify", "CloseSession")
        ]
        table.add_row(
            str(lv["concurrency"]),
            f"{lv['episodes_per_s']:.0f}",
            f"{lv['server_cpu_ms_per_episode']:.2f}",
            f"{lv['server_rss_mb']:.0f}",
            *cells,
        )
    console.print(table)
    if report.get("memory"):
        mem = Table(title="server RSS with live sessions")
        for col in (
            "sessions",
            "idle MB",
            "untouched MB",
            "KB/untouched",
            "after 1 write MB",
            "KB/written",
        ):
            mem.add_column(col, justify="right")
        for m in report["memory"]:
            mem.add_row(
                str(m["sessions"]),
                f"{m['rss_idle_mb']:.0f}",
                f"{m['rss_untouched_mb']:.0f}",
                f"{m['kb_per_untouched_session']:.1f}",
                f"{m['rss_after_one_write_mb']:.0f}",
                f"{m['kb_per_written_session']:.1f}",
            )
        console.print(mem)
    ops = Table(title="in-process operation cost, p50 ms (no transport)")
    ops.add_column("operation")
    ops.add_column("p50 ms", justify="right")
    for name, ms in report["operations_p50_ms"].items():
        ops.add_row(name, f"{ms:.3f}")
    console.print(ops)


# -- scale-out mode ---------------------------------------------------------------


def scale_out(
    data_dir: str | None, episodes: list[dict[str, Any]], counts: list[int], levels: list[int]
) -> list[dict[str, Any]]:
    """Each level against each number of server processes, the clients on the multi-target SDK
    with ring_hash affinity (also for one process, so only the count changes)."""
    out = []
    for count in counts:
        group = ServerGroup(data_dir, count)
        try:
            run_level(group, episodes[: min(50, len(episodes))], 4, affinity=True)  # warm-up
            for level in levels:
                result = run_level(group, episodes, level, affinity=True)
                result["servers"] = count
                out.append(result)
                console.print(f"{count} server(s), concurrency {level}: done")
        finally:
            group.stop()
    return out


def print_scale_out(report: dict[str, Any]) -> None:
    table = Table(title=f"scale-out, episodes: {report['source']}")
    # Short headers: the table fits 80 columns. CPU figures are ms per episode.
    for col in ("servers", "conc.", "ep/s", "x1", "srv CPU", "cli CPU", "RSS MB", "ep p50/p99"):
        table.add_column(col, justify="right")
    single = {
        lv["concurrency"]: lv["episodes_per_s"] for lv in report["scale_out"] if lv["servers"] == 1
    }
    for lv in report["scale_out"]:
        base = single.get(lv["concurrency"])
        episode = lv["latency_ms"]["episode"]
        table.add_row(
            str(lv["servers"]),
            str(lv["concurrency"]),
            f"{lv['episodes_per_s']:.0f}",
            f"{lv['episodes_per_s'] / base:.2f}" if base else "",
            f"{lv['server_cpu_ms_per_episode']:.2f}",
            f"{lv['client_cpu_ms_per_episode']:.2f}",
            f"{lv['server_rss_mb']:.0f}",
            f"{episode['p50']:.1f}/{episode['p99']:.0f}",
        )
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_dir_option(parser)
    parser.add_argument("--episodes", type=int, default=1000, help="episodes per concurrency level")
    parser.add_argument("--levels", default="1,8,32,128", help="concurrency levels")
    parser.add_argument("--no-memory", action="store_true", help="skip the live-session RSS runs")
    parser.add_argument(
        "--servers",
        default=None,
        help="scale-out mode: numbers of server processes, e.g. 1,2",
    )
    parser.add_argument("--out", default=None, help="results file")
    args = parser.parse_args()
    data_dir = default_data_dir(args.data_dir)
    episodes, source = load_episodes(data_dir, args.episodes)
    report: dict[str, Any] = {
        "source": source,
        "data_dir": data_dir,
        "machine": machine_info(),
        "levels": [],
    }
    levels = [int(x) for x in args.levels.split(",")]
    if args.servers:
        counts = [int(x) for x in args.servers.split(",")]
        report["scale_out"] = scale_out(data_dir, episodes, counts, levels)
        print_scale_out(report)
        write_results(report, args.out, "scale_out.json")
        return
    server = ServerProcess(data_dir)
    try:
        run_level(server, episodes[: min(50, len(episodes))], 4)  # warm-up
        for level in levels:
            report["levels"].append(run_level(server, episodes, level))
            console.print(f"concurrency {level}: done")
    finally:
        server.stop()
    report["memory"] = [] if args.no_memory else memory_levels(data_dir)
    report["operations_p50_ms"] = operation_costs(data_dir, episodes[:200], reps=3)
    print_report(report)
    write_results(report, args.out, "latest.json")


if __name__ == "__main__":
    main()
