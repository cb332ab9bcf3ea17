"""Profile: where the gRPC server spends its CPU per episode (cProfile on thread CPU time).

Usage: ``.venv/bin/python bench/profile_server.py [--episodes 400] [--concurrency 8]
[--top 25] [--echo]``

A child process serves the environment the way ``workplace-env serve`` does, with every thread
it starts (grpcio's poller, the RPC pool) under its own ``cProfile.Profile`` timed by
``time.thread_time`` (CPU, not wall clock: waiting for the GIL or a core does not count). The
grpc path of ``http_bench.py`` runs its episodes against it; then the stats of all threads are
merged and it prints the share of a few groups (grpcio's Python layer, our pipeline's steps, the
servicer and message conversion, the environment, metrics) and the functions with the most own
CPU time. ``--echo`` profiles ``http_bench.py``'s echo server instead (the floor). cProfile's
own overhead inflates Python-heavy code against C code: read the shares, not the totals.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

GROUPS = {
    "grpcio (server machinery)": ("grpc/_server.py", "grpc/_common.py", "grpc/_utilities.py"),
    "RPC path (pipeline: guard, session header, admin token, metrics wrapper)": (
        "server/pipeline.py",
        "server/guard.py",
        "server/affinity.py",
        "server/admin.py",
        "server/observability.py",
    ),
    "metrics (prometheus-client)": ("prometheus_client/",),
    "servicer and conversion": ("server/servicer.py", "server/convert.py", "server/status.py"),
    "environment (store, tools, verify)": (
        "sessions",
        "sandbox/",
        "verify.py",
        "identity.py",
        "checkpoint/",
    ),
    "threads and locks": ("threading.py", "concurrent/futures/", "queue.py"),
    "logging": ("logging/",),
}

_profiles: list[cProfile.Profile] = []


def _profile_threads() -> None:
    """Run every thread started from now on under its own CPU-time profile."""
    run = threading.Thread.run

    def profiled_run(self: threading.Thread) -> None:
        profile = cProfile.Profile(time.thread_time)
        _profiles.append(profile)
        profile.enable()
        try:
            run(self)
        finally:
            profile.disable()

    threading.Thread.run = profiled_run  # type: ignore[method-assign]


def _dump(out: str) -> None:
    merged: pstats.Stats | None = None
    for profile in list(_profiles):
        profile.disable()  # a thread still running: stop its profile where it is
        profile.create_stats()
        if not profile.stats:  # type: ignore[attr-defined]
            continue
        if merged is None:
            merged = pstats.Stats(profile)
        else:
            merged.add(profile)
    if merged is not None:
        merged.dump_stats(out)


def serve(out: str, data_dir: str | None, echo: bool) -> None:
    """The child: serve until SIGTERM with every thread profiled, then dump the merged stats."""
    _profile_threads()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    if echo:
        import http_bench

        server, port = http_bench.echo_server(4)
    else:
        from workplace_env.sandbox.load import load_sandbox
        from workplace_env.server.app import start_server
        from workplace_env.sessions import SessionStore

        running = start_server(SessionStore(load_sandbox(data_dir)), "127.0.0.1:0")
        server, port = running.server, running.port
    print(f"serving on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    stop.wait()
    _dump(out)
    server.stop(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--echo", action="store_true", help="profile the echo server (floor)")
    parser.add_argument("--out", default="/tmp/workplace-env-server.prof")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    from bench import default_data_dir, load_episodes

    data_dir = default_data_dir(args.data_dir)
    if args.serve:
        serve(args.out, data_dir, args.echo)
        return
    import http_bench

    lines, _ = load_episodes(data_dir, args.episodes)
    cmd = [sys.executable, __file__, "--serve", "--out", args.out]
    cmd += ["--echo"] if args.echo else []
    child = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        line = child.stderr.readline() if child.stderr else ""
        if "serving on" not in line:
            raise RuntimeError(f"server did not start: {line!r}")
        target = line.strip().rsplit(" ", 1)[1]
        threads = max(1, args.concurrency // 2)
        http_bench._worker("echo" if args.echo else "grpc", target, 0, lines, threads)
    finally:
        child.send_signal(signal.SIGTERM)
        child.wait(60)
    from profile_gateway import report

    report(args.out, args.top, len(lines), groups=GROUPS, rest="other (builtins, protobuf, ...)")


if __name__ == "__main__":
    main()
