"""Benchmark: three replicas through HAProxy vs direct, over gRPC and the HTTP gateway.

Usage (README): ``.venv/bin/python bench/proxy_bench.py [--episodes N] [--concurrency C]``

Starts the cluster the proxy test runs (tests/proxy_cluster.py: three ``workplace-env serve
--http-address`` replicas and ``haproxy -f deploy/haproxy.cfg``; haproxy is installed with
apt-get when missing), then runs the same episodes four ways, side by side in one run:

* gRPC direct: the SDK given the three replicas (client-side ring_hash on the session header);
* gRPC proxy:  the SDK given HAProxy's address (HAProxy hashes the header);
* HTTP direct: each legacy episode sent to one gateway, round robin, its cookies kept;
* HTTP proxy:  every episode sent to HAProxy, which pins it by its own cookie.

An episode is seed, 10 tool calls, verify (and CloseSession on gRPC). Reported per way:
episodes/s, CPU ms per episode on each replica and summed (``/proc/<pid>/stat``), HAProxy's
CPU ms per episode, and p50/p99 episode latency. Clients are separate processes, so their CPU
is not in the replicas' figures. Results go to ``bench/results/proxy.json``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import threading
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench import console, run_threads, write_results  # noqa: E402  (bench/ is not a package)
from tests.helpers import SCRIPTS, predicted, script, task_row  # noqa: E402
from tests.proxy_cluster import Cluster, ensure_haproxy  # noqa: E402

CALLS = 10
JSON = {"content-type": "application/json"}
WAYS = ("gRPC direct", "gRPC proxy", "HTTP direct", "HTTP proxy")


def _grpc_worker(target: str | list[str], indexes: list[int], threads: int) -> list[float]:
    """Episodes ``indexes`` on ``threads`` threads of this process; their latencies (s)."""
    from workplace_env_client import EnvironmentClient

    latencies: list[float] = []
    lock = threading.Lock()
    queue = list(reversed(indexes))

    def loop(env: EnvironmentClient) -> None:
        while True:
            with lock:
                if not queue:
                    return
                i = queue.pop()
            k, sid = i % SCRIPTS, f"pb-{uuid.uuid4().hex}"
            episode = (f"r{i}", 0)
            start = time.perf_counter()
            env.seed(sid, episode, ("bench", f"t{k}"), task_row(k))
            for name, arguments in script(k)[:CALLS]:
                env.call_tool_raw(sid, name, arguments)
            env.verify(sid, predicted(k))
            env.close_session(sid, episode)
            with lock:
                latencies.append(time.perf_counter() - start)

    with EnvironmentClient(target, timeout_s=120) as env:
        run_threads(loop, threads, env)
    return latencies


def _http_worker(urls: list[str], indexes: list[int], threads: int) -> list[float]:
    """Legacy HTTP episodes ``indexes``: episode ``i`` goes to ``urls[i % len(urls)]``."""
    import httpx

    latencies: list[float] = []
    lock = threading.Lock()
    queue = list(reversed(indexes))

    def loop() -> None:
        clients = {url: httpx.Client(base_url=url, timeout=120) for url in urls}
        while True:
            with lock:
                if not queue:
                    break
                i = queue.pop()
            k, http = i % SCRIPTS, clients[urls[i % len(urls)]]
            http.cookies.clear()  # a new episode, a new cookie jar
            start = time.perf_counter()
            http.post("/seed_session", json=task_row(k)).raise_for_status()
            for name, arguments in script(k)[:CALLS]:
                http.post(f"/{name}", content=arguments, headers=JSON).raise_for_status()
            output = [
                {"type": "function_call", "call_id": f"c{j}", "name": n, "arguments": a}
                for j, (n, a) in enumerate(predicted(k))
            ]
            body = {**task_row(k), "responses_create_params": {}, "response": {"output": output}}
            http.post("/verify", json=body).raise_for_status()
            with lock:
                latencies.append(time.perf_counter() - start)
        for client in clients.values():
            client.close()

    run_threads(loop, threads)
    return latencies


def run_way(
    cluster: Cluster, way: str, episodes: int, processes: int, threads: int
) -> dict[str, Any]:
    """``episodes`` episodes one way, from ``processes`` x ``threads`` clients."""
    replicas, proxy = cluster.replicas, cluster.proxy
    if way == "gRPC direct":
        worker, target = _grpc_worker, [r.grpc for r in replicas]
    elif way == "gRPC proxy":
        worker, target = _grpc_worker, proxy.grpc_target
    elif way == "HTTP direct":
        worker, target = _http_worker, [f"http://{r.http}" for r in replicas]
    else:
        worker, target = _http_worker, [proxy.http_url]
    shards = [list(range(episodes))[p::processes] for p in range(processes)]
    cpu0, proxy0 = [r.cpu_s() for r in replicas], proxy.cpu_s()
    wall0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=processes) as pool:
        parts = list(pool.map(worker, [target] * processes, shards, [threads] * processes))
    wall = time.perf_counter() - wall0
    cpu = [r.cpu_s() - c for r, c in zip(replicas, cpu0, strict=True)]
    latencies = sorted(x for part in parts for x in part)
    assert len(latencies) == episodes

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1e3

    return {
        "way": way,
        "episodes": episodes,
        "episodes_per_s": episodes / wall,
        "replica_cpu_ms_per_episode": [c / episodes * 1e3 for c in cpu],
        "replicas_cpu_ms_per_episode": sum(cpu) / episodes * 1e3,
        "haproxy_cpu_ms_per_episode": (proxy.cpu_s() - proxy0) / episodes * 1e3,
        "episode_ms": {"p50": pct(0.5), "p99": pct(0.99)},
    }


def print_report(report: dict[str, Any]) -> None:
    table = Table(
        title=f"3 replicas, {report['concurrency']} concurrent episodes, "
        f"{report['episodes']} per way ({CALLS} calls each)"
    )
    for col in (
        "way",
        "ep/s",
        "vs direct",
        "CPU ms/ep per replica",
        "replicas CPU ms/ep",
        "HAProxy CPU ms/ep",
        "ep p50/p99 ms",
    ):
        table.add_column(col, justify="left" if col == "way" else "right")
    rates = {r["way"]: r["episodes_per_s"] for r in report["ways"]}
    for r in report["ways"]:
        direct = rates[r["way"].split()[0] + " direct"]
        table.add_row(
            r["way"],
            f"{r['episodes_per_s']:.1f}",
            f"{r['episodes_per_s'] / direct:.2f}",
            " / ".join(f"{c:.1f}" for c in r["replica_cpu_ms_per_episode"]),
            f"{r['replicas_cpu_ms_per_episode']:.1f}",
            f"{r['haproxy_cpu_ms_per_episode']:.2f}",
            f"{r['episode_ms']['p50']:.0f} / {r['episode_ms']['p99']:.0f}",
        )
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=600, help="episodes per way [600]")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent episodes [16]")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "proxy.json"))
    args = parser.parse_args()
    haproxy, reason = ensure_haproxy()
    if haproxy is None:
        sys.exit(f"cannot run: {reason}")
    processes = 2
    threads = max(1, args.concurrency // processes)
    with Cluster(haproxy) as cluster:
        for way in WAYS:  # warm every path (connections, imports, caches) untimed
            run_way(cluster, way, 4 * processes * threads, processes, threads)
        ways = [run_way(cluster, w, args.episodes, processes, threads) for w in WAYS]
    report = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "episodes": args.episodes,
        "concurrency": processes * threads,
        "ways": ways,
    }
    print_report(report)
    write_results(report, args.out, "proxy.json")


if __name__ == "__main__":
    main()
