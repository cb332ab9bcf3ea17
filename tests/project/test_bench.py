"""The bench scripts' episodes say what they are: the plan's source names its tables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from workplace_env.sandbox.generate import generate_csv_texts
from workplace_env.sandbox.tables import CSV_FILES

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import bench  # noqa: E402  (bench/ is not a package)


@pytest.fixture
def no_mix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A checkout with no reference data beside it (a clone)."""
    monkeypatch.setattr(bench, "SHARED", tmp_path / "absent")


def test_generated_episodes_on_the_embedded_sandbox_say_so(no_mix: None) -> None:
    episodes, source = bench.load_episodes(None, 3)
    assert len(episodes) == 3 and all(e["calls"] == e["ground_truth"] for e in episodes)
    assert source.startswith("generated tasks") and "embedded default sandbox" in source


def test_generated_episodes_on_a_data_dir_name_it(no_mix: None, tmp_path: Path) -> None:
    data = tmp_path / "csvs"
    data.mkdir()
    for key, text in generate_csv_texts(seed=3).items():
        (data / CSV_FILES[key]).write_text(text, encoding="utf-8")
    episodes, source = bench.load_episodes(str(data), 2)
    assert len(episodes) == 2
    assert source.startswith("generated tasks") and str(data) in source
    assert "embedded" not in source


@pytest.mark.parametrize(
    "script",
    ["bench.py", "http_bench.py", "grpc_ladder.py", "profile_gateway.py", "evict_bench.py"],
)
def test_a_data_dir_that_is_no_directory_is_a_usage_error(script: str, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--data-dir", str(missing)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert f"'{missing}' is no directory" in done.stderr and "Traceback" not in done.stderr
