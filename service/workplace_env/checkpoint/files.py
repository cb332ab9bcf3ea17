"""Checkpoints on disk: one file per session plus a manifest of SHA-256 digests, all atomic.

Layout of a checkpoint directory::

    manifest.json        {"schema_version": 1, "checkpoint_id", "created_at", "files": {..}}
    session-000000.json  one session snapshot (a JSON object), named by position, never by id

Every file is written to a temporary name, fsynced, renamed into place, and the directory is
fsynced; the manifest is written last, so a crash leaves either the old checkpoint or the new one.
:func:`read_checkpoint` verifies every digest before returning anything. Client-chosen session ids
never become file names.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
SCHEMA_VERSION = 1


class CheckpointFileError(ValueError):
    """A checkpoint directory that cannot be read back: names the file and what is wrong."""


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: temp file, fsync, rename, fsync the directory."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_checkpoint(directory: str | Path, snapshots: list[dict[str, Any]]) -> dict[str, Any]:
    """Write ``snapshots`` (JSON objects) and their manifest to ``directory``; return the manifest.

    Files of an earlier checkpoint that the new manifest does not list are removed after it is
    in place.
    """
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    for i, snapshot in enumerate(snapshots):
        name = f"session-{i:06d}.json"
        data = json.dumps(snapshot, ensure_ascii=False, sort_keys=True).encode("utf-8")
        write_atomic(root / name, data)
        files[name] = hashlib.sha256(data).hexdigest()
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "checkpoint_id": uuid.uuid4().hex,
        "created_at": time.time(),
        "files": files,
    }
    write_atomic(root / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True).encode("utf-8"))
    for stale in root.glob("session-*.json"):
        if stale.name not in files:
            stale.unlink()
    return manifest


def read_checkpoint(directory: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The manifest and every snapshot of a checkpoint, after verifying every digest.

    Raises CheckpointFileError naming the file when the manifest or a file is missing,
    unreadable, altered (digest mismatch) or not a JSON object.
    """
    root = Path(directory)
    try:
        manifest = json.loads((root / MANIFEST).read_bytes())
    except (OSError, ValueError) as exc:
        raise CheckpointFileError(f"{root / MANIFEST}: cannot read the manifest: {exc}") from exc
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if (
        not isinstance(files, dict)
        or manifest.get("schema_version") != SCHEMA_VERSION
        or not all(isinstance(v, str) for v in files.values())
    ):
        raise CheckpointFileError(f"{root / MANIFEST}: not a schema_version 1 manifest")
    snapshots: list[dict[str, Any]] = []
    for name in sorted(files):
        if Path(name).name != name or not name.endswith(".json"):
            raise CheckpointFileError(f"{root / MANIFEST}: bad file name {name!r}")
        try:
            data = (root / name).read_bytes()
        except OSError as exc:
            raise CheckpointFileError(f"{root / name}: cannot read: {exc}") from exc
        if hashlib.sha256(data).hexdigest() != files[name]:
            raise CheckpointFileError(f"{root / name}: SHA-256 differs from the manifest")
        try:
            snapshot = json.loads(data)
        except ValueError as exc:
            raise CheckpointFileError(f"{root / name}: not JSON: {exc}") from exc
        if not isinstance(snapshot, dict):
            raise CheckpointFileError(f"{root / name}: not a JSON object")
        snapshots.append(snapshot)
    return manifest, snapshots
