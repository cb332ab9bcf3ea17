"""Benchmark: server CPU per episode over the HTTP gateway, over gRPC, and the gRPC echo floor.

Usage (README): ``.venv/bin/python bench/http_bench.py [--episodes N] [--levels 1,8,32]
[--repeat R] [--out FILE]``

One ``workplace-env serve --http-address`` process (the co-hosted gateway) and one echo server
(a gRPC server whose unary methods only answer bytes) run side by side; for each concurrency
level the same episode plan goes, in turn, through

* **http**: the gateway, with the request shapes of NeMo Gym's agents: ``POST /seed_session``
  with the whole dataset row (``responses_create_params`` with the 27 tool definitions, so
  17-35 KB), one ``POST /<tool>`` per call, ``POST /verify`` with the row plus the Responses-API
  ``response`` (``function_call`` and ``function_call_output`` items, the tools, a final
  message), ``POST /close_session``; the session cookie carried by hand, one keep-alive
  connection per client thread;
* **grpc**: the SDK on the same plan (typed seed of the row, ``CallTool`` per call, ``Verify``
  of the calls, ``CloseSession``);
* **echo**: as many unary RPCs per episode as the grpc path makes, against the echo server
  (the transport's floor in Python gRPC): 64-byte requests, empty answers;
* **echo-bytes**: the same RPCs against the same echo server, each carrying the byte size of
  the grpc path's serialized request and the SDK's session header, and answered with the byte
  size of its serialized response (measured once per plan line before the runs; the server
  slices a buffer, no protobuf): the floor with the plan's payloads. It is context next to
  **echo**, which stays the floor.

For each it prints **server CPU ms per episode** (user + system time of the server process from
``/proc/<pid>/stat``, so it holds on a shared machine) and the ratios http/grpc, grpc/echo and
grpc/echo-bytes, measured in the same run; ``--repeat`` runs every level that many times (the
table shows each run). Clients run in 1 process at concurrency 1, 2 above, with threads up to
the level.

The plan is ``../shared/data/bench/episode_mix.jsonl`` on the WorkBench CSVs when present, else
oracle episodes of generated tasks on the embedded default sandbox. Results go to
``bench/results/http.json``.

**Against another revision**: ``--against REV`` (a git revision of this repository) serves
``REV``'s code too (its files from ``git archive``, its stubs generated from its ``proto/``,
this checkout's venv) and runs the http and grpc paths on both servers, alternated
(this tree, then REV, then REV, then this tree...) so that a change of the machine's load
weighs on both alike; it prints each run's CPU ms per episode of both and their ratio
(this tree / REV), and the medians. The echo paths are skipped (they run no environment code).
Results go to ``bench/results/http_against.json``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from bench import (  # noqa: E402  (bench/ is not a package)
    ServerProcess,
    add_data_dir_option,
    console,
    default_data_dir,
    load_episodes,
    machine_info,
    run_threads,
    write_results,
)

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
COOKIE = "WorkbenchResourcesServer___workplace_assistant"
ECHO_METHOD = "/bench.Echo/Nothing"
SIZED_METHOD = "/bench.Echo/Sized"
#: What a ``Sized`` answer is cut from: larger than any message of the plan (seeds: 17-35 KB).
_PAD = bytes(1 << 20)
PATHS = ("http", "grpc", "echo", "echo-bytes")
#: The paths ``--against`` compares (the echo paths run no environment code).
AGAINST_PATHS = ("http", "grpc")


# -- the servers ---------------------------------------------------------------------------------


class CoHostedServer(ServerProcess):
    """``workplace-env serve --http-address`` in a subprocess: gRPC and HTTP ports."""

    def __init__(self, data_dir: str | None, tree: Path | None = None) -> None:
        """``tree``: a source tree from :func:`revision_tree` to serve (default: this one's,
        imported the same way, so that both trees of an ``--against`` run start alike)."""
        cmd = [sys.executable, "-m", "workplace_env.cli", "serve", "--address", "127.0.0.1:0"]
        cmd += ["--http-address", "127.0.0.1:0"]
        if data_dir:
            cmd += ["--data-dir", data_dir]
        env = {**os.environ, "PYTHONPATH": _tree_path(tree or REPO)}
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
        records = {}  # serve writes JSON lines: the gRPC address, the sandbox, the gateway
        while "url" not in records:
            line = self.proc.stderr.readline() if self.proc.stderr else ""
            if not line.startswith("{"):
                self.proc.kill()
                raise RuntimeError(f"server did not start: {line!r}")
            record = json.loads(line)
            records.update({k: v for k, v in record.items() if k in ("address", "url")})
            if "serving on" in record["message"]:
                self.port = int(record["port"])
        self.target = f"127.0.0.1:{self.port}"
        self.http_port = int(records["url"].rsplit(":", 1)[1])


def _tree_path(tree: Path) -> str:
    """The ``PYTHONPATH`` that imports the server, the SDK and the stubs from ``tree``."""
    return os.pathsep.join(str(tree / part) for part in ("service", "client", "gen"))


class RevisionError(ValueError):
    """An ``--against`` revision that cannot be served (no such commit, another layout)."""


def revision_tree(revision: str, root: Path | None = None) -> Path:
    """A source tree of ``revision`` of this repository, with its stubs generated: extracted
    once into ``root`` (default: ``workplace-env-trees`` in the temporary directory) as
    ``<commit>/`` and reused.

    Raises RevisionError naming the problem when ``revision`` is no commit, or its tree has not
    this checkout's layout (``service/``, ``client/``, ``proto/``)."""
    found = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if found.returncode != 0:
        raise RevisionError(f"--against {revision!r}: no commit of {REPO} has that name")
    commit = found.stdout.strip()
    tree = (root or Path(tempfile.gettempdir()) / "workplace-env-trees") / commit
    if (tree / "gen").is_dir():
        return tree
    building = tree.with_name(f"{commit}.{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(building)], input=archive, check=True)
    if not all((building / part).is_dir() for part in ("service", "client", "proto")):
        shutil.rmtree(building)
        raise RevisionError(
            f"--against {revision!r}: its tree has no service/, client/ and proto/ to serve"
        )
    protos = sorted(
        str(p.relative_to(building / "proto")) for p in (building / "proto").rglob("*.proto")
    )
    (building / "gen").mkdir()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-Iproto",
            "--python_out=gen",
            "--grpc_python_out=gen",
            *protos,
        ],
        cwd=building,
        check=True,
    )
    for directory in (building / "gen").rglob("*"):
        if directory.is_dir():
            (directory / "__init__.py").touch()
    try:
        building.rename(tree)
    except OSError:  # another run built it meanwhile
        shutil.rmtree(building)
    return tree


class EchoServer(ServerProcess):
    """This file's ``--echo-server`` mode in a subprocess: the gRPC floor."""

    def __init__(self, workers: int = 4) -> None:
        cmd = [sys.executable, __file__, "--echo-server", "--workers", str(workers)]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline() if self.proc.stderr else ""
        if "echo on" not in line:
            self.proc.kill()
            raise RuntimeError(f"echo server did not start: {line!r}")
        self.port = int(line.rsplit(":", 1)[1])
        self.target = f"127.0.0.1:{self.port}"


def echo_server(workers: int) -> tuple[Any, int]:
    """A started gRPC server and its port. Two unary methods on bytes (no protobuf): ``Nothing``
    answers empty bytes; ``Sized`` answers as many zero bytes as its request's first 4 bytes say
    (big-endian), the rest of the request being padding to the size under test."""
    from concurrent import futures

    import grpc

    from workplace_env.server.app import server_options

    def nothing(request: bytes, context: Any) -> bytes:
        return b""

    def sized(request: bytes, context: Any) -> bytes:
        return _PAD[: int.from_bytes(request[:4], "big")]

    handler = grpc.method_handlers_generic_handler(
        "bench.Echo",
        {
            "Nothing": grpc.unary_unary_rpc_method_handler(nothing),
            "Sized": grpc.unary_unary_rpc_method_handler(sized),
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers), options=server_options())
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def serve_echo(workers: int) -> None:
    """The echo server (:func:`echo_server`) until killed."""
    server, port = echo_server(workers)
    print(f"echo on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    server.wait_for_termination()


# -- the request shapes of NeMo Gym's agents ---------------------------------------------------


def _tools() -> list[dict[str, Any]]:
    from workplace_env.sandbox.tools import advertised_tools

    return [{"type": "function", **t.schema} for t in advertised_tools()]


def nemo_row(line: dict[str, Any], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """A NeMo Gym dataset row for a plan line: the task plus ``responses_create_params``."""
    return {
        "id": line["id"],
        "category": line.get("category", ""),
        "environment_name": "workplace_assistant",
        "ground_truth": line["ground_truth"],
        "responses_create_params": {
            "input": [
                {"role": "system", "content": line.get("system") or "Today is 2023-11-30."},
                {"role": "user", "content": line.get("prompt") or f"Task {line['id']}"},
            ],
            "tools": tools,
            "parallel_tool_calls": False,
            "temperature": 1.0,
        },
    }


def responses_output(calls: list[dict[str, Any]], outputs: list[str]) -> list[dict[str, Any]]:
    """The Responses-API ``output`` of an agent that made ``calls`` and saw ``outputs``."""
    items: list[dict[str, Any]] = []
    for i, (call, output) in enumerate(zip(calls, outputs, strict=True)):
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{i}",
                "call_id": f"call_{i}",
                "name": call["name"],
                "arguments": call["arguments"],
                "status": "completed",
            }
        )
        items.append({"type": "function_call_output", "call_id": f"call_{i}", "output": output})
    items.append(
        {
            "type": "message",
            "id": "msg_0",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
        }
    )
    return items


def verify_body(row: dict[str, Any], output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        **row,
        "response": {
            "id": f"resp_{uuid.uuid4().hex}",
            "object": "response",
            "created_at": 1_764_547_200,
            "model": "bench-model",
            "status": "completed",
            "output": output,
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": row["responses_create_params"]["tools"],
            "temperature": 1.0,
        },
    }


# -- client processes --------------------------------------------------------------------------


def _grpc_episode(env: Any, line: dict[str, Any], tools: list[dict[str, Any]]) -> None:
    """One episode of ``line`` down the SDK: seed of the row, its calls, verify, close."""
    row = nemo_row(line, tools)
    sid, episode = f"b-{uuid.uuid4().hex}", (f"r{uuid.uuid4().hex[:12]}", 0)
    env.seed(sid, episode, ("bench", str(line["id"])), row)
    for call in line["calls"]:
        env.call_tool_raw(sid, call["name"], call["arguments"])
    env.verify(sid, line["calls"])
    env.close_session(sid, episode)


def measure_sizes(target: str, lines: list[dict[str, Any]]) -> None:
    """Set ``line["sizes"]`` on every plan line: (request, response) serialized bytes of each
    RPC its grpc episode makes, measured by one run of the distinct lines against ``target``."""
    import grpc

    from workplace_env_client import EnvironmentClient, make_channel

    class Sizes(grpc.UnaryUnaryClientInterceptor):
        def __init__(self) -> None:
            self.seen: list[tuple[int, int]] = []

        def intercept_unary_unary(self, continuation, details, request):  # type: ignore[no-untyped-def]
            outcome = continuation(details, request)
            self.seen.append((request.ByteSize(), outcome.result().ByteSize()))
            return outcome

    tools, sizes, by_key = _tools(), Sizes(), {}
    channel = make_channel(target, max_attempts=1)
    with EnvironmentClient(channel=grpc.intercept_channel(channel, sizes), timeout_s=120) as env:
        for line in lines:
            key = json.dumps([line["id"], line["calls"]], sort_keys=True)
            if key not in by_key:
                sizes.seen = []
                _grpc_episode(env, line, tools)
                by_key[key] = sizes.seen
            line["sizes"] = by_key[key]
    channel.close()


class _Http:
    """One keep-alive connection with a hand-carried session cookie."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.cookie: str | None = None

    def post(self, path: str, body: bytes) -> bytes:
        headers = {"content-type": "application/json"}
        if self.cookie:
            headers["cookie"] = self.cookie
        self.conn.request("POST", path, body, headers)
        response = self.conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"{path}: {response.status} {data[:200]!r}")
        set_cookie = response.getheader("set-cookie")
        if set_cookie:
            self.cookie = set_cookie.split(";", 1)[0]
        return data


def _http_episode(client: _Http, row: dict[str, Any], calls: list[dict[str, Any]]) -> None:
    client.cookie = None
    client.post("/seed_session", json.dumps(row).encode())
    outputs = []
    for call in calls:
        body = client.post(f"/{call['name']}", call["arguments"].encode())
        outputs.append(json.dumps(json.loads(body)["output"]))
    body = json.dumps(verify_body(row, responses_output(calls, outputs))).encode()
    answer = json.loads(client.post("/verify", body))
    if answer["mask_sample"]:
        raise RuntimeError(f"verify lost the session: {answer['failure_reason']}")
    client.post("/close_session", b"{}")


def _worker(
    path: str, target: str, http_port: int, lines: list[dict[str, Any]], threads: int
) -> int:
    """Run ``lines`` on ``threads`` threads down ``path`` (one of :data:`PATHS`; echo-bytes
    needs the lines' ``sizes``, see :func:`measure_sizes`); return RPCs made."""
    import grpc

    from workplace_env_client import EnvironmentClient
    from workplace_env_client.routing import session_metadata

    tools = _tools()
    lock = threading.Lock()
    queue = list(reversed(lines))

    def take() -> dict[str, Any] | None:
        with lock:
            return queue.pop() if queue else None

    def http_loop() -> None:
        client = _Http(http_port)
        while (line := take()) is not None:
            _http_episode(client, nemo_row(line, tools), line["calls"])

    def grpc_loop(env: EnvironmentClient) -> None:
        while (line := take()) is not None:
            _grpc_episode(env, line, tools)

    def echo_loop(channel: grpc.Channel) -> None:
        nothing = channel.unary_unary(ECHO_METHOD)
        while (line := take()) is not None:
            for _ in range(len(line["calls"]) + 3):
                nothing(b"x" * 64, timeout=120)

    # echo-bytes: one prepared request per (request size, response size) of the plan
    sized_requests = {
        pair: pair[1].to_bytes(4, "big") + bytes(max(0, pair[0] - 4))
        for line in (lines if path == "echo-bytes" else [])
        for pair in line["sizes"]
    }

    def echo_bytes_loop(channel: grpc.Channel) -> None:
        sized = channel.unary_unary(SIZED_METHOD)
        while (line := take()) is not None:
            header = session_metadata(f"b-{uuid.uuid4().hex}")  # the SDK's, one id per episode
            for pair in line["sizes"]:
                sized(sized_requests[pair], timeout=120, metadata=header)

    if path != "http":
        env = EnvironmentClient(target, timeout_s=120)
        loop, args = {
            "grpc": (grpc_loop, (env,)),
            "echo": (echo_loop, (env.channel,)),
            "echo-bytes": (echo_bytes_loop, (env.channel,)),
        }[path]
    else:
        env, loop, args = None, http_loop, ()
    run_threads(loop, threads, *args)
    if env is not None:
        env.close()
    return sum(len(line["calls"]) + 3 for line in lines)


def run_path(
    path: str,
    server: ServerProcess,
    http_port: int,
    lines: list[dict[str, Any]],
    concurrency: int,
) -> dict[str, Any]:
    """Run the plan down ``path`` at ``concurrency``; server CPU ms per episode."""
    processes = 1 if concurrency == 1 else 2
    threads = max(1, concurrency // processes)
    shards = [lines[i::processes] for i in range(processes)]
    cpu0, wall0 = server.cpu_s(), time.perf_counter()
    with ProcessPoolExecutor(max_workers=processes) as pool:
        requests = sum(
            pool.map(
                _worker,
                [path] * processes,
                [server.target] * processes,
                [http_port] * processes,
                shards,
                [threads] * processes,
            )
        )
    wall, cpu = time.perf_counter() - wall0, server.cpu_s() - cpu0
    return {
        "path": path,
        "concurrency": concurrency,
        "episodes": len(lines),
        "requests_per_episode": requests / len(lines),
        "episodes_per_s": len(lines) / wall,
        "server_cpu_ms_per_episode": cpu / len(lines) * 1e3,
        "server_rss_mb": server.rss_mb(),
    }


# -- main ----------------------------------------------------------------------------------------


def _ratio(a: float, b: float) -> str:
    """``a / b`` to two decimals; "-" when ``b`` is 0 (a run too short for the CPU clock's
    10 ms ticks)."""
    return f"{a / b:.2f}" if b else "-"


def print_report(report: dict[str, Any]) -> None:
    table = Table(title=f"server CPU ms per episode; plan: {report['source']}")
    columns = ("conc.", "run", *PATHS, "http/grpc", "grpc/echo", "grpc/echo-bytes", "http ep/s")
    for col in columns:
        table.add_column(col, justify="right")
    for run in report["runs"]:
        http_, grpc_, echo, echo_bytes = (run[p]["server_cpu_ms_per_episode"] for p in PATHS)
        table.add_row(
            str(run["concurrency"]),
            str(run["run"]),
            f"{http_:.2f}",
            f"{grpc_:.2f}",
            f"{echo:.2f}",
            f"{echo_bytes:.2f}",
            _ratio(http_, grpc_),
            _ratio(grpc_, echo),
            _ratio(grpc_, echo_bytes),
            f"{run['http']['episodes_per_s']:.0f}",
        )
    console.print(table)


def print_against(report: dict[str, Any]) -> None:
    """The ``--against`` table: each run's CPU ms per episode of both trees and their ratio."""
    rev = report["against"]["revision"]
    table = Table(
        title=f"server CPU ms per episode, this tree against {rev}; plan: {report['source']}"
    )
    for col in ("conc.", "run", "http", f"http@{rev}", "ratio", "grpc", f"grpc@{rev}", "ratio"):
        table.add_column(col, justify="right")
    for run in report["runs"]:
        cells = [str(run["concurrency"]), str(run["run"])]
        for path in AGAINST_PATHS:
            ours, theirs = (run[p]["server_cpu_ms_per_episode"] for p in (path, f"{path}@"))
            cells += [f"{ours:.2f}", f"{theirs:.2f}", _ratio(ours, theirs)]
        table.add_row(*cells)
    for level, medians in report["medians"].items():
        cells = [level, "median"]
        for path in AGAINST_PATHS:
            ours, theirs, ratio = medians[path]
            cells += [f"{ours:.2f}", f"{theirs:.2f}", f"{ratio:.2f}"]
        table.add_row(*cells, style="bold")
    console.print(table)
    for level, lower in report["lower_in"].items():
        console.print(
            f"concurrency {level}: this tree cheaper in "
            + ", ".join(f"{path} {n} of {report['runs_per_level']}" for path, n in lower.items())
            + " runs (ratio < 1)"
        )


@contextmanager
def _server_pair(
    data_dir: str | None, tree: Path, lines: list[dict[str, Any]]
) -> Iterator[tuple[CoHostedServer, CoHostedServer]]:
    """A co-hosted server of this tree and one of ``tree``, both warmed on every
    :data:`AGAINST_PATHS` path; stopped after the block. A new pair for each run: a process's
    own layout (hash seed, addresses) moves its CPU per episode by a few per cent, so each run's
    ratio is of two new processes."""
    ours = CoHostedServer(data_dir)
    try:
        theirs = CoHostedServer(data_dir, tree)
    except BaseException:
        ours.stop()
        raise
    try:
        for server in (ours, theirs):
            for path in AGAINST_PATHS:
                run_path(path, server, server.http_port, lines[: min(50, len(lines))], 4)
        yield ours, theirs
    finally:
        ours.stop()
        theirs.stop()


def run_against(
    revision: str,
    tree: Path,
    data_dir: str | None,
    lines: list[dict[str, Any]],
    levels: list[int],
    repeat: int,
) -> dict[str, Any]:
    """The ``--against`` runs (module docstring): per level and run, each of
    :data:`AGAINST_PATHS` on this tree (key ``path``) and on ``revision`` (its ``tree``, from
    :func:`revision_tree`; key ``path@``),
    alternated, on a new pair of servers for each run (:func:`_server_pair`); with per-level
    medians and counts of runs where this tree was cheaper."""
    runs: list[dict[str, Any]] = []
    turn = 0
    for level in levels:
        for run in range(1, repeat + 1):
            entry: dict[str, Any] = {"concurrency": level, "run": run}
            with _server_pair(data_dir, tree, lines) as (ours, theirs):
                for path in AGAINST_PATHS:
                    pair = [(path, ours), (f"{path}@", theirs)]
                    for key, server in pair[:: 1 if turn % 2 == 0 else -1]:
                        entry[key] = run_path(path, server, server.http_port, lines, level)
                    turn += 1
            runs.append(entry)
            console.print(f"concurrency {level}, run {run}: done")
    medians: dict[str, Any] = {}
    lower_in: dict[str, Any] = {}
    for level in levels:
        at = [r for r in runs if r["concurrency"] == level]
        medians[str(level)], lower_in[str(level)] = {}, {}
        for path in AGAINST_PATHS:
            a = [r[path]["server_cpu_ms_per_episode"] for r in at]
            b = [r[f"{path}@"]["server_cpu_ms_per_episode"] for r in at]
            ratios = [x / y for x, y in zip(a, b, strict=True) if y]
            medians[str(level)][path] = (
                statistics.median(a),
                statistics.median(b),
                statistics.median(ratios) if ratios else float("nan"),
            )
            lower_in[str(level)][path] = sum(r < 1 for r in ratios)
    return {
        "against": {"revision": revision, "tree": str(tree)},
        "runs": runs,
        "runs_per_level": repeat,
        "medians": medians,
        "lower_in": lower_in,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_dir_option(parser)
    parser.add_argument("--episodes", type=int, default=400, help="episodes per path and level")
    parser.add_argument("--levels", default="1,8,32", help="concurrency levels")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each level")
    parser.add_argument("--out", default=None, help="results file")
    parser.add_argument(
        "--against",
        metavar="REV",
        default=None,
        help="also serve git revision REV and compare (module docstring); e.g. main",
    )
    parser.add_argument("--echo-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.echo_server:
        serve_echo(args.workers)
        return
    data_dir = default_data_dir(args.data_dir)
    lines, source = load_episodes(data_dir, args.episodes)
    levels = [int(x) for x in args.levels.split(",")]
    report: dict[str, Any] = {"source": source, "data_dir": data_dir, "machine": machine_info()}
    if args.against:
        try:
            tree = revision_tree(args.against)
        except RevisionError as exc:
            parser.error(str(exc))
        report |= run_against(args.against, tree, data_dir, lines, levels, args.repeat)
        print_against(report)
        write_results(report, args.out, "http_against.json")
        return
    report["runs"] = []
    server, echo = CoHostedServer(data_dir), EchoServer()
    servers = dict(zip(PATHS, (server, server, echo, echo), strict=True))
    try:
        measure_sizes(server.target, lines)
        report["rpc_bytes_per_episode"] = {
            "request": sum(q for line in lines for q, _ in line["sizes"]) / len(lines),
            "response": sum(r for line in lines for _, r in line["sizes"]) / len(lines),
        }
        warm = lines[: min(50, len(lines))]
        for path, srv in servers.items():
            run_path(path, srv, server.http_port, warm, 4)
        for level in levels:
            for run in range(1, args.repeat + 1):
                entry: dict[str, Any] = {"concurrency": level, "run": run}
                for path, srv in servers.items():
                    entry[path] = run_path(path, srv, server.http_port, lines, level)
                report["runs"].append(entry)
                console.print(f"concurrency {level}, run {run}: done")
    finally:
        server.stop()
        echo.stop()
    print_report(report)
    write_results(report, args.out, "http.json")


if __name__ == "__main__":
    main()
