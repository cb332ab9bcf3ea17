"""Profile: where the gRPC server spends its CPU per episode (every thread, sampled).

Usage: ``.venv/bin/python bench/profile_server.py [--episodes 400] [--concurrency 8]
[--top 25] [--interval-ms 1] [--echo]``

A child process serves the environment the way ``workplace-env serve`` does, with
``cpu_profile.CpuSampler`` looking at all its threads (grpcio's poller, the RPC pool, the
evictor) every ``--interval-ms``: a thread whose CPU clock moved since the last look and that is
not waiting is one sample of its Python stack. CPU, not wall clock: waiting for the GIL, a lock
or a core does not count. The grpc path of ``http_bench.py`` runs its episodes against it; at
SIGTERM the child writes the samples as a pstats file (``--out``) and this prints, per episode,
the share of a few groups (grpcio's Python layer, our pipeline's steps, the servicer and
message conversion, the environment, metrics) and the functions with the most own and
cumulative CPU. ``--echo`` profiles ``http_bench.py``'s echo server instead (the floor).

Accuracy: a sample stands for the interval before it, so the figures are statistical: a line
with ``n`` samples is good to about ``1/sqrt(n)`` of itself (the ``samples`` column; about one
per episode at 1 ms on a 2-core machine): run more episodes, or a shorter interval, for finer
lines. A shorter interval costs the server more: each look holds the GIL for a moment (the
sampler's own CPU is not counted). Work shorter than the interval is seen in proportion to its
CPU, not per call (no call counts). CPU in C under a call that also waits (grpcio's
completion-queue poll) is one line, "CPU no sample saw"; ``cpu_profile.CpuSampler`` says what
else the looks can mistake.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from cpu_profile import CpuSampler, report  # noqa: E402

from bench import add_data_dir_option, default_data_dir  # noqa: E402  (bench/ is no package)

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


def serve(out: str, data_dir: str | None, echo: bool, interval_s: float) -> None:
    """The child: serve until SIGTERM, sampled, then write the samples to ``out``."""
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
    sampler = CpuSampler(interval_s)
    sampler.start()
    print(f"serving on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    stop.wait()
    sampler.stop()
    sampler.dump(out)
    server.stop(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument(
        "--interval-ms",
        type=float,
        default=1.0,
        help="time between the sampler's looks at the threads (default: 1 ms)",
    )
    add_data_dir_option(parser)
    parser.add_argument("--echo", action="store_true", help="profile the echo server (floor)")
    parser.add_argument("--out", default="/tmp/workplace-env-server.prof")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.interval_ms > 0:
        parser.error(f"--interval-ms {args.interval_ms}: must be above 0")
    data_dir = default_data_dir(args.data_dir)
    if args.serve:
        serve(args.out, data_dir, args.echo, args.interval_ms / 1e3)
        return
    import http_bench

    from bench import load_episodes

    lines, _ = load_episodes(data_dir, args.episodes)
    cmd = [sys.executable, __file__, "--serve", "--out", args.out]
    cmd += ["--interval-ms", str(args.interval_ms)]
    cmd += ["--data-dir", data_dir] if data_dir else []
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
    if child.returncode != 0:
        raise RuntimeError(f"the server exited with {child.returncode}: no profile written")
    report(
        args.out,
        args.top,
        title="server CPU",
        groups=GROUPS,
        rest="other (builtins, protobuf, ...)",
        episodes=len(lines),
        counted="samples",
    )


if __name__ == "__main__":
    main()
