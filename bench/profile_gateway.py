"""Profile: where the co-hosted HTTP gateway spends its CPU (cProfile on thread CPU time).

Usage: ``.venv/bin/python bench/profile_gateway.py [--episodes 400] [--concurrency 8]
[--top 25]``

A child process serves the gateway the way ``serve --http-address`` does (the store, the gRPC
server, the gateway on its backend), with uvicorn in its main thread under cProfile timed by
``time.thread_time`` (CPU, not wall clock, so waiting for a core on a shared machine does not
count). ``http_bench.py``'s HTTP episodes run against it; then it prints the share of a few
groups (HTTP server, FastAPI/Starlette, JSON, cookies, the backend and the environment) and
the functions with the most own and cumulative CPU time (``cpu_profile.report``). Only the
event-loop thread is profiled: with the remote backend (in an older checkout) the SDK calls
run on worker threads and the loopback gRPC server's work on its own threads, which this
profile does not see (``profile_server.py``'s sampler sees every thread, without call counts).
"""

from __future__ import annotations

import argparse
import cProfile
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from cpu_profile import report  # noqa: E402

from bench import add_data_dir_option  # noqa: E402  (bench/ is not a package)

GROUPS = {
    "HTTP server (uvicorn, httptools, event loop)": ("uvicorn/", "httptools", "asyncio/", "uvloop"),
    "FastAPI / Starlette stack": ("fastapi/", "starlette/", "anyio/"),
    "JSON": ("json/", "fastjson.py", "orjson", "wire.py"),
    "cookies and tokens": ("cookies.py", "itsdangerous/", "hmac.py", "hashlib"),
    "SDK, transport and gRPC messages": (
        "in_process.py",
        "workplace_env_client/",
        "grpc/",
        "protobuf",
    ),
    "environment (servicer, store, tools, verify)": (
        "server/servicer.py",
        "server/convert.py",
        "sessions/",
        "sandbox/",
        "verify.py",
        "identity.py",
        "prometheus_client/",
    ),
}


def serve(out: str, data_dir: str | None) -> None:
    """The child: serve until SIGTERM, profiling the gateway thread, then dump the stats."""
    import uvicorn

    from workplace_env.gateway import GatewaySettings, create_app
    from workplace_env.gateway.serve import _config, bind_socket, limits_of
    from workplace_env.sandbox.load import load_sandbox
    from workplace_env.server.app import start_server
    from workplace_env.sessions import SessionStore
    from workplace_env_client import EnvironmentClient

    running = start_server(SessionStore(load_sandbox(data_dir)), "127.0.0.1:0")
    sock = bind_socket("127.0.0.1:0")
    try:
        from workplace_env.server.in_process import in_process_client

        client = in_process_client(running)
    except ImportError:  # an older checkout: the SDK over loopback gRPC
        client = EnvironmentClient(f"127.0.0.1:{running.port}")
    settings = GatewaySettings()
    app = create_app(client, settings)
    server = uvicorn.Server(_config(app, limits_of(settings), "warning", 1.0))
    print(f"gateway on 127.0.0.1:{sock.getsockname()[1]}", file=sys.stderr, flush=True)
    # uvicorn re-raises the stop signal once drained: a no-op handler lets the stats be written
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    profile = cProfile.Profile(time.thread_time)
    profile.enable()
    server.run(sockets=[sock])
    profile.disable()
    profile.dump_stats(out)
    running.stop(grace_s=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--top", type=int, default=25)
    add_data_dir_option(parser)
    parser.add_argument("--out", default="/tmp/workplace-env-gateway.prof")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.out, args.data_dir)
        return
    import http_bench

    from bench import default_data_dir, load_episodes

    data_dir = default_data_dir(args.data_dir)
    lines, _ = load_episodes(data_dir, args.episodes)
    cmd = [sys.executable, __file__, "--serve", "--out", args.out]
    if data_dir:
        cmd += ["--data-dir", data_dir]
    child = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        line = child.stderr.readline() if child.stderr else ""
        if "gateway on" not in line:
            raise RuntimeError(f"gateway did not start: {line!r}")
        port = int(line.rsplit(":", 1)[1])
        threads = max(1, args.concurrency // 2)
        http_bench._worker("http", "", port, lines, threads)
    finally:
        child.send_signal(signal.SIGTERM)
        child.wait(60)
    report(args.out, args.top, title="gateway thread CPU", groups=GROUPS)


if __name__ == "__main__":
    main()
