"""The main job's input handling: files that are not episodes are refused, not run."""

from __future__ import annotations

import subprocess
import sys

import pytest

from workplace_env.runner import read_jsonl


def _run(path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "workplace_env.cli", "run", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_lines_that_are_not_episodes_are_mismatches(tmp_path):
    path = tmp_path / "not_tasks.jsonl"
    path.write_text('{"foo": 1}\n')
    proc = _run(path)
    assert proc.returncode == 1
    assert "not an episode" in proc.stdout + proc.stderr


def test_an_empty_file_is_refused(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    proc = _run(path)
    assert proc.returncode == 2 and "no episodes" in proc.stderr


@pytest.mark.parametrize("content", [b"\xff\xfe\x00garbage", b"[1, 2]\n", b"{bad\n"])
def test_unreadable_files_name_the_file(tmp_path, content):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(ValueError) as err:
        read_jsonl(str(path))
    assert str(path) in str(err.value)
