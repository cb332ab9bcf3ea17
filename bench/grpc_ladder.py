"""Benchmark: a ladder of gRPC server variants against the echo floor, interleaved.

Usage: ``.venv/bin/python bench/grpc_ladder.py [--variants echo,serve,bare,canned,...]
[--levels 1,8,32] [--episodes 400] [--repeat 4] [--out FILE]``

Every variant is a server process of its own, all started side by side; for each concurrency
level and repetition the plan of ``http_bench.py`` goes to each variant in turn (the order
reversed every repetition, so drift in the machine's load falls on every variant alike): the
grpc plan through the SDK, or, for the echo variants, ``http_bench.py``'s echo plan (as many
unary RPCs of 64 bytes per episode, empty answers). For each run it reads the server's CPU
(user + system, ``/proc``) and splits it by thread: grpcio's serving thread (``poll``: the
completion-queue loop, request matching), the handler threads (``pool``: the
server's thread pool; ``lane``: :class:`~workplace_env.server.guard.Lane`), gRPC core's own
threads (``core``) and the rest (``other``); and the voluntary context switches. It prints,
per level, the median server CPU ms per episode of each variant, the median and range of its
per-repetition ratio to the echo floor of the same repetition (``x echo``), and the thread
split (medians, ms per episode).

Variants (``--variants``, any order), each ``SERVER`` or ``SERVER@CLIENT``:

* ``echo``: ``http_bench.py``'s echo server (the floor: a generic handler on bytes,
  a 4-thread pool, the server's channel options);
* ``echo-registered``: the same two methods registered (``add_registered_method_handlers``);
* ``echo-aio``: the same two methods, async, on a ``grpc.aio`` server;
* ``canned-bytes``: the environment service's methods registered on bytes (no protobuf on
  the server), each answering the serialized first response it produced;
* ``canned``: ``bare`` whose methods answer the first response they produced;
* ``bare``: ``grpc.server`` with a 4-thread pool and the server's options, the environment
  servicer registered as generated (registered methods), no pipeline, lane or metrics;
* ``bare-generic``: ``bare`` found through a generic handler instead;
* ``serve``: ``workplace-env serve``'s server as built by ``start_server`` (the production
  wiring, without the co-hosted gateway);
* ``serve-nometrics``, ``serve-nocheck``: ``serve`` without the counting wrapper (metrics,
  timing, logs), without the session header check: measurement only;
* ``...+pin`` (e.g. ``echo+pin``, ``serve+pin``): the variant with all its threads on one
  CPU (``sched_setaffinity`` before any thread starts);
* ``serve-timed``: ``serve`` with request parsing, the behaviour, each servicer method, the
  tool call's argument parsing, tool and output encoding, and response serialization timed
  by thread CPU (printed after the table; the timers add
  about 10 µs per RPC).

Clients: ``sdk`` (the default of the environment servers: the grpc plan through
``EnvironmentClient``), ``sdk1`` (the same without gRPC retries), ``echo`` (the default of the
echo servers: the echo plan), ``echo-retry`` (the echo plan on a channel whose retry policy
covers the echo methods, as the SDK's covers its RPCs), ``echo-paced`` (the echo plan with
:data:`PACE_S` of client CPU before each RPC), ``echo-sdk`` (the grpc plan through
``EnvironmentClient``, every RPC sent to the echo method: the SDK's client path, pacing,
sizes and header, against the floor's server).

Results go to ``bench/results/grpc_ladder.json``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import http_bench  # noqa: E402  (bench/ is not a package)

from bench import (  # noqa: E402
    ServerProcess,
    add_data_dir_option,
    console,
    default_data_dir,
    load_episodes,
    machine_info,
    run_threads,
    write_results,
)

GROUPS = ("poll", "pool", "lane", "core", "other")
_PR_SET_NAME = 15


# -- the server variants (child process) --------------------------------------------------------


def _name_threads() -> None:
    """Give every Python thread started from now on its name as OS thread name (``comm``), so
    the parent can split the CPU by thread from ``/proc``."""
    libc = ctypes.CDLL(None)
    run = threading.Thread.run

    def named_run(self: threading.Thread) -> None:
        name = "py:poll" if "_serve" in self.name else "py:" + self.name
        libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name[:15].encode()), 0, 0, 0)
        run(self)

    threading.Thread.run = named_run  # type: ignore[method-assign]


def _store(data_dir: str | None) -> Any:
    from workplace_env.sandbox.load import load_sandbox
    from workplace_env.sessions import SessionStore

    return SessionStore(load_sandbox(data_dir))


def _plain_server(workers: int = 4) -> Any:
    from concurrent import futures

    import grpc

    from workplace_env.server.app import server_options

    pool = futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rpc")
    return grpc.server(pool, options=server_options())


def _canned(servicer: Any) -> Any:
    """``servicer`` answering, for each method, the first response it produced."""
    from workplace.env.v1 import environment_pb2_grpc as pb_grpc

    class Canned(pb_grpc.EnvironmentServiceServicer):
        pass

    canned = Canned()
    for name in ("SeedSession", "CallTool", "Verify", "CloseSession", "ListTools"):
        real = getattr(servicer, name)
        memo: list[Any] = []

        def method(request: Any, context: Any, real: Callable[..., Any] = real, memo=memo) -> Any:
            if not memo:
                memo.append(real(request, context))
            return memo[0]

        setattr(canned, name, method)
    return canned


#: Thread CPU seconds spent in each timed piece of ``serve-timed`` (:func:`_time_pieces`).
TIMED: dict[str, float] = {}


def _timed(piece: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    clock = time.thread_time

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            TIMED[piece] = TIMED.get(piece, 0.0) + clock() - start

    return timed


def _time_pieces() -> None:
    """Time, by thread CPU, the pieces of the environment RPCs' path in this process: request
    parsing, the whole behaviour (metrics, checks, servicer), the servicer alone, response
    serialization. Written to the file named by ``$LADDER_TIMED`` on SIGUSR1."""
    from workplace_env.server import observability, pipeline
    from workplace_env.server.app import SERVICE_NAME
    from workplace_env.server.servicer import EnvironmentServicer

    for name in ("SeedSession", "CallTool", "Verify", "CloseSession"):
        method = _timed(f"servicer.{name}", getattr(EnvironmentServicer, name))
        setattr(EnvironmentServicer, name, method)
    from workplace_env.sessions import lifecycle

    for name in ("execute", "encode_output", "parse_arguments"):  # inside CallTool
        setattr(lifecycle, name, _timed(f"tool.{name}", getattr(lifecycle, name)))
    counting, lenient, wrap = observability._counting, pipeline.lenient, pipeline.Pipeline._wrap
    observability._counting = lambda inner, rpc, metrics: _timed(
        "behaviour", counting(inner, rpc, metrics)
    )
    pipeline.lenient = lambda d: _timed("parse", lenient(d))

    def timed_wrap(self: Any, service: str, name: str, handler: Any) -> Any:
        if service == SERVICE_NAME:
            serializer = _timed("serialize", handler.response_serializer)
            handler = handler._replace(response_serializer=serializer)
        return wrap(self, service, name, handler)

    pipeline.Pipeline._wrap = timed_wrap  # type: ignore[method-assign]

    def dump(signum: int, frame: Any) -> None:
        Path(os.environ["LADDER_TIMED"]).write_text(json.dumps(TIMED))

    signal.signal(signal.SIGUSR1, dump)


def start_variant(variant: str, data_dir: str | None) -> tuple[Any, int]:
    """Start ``variant`` (see the module docstring); the server and its port."""
    import grpc

    from workplace.env.v1 import environment_pb2_grpc as pb_grpc

    if variant == "echo":
        return http_bench.echo_server(4)
    if variant == "echo-registered":
        server = _plain_server()
        server.add_registered_method_handlers(
            "bench.Echo",
            {
                "Nothing": grpc.unary_unary_rpc_method_handler(lambda request, context: b""),
                "Sized": grpc.unary_unary_rpc_method_handler(
                    lambda request, context: http_bench._PAD[: int.from_bytes(request[:4], "big")]
                ),
            },
        )
    elif variant in ("serve", "serve-timed", "serve-nometrics", "serve-nocheck"):
        from workplace_env.server import affinity, observability
        from workplace_env.server.app import start_server

        if variant == "serve-timed":
            _time_pieces()
        elif variant == "serve-nometrics":  # measurement only: no counting, timing or logs
            observability._counting = lambda inner, rpc, metrics: inner
        elif variant == "serve-nocheck":  # measurement only: no session header check
            affinity.abort_on_header_mismatch = lambda request, rpc, context: None

        running = start_server(_store(data_dir), "127.0.0.1:0")
        return running.server, running.port
    elif variant == "canned-bytes":
        from workplace.env.v1 import environment_pb2 as pb
        from workplace_env.server.servicer import EnvironmentServicer

        server = _plain_server()
        servicer = EnvironmentServicer(_store(data_dir))
        service = pb.DESCRIPTOR.services_by_name["EnvironmentService"]
        handlers = {}
        for method in service.methods:
            real = getattr(servicer, method.name)
            parse = pb.DESCRIPTOR.message_types_by_name[method.input_type.name]
            memo: list[bytes] = []

            def answer(request: bytes, context: Any, real=real, parse=parse, memo=memo) -> bytes:
                if not memo:
                    from google.protobuf import message_factory

                    cls = message_factory.GetMessageClass(parse)
                    memo.append(real(cls.FromString(request), context).SerializeToString())
                return memo[0]

            handlers[method.name] = grpc.unary_unary_rpc_method_handler(answer)
        server.add_registered_method_handlers(service.full_name, handlers)
    elif variant == "bare-generic":
        from workplace_env.server.servicer import EnvironmentServicer

        server = _plain_server()

        class GenericOnly:  # registers the generated generic handler, not the named methods
            add_generic_rpc_handlers = server.add_generic_rpc_handlers

            def add_registered_method_handlers(self, service: str, handlers: Any) -> None:
                pass

        pb_grpc.add_EnvironmentServiceServicer_to_server(
            EnvironmentServicer(_store(data_dir)), GenericOnly()
        )
    elif variant in ("bare", "canned"):
        from workplace_env.server.servicer import EnvironmentServicer

        server = _plain_server()
        servicer = EnvironmentServicer(_store(data_dir))
        if variant == "canned":
            servicer = _canned(servicer)
        pb_grpc.add_EnvironmentServiceServicer_to_server(servicer, server)
    else:
        raise SystemExit(f"unknown variant {variant!r}")
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    if variant.startswith("canned"):
        _prime(f"127.0.0.1:{port}", data_dir)
    return server, port


def _prime(target: str, data_dir: str | None) -> None:
    """One episode of the plan, so that every canned answer is taken from a real one before
    the clients come (concurrent first calls would otherwise find sessions never seeded)."""
    from workplace_env_client import EnvironmentClient

    line = load_episodes(data_dir, 1)[0][0]
    with EnvironmentClient(target, timeout_s=60) as env:
        http_bench._grpc_episode(env, line, http_bench._tools())


def _serve_echo_aio() -> None:
    """``echo-aio``: the echo's two methods on a ``grpc.aio`` server (async handlers, one
    event loop), until SIGTERM."""
    import asyncio

    import grpc

    from workplace_env.server.app import server_options

    async def nothing(request: bytes, context: Any) -> bytes:
        return b""

    async def sized(request: bytes, context: Any) -> bytes:
        return http_bench._PAD[: int.from_bytes(request[:4], "big")]

    async def main() -> None:
        server = grpc.aio.server(options=server_options())
        server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    "bench.Echo",
                    {
                        "Nothing": grpc.unary_unary_rpc_method_handler(nothing),
                        "Sized": grpc.unary_unary_rpc_method_handler(sized),
                    },
                ),
            )
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        print(f"serving on 127.0.0.1:{port}", file=sys.stderr, flush=True)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        await server.stop(0)

    asyncio.run(main())


def serve_variant(variant: str, data_dir: str | None) -> None:
    """The child: serve ``variant`` until SIGTERM."""
    _name_threads()
    variant, pinned, _ = variant.partition("+pin")
    if pinned:  # every thread of the server (gRPC core's too) on the first CPU allowed
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    if variant == "echo-aio":
        _serve_echo_aio()
        return
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    server, port = start_variant(variant, data_dir)
    print(f"serving on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    os.environ["LADDER_TIMED"] = f"/tmp/grpc_ladder_{os.getpid()}.json"
    while not stop.wait(1.0):
        pass
    server.stop(0)


class Variant(ServerProcess):
    """One variant in a child process (:func:`serve_variant`); CPU split by thread."""

    def __init__(self, name: str, data_dir: str | None) -> None:
        self.name = name
        variant, _, client = name.partition("@")
        echo = variant.startswith("echo")
        self.client = client or ("echo" if echo else "sdk")
        if self.client.startswith("echo") != echo:  # the echo methods exist on echo servers only
            raise SystemExit(f"{name}: client {self.client!r} does not fit server {variant!r}")
        cmd = [sys.executable, __file__, "--serve", variant]
        cmd += ["--data-dir", data_dir] if data_dir else []
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline() if self.proc.stderr else ""
        if "serving on" not in line:
            self.proc.kill()
            raise RuntimeError(f"{variant} did not start: {line!r}")
        self.target = line.strip().rsplit(" ", 1)[1]

    def timed(self) -> dict[str, float]:
        """``serve-timed``'s piece times so far (seconds); empty for other variants."""
        if self.name.partition("@")[0] != "serve-timed":
            return {}
        path = Path(f"/tmp/grpc_ladder_{self.proc.pid}.json")
        path.unlink(missing_ok=True)
        self.proc.send_signal(signal.SIGUSR1)
        for _ in range(200):
            if path.exists() and path.stat().st_size:
                time.sleep(0.01)
                pieces: dict[str, float] = json.loads(path.read_text())
                path.unlink()
                return pieces
            time.sleep(0.01)
        raise RuntimeError("serve-timed did not answer")

    def threads(self) -> dict[str, float]:
        """CPU seconds so far by thread group (:data:`GROUPS`) and ``ctxsw``: the voluntary
        context switches of all threads."""
        out = dict.fromkeys((*GROUPS, "ctxsw"), 0.0)
        base = Path(f"/proc/{self.proc.pid}/task")
        for task in base.iterdir():
            try:
                stat = (task / "stat").read_text()
                status = (task / "status").read_text()
            except OSError:  # the thread ended
                continue
            comm = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat.rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / http_bench.CLOCK_TICKS
            out[_group(comm)] += cpu
            for line in status.splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    out["ctxsw"] += int(line.split()[1])
        return out


def _group(comm: str) -> str:
    if comm.startswith(("py:rpc", "py:ThreadPool")):
        return "pool"
    if comm.startswith("py:env-rpc"):
        return "lane"
    if comm == "py:poll":
        return "poll"
    if comm.startswith("py:") or comm == "python":
        return "other"
    return "core"


# -- the clients ---------------------------------------------------------------------------------


#: ``echo-paced``: CPU seconds the client spends before each echo RPC (about the SDK's own
#: client work per RPC of the grpc plan, see the ``echo-sdk`` client).
PACE_S = 150e-6


def _channel(target: str, client: str) -> Any:
    """The SDK's channel to ``target``; ``sdk1``: without retries; ``echo-retry``: with the
    SDK's retry policy on the echo methods too."""
    import grpc

    from workplace_env_client import channel as sdk_channel

    if client == "sdk1":
        return sdk_channel.make_channel(target, max_attempts=1)
    if client not in ("echo-retry", "echo-sdk"):
        return sdk_channel.make_channel(target)
    options = [o for o in sdk_channel.channel_options() if o[0] != "grpc.service_config"]
    config = sdk_channel._retry_method_config(sdk_channel.DEFAULT_MAX_ATTEMPTS)
    config[0]["name"] = [{"service": "bench.Echo"}]
    options.append(("grpc.service_config", json.dumps({"methodConfig": config})))
    return grpc.insecure_channel(target, options=options)


def _worker(client: str, target: str, lines: list[dict[str, Any]], threads: int) -> int:
    """Run ``lines`` on ``threads`` threads as ``client`` (see the module docstring); return
    the RPCs made. A failed RPC fails the run (its figures would count missing work)."""
    from workplace_env_client import EnvironmentClient

    tools = http_bench._tools()
    lock = threading.Lock()
    queue = list(reversed(lines))
    channel = _channel(target, client)

    def take() -> dict[str, Any] | None:
        with lock:
            return queue.pop() if queue else None

    def grpc_loop() -> None:
        env = EnvironmentClient(
            channel=channel, timeout_s=120, max_attempts=1 if client == "sdk1" else 4
        )
        while (line := take()) is not None:
            http_bench._grpc_episode(env, line, tools)

    pace = PACE_S if client == "echo-paced" else 0.0

    def echo_loop() -> None:
        nothing = channel.unary_unary(http_bench.ECHO_METHOD)
        clock = time.thread_time
        while (line := take()) is not None:
            for _ in range(len(line["calls"]) + 3):
                if pace:  # the client's own work before each RPC, as CPU time
                    until = clock() + pace
                    while clock() < until:
                        pass
                nothing(b"x" * 64, timeout=120)

    def echo_sdk_loop() -> None:
        # The SDK's own client path (requests built and sent by EnvironmentClient, its session
        # header, its retry policy), each RPC sent to the echo method: empty answers parse as
        # empty responses.
        from workplace.env.v1 import environment_pb2 as pb

        env = EnvironmentClient(channel=channel, timeout_s=120)

        class Stub:
            pass

        stub = Stub()
        for method in ("SeedSession", "CallTool", "Verify", "CloseSession"):
            response = getattr(pb, f"{method}Response")
            call = channel.unary_unary(
                http_bench.ECHO_METHOD,
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=response.FromString,
            )
            setattr(stub, method, call)
        env.stub = stub
        while (line := take()) is not None:
            http_bench._grpc_episode(env, line, tools)

    loop = {"echo-sdk": echo_sdk_loop}.get(client) or (
        echo_loop if client.startswith("echo") else grpc_loop
    )
    failures: list[BaseException] = []

    def run() -> None:
        try:
            loop()
        except BaseException as exc:
            failures.append(exc)
            queue.clear()

    run_threads(run, threads)
    channel.close()
    if failures:
        raise failures[0]
    return sum(len(line["calls"]) + 3 for line in lines)


def run_clients(variant: Variant, lines: list[dict[str, Any]], level: int) -> dict[str, Any]:
    """The plan at ``level`` against ``variant`` (1 client process at level 1, else 2, as
    ``http_bench.py``); server CPU ms per episode."""
    processes = 1 if level == 1 else 2
    threads = max(1, level // processes)
    cpu0, wall0 = variant.cpu_s(), time.perf_counter()
    with ProcessPoolExecutor(max_workers=processes) as pool:
        rpcs = sum(
            pool.map(
                _worker,
                [variant.client] * processes,
                [variant.target] * processes,
                [lines[i::processes] for i in range(processes)],
                [threads] * processes,
            )
        )
    wall, cpu = time.perf_counter() - wall0, variant.cpu_s() - cpu0
    return {
        "episodes": len(lines),
        "rpcs_per_episode": rpcs / len(lines),
        "episodes_per_s": len(lines) / wall,
        "server_cpu_ms_per_episode": cpu / len(lines) * 1e3,
    }


# -- the runs (parent) ---------------------------------------------------------------------------


def run_one(variant: Variant, lines: list[dict[str, Any]], level: int) -> dict[str, Any]:
    before, timed0 = variant.threads(), variant.timed()
    result = run_clients(variant, lines, level)
    after, timed1 = variant.threads(), variant.timed()
    n = len(lines)
    result["timed_ms_per_episode"] = {
        k: (v - timed0.get(k, 0.0)) / n * 1e3 for k, v in timed1.items()
    }
    result["threads_ms_per_episode"] = {g: (after[g] - before[g]) / n * 1e3 for g in GROUPS}
    result["ctxsw_per_episode"] = (after["ctxsw"] - before["ctxsw"]) / n
    return result


def _ratio(runs: list[dict[str, Any]], name: str, floor: str) -> list[float]:
    """``name``'s CPU per episode over ``floor``'s, per run; runs whose floor measured 0 (too
    short for the CPU clock's 10 ms ticks) are left out."""
    return [
        r[name]["server_cpu_ms_per_episode"] / r[floor]["server_cpu_ms_per_episode"]
        for r in runs
        if r[floor]["server_cpu_ms_per_episode"]
    ]


def print_level(level: int, runs: list[dict[str, Any]], names: list[str], floor: str) -> None:
    table = Table(title=f"C={level}: server CPU ms per episode, {len(runs)} runs, medians")
    for col in ("variant", "cpu", f"x {floor}", "range", *GROUPS, "ctxsw/ep", "ep/s"):
        table.add_column(col, justify="right")
    for name in names:
        cpu = statistics.median(r[name]["server_cpu_ms_per_episode"] for r in runs)
        ratios = _ratio(runs, name, floor)
        split = [
            statistics.median(r[name]["threads_ms_per_episode"][g] for r in runs) for g in GROUPS
        ]
        table.add_row(
            name,
            f"{cpu:.2f}",
            f"{statistics.median(ratios):.2f}" if ratios else "-",
            f"{min(ratios):.2f}-{max(ratios):.2f}" if ratios else "-",
            *(f"{s:.2f}" for s in split),
            f"{statistics.median(r[name]['ctxsw_per_episode'] for r in runs):.1f}",
            f"{statistics.median(r[name]['episodes_per_s'] for r in runs):.0f}",
        )
    console.print(table)
    for name in names:
        pieces = runs[0][name].get("timed_ms_per_episode")
        if pieces:
            medians = {
                k: statistics.median(r[name]["timed_ms_per_episode"][k] for r in runs)
                for k in sorted(pieces)
            }
            console.print(
                f"{name}: thread CPU ms per episode in "
                + ", ".join(f"{k} {v:.3f}" for k, v in medians.items())
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="echo,serve,bare,canned")
    parser.add_argument("--levels", default="1,8,32")
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=4)
    add_data_dir_option(parser)
    parser.add_argument("--out", default=None)
    parser.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    data_dir = default_data_dir(args.data_dir)
    if args.serve:
        serve_variant(args.serve, data_dir)
        return
    names = args.variants.split(",")
    floor = "echo" if "echo" in names else names[0]
    lines, source = load_episodes(data_dir, args.episodes)
    variants: dict[str, Variant] = {}
    report: dict[str, Any] = {"source": source, "machine": machine_info(), "levels": {}}
    try:
        for name in names:
            variants[name] = Variant(name, data_dir)
        warm = lines[: min(50, len(lines))]
        for v in variants.values():
            run_one(v, warm, 4)
        for level in (int(x) for x in args.levels.split(",")):
            runs: list[dict[str, Any]] = []
            for rep in range(args.repeat):
                order = names if rep % 2 == 0 else names[::-1]
                runs.append({name: run_one(variants[name], lines, level) for name in order})
                console.print(f"C={level} run {rep + 1}, load {os.getloadavg()[0]:.1f}")
            report["levels"][level] = runs
            print_level(level, runs, names, floor)
    finally:
        for v in variants.values():
            v.stop()
    report["machine"]["loadavg_at_end"] = os.getloadavg()
    write_results(report, args.out, "grpc_ladder.json")


if __name__ == "__main__":
    main()
