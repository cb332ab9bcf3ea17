"""The README's curl episode (section "HTTP gateway"), run as written with the real curl against
the co-hosted gateway (MCP on, as ``serve --http-address`` by default): every answer the README
shows after a ``# `` line is the one the gateway gives (``...`` stands for any text)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import GATEWAY_BACKENDS

pytestmark = pytest.mark.gateway(backends=GATEWAY_BACKENDS)

README = Path(__file__).resolve().parents[1] / "README.md"
README_GATEWAY = "http://127.0.0.1:8080"
_ANSWER = "@@readme-answer@@"


def curl_block() -> list[str]:
    """The lines of README's shell block that runs curl against the gateway."""
    block: list[str] | None = None
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            if block is not None and any(s.startswith("curl ") for s in block):
                return block
            block = [] if line.strip() in ("```sh", "```bash") else None
        elif block is not None:
            block.append(line)
    raise AssertionError("README has no curl block")


def matches(shown: str, got: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in shown.split("..."))
    return re.fullmatch(pattern, got) is not None


def test_readme_curl_episode_answers_as_written(gateway, tmp_path):
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl not installed")
    lines = curl_block()
    shown = [line.removeprefix("# ") for line in lines if line.startswith("# ")]
    assert len(shown) >= 4, lines
    script = "\n".join(
        f"echo '{_ANSWER}'" if line.startswith("# ") else line.replace(README_GATEWAY, gateway.url)
        for line in lines
    )
    run = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    answers = run.stdout.split(_ANSWER + "\n")[:-1]
    assert len(answers) == len(shown), run.stdout
    for expected, got in zip(shown, answers, strict=True):
        assert matches(expected, got), (expected, got)
