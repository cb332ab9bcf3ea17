"""Benchmark (not a test): abandoned sessions are evicted by the idle TTL and their memory returns.

Usage: ``.venv/bin/python bench/evict_bench.py [--sessions 1000] [--data-dir DIR]``

Runs a gRPC server in this process over a store with a fake clock. Through the SDK it seeds
``--sessions`` sessions and makes one write in each (an email sent, so every session owns a
private copy of the emails table), then abandons them: no verify, no close. The clock is moved
past the idle TTL and the store's sweep (:meth:`SessionStore.evict_idle`, what the server's
sweep thread calls) runs once. Resident memory (``VmRSS`` of ``/proc/self/status``) is read after
a warm-up, with every session live, and after the sweep, each time after ``gc.collect()`` and
glibc's ``malloc_trim(0)`` (so freed memory is handed back to the OS, not just to the allocator).

Prints a table; exits 1 unless every session was evicted and the RSS after the sweep is within
``--tolerance`` (default 10 %) of the RSS before the sessions were seeded.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import sys
import time
from contextlib import suppress
from pathlib import Path

from rich.table import Table

from workplace_env.sandbox.load import load_sandbox
from workplace_env.server.app import start_server
from workplace_env.sessions import SessionConfig, SessionStore
from workplace_env_client import EnvironmentClient, SessionExpiredError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import add_data_dir_option, console, default_data_dir  # bench/: no package

TASK = {"id": "evict-bench", "ground_truth": []}


class FakeClock:
    """Seconds that only move when told, so the TTL passes without waiting an hour."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _trim() -> None:
    """Collect garbage and return the allocator's free memory to the OS (glibc only)."""
    gc.collect()
    with suppress(OSError, AttributeError):  # not glibc: RSS may stay higher than it needs to
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def rss_mib() -> float:
    """This process's resident set size in MiB (``VmRSS`` of ``/proc/self/status``)."""
    _trim()
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _episode(client: EnvironmentClient, i: int, prefix: str) -> str:
    sid = f"{prefix}-{i}"
    client.seed(sid, (f"r-{prefix}-{i}", 0), ("bench", "evict"), TASK)
    arguments = {"recipient": "bench@example.com", "subject": f"abandoned {i}", "body": "x" * 200}
    client.call_tool(sid, "email_send_email", arguments)
    return sid


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    add_data_dir_option(parser)
    parser.add_argument("--tolerance", type=float, default=0.10, help="allowed RSS growth")
    args = parser.parse_args()

    clock = FakeClock()
    config = SessionConfig(idle_ttl_s=3600.0)
    store = SessionStore(load_sandbox(default_data_dir(args.data_dir)), config, clock=clock)
    server = start_server(store, "127.0.0.1:0", evict_interval_s=3600)  # we sweep ourselves
    client = EnvironmentClient(f"127.0.0.1:{server.port}")
    rows: list[tuple[str, int, float, str]] = []
    try:
        # Warm-up: the same path end to end (first-use caches, gRPC buffers, verifier memo),
        # then evicted the same way, so the baseline is a steady state.
        for i in range(50):
            _episode(client, i, "warm")
        clock.now += config.idle_ttl_s + 1
        store.evict_idle()
        start = rss_mib()
        rows.append(("start (after warm-up)", store.live_count(), start, "-"))

        began = time.perf_counter()
        sids = [_episode(client, i, "abandoned") for i in range(args.sessions)]
        seeded_s = time.perf_counter() - began
        peak = rss_mib()
        rows.append((f"{args.sessions} seeded + 1 write", store.live_count(), peak, "-"))

        clock.now += config.idle_ttl_s + 1
        began = time.perf_counter()
        evicted = store.evict_idle()
        sweep_s = time.perf_counter() - began
        end = rss_mib()
        rows.append((f"after the TTL sweep ({evicted} evicted)", store.live_count(), end, "-"))

        try:  # an evicted session answers SESSION_EXPIRED (X1)
            client.call_tool(sids[0], "email_search_emails", {"query": "abandoned"})
            expired_answer = "served (wrong)"
        except SessionExpiredError as exc:
            expired_answer = exc.reason
    finally:
        client.close()
        server.stop(0)

    growth = (end - start) / start
    table = Table(title=f"idle-TTL eviction of {args.sessions} abandoned sessions")
    for col in ("phase", "live sessions", "RSS MiB", "vs start"):
        table.add_column(col, justify="right")
    for phase, live, rss, _ in rows:
        table.add_row(phase, str(live), f"{rss:.1f}", f"{(rss - start) / start:+.1%}")
    console.print(table)
    per_session_kib = (peak - start) * 1024 / max(args.sessions, 1)
    console.print(
        f"seed + write: {seeded_s:.2f} s for {args.sessions} sessions "
        f"({per_session_kib:.0f} KiB RSS each); sweep: {sweep_s * 1000:.1f} ms; "
        f"a call on an evicted session: {expired_answer}"
    )
    ok = evicted == args.sessions and growth <= args.tolerance and store.live_count() == 0
    console.print(
        f"RSS after the sweep is {growth:+.1%} of the start (limit {args.tolerance:.0%}): "
        + ("[green]OK[/green]" if ok else "[red]FAIL[/red]")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
