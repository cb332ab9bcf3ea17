"""Benchmark: server RSS through N distinct verifies, and what the verifier's memo buys.

Usage (README): ``.venv/bin/python bench/verify_cache_bench.py [--verifies 10000]
[--cache-mb 64] [--out FILE]``

Starts ``workplace-env serve --verify-cache-mb M`` (on ``../shared``'s WorkBench CSVs when
present, else the embedded sandbox), seeds one session, and sends ``--verifies`` verifies each
with a distinct write to the email table (``email_send_email`` with a new subject: a new end
state every time, the largest table, the worst case for the memo), sampling the server's RSS
every 500. Then it times verifies of a repeated write (memo hits) against distinct ones
(misses). Prints the peak RSS and the hit/miss verify times; results in
``bench/results/verify_cache.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from bench import SHARED, ServerProcess, write_results  # noqa: E402  (bench/ is not a package)


class CacheServer(ServerProcess):
    def __init__(self, data_dir: str | None, cache_mb: float) -> None:
        cmd = [sys.executable, "-m", "workplace_env.cli", "serve", "--address", "127.0.0.1:0"]
        cmd += ["--verify-cache-mb", str(cache_mb)]
        if data_dir:
            cmd += ["--data-dir", data_dir]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline() if self.proc.stderr else ""
        if "serving on" not in line:
            self.proc.kill()
            raise RuntimeError(f"server did not start: {line!r}")
        self.port = int(json.loads(line)["port"])  # serve writes JSON lines
        self.target = f"127.0.0.1:{self.port}"


def send(subject: str) -> tuple[str, str]:
    args = {"recipient": "bench@atlas.com", "subject": subject, "body": "b"}
    return ("email_send_email", json.dumps(args))


def run(data_dir: str | None, cache_mb: float, verifies: int) -> dict[str, Any]:
    from workplace_env_client import EnvironmentClient

    server = CacheServer(data_dir, cache_mb)
    try:
        with EnvironmentClient(server.target, timeout_s=120) as env:
            episode = ("cache-bench", 0)
            env.seed(
                "cache-bench", episode, ("bench", "cache"), {"id": "cache", "ground_truth": []}
            )
            idle = server.rss_mb()
            samples, miss = [], []
            for i in range(verifies):
                start = time.perf_counter()
                env.verify("cache-bench", [send(f"distinct {i}")], ground_truth=[])
                miss.append(time.perf_counter() - start)
                if (i + 1) % 500 == 0:
                    samples.append((i + 1, server.rss_mb()))
            hit = []
            for _ in range(500):
                start = time.perf_counter()
                env.verify("cache-bench", [send("repeated")], ground_truth=[])
                hit.append(time.perf_counter() - start)
            cpu_s = server.cpu_s()
    finally:
        server.stop()
    return {
        "cache_mb": cache_mb,
        "verifies": verifies,
        "rss_idle_mb": idle,
        "rss_peak_mb": max(r for _, r in samples) if samples else idle,
        "rss_samples_mb": samples,
        "distinct_verify_p50_ms": statistics.median(miss) * 1e3,
        "repeated_verify_p50_ms": statistics.median(hit[1:]) * 1e3,
        "server_cpu_s": cpu_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None, help="WorkBench CSVs (default: ../shared's)")
    parser.add_argument("--verifies", type=int, default=10_000)
    parser.add_argument("--cache-mb", default="64,0", help="memo bounds to run, MiB")
    parser.add_argument("--out", default=None, help="results file")
    args = parser.parse_args()
    data_dir = args.data_dir
    if data_dir is None and (SHARED / "workbench" / "emails.csv").exists():
        data_dir = str(SHARED / "workbench")
    results = [run(data_dir, float(mb), args.verifies) for mb in args.cache_mb.split(",")]
    print(
        f"{'cache MiB':>9} {'verifies':>8} {'idle MB':>8} {'peak MB':>8} "
        f"{'distinct p50 ms':>15} {'repeated p50 ms':>15}"
    )
    for r in results:
        print(
            f"{r['cache_mb']:>9g} {r['verifies']:>8} {r['rss_idle_mb']:>8.0f} "
            f"{r['rss_peak_mb']:>8.0f} {r['distinct_verify_p50_ms']:>15.3f} "
            f"{r['repeated_verify_p50_ms']:>15.3f}"
        )
    write_results({"data_dir": data_dir, "runs": results}, args.out, "verify_cache.json")


if __name__ == "__main__":
    main()
