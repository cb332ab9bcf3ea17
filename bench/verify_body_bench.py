"""Bench: what a huge ``/verify`` body costs the co-hosted server.

Usage: ``.venv/bin/python bench/verify_body_bench.py [--items 300000] [--runs 3] [--before DIR]``

``--before DIR``: also serve the code of another checkout (e.g. ``git worktree add DIR
5ab31b9``, the tree before the bound), run by this venv with ``DIR/service`` and
``DIR/client`` first on ``PYTHONPATH``.

Builds a huge body (``--items`` Responses-API output items: messages, function calls and
their outputs, a third each; ~45 MB for 300,000) and a body at the default bound (10,000
entries: 6,600 items, 3,400 of them messages of one content part), then:

1. in this process, times the parse of the big body's text with Python's cyclic collector on
   and paused (:func:`workplace_env.wire.collector_paused`), and the checks of the output;
2. against ``workplace-env serve --http-address`` subprocesses (the embedded sandbox), with the
   default ``--max-verify-output-items`` and with ``0`` (no bound: every item checked,
   converted and the calls replayed, the behaviour before the bound), times ``POST /verify``
   of each body while a thread polls ``GET /health``, and prints the answer's status, its
   wall time and the slowest ``/health`` answer meanwhile.

Wall times on a shared machine vary with its load; compare figures from one run.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
CALL = {"name": "email_search_emails", "arguments": '{"query": "budget"}'}


def big_body(items: int, calls: int = 1_000) -> dict[str, Any]:
    """``items`` output items; at most ``calls`` of them function calls (under the call bound,
    so a server without the item bound scores it)."""
    output: list[dict[str, Any]] = []
    made = 0
    for i in range(items):
        kind = i % 3
        if kind == 1 and made < calls:
            made += 1
            output.append({"type": "function_call", "call_id": f"c{i}", "id": f"fc{i}", **CALL})
        elif kind == 2:
            output.append({"type": "function_call_output", "call_id": f"c{i - 1}", "output": "x"})
        else:
            output.append(
                {
                    "type": "message",
                    "id": f"m{i}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "Looking.", "annotations": []}],
                }
            )
    return {
        "id": "t",
        "ground_truth": [CALL],
        "responses_create_params": {},
        "response": {"output": output},
    }


def in_process(text: str) -> None:
    from workplace_env import wire
    from workplace_env.gateway import fastjson
    from workplace_env.responses import output_entries, response_output_problems

    for label, paused in (("collector on", False), ("collector paused", True)):
        start = time.perf_counter()
        if paused:
            with wire.collector_paused():
                value = json.loads(text)
        else:
            value = json.loads(text)
        print(f"  json.loads, {label}: {time.perf_counter() - start:.2f} s")
        del value
        gc.collect()
    start = time.perf_counter()
    value = fastjson.loads(text)
    print(f"  the gateway's parse (wire rule, paused): {time.perf_counter() - start:.2f} s")
    output = value["response"]["output"]
    start = time.perf_counter()
    output_entries(output)
    print(f"  counting its entries (the bound, all of them): {time.perf_counter() - start:.3f} s")
    start = time.perf_counter()
    response_output_problems(output)
    print(f"  checking every item (what the bound spares): {time.perf_counter() - start:.2f} s")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(*flags: str, pythonpath: str | None = None) -> tuple[subprocess.Popen[bytes], str]:
    grpc_port, http_port = free_port(), free_port()
    process = subprocess.Popen(
        [
            str(REPO / ".venv" / "bin" / "workplace-env"),
            "serve",
            "--address",
            f"127.0.0.1:{grpc_port}",
            "--http-address",
            f"127.0.0.1:{http_port}",
            *flags,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": pythonpath} if pythonpath else None,
    )
    url = f"http://127.0.0.1:{http_port}"
    for _ in range(600):
        try:
            httpx.get(f"{url}/health", timeout=1)
            return process, url
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("the server did not start")


def timed_verify(url: str, data: bytes) -> tuple[int, float, float]:
    """(status, wall seconds, slowest /health answer meanwhile in seconds)."""
    done = threading.Event()
    slowest = [0.0]

    def poll() -> None:
        with httpx.Client(timeout=120) as client:
            while not done.is_set():
                start = time.perf_counter()
                client.get(f"{url}/health")
                slowest[0] = max(slowest[0], time.perf_counter() - start)
                time.sleep(0.01)

    poller = threading.Thread(target=poll)
    poller.start()
    start = time.perf_counter()
    answer = httpx.post(
        f"{url}/verify", content=data, headers={"content-type": "application/json"}, timeout=600
    )
    wall = time.perf_counter() - start
    done.set()
    poller.join()
    return answer.status_code, wall, slowest[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=300_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", help="another checkout to serve too (see the docstring)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "service"))
    big = json.dumps(big_body(args.items))
    allowed = json.dumps(big_body(6_600))  # 6,600 items + 3,400 content parts: the bound
    print(f"big body: {args.items} items, {len(big) / 1e6:.1f} MB")
    print(f"allowed body: 10,000 entries (the default bound), {len(allowed) / 1e6:.2f} MB")
    print("in process:")
    in_process(big)
    servers: list[tuple[tuple[str, ...], str, str | None]] = [
        ((), "default bound", None),
        (("--max-verify-output-items", "0"), "no bound", None),
    ]
    if args.before:
        before = os.pathsep.join(str(Path(args.before) / d) for d in ("service", "client"))
        servers.append(((), "before", before))
    for flags, label, pythonpath in servers:
        process, url = serve(*flags, pythonpath=pythonpath)
        try:
            for name, text in (("big", big), ("allowed", allowed)):
                for run in range(args.runs):
                    status, wall, health = timed_verify(url, text.encode())
                    print(
                        f"{label:13} {name:8} run {run}: HTTP {status}, {wall:.2f} s, "
                        f"slowest /health meanwhile {health * 1000:.0f} ms"
                    )
        finally:
            process.terminate()
            process.wait(30)


if __name__ == "__main__":
    main()
