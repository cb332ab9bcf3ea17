"""Benchmark (not a test): the RSS of one session filled to the write bound.

Usage: ``.venv/bin/python bench/session_bound_rss.py``

For each case, starts ``workplace-env serve --admin-open`` (default settings unless the case
adds flags) as a child process, seeds one session and sends ``email_send_email`` with a body of
the case's size until the server refuses ``SESSION_TOO_LARGE`` (or, with the bound off, until
the same 64 MiB are written). Prints the server's ``VmRSS`` and ``VmHWM`` (peak) from
``/proc/<pid>/status`` after the seed, when the session is full, and after one export of it (a
checkpoint save's work on the server), as one JSON line per case.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

from workplace_env_client import AdminClient, EnvironmentClient, SessionTooLargeError

#: (body characters per send, extra serve flags)
CASES = (
    (300_000, ()),
    (30_000_000, ()),
    (300_000, ("--max-session-write-bytes", "0")),
)
FILL_BYTES = 64 * 2**20  # the default bound; the bound-off case stops here too


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def memory_mib(pid: int) -> dict[str, float]:
    """``VmRSS`` and ``VmHWM`` of process ``pid``, MiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            out[line.split(":")[0]] = round(int(line.split()[1]) / 1024, 1)
    return out


def run(body_chars: int, flags: tuple[str, ...]) -> dict:
    port = _free_port()
    serve = [f"{sys.prefix}/bin/workplace-env", "serve", "--address", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(
        [*serve, "--admin-open", *flags], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    target = f"127.0.0.1:{port}"
    try:
        with EnvironmentClient(target, timeout_s=600) as sdk, AdminClient(target) as admin:
            for _ in range(600):  # until the server listens
                try:
                    sdk.seed("s", ("bench", 0), ("bench", "1"), {"id": "1", "ground_truth": []})
                    break
                except Exception:
                    time.sleep(0.1)
            seeded = memory_mib(proc.pid)
            body = {"recipient": "a@b.com", "subject": "fill", "body": "x" * body_chars}
            arguments = json.dumps(body)
            calls = written = 0
            refused = None
            while written + len(arguments) <= FILL_BYTES or not flags:
                try:
                    sdk.call_tool_raw("s", "email_send_email", arguments)
                except SessionTooLargeError as exc:
                    refused = {"limit_bytes": exc.limit_bytes, "size_bytes": exc.size_bytes}
                    break
                calls, written = calls + 1, written + len(arguments)
            full = memory_mib(proc.pid)
            admin.export_sessions()
            exported = memory_mib(proc.pid)
        return {
            "body_chars": body_chars,
            "flags": list(flags),
            "calls": calls,
            "written_bytes": written,
            "refused": refused,
            "seeded": seeded,
            "full": full,
            "after_export": exported,
        }
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    for body_chars, flags in CASES:
        print(json.dumps(run(body_chars, flags)), flush=True)


if __name__ == "__main__":
    main()
