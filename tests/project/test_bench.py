"""The bench scripts' episodes say what they are: the plan's source names its tables."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from workplace_env.sandbox.generate import generate_csv_texts
from workplace_env.sandbox.tables import CSV_FILES

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import cpu_profile  # noqa: E402

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
    [
        "bench.py",
        "http_bench.py",
        "grpc_ladder.py",
        "profile_gateway.py",
        "profile_server.py",
        "evict_bench.py",
    ],
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


def spin_in_a_named_function(cpu_s: float) -> None:
    """Use ``cpu_s`` of this thread's CPU in this function's own loop."""
    start = time.thread_time()
    while time.thread_time() - start < cpu_s:
        pass


def test_the_sampler_charges_a_spinning_thread_s_cpu_to_its_function() -> None:
    sampler = cpu_profile.CpuSampler(interval_s=0.001)
    sampler.start()
    spinner = threading.Thread(target=spin_in_a_named_function, args=(0.3,))
    spinner.start()
    spinner.join()  # this thread waits meanwhile: a waiting place, no sample
    sampler.stop()
    stats = sampler.stats()
    own = {name: value[2] for (_, _, name), value in stats.items()}
    assert sampler.cpu_s > 0.25  # all but what it used after the last look
    assert own["spin_in_a_named_function"] > 0.8 * sum(own.values())
    (entry,) = [v for (_, _, name), v in stats.items() if name == "Thread.run"]
    assert entry[3] >= own["spin_in_a_named_function"]  # cumulative: on every sample's stack


def test_profile_server_prints_group_shares_that_add_up(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "profile_server.py"),
            "--episodes",
            "100",
            "--concurrency",
            "1",
            "--interval-ms",
            "0.25",
            "--top",
            "5",
            "--out",
            str(tmp_path / "server.prof"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    head = done.stdout.split("\n\n", 1)[0].splitlines()
    assert head[0].startswith("server CPU: ") and head[0].endswith(" ms/ep (own time by group)")
    groups = {}
    for line in head[1:]:
        share, per_episode, name = re.fullmatch(
            r"\s*([\d.]+)%\s+([\d.]+) ms/ep\s+(.+)", line
        ).groups()
        groups[name] = (float(share), float(per_episode))
    assert abs(sum(share for share, _ in groups.values()) - 100) < 0.1 * len(groups)
    assert groups["environment (store, tools, verify)"][1] > 0
    assert "top 5 functions by own time" in done.stdout
    assert "top 5 functions by cumulative time" in done.stdout
