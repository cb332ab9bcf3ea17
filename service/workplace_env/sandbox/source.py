"""Getting the WorkBench sandbox: ``workplace-env data fetch`` and ``data verify``.

A source holds the six CSVs of the sandbox (:data:`~workplace_env.sandbox.tables.CSV_FILES`):

* ``nemo-gym`` (the default): an importable NeMo Gym, else the venv of
  ``$WORKPLACE_ENV_NEMO_VENV`` or :func:`default_nemo_venv`, else the ``nemo-gym==0.7.0`` wheel
  downloaded from the package index with ``pip download``;
* a directory: a NeMo Gym venv or site-packages, a WorkBench checkout, any tree holding the CSVs;
* an archive (``.whl``, ``.zip``, ``.tar``, ``.tar.gz``/``.tgz``) or an ``http(s)://`` URL of one.

Only data files are read: the CSVs and the JSONL task files found with them (in NeMo Gym's
``workplace_assistant`` package when the source holds it). A JSONL file is a task file when
every line is an episode ``run`` plays (:func:`task_file_problem`); the others are skipped:
counted when they are JSONL of another kind (NeMo Gym's ``example_rollouts.jsonl``: responses
and rewards without a ground truth), named with why when damaged.
Every CSV must have the SHA-256 of :data:`SANDBOX_SHA256` (NeMo Gym 0.7.0's files); one that
is missing or changed is refused, named with how it changed (its rows and header against the
known file's), before anything is written. ``--data-dir DIR`` plays any directory of that
layout, saying which of its CSVs are missing, changed or added when it is not the sandbox.

A fetched directory (the cache, :func:`default_data_dir`, or ``data fetch --to``) records its
source and the SHA-256 of each file it got (:data:`SOURCE_RECORD`); a fetch from the same
source (the same URL, a local archive of the same bytes, ``nemo-gym``) into a directory still
holding those bytes reads nothing. A local directory source is read again each time.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import urllib.parse
import urllib.request
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from workplace_env.jsonl import episode_problem, jsonl_objects
from workplace_env.plurals import counted
from workplace_env.sandbox.tables import COLUMNS, CSV_FILES
from workplace_env.terminal import CommandError, blank_problem, checked_path, path_problem

#: The source ``data fetch`` uses when none is given.
NEMO_GYM = "nemo-gym"
#: The NeMo Gym release whose CSVs :data:`SANDBOX_SHA256` describes.
NEMO_GYM_REQUIREMENT = "nemo-gym==0.7.0"
#: Environment variable read for ``data fetch --from``.
SOURCE_ENV = "WORKPLACE_ENV_DATA_FROM"
#: SHA-256 (hex) of each CSV of the WorkBench sandbox as the nemo-gym 0.7.0 wheel ships it
#: (``resources_servers/workplace_assistant/csv_data/{processed,raw}``).
SANDBOX_SHA256: Mapping[str, str] = {
    "analytics_data.csv": "4a0df10aabc07980f1cc074dc9ab36406ce98dead7e14fe11f72a9f1ba788688",
    "calendar_events.csv": "6c9df1872d54d0b0d068d1b066766a8ddbc29c3933f1d56c9efd554926312295",
    "customer_relationship_manager_data.csv": (
        "599057e4eec3a7c25ac04b4d655ea2c034b7b7782205dc367a28122756e04c41"
    ),
    "email_addresses.csv": "1f3465b92eb41b90a973a9b00f35757a23d16839652b5e352e9d217d8e404b0b",
    "emails.csv": "1809e341a0e4f1fd78cf1b759964a42abd28db8c9b9dca364456efc31f82bb31",
    "project_tasks.csv": "fa0c05d5609f49e905342bd12592b09f23eff6147dcf607b808703f45ddbeaeb",
}
assert set(SANDBOX_SHA256) == set(CSV_FILES.values())
#: Data rows of each CSV of the WorkBench sandbox, its header apart (``email_addresses.csv``
#: has none: every line is an address).
SANDBOX_ROWS: Mapping[str, int] = {
    "analytics_data.csv": 1000,
    "calendar_events.csv": 300,
    "customer_relationship_manager_data.csv": 200,
    "email_addresses.csv": 20,
    "emails.csv": 500,
    "project_tasks.csv": 300,
}
#: The header of each CSV of the sandbox that has one (its table's columns, in file order).
SANDBOX_HEADERS: Mapping[str, tuple[str, ...]] = {
    name: COLUMNS[key] for key, name in CSV_FILES.items() if name != "email_addresses.csv"
}

#: A NeMo Gym venv (the tests' black-box venv) whose data ``nemo-gym`` reads when it is set.
NEMO_VENV_ENV = "WORKPLACE_ENV_NEMO_VENV"
#: Where NeMo Gym keeps the environment inside its wheel (and site-packages).
NEMO_PACKAGE = PurePosixPath("resources_servers", "workplace_assistant")
#: Bytes one data file may have at most (the largest CSV has ~0.3 MB).
MAX_FILE_BYTES = 64 * 1024 * 1024
#: Bytes a downloaded archive may have at most (the nemo-gym wheel has ~43 MB).
MAX_DOWNLOAD_BYTES = 512 * 1024 * 1024
#: Directory levels searched below a directory source.
_MAX_DEPTH = 6
_DOWNLOAD_TIMEOUT_S = 600
_URL_SCHEMES = ("http://", "https://")

Log = Callable[[str], None]


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/workplace-env`` (``~/.cache/workplace-env`` when unset)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "workplace-env"


def default_nemo_venv() -> Path:
    """Where the tests build their NeMo Gym venv unless ``$WORKPLACE_ENV_NEMO_VENV`` names one:
    ``<cache_dir()>/nemo-gym-0.7.0-venv``."""
    return cache_dir() / "nemo-gym-0.7.0-venv"


def default_data_dir() -> Path:
    """Where ``data fetch`` puts the sandbox by default: ``<cache_dir()>/workbench``."""
    return cache_dir() / "workbench"


def sha256_hex(data: bytes) -> str:
    """The hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def missing_csvs(directory: str | Path) -> str | None:
    """Why ``directory`` cannot be loaded as a sandbox: the CSVs of :data:`SANDBOX_SHA256` it
    does not hold as readable files (``missing emails.csv, ...; not readable: ...``, with
    where to get them), or None when it holds all six."""
    root = Path(directory).expanduser()
    names = sorted(SANDBOX_SHA256)
    missing = [name for name in names if not (root / name).is_file()]
    unreadable = [n for n in names if n not in missing and not os.access(root / n, os.R_OK)]
    if not missing and not unreadable:
        return None
    said = [f"missing {', '.join(missing)}"] if missing else []
    said += [f"not readable: {', '.join(unreadable)}"] if unreadable else []
    return (
        f"not a sandbox directory: {'; '.join(said)} (it needs the six WorkBench CSVs: "
        "'workplace-env data fetch' prints a directory holding them)"
    )


def verify_directory(directory: Path) -> None:
    """Check the six CSVs of ``directory`` against :data:`SANDBOX_SHA256`. Raises
    :class:`CommandError` (exit 2) naming every file that differs
    (:func:`sandbox_differences`: each missing or changed CSV, with how, and each CSV added)."""
    differences = sandbox_differences(directory)
    if any(not d.startswith("added ") for d in differences):
        raise CommandError(f"{directory} is not the WorkBench sandbox:", "; ".join(differences))


def sandbox_differences(directory: Path) -> list[str]:
    """How the CSVs of ``directory`` differ from the WorkBench sandbox's, one text each, or
    ``[]``: ``missing NAME``, ``changed NAME (...)`` (:func:`csv_change`: its rows, header and
    digests), ``NAME cannot be read: ...``, and ``added NAME`` for a ``*.csv`` no table is read
    from (named only when one of the six differs)."""
    found: list[str] = []
    for name, expected in sorted(SANDBOX_SHA256.items()):
        path = directory / name
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            found.append(f"missing {name}")
            continue
        except OSError as exc:
            found.append(f"{name} cannot be read: {exc}")
            continue
        if sha256_hex(data) != expected:
            found.append(csv_change(name, data, str(path)))
    if found:
        try:
            others = sorted(p.name for p in directory.glob("*.csv") if p.name not in SANDBOX_SHA256)
        except OSError:
            others = []
        found += [f"added {name} (no table of the sandbox: not read)" for name in others]
    return found


#: What differs in a CSV with the known file's rows and header.
_OTHER_CONTENT = "cells, quoting, blank lines or line endings"


def csv_change(name: str, data: bytes, where: str) -> str:
    """How the CSV ``data`` of the sandbox file ``name`` (read from ``where``) differs from the
    known one: ``changed NAME (WHERE): ...`` with its data rows against :data:`SANDBOX_ROWS`
    (``N rows, the known file has M``), its header's columns missing or added against
    :data:`SANDBOX_HEADERS`, or ``the same N rows and header, other content``; then its SHA-256
    and the expected one. Text that is not UTF-8 or not CSV is said so."""
    digests = f"sha256 {sha256_hex(data)}, expected {SANDBOX_SHA256[name]}"
    try:
        records = list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))
    except (UnicodeDecodeError, csv.Error) as exc:
        return f"changed {name} ({where}): not readable as UTF-8 CSV ({exc}); {digests}"
    header = SANDBOX_HEADERS.get(name)
    has_header = header is not None and bool(records) and tuple(records[0]) == header
    rows = len(records) - (1 if header is not None and records else 0)
    how = []
    if rows != SANDBOX_ROWS[name]:
        how.append(f"{counted(rows, 'row')}, the known file has {SANDBOX_ROWS[name]}")
    if header is not None and not has_header:
        got = records[0] if records else []
        parts = [f"column {c} missing" for c in header if c not in got]
        parts += [f"column {c} added" for c in got if c not in header]
        how.append("header: " + (", ".join(parts) if parts else "its columns in another order"))
    if not how:
        how.append(f"the same {counted(rows, 'row')} and header, other content ({_OTHER_CONTENT})")
    return f"changed {name} ({where}): {', '.join(how)}; {digests}"


def fetch_data(source: str | None, dest: Path | None, log: Log, argument: str = "--from") -> Path:
    """Put the verified CSVs and the task files of ``source`` (None: ``$WORKPLACE_ENV_DATA_FROM``,
    else :data:`NEMO_GYM`) into ``dest`` (None: :func:`default_data_dir`, its parents made);
    returns the directory. ``dest`` keeps a :data:`SOURCE_RECORD` of the source
    (:func:`_source_key`) and of each file's SHA-256; a ``dest`` that records the same source and
    still holds those bytes is reused, nothing fetched. ``log`` gets the progress messages and
    each file skipped, with why.

    Raises :class:`CommandError` (exit 2) naming ``argument`` (or the variable) for a source
    that is empty, missing or cannot be read (a corrupt archive with its library's reason),
    and for one that does not hold the sandbox (each missing or differing CSV named with its
    digests); ``dest`` is then unchanged.
    """
    if source is None and SOURCE_ENV in os.environ:
        source, argument = os.environ[SOURCE_ENV], f"${SOURCE_ENV}"
    if source is not None and (blank := blank_problem(source)):
        raise CommandError(f"{argument}: {blank}", f"(the default is {NEMO_GYM})")
    source = NEMO_GYM if source is None else source
    dest = _data_cache() if dest is None else dest
    checked_path(dest, "--to", "directory", output=True)
    key = _source_key(source, argument)
    if key is not None and _holds(dest, key):
        log(f"{dest} already holds the verified WorkBench sandbox from {source}")
        return dest
    with _opened(source, argument, log) as files:
        csvs, tasks, others = _select(files, source, log)
        _install(dest, {**csvs, **tasks}, key)
    plural = "" if others == 1 else "s"
    log(
        f"WorkBench sandbox from {source}: {len(csvs)} CSVs verified"
        + (f", task files {', '.join(sorted(tasks))}" if tasks else ", no task file found")
        + (f" ({others} other JSONL file{plural}, not tasks, left out)" if others else "")
    )
    return dest


def data_dir_of(value: str, log: Log) -> Path:
    """The CSV directory ``--data-dir VALUE`` names: a directory as it is (not a NeMo Gym venv
    or site-packages: its CSVs are loaded unchecked, any sandbox of that layout; ``log`` gets
    how they differ from the WorkBench sandbox when they do, :func:`sandbox_differences`);
    any other source (a file, a URL, a NeMo Gym venv, :data:`NEMO_GYM`) is fetched into
    :func:`default_data_dir` by :func:`fetch_data`, which reuses the cache only when it was
    fetched from that same source. Raises :class:`CommandError` as :func:`fetch_data`."""
    if not (value == NEMO_GYM or value.startswith(_URL_SCHEMES)):
        _check_source_path(value, "--data-dir")
    path = Path(value).expanduser()
    if path.is_dir() and _nemo_package_in(path) is None:
        if unloadable := missing_csvs(path):
            raise CommandError(f"--data-dir: {value}: {unloadable}")
        if differences := sandbox_differences(path):
            log(
                f"--data-dir {value} is not the WorkBench sandbox: {'; '.join(differences)}. "
                "Its tables are played as they are; for the WorkBench ones, use the directory "
                "'workplace-env data fetch' prints."
            )
        return path
    return fetch_data(value, None, log, "--data-dir")


# -- the record of where a fetched directory's files came from -----------------------------------

#: The file of a fetched directory naming its source and the SHA-256 of each file it holds:
#: ``{"source": KEY, "files": {NAME: SHA256}}`` (KEY: :func:`_source_key`).
SOURCE_RECORD = ".workplace-env-source.json"


def _data_cache() -> Path:
    """:func:`default_data_dir`, its parent made (the cache is the commands' own to make)."""
    dest = default_data_dir()
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandError(f"cannot make the cache directory {dest.parent}:", exc) from exc
    return dest


def _source_key(source: str, argument: str) -> dict[str, str] | None:
    """What a directory fetched from ``source`` records it came from: NeMo Gym's release for
    :data:`NEMO_GYM`, the URL for an ``http(s)`` source, the SHA-256 of a local archive; None
    for a local directory (read again each time). Raises :class:`CommandError` naming
    ``argument`` for a path that is missing or cannot be read."""
    if source == NEMO_GYM:
        return {"nemo_gym": NEMO_GYM_REQUIREMENT}
    if source.startswith(_URL_SCHEMES):
        return {"url": source}
    _check_source_path(source, argument)
    path = Path(source).expanduser()
    if path.is_dir():
        return None
    try:
        with path.open("rb") as stream:
            return {"archive_sha256": hashlib.file_digest(stream, "sha256").hexdigest()}
    except OSError as exc:
        raise CommandError(f"{argument}: cannot read {path}:", exc) from exc


def _holds(dest: Path, key: dict[str, str]) -> bool:
    """Whether ``dest`` records ``key`` as its source and still holds the files it records,
    byte for byte, the six CSVs of the sandbox among them."""
    try:
        record = json.loads((dest / SOURCE_RECORD).read_bytes())
        files = record["files"] if record["source"] == key else {}
        if any(files.get(name) != digest for name, digest in SANDBOX_SHA256.items()):
            return False
        return all(
            PurePosixPath(name).name == name and sha256_hex((dest / name).read_bytes()) == digest
            for name, digest in files.items()
        )
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return False


def _check_source_path(value: str, argument: str) -> None:
    """Raise :class:`CommandError` naming ``argument`` when the path source ``value`` is empty,
    missing or unreadable."""
    problem = path_problem(value, "any")
    if problem is not None:
        raise CommandError(
            f"{argument}: {problem}",
            f"(a source is {NEMO_GYM}, a directory, an archive (.whl, .zip, .tar.gz) or an "
            "http(s) URL)",
        )


# -- what a source holds: (path inside the source, a reader of its bytes) -------------------------

Files = list[tuple[PurePosixPath, Callable[[], bytes]]]


@contextmanager
def _opened(source: str, argument: str, log: Log) -> Iterator[Files]:
    """The data files of ``source`` (see the module docstring), readable for the duration;
    a bad path or archive is a :class:`CommandError` naming ``argument``."""
    if source == NEMO_GYM:
        installed = _installed_nemo_package()
        for venv in (os.environ.get(NEMO_VENV_ENV), default_nemo_venv()):
            if installed is None and venv:
                installed = _nemo_package_in(Path(venv))
        if installed is not None:
            log(f"reading NeMo Gym's data in {installed}")
            yield _directory_files(installed)
            return
        with tempfile.TemporaryDirectory(prefix="workplace-env-data-") as tmp:
            wheel = _download_wheel(Path(tmp), log)
            with _archive_files(wheel, argument) as files:
                yield files
        return
    if source.startswith(_URL_SCHEMES):
        with tempfile.TemporaryDirectory(prefix="workplace-env-data-") as tmp:
            archive = _download(source, Path(tmp), log)
            with _archive_files(archive, argument) as files:
                yield files
        return
    _check_source_path(source, argument)
    path = Path(source).expanduser()
    if path.is_dir():
        yield _directory_files(_nemo_package_in(path) or path)
    else:
        with _archive_files(path, argument) as files:
            yield files


def _installed_nemo_package() -> Path | None:
    """NeMo Gym's ``workplace_assistant`` directory in this interpreter's path, or None (found
    by the import system's search, without importing anything)."""
    try:
        spec = importlib.util.find_spec(NEMO_PACKAGE.parts[0])
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location, NEMO_PACKAGE.parts[1])
        if (candidate / "csv_data").is_dir():
            return candidate
    return None


def _nemo_package_in(path: Path) -> Path | None:
    """NeMo Gym's ``workplace_assistant`` directory in a site-packages or venv ``path``."""
    candidates = [
        path / NEMO_PACKAGE,
        *sorted(path.glob(f"lib/python3*/site-packages/{NEMO_PACKAGE}")),
    ]
    return next((c for c in candidates if (c / "csv_data").is_dir()), None)


def _directory_files(root: Path) -> Files:
    files: Files = []
    for current, dirs, names in os.walk(root):
        depth = len(Path(current).relative_to(root).parts)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and depth < _MAX_DEPTH)
        for name in sorted(names):
            if _wanted(name):
                path = Path(current, name)
                files.append((PurePosixPath(path.relative_to(root).as_posix()), _reader(path)))
    return files


def _reader(path: Path) -> Callable[[], bytes]:
    """A reader of the file ``path`` (refused above :data:`MAX_FILE_BYTES`)."""

    def read() -> bytes:
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                raise CommandError(f"{path} is larger than {MAX_FILE_BYTES} bytes")
            return path.read_bytes()
        except OSError as exc:
            raise CommandError(f"cannot read {path}:", exc) from exc

    return read


def _wanted(name: str) -> bool:
    return name in SANDBOX_SHA256 or name.endswith(".jsonl")


#: How an archive is told: its first bytes (zip; gzip, bzip2, xz or plain tar), else its suffix.
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_TAR_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")
_USTAR_OFFSET = 257
_ZIP_SUFFIXES = (".whl", ".zip")
_TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")


def _archive_kind(path: Path) -> str | None:
    """``zip`` or ``tar`` by the first bytes of ``path`` (a damaged archive keeps them), else
    by its suffix; None for neither."""
    with path.open("rb") as stream:
        head = stream.read(_USTAR_OFFSET + 5)
    name = path.name.lower()
    if head.startswith(_ZIP_MAGIC):
        return "zip"
    if head.startswith(_TAR_MAGIC) or head[_USTAR_OFFSET:] == b"ustar":
        return "tar"
    if name.endswith(_ZIP_SUFFIXES):
        return "zip"
    return "tar" if name.endswith(_TAR_SUFFIXES) else None


@contextmanager
def _archive_files(path: Path, argument: str = "--from") -> Iterator[Files]:
    """The data files of the archive ``path`` (zip or tar: :func:`_archive_kind`), read in
    memory. One that is no archive, or cannot be read, is a :class:`CommandError` naming
    ``argument`` (with the archive library's reason)."""
    try:
        kind = _archive_kind(path)
    except OSError as exc:
        raise CommandError(f"{argument}: cannot read {path}:", exc) from exc
    if kind is None:
        raise CommandError(
            f"{argument}: {path} is not an archive:",
            "neither zip (.whl, .zip) nor tar (.tar, .tar.gz, .tgz) by its name or first bytes",
        )
    is_zip = kind == "zip"
    try:
        if is_zip:
            with zipfile.ZipFile(path) as zipped:
                yield [
                    (
                        PurePosixPath(i.filename),
                        _member_reader(i.filename, i.file_size, zipped.open, i),
                    )
                    for i in zipped.infolist()
                    if not i.is_dir() and _wanted(PurePosixPath(i.filename).name)
                ]
            return
        with tarfile.open(path) as tarred:
            yield [
                (PurePosixPath(m.name), _member_reader(m.name, m.size, tarred.extractfile, m))
                for m in tarred.getmembers()
                if m.isfile() and _wanted(PurePosixPath(m.name).name)
            ]
    except (OSError, EOFError, zlib.error, zipfile.BadZipFile, tarfile.TarError) as exc:
        raise CommandError(f"{argument}: corrupt {kind} archive {path}:", exc) from exc


def _member_reader(
    name: str, size: int, open_member: Callable, member: object
) -> Callable[[], bytes]:
    """A reader of one archive member of ``size`` bytes (refused above :data:`MAX_FILE_BYTES`)."""

    def read() -> bytes:
        if size > MAX_FILE_BYTES:
            raise CommandError(f"{name} is larger than {MAX_FILE_BYTES} bytes")
        with open_member(member) as stream:
            return stream.read(MAX_FILE_BYTES + 1)[:MAX_FILE_BYTES]

    return read


def _download_wheel(tmp: Path, log: Log) -> Path:
    """The nemo-gym wheel fetched by ``pip download`` into ``tmp``."""
    log(f"downloading the {NEMO_GYM_REQUIREMENT} wheel (~43 MB) with pip")
    command = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q"]
    command += ["--no-deps", "--only-binary=:all:", "--python-version", "3.13"]
    # The wheel asks for Python >=3.13.14 on paper; only its data files are read here.
    command += ["--ignore-requires-python", NEMO_GYM_REQUIREMENT, "-d", str(tmp)]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=_DOWNLOAD_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CommandError(f"pip download {NEMO_GYM_REQUIREMENT} failed:", exc) from exc
    wheels = sorted(tmp.glob("nemo_gym-*.whl"))
    if done.returncode != 0 or not wheels:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise CommandError(
            f"pip download {NEMO_GYM_REQUIREMENT} failed (exit {done.returncode}):",
            f"{tail}. Give another source with --from (an archive, a directory or a URL)",
        )
    return wheels[0]


def _download(url: str, tmp: Path, log: Log) -> Path:
    """The archive at ``url`` saved into ``tmp`` (at most :data:`MAX_DOWNLOAD_BYTES`)."""
    log(f"downloading {url}")
    name = PurePosixPath(urllib.parse.urlparse(url).path).name or "download"
    target = tmp / name
    try:
        with (
            urllib.request.urlopen(url, timeout=_DOWNLOAD_TIMEOUT_S) as response,
            target.open("wb") as out,
        ):
            total = 0
            while chunk := response.read(1 << 20):
                total += len(chunk)
                if total > MAX_DOWNLOAD_BYTES:
                    raise CommandError(f"{url} is larger than {MAX_DOWNLOAD_BYTES} bytes")
                out.write(chunk)
    except (OSError, ValueError) as exc:
        raise CommandError(f"cannot download {url}:", exc) from exc
    return target


# -- choosing the files and writing them -----------------------------------------------------------


class Selected(NamedTuple):
    """What a fetch takes from a source: the verified ``csvs`` and the ``tasks`` (file name to
    bytes), and how many JSONL files of another kind it left out (``others``)."""

    csvs: dict[str, bytes]
    tasks: dict[str, bytes]
    others: int


def _select(files: Files, source: str, log: Log) -> Selected:
    """The verified CSV of each name and the task files (by file name) of ``files``; each other
    JSONL file is skipped: counted when it is JSONL of another kind, logged with why when it
    is damaged (:func:`task_file_problem`) or a second file of a name already taken. NeMo
    Gym's ``workplace_assistant`` package, when present, is the only part read. Raises
    :class:`CommandError` naming each missing or differing CSV."""
    inside = [(p, r) for p, r in files if _under_package(p) is not None]
    if inside:
        files = [(_under_package(p), r) for p, r in inside]  # type: ignore[misc]
    csvs: dict[str, bytes] = {}
    mismatches: dict[str, str] = {}
    tasks: dict[str, PurePosixPath] = {}
    task_data: dict[str, bytes] = {}
    others = 0
    for path, read in files:
        name = path.name
        if name in SANDBOX_SHA256:
            if name in csvs:
                continue
            data = read()
            if sha256_hex(data) == SANDBOX_SHA256[name]:
                csvs[name] = data
            else:
                mismatches.setdefault(name, csv_change(name, data, str(path)))
        elif name in tasks:
            log(f"skipped {path}: the task file {tasks[name]} of the same name was taken")
        elif (problem := task_file_problem(data := read(), str(path))) is not None:
            if problem.damaged:
                log(f"skipped {path}: not a task file: {problem.why}")
            else:
                others += 1
        else:
            tasks[name], task_data[name] = path, data
    problems = [
        mismatches.get(name, f"missing {name}")
        for name in sorted(SANDBOX_SHA256)
        if name not in csvs
    ]
    if problems:
        raise CommandError(f"{source} does not hold the WorkBench sandbox:", "; ".join(problems))
    return Selected(csvs, task_data, others)


class TaskFileProblem(NamedTuple):
    """Why a JSONL file is not a task file: ``why``; ``damaged``: it is no JSONL of objects at
    all (not UTF-8, a line that is not a JSON object, no line), else JSONL of another kind (a
    line that is not an episode, e.g. NeMo Gym's rollouts)."""

    why: str
    damaged: bool


def task_file_problem(data: bytes, name: str) -> TaskFileProblem | None:
    """Why the JSONL ``data`` (of the file ``name``) is not a task file ``run`` plays, or None:
    not UTF-8, a line that is not a JSON object or not an episode, no line at all."""
    try:
        lines = jsonl_objects(data.decode("utf-8"), name)
    except UnicodeDecodeError as exc:
        return TaskFileProblem(f"not UTF-8 text: {exc}", damaged=True)
    except ValueError as exc:
        return TaskFileProblem(str(exc), damaged=True)
    if not lines:
        return TaskFileProblem("no line", damaged=True)
    why = next((why for n, line in lines if (why := episode_problem(line, n))), None)
    return None if why is None else TaskFileProblem(why, damaged=False)


def _under_package(path: PurePosixPath) -> PurePosixPath | None:
    """``path`` relative to NeMo Gym's ``workplace_assistant`` directory, or None."""
    parts = path.parts
    for i in range(len(parts) - 1):
        if PurePosixPath(*parts[i : i + 2]) == NEMO_PACKAGE:
            return PurePosixPath(*parts[i + 2 :]) if len(parts) > i + 2 else None
    return None


def _install(dest: Path, files: Mapping[str, bytes], key: dict[str, str] | None) -> None:
    """Write ``files`` (name to bytes) into ``dest``, each file replaced atomically (a fetch
    running at the same time writes its own temporary files), then its :data:`SOURCE_RECORD`
    of ``key`` and their digests (none for a ``key`` of None: ``dest`` is read again)."""
    try:
        dest.mkdir(parents=True, exist_ok=True)
        (dest / SOURCE_RECORD).unlink(missing_ok=True)
        for name, data in sorted(files.items()):
            _replace(dest, name, data)
        if key is not None:
            digests = {name: sha256_hex(data) for name, data in sorted(files.items())}
            record = {"source": key, "files": digests}
            _replace(dest, SOURCE_RECORD, json.dumps(record, indent=1).encode())
    except OSError as exc:
        raise CommandError(f"cannot write into {dest}:", exc) from exc


def _replace(dest: Path, name: str, data: bytes) -> None:
    """Write ``data`` as ``dest/name`` through a temporary file renamed over it."""
    handle, part = tempfile.mkstemp(dir=dest, prefix=f".{name}.")
    with os.fdopen(handle, "wb") as out:
        out.write(data)
    os.chmod(part, 0o644)
    os.replace(part, dest / name)
