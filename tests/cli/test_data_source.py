"""``workplace-env data fetch`` and ``data verify``: the WorkBench sandbox from NeMo Gym's venv,
from a directory, from an archive served over HTTP; a CSV that is changed or missing is refused,
named with how it changed and its digests, and nothing is written; a ``--data-dir`` that is not
the sandbox is played, naming each CSV missing, changed or added.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import socket
import subprocess
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from tests.cli.test_cli import HANG_S, _command, invoke
from tests.conftest import WORKBENCH, shared_file
from tests.nemo.venv import nemo_python, site_packages
from workplace_env.sandbox.source import (
    NEMO_PACKAGE,
    SANDBOX_SHA256,
    SOURCE_ENV,
    sandbox_differences,
)

NAMES = sorted(SANDBOX_SHA256)
CSV_DIR = NEMO_PACKAGE / "csv_data" / "processed"


def sandbox_bytes() -> dict[str, bytes]:
    """The shared data's six CSVs (skips naming one that is absent)."""
    return {name: shared_file(WORKBENCH / name).read_bytes() for name in NAMES}


def tampered(files: dict[str, bytes], name: str) -> dict[str, bytes]:
    return {**files, name: files[name] + b"\n"}


def zip_bytes(files: dict[str, bytes], prefix: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for name, data in files.items():
            archive.writestr(f"{prefix}{name}", data)
    return buf.getvalue()


def tar_gz_bytes(files: dict[str, bytes], prefix: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{prefix}{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def http_dir(tmp_path) -> Iterator[tuple[Path, str, list[str]]]:
    """A directory served over HTTP on loopback (a thread, stopped after the test): its path,
    its base URL and the path of each GET answered, in order."""
    root = tmp_path / "served"
    root.mkdir()
    gets: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            gets.append(self.path)
            super().do_GET()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(Handler, directory=str(root))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}", gets
    finally:
        server.shutdown()
        thread.join(timeout=HANG_S)
        server.server_close()


def assert_sandbox_in(directory: Path) -> None:
    for name in NAMES:
        assert hashlib.sha256((directory / name).read_bytes()).hexdigest() == SANDBOX_SHA256[name]


def test_the_known_digests_are_the_shared_sandbox_s():
    files = sandbox_bytes()
    assert {n: hashlib.sha256(b).hexdigest() for n, b in files.items()} == dict(SANDBOX_SHA256)


@pytest.mark.parametrize("where", ["venv", "site-packages"])
def test_fetch_from_the_nemo_gym_venv_prints_the_directory_alone(tmp_path, where):
    python = nemo_python()
    source = python.parent.parent if where == "venv" else site_packages(python)
    dest = tmp_path / "data"
    done = subprocess.run(
        [*_command(), "data", "fetch", "--from", str(source), "--to", str(dest)],
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{dest}\n"  # DATA=$(workplace-env data fetch) gets the directory
    said = " ".join(done.stderr.split())
    summary = "6 CSVs verified, task files example.jsonl (1 other JSONL file, not tasks, left out)"
    assert summary in said
    assert_sandbox_in(dest)
    # its rollouts carry no ground truth: not a task file run can play, left out, only counted
    # (they were named with why on every fetch)
    assert not (dest / "example_rollouts.jsonl").exists()
    assert "example_rollouts" not in said and "skipped" not in said
    # NeMo Gym's example tasks came along, and they play on the fetched sandbox
    result = invoke("run", dest / "example.jsonl", "--policy", "oracle", "--data-dir", dest)
    assert result.exit_code == 0, result.output
    assert "│ mean reward (played) │ 1.0000 │" in result.stdout


def test_the_default_source_reads_the_nemo_gym_venv_named_by_the_variable(tmp_path):
    venv = nemo_python().parent.parent
    cache = tmp_path / "cache"
    env = {"XDG_CACHE_HOME": str(cache), "WORKPLACE_ENV_NEMO_VENV": str(venv)}
    result = invoke("data", "fetch", env=env)
    assert result.exit_code == 0, result.output
    dest = cache / "workplace-env" / "workbench"
    assert result.stdout == f"{dest}\n"
    assert f"reading NeMo Gym's data in {venv}" in result.stderr.replace("\n", "")
    assert_sandbox_in(dest)
    again = invoke("data", "fetch", env=env)  # already there: nothing fetched
    assert again.stdout == f"{dest}\n"
    assert "already holds the verified WorkBench sandbox" in again.stderr


@pytest.mark.parametrize(
    ("archive", "build", "prefix"),
    [
        ("nemo_gym-0.7.0-py3-none-any.whl", zip_bytes, f"{CSV_DIR}/"),
        ("workbench.tar.gz", tar_gz_bytes, "WorkBench-main/data/"),
        ("served-without-suffix", zip_bytes, ""),
    ],
)
def test_fetch_from_an_archive_served_over_http(tmp_path, http_dir, archive, build, prefix):
    root, url, _ = http_dir
    files = sandbox_bytes()
    tasks = b'{"id": "t", "ground_truth": []}\n'
    (root / archive).write_bytes(build({**files, "tasks.jsonl": tasks}, prefix))
    dest = tmp_path / "data"
    result = invoke("data", "fetch", "--to", dest, env={SOURCE_ENV: f"{url}/{archive}"})
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{dest}\n"
    assert_sandbox_in(dest)
    assert (dest / "tasks.jsonl").read_bytes() == tasks


def test_fetch_copies_only_the_task_files_it_validates_and_names_each_damaged(tmp_path):
    """Every *.jsonl of the source was copied as a task file: notes, rollouts, broken JSON.
    JSONL of another kind is counted, a damaged file or a second of a name is named."""
    source = tmp_path / "src"
    (source / "a").mkdir(parents=True)
    (source / "b").mkdir()
    for name, data in sandbox_bytes().items():
        (source / name).write_bytes(data)
    task = b'{"id": "t", "ground_truth": []}\n\n{"id": "u", "function_calls": []}\n'
    (source / "a" / "tasks.jsonl").write_bytes(task)
    (source / "b" / "tasks.jsonl").write_bytes(b'{"id": "other", "ground_truth": []}\n')
    (source / "notes.jsonl").write_bytes(b'{"note": "hello"}\n')
    (source / "rollouts.jsonl").write_bytes(b'{"response": {}, "reward": 1.0}\n')
    (source / "broken.jsonl").write_bytes(b'{"id": "t", "ground_truth": []}\n{"id": \n')
    (source / "list.jsonl").write_bytes(b"[1, 2]\n")
    (source / "latin1.jsonl").write_bytes(b'{"id": "caf\xe9", "ground_truth": []}\n')
    (source / "empty.jsonl").write_bytes(b"\n")
    dest = tmp_path / "data"
    result = invoke("data", "fetch", "--from", source, "--to", dest)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in dest.glob("*.jsonl")) == ["tasks.jsonl"]
    assert (dest / "tasks.jsonl").read_bytes() == task
    said = " ".join(result.stderr.split())
    for skipped in (
        "skipped b/tasks.jsonl: the task file a/tasks.jsonl of the same name was taken",
        "skipped broken.jsonl: not a task file: broken.jsonl:2: not JSON",
        "skipped list.jsonl: not a task file: list.jsonl:1: not a JSON object",
        "skipped latin1.jsonl: not a task file: not UTF-8 text",
        "skipped empty.jsonl: not a task file: no line",
    ):
        assert skipped in said
    assert "notes.jsonl" not in said and "rollouts.jsonl" not in said
    summary = "6 CSVs verified, task files tasks.jsonl (2 other JSONL files, not tasks, left out)"
    assert summary in said


@pytest.mark.parametrize("build", [zip_bytes, tar_gz_bytes])
def test_a_tampered_csv_is_refused_naming_it_and_nothing_is_written(tmp_path, http_dir, build):
    root, url, _ = http_dir
    files = tampered(sandbox_bytes(), "customer_relationship_manager_data.csv")
    found = hashlib.sha256(files["customer_relationship_manager_data.csv"]).hexdigest()
    (root / "data.tar.gz").write_bytes(build(files, "x/"))
    dest = tmp_path / "data"
    result = invoke("data", "fetch", "--from", f"{url}/data.tar.gz", "--to", dest)
    assert result.exit_code == 2
    message = result.stderr.replace("\n", "")
    assert "changed customer_relationship_manager_data.csv" in message
    assert "the same 200 rows and header, other content" in message
    assert SANDBOX_SHA256["customer_relationship_manager_data.csv"] in message
    assert found in message
    assert "emails.csv" not in message
    assert result.stdout == ""
    assert not dest.exists()


def test_a_missing_csv_is_named(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for name, data in sandbox_bytes().items():
        if name != "email_addresses.csv":
            (source / name).write_bytes(data)
    result = invoke("data", "fetch", "--from", source, "--to", tmp_path / "data")
    assert result.exit_code == 2
    assert "missing email_addresses.csv" in result.stderr
    assert not (tmp_path / "data").exists()


def test_only_nemo_gym_s_package_is_read_from_a_wheel(tmp_path):
    """A CSV of the same name elsewhere in the wheel (here a tampered one) is not the sandbox."""
    files = sandbox_bytes()
    wheel = tmp_path / "nemo.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in tampered(files, "emails.csv").items():
            archive.writestr(f"aaa/{name}", data)
        for name, data in files.items():
            archive.writestr(f"{CSV_DIR}/{name}", data)
    result = invoke("data", "fetch", "--from", wheel, "--to", tmp_path / "data")
    assert result.exit_code == 0, result.output
    assert_sandbox_in(tmp_path / "data")


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("no/such/path", "--from: no such file or directory: no/such/path"),
        ("notes.txt", "--from: notes.txt is not an archive"),
        ("broken.whl", "--from: corrupt zip archive broken.whl: File is not a zip file"),
        ("broken.tgz", "--from: corrupt tar archive broken.tgz:"),
        ("http://127.0.0.1:9/x.zip", "cannot download http://127.0.0.1:9/x.zip"),
    ],
)
def test_a_source_that_cannot_be_read_is_a_usage_error(tmp_path, monkeypatch, source, says):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("not an archive")
    (tmp_path / "broken.whl").write_bytes(b"PK\x03\x04 cut short")
    (tmp_path / "broken.tgz").write_bytes(b"\x1f\x8b cut short")
    result = invoke("data", "fetch", "--from", source, "--to", tmp_path / "data")
    assert result.exit_code == 2
    assert says in result.stderr.replace("\n", "")
    assert result.stdout == ""


def test_verify_names_each_file_that_differs_or_is_missing(tmp_path):
    files = sandbox_bytes()
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    assert invoke("data", "verify", tmp_path).exit_code == 0
    (tmp_path / "emails.csv").write_bytes(tampered(files, "emails.csv")["emails.csv"])
    (tmp_path / "project_tasks.csv").unlink()
    result = invoke("data", "verify", tmp_path)
    assert result.exit_code == 2
    message = result.stderr.replace("\n", "")
    assert "changed emails.csv" in message and "the same 500 rows and header" in message
    assert SANDBOX_SHA256["emails.csv"] in message
    assert "missing project_tasks.csv" in message


def test_data_dir_takes_a_source_fetched_into_the_cache_first(tmp_path, http_dir):
    root, url, _ = http_dir
    files = sandbox_bytes()
    (root / "good.zip").write_bytes(zip_bytes(files, "d/"))
    (root / "bad.zip").write_bytes(zip_bytes(tampered(files, "calendar_events.csv"), "d/"))
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    refused = invoke("generate-tasks", "--count", "2", "--data-dir", f"{url}/bad.zip", env=env)
    assert refused.exit_code == 2
    said = " ".join(refused.output.split())
    assert "Invalid value for '--data-dir'" in said
    assert "changed calendar_events.csv" in said
    made = invoke("generate-tasks", "--count", "2", "--data-dir", f"{url}/good.zip", env=env)
    assert made.exit_code == 0, made.output
    assert len(made.stdout.splitlines()) == 2
    assert_sandbox_in(tmp_path / "cache" / "workplace-env" / "workbench")


def test_data_dir_naming_nothing_that_exists_is_refused_not_replaced_by_the_cache(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    cache = tmp_path / "cache" / "workplace-env" / "workbench"
    cache.mkdir(parents=True)
    for name, data in sandbox_bytes().items():
        (cache / name).write_bytes(data)
    result = invoke("generate-tasks", "--count", "1", "--data-dir", tmp_path / "nothing", env=env)
    assert result.exit_code == 2
    assert f"no such file or directory: {tmp_path / 'nothing'}" in " ".join(result.output.split())


@pytest.mark.parametrize("build", [zip_bytes, tar_gz_bytes])
def test_a_damaged_archive_is_refused_naming_it(tmp_path, build):
    whole = build(sandbox_bytes(), "d/")
    for cut in (len(whole) // 2, len(whole) - 40):
        archive = tmp_path / f"cut-{cut}"
        archive.write_bytes(whole[:cut])
        result = invoke("data", "fetch", "--from", archive, "--to", tmp_path / "data")
        assert result.exit_code == 2, result.output
        said = " ".join(result.stderr.split())
        assert f"--from: corrupt {'zip' if build is zip_bytes else 'tar'} archive {archive}" in said
        assert not (tmp_path / "data").exists()


def _sandbox_dir(root: Path) -> Path:
    root.mkdir()
    for name, data in sandbox_bytes().items():
        (root / name).write_bytes(data)
    return root


def test_each_difference_from_the_sandbox_is_named_by_kind(tmp_path):
    """Missing, changed (rows, header, or the same rows with other cells) and added CSVs are
    each named; the shared sandbox has none; an added CSV alone is no difference."""
    data = _sandbox_dir(tmp_path / "data")
    (data / "contacts.csv").write_text("name\nx\n")
    assert sandbox_differences(data) == []
    emails = (data / "emails.csv").read_bytes()
    (data / "emails.csv").write_bytes(emails.replace(b"Update", b"Updated", 1))
    lines = (data / "calendar_events.csv").read_bytes().split(b"\n")
    lines[0] = lines[0].replace(b"event_name", b"title")
    (data / "calendar_events.csv").write_bytes(b"\n".join([*lines[:-2], b""]))
    (data / "project_tasks.csv").unlink()
    found = sandbox_differences(data)
    assert [f.split(" (")[0] for f in found] == [
        "changed calendar_events.csv",
        "changed emails.csv",
        "missing project_tasks.csv",
        "added contacts.csv",
    ]
    assert (
        "298 rows, the known file has 300, header: column event_name missing, column title "
        "added" in found[0]
    )
    assert "the same 500 rows and header, other content" in found[1]


def test_a_modified_data_dir_is_played_naming_what_differs(tmp_path):
    """``--data-dir`` over a changed copy of the sandbox: the command goes on, and says which
    CSV changed and how before it plays."""
    data = _sandbox_dir(tmp_path / "data")
    emails = (data / "emails.csv").read_bytes().split(b"\n")
    (data / "emails.csv").write_bytes(b"\n".join(emails[:1] + emails[2:]))
    result = invoke("generate-tasks", "--count", "1", "--data-dir", data)
    assert result.exit_code == 0, result.output
    said = " ".join(result.stderr.split())
    assert f"--data-dir {data} is not the WorkBench sandbox: changed emails.csv" in said
    assert "499 rows, the known file has 500" in said and "data fetch" in said
    same = invoke("generate-tasks", "--count", "1", "--data-dir", WORKBENCH)
    assert "not the WorkBench sandbox" not in same.stderr


def test_serve_names_a_modified_data_dir_in_a_json_record(tmp_path):
    """Under ``serve`` (every stderr line a JSON record) the difference of a changed sandbox is
    a WARNING record, not a plain line."""
    data = _sandbox_dir(tmp_path / "data")
    emails = (data / "emails.csv").read_bytes().split(b"\n")
    (data / "emails.csv").write_bytes(b"\n".join(emails[:1] + emails[2:]))
    with socket.socket() as holder:  # the bind fails after the settings are read: a quick exit
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = f"127.0.0.1:{holder.getsockname()[1]}"
        result = invoke("serve", "--data-dir", data, "--address", taken)
    assert result.exit_code == 2, result.output
    records = [json.loads(line) for line in result.output.splitlines() if line.strip()]
    said = [r["message"] for r in records if "not the WorkBench sandbox" in r["message"]]
    assert len(said) == 1 and "changed emails.csv" in said[0]


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port bound but not listening: a connection to it is refused."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        yield holder.getsockname()[1]


@pytest.mark.parametrize(
    "command",
    [
        ["demo", "--count", "2"],
        ["run", "TASKS"],
        ["generate-tasks", "--count", "1"],
        ["serve", "--print-config"],
    ],
)
@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("passwd", "passwd is not an archive"),
        ("junk.zip", "corrupt zip archive junk.zip"),
        ("URL", "cannot download URL: <urlopen error [Errno 111] Connection refused>"),
    ],
)
def test_a_data_dir_source_that_cannot_be_read_is_refused_though_the_cache_verifies(
    tmp_path, monkeypatch, closed_port, command, source, says
):
    """A verified sandbox in the cache stands in for no other source: each command taking
    ``--data-dir`` reads the source it names and exits 2 naming the option when it fails."""
    monkeypatch.chdir(tmp_path)
    cache = tmp_path / "cache"
    (cache / "workplace-env").mkdir(parents=True)
    cached = _sandbox_dir(cache / "workplace-env" / "workbench")
    (tmp_path / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (tmp_path / "junk.zip").write_bytes(b"PK\x03\x04 cut short")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "t", "ground_truth": []}\n')
    url = f"http://127.0.0.1:{closed_port}/x.zip"
    source = url if source == "URL" else source
    args = [tasks if a == "TASKS" else a for a in command]
    result = invoke(*args, "--data-dir", source, env={"XDG_CACHE_HOME": str(cache)})
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert "Invalid value for '--data-dir'" in said
    assert says.replace("URL", url) in said
    assert "the verified WorkBench sandbox in" not in said
    assert result.stdout == ""
    assert_sandbox_in(cached)


def test_a_data_dir_source_is_fetched_again_only_when_it_is_another_or_has_changed(
    tmp_path, http_dir
):
    """The cache records the source it was fetched from and what it holds: a second start from
    the same URL downloads nothing; another URL, a changed archive or a changed cache file is
    fetched again."""
    root, url, gets = http_dir
    files = sandbox_bytes()
    first_tasks = b'{"id": "first", "ground_truth": []}\n'
    other_tasks = b'{"id": "other", "ground_truth": []}\n'
    (root / "a.zip").write_bytes(zip_bytes({**files, "tasks.jsonl": first_tasks}, "d/"))
    (root / "b.zip").write_bytes(zip_bytes({**files, "tasks.jsonl": other_tasks}, "d/"))
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    cache = tmp_path / "cache" / "workplace-env" / "workbench"

    def start(source: object) -> str:
        result = invoke("generate-tasks", "--count", "1", "--data-dir", source, env=env)
        assert result.exit_code == 0, result.output
        return " ".join(result.stderr.split())

    start(f"{url}/a.zip")
    assert gets == ["/a.zip"]
    assert (cache / "tasks.jsonl").read_bytes() == first_tasks
    said = start(f"{url}/a.zip")
    assert gets == ["/a.zip"]  # the same URL: no second download
    assert f"{cache} already holds the verified WorkBench sandbox from {url}/a.zip" in said
    start(f"{url}/b.zip")
    assert gets == ["/a.zip", "/b.zip"]
    assert (cache / "tasks.jsonl").read_bytes() == other_tasks
    (cache / "tasks.jsonl").write_bytes(first_tasks)  # the cache no longer holds what it got
    start(f"{url}/b.zip")
    assert gets == ["/a.zip", "/b.zip", "/b.zip"]
    assert (cache / "tasks.jsonl").read_bytes() == other_tasks

    archive = tmp_path / "local.zip"
    archive.write_bytes((root / "a.zip").read_bytes())
    start(archive)
    assert (cache / "tasks.jsonl").read_bytes() == first_tasks
    assert "already holds" in start(archive)
    archive.write_bytes((root / "b.zip").read_bytes())  # the same path, changed
    assert "already holds" not in start(archive)
    assert (cache / "tasks.jsonl").read_bytes() == other_tasks
    assert gets == ["/a.zip", "/b.zip", "/b.zip"]


def test_a_cache_fetched_from_another_source_does_not_stand_in_for_nemo_gym(tmp_path, http_dir):
    """``data fetch`` (the default source, ``nemo-gym``) over a cache filled from a URL reads
    NeMo Gym; a second fetch reuses what it wrote."""
    root, url, _ = http_dir
    (root / "a.zip").write_bytes(zip_bytes(sandbox_bytes(), "d/"))
    venv = nemo_python().parent.parent
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "WORKPLACE_ENV_NEMO_VENV": str(venv)}
    assert invoke("data", "fetch", "--from", f"{url}/a.zip", env=env).exit_code == 0
    fetched = invoke("data", "fetch", env=env)
    assert fetched.exit_code == 0, fetched.output
    assert f"reading NeMo Gym's data in {venv}" in fetched.stderr.replace("\n", "")
    again = invoke("data", "fetch", env=env)
    assert "already holds the verified WorkBench sandbox from nemo-gym" in again.stderr
