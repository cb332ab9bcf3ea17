"""The bench scripts' episodes say what they are: the plan's source names its tables."""

from __future__ import annotations

import json
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


def test_against_a_name_that_is_no_commit_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "http_bench.py"), "--against", "no-such-revision"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "--against 'no-such-revision': no commit" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_revision_tree_serves_that_revision_s_code(tmp_path: Path) -> None:
    import http_bench

    tree = http_bench.revision_tree("HEAD", root=tmp_path)
    assert tree.parent == tmp_path and (tree / "gen").is_dir()
    assert http_bench.revision_tree("HEAD", root=tmp_path) == tree  # built once, then reused
    imported = subprocess.run(
        [
            sys.executable,
            "-c",
            "import workplace_env.server.app, workplace_env_client, workplace.env.v1; "
            "print(workplace_env.server.app.__file__); print(workplace_env_client.__file__)",
        ],
        env={"PYTHONPATH": http_bench._tree_path(tree), "PATH": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert imported.returncode == 0, imported.stderr
    assert all(line.startswith(str(tree)) for line in imported.stdout.splitlines())


def test_against_prints_both_trees_and_their_ratio(tmp_path: Path) -> None:
    out = tmp_path / "against.json"
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "http_bench.py"),
            "--against",
            "HEAD",
            "--episodes",
            "3",
            "--levels",
            "1",
            "--repeat",
            "1",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "http@HEAD" in done.stdout and "grpc@HEAD" in done.stdout
    report = json.loads(out.read_text())
    (run,) = report["runs"]
    for path in ("http", "grpc"):
        assert run[path]["episodes"] == run[f"{path}@"]["episodes"] == 3
    assert set(report["medians"]["1"]) == {"http", "grpc"}
