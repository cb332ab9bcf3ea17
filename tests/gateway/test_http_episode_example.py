"""The documented curl episode (docs/examples/http_episode.sh), run as written with the real curl
against the co-hosted gateway (MCP on, as ``serve --http-address`` by default): every answer the
example shows in a ``# `` line after its commands is the one the gateway gives (``...`` stands
for any text)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.helpers import GATEWAY_BACKENDS, REPO

pytestmark = pytest.mark.gateway(backends=GATEWAY_BACKENDS)

EXAMPLE = REPO / "docs" / "examples" / "http_episode.sh"
_ANSWER = "@@example-answer@@"


def curl_block() -> list[str]:
    """The example's lines from its ``G=`` line on (the header comments are not answers)."""
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("G="))
    return lines[start:]


def matches(shown: str, got: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in shown.split("..."))
    return re.fullmatch(pattern, got) is not None


def test_the_curl_episode_answers_as_written(gateway, tmp_path):
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl not installed")
    lines = curl_block()
    shown = [line.removeprefix("# ") for line in lines if line.startswith("# ")]
    assert len(shown) >= 4, lines
    script = "\n".join(f"echo '{_ANSWER}'" if line.startswith("# ") else line for line in lines)
    run = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "G": gateway.url},
    )
    assert run.returncode == 0, run.stderr
    answers = run.stdout.split(_ANSWER + "\n")[:-1]
    assert len(answers) == len(shown), run.stdout
    for expected, got in zip(shown, answers, strict=True):
        assert matches(expected, got), (expected, got)
