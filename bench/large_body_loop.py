"""Bench: how long ``GET /health`` waits while the gateway takes one large body.

Usage: ``.venv/bin/python bench/large_body_loop.py [--rows 100000] [--ints 20000000]``

Serves the co-hosted gateway (in-process backend, embedded sandbox) in this process, then
sends, each while this thread polls ``GET /health`` every 50 ms:

1. ``POST /aggregate_metrics`` of ``--rows`` verify responses (~45 MB for 100,000);
2. ``POST /mcp`` of one ``tools/call`` whose arguments hold ``--ints`` zeros (~57 MB for
   20,000,000).

Prints each answer's status and wall time, and the median and slowest ``/health`` answers
meanwhile. Run it with ``PYTHONPATH=DIR/service:DIR/client`` to measure another checkout's
code. Wall times on a shared machine vary with its load; compare figures from one run.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Any

import httpx

from workplace_env.gateway import start_gateway
from workplace_env.sandbox.load import load_sandbox
from workplace_env.server.app import start_server
from workplace_env.server.in_process import in_process_client
from workplace_env.sessions import SessionStore

JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def aggregate_body(rows: int) -> str:
    """``rows`` verify responses, one task each, with a small response and usage."""
    item = {"type": "message", "content": [{"type": "output_text", "text": "x" * 40}]}
    row: dict[str, Any] = {
        "_ng_rollout_index": 0,
        "reward": 1.0,
        "response": {"output": [item] * 3, "usage": {"input_tokens": 10, "output_tokens": 5}},
    }
    return json.dumps({"verify_responses": [{**row, "_ng_task_index": i} for i in range(rows)]})


def mcp_body(ints: int) -> str:
    """A ``tools/call`` whose arguments hold ``ints`` zeros."""
    params = {"name": "email_search_emails", "arguments": {"query": [0] * ints}}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})


def measure(url: str, path: str, body: str) -> None:
    """POST ``body`` to ``path`` while polling ``/health``; print the figures."""
    data = body.encode()
    answer: dict[str, Any] = {}
    done = threading.Event()

    def post() -> None:
        started = time.monotonic()
        reply = httpx.post(f"{url}{path}", content=data, headers=JSON, timeout=600)
        answer.update(status=reply.status_code, seconds=time.monotonic() - started)
        done.set()

    threading.Thread(target=post, daemon=True).start()
    waits = []
    while not done.is_set():
        started = time.monotonic()
        httpx.get(f"{url}/health", timeout=600)
        waits.append(time.monotonic() - started)
        done.wait(0.05)
    waits.sort()
    print(
        f"{path}: {len(data) / 2**20:.1f} MiB -> {answer['status']} in {answer['seconds']:.1f} s;"
        f" /health meanwhile: {len(waits)} answers, median {waits[len(waits) // 2] * 1e3:.0f} ms,"
        f" slowest {waits[-1] * 1e3:.0f} ms",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--ints", type=int, default=20_000_000)
    args = parser.parse_args()
    server = start_server(SessionStore(load_sandbox(None)), address="127.0.0.1:0")
    gateway = start_gateway(client=in_process_client(server, 64 * 2**20))
    try:
        measure(gateway.url, "/aggregate_metrics", aggregate_body(args.rows))
        measure(gateway.url, "/mcp", mcp_body(args.ints))
    finally:
        gateway.stop()
        server.stop(0)


if __name__ == "__main__":
    main()
