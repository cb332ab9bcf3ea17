"""Checkpoints on disk: one file per session plus a manifest of SHA-256 digests, all atomic.

Layout of a checkpoint directory::

    manifest.json                    {"schema_version": 1, "checkpoint_id", "created_at",
                                     "files": {name: sha256}, "fences": [fence, ...]}
    session-<checkpoint_id>-000000.json  one session snapshot (a JSON object), named by its
                                     checkpoint and position, never by session id

(Checkpoints written before the names carried the checkpoint id have ``session-000000.json``;
the manifest lists the names, so both read alike. ``fences``, the closed ids the server fenced
as JSON objects, is absent in checkpoints written before fences travelled, and when none.)

A save into a directory that holds a checkpoint never touches that checkpoint's files until the
new one is complete: the new session files get names of their own, each written to a temporary
name, fsynced and renamed, the directory fsynced; then the manifest is replaced the same way,
which is the switch from the old checkpoint to the new one; only then are the old checkpoint's
files and the temporary files of interrupted saves removed. So a crash at any point leaves the
old checkpoint or the new one whole, and :func:`read_checkpoint` reads only what the manifest
names (leftovers are ignored, and the next save removes them). One save at a time writes a
directory (an advisory lock on it). :func:`read_checkpoint` verifies every digest before returning
anything. Client-chosen session ids never become file names.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workplace_env.locks import only_writer

MANIFEST = "manifest.json"
MANIFEST_SCHEMA_VERSION = 1


class CheckpointFileError(ValueError):
    """A checkpoint directory that cannot be read back: names the file and what is wrong."""


class NotACheckpoint(CheckpointFileError):
    """A directory whose manifest is missing, unreadable or not a checkpoint manifest."""


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _no_fault(step: str) -> None:
    """The default of ``fault``: nothing (tests pass a hook that stops a save at a step)."""


def write_atomic(path: Path, data: bytes, fault: Callable[[str], None] = _no_fault) -> None:
    """Write ``data`` to ``path`` atomically: temp file, fsync, rename, fsync the directory.

    ``fault`` is called with ``"written <name>"`` once the temp file is on disk and ``"renamed
    <name>"`` once it is in place (fault points for tests).
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        fault(f"written {path.name}")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    fault(f"renamed {path.name}")


def _is_leftover(name: str, keep: dict[str, str]) -> bool:
    """A file a save may remove: a session file the manifest does not list, or the temporary
    file of an interrupted write (``.session-*`` or ``.manifest.json.*``). Nothing else."""
    if name.startswith("session-") and name.endswith(".json"):
        return name not in keep
    return name.startswith((".session-", f".{MANIFEST}."))


def write_checkpoint(
    directory: str | Path,
    snapshots: list[dict[str, Any]],
    *,
    fences: list[dict[str, Any]] | None = None,
    fault: Callable[[str], None] = _no_fault,
) -> dict[str, Any]:
    """Write ``snapshots`` (JSON objects) and their manifest, with ``fences`` (JSON objects) in
    it, to ``directory``; return the manifest.

    Crash-safe over an existing checkpoint (module docstring): new files under names of their
    own, the manifest replaced last, then the files the new manifest does not list removed
    (the older checkpoint's and leftovers of interrupted saves). ``fault`` is called at each
    step (``"written <name>"``, ``"renamed <name>"``, ``"removed <name>"``), a hook for tests
    that stop a save there. Raises OSError when the directory cannot be written or another save
    is writing it.
    """
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    with only_writer(root, "another checkpoint save is writing this directory"):
        checkpoint_id = uuid.uuid4().hex
        files: dict[str, str] = {}
        for i, snapshot in enumerate(snapshots):
            name = f"session-{checkpoint_id}-{i:06d}.json"
            data = json.dumps(snapshot, ensure_ascii=False, sort_keys=True).encode("utf-8")
            write_atomic(root / name, data, fault)
            files[name] = hashlib.sha256(data).hexdigest()
        manifest = {
            "schema_version": MANIFEST_SCHEMA_VERSION,
            "checkpoint_id": checkpoint_id,
            "created_at": time.time(),
            "files": files,
        }
        if fences:
            manifest["fences"] = fences
        text = json.dumps(manifest, indent=2, sort_keys=True).encode("utf-8")
        write_atomic(root / MANIFEST, text, fault)  # the switch to the new checkpoint
        for stale in sorted(root.iterdir()):
            if stale.is_file() and _is_leftover(stale.name, files):
                stale.unlink(missing_ok=True)
                fault(f"removed {stale.name}")
        _fsync_dir(root)
    return manifest


def read_checkpoint(directory: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The manifest (its ``fences``, when present, a list of JSON objects) and every snapshot
    of a checkpoint, after verifying every digest.

    Raises :class:`NotACheckpoint` when the manifest is missing, unreadable, not a manifest
    or its ``fences`` not a list of objects; CheckpointFileError naming the file when a
    snapshot file is missing, unreadable, altered (digest mismatch) or not a JSON object.
    """
    root = Path(directory)
    try:
        manifest = json.loads((root / MANIFEST).read_bytes())
    except FileNotFoundError as exc:
        raise NotACheckpoint(f"not a checkpoint directory: no {MANIFEST} in {root}") from exc
    except OSError as exc:
        raise NotACheckpoint(
            f"not a checkpoint directory: cannot read {root / MANIFEST}: {exc.strerror or exc}"
        ) from exc
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, too deep
        raise NotACheckpoint(
            f"not a checkpoint directory: {root / MANIFEST} is not JSON: {exc}"
        ) from exc
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if (
        not isinstance(files, dict)
        or manifest.get("schema_version") != MANIFEST_SCHEMA_VERSION
        or not all(isinstance(v, str) for v in files.values())
    ):
        raise NotACheckpoint(
            f"not a checkpoint directory: {root / MANIFEST} is not a schema_version 1 manifest"
        )
    fences = manifest.get("fences", [])
    if not isinstance(fences, list) or not all(isinstance(f, dict) for f in fences):
        raise NotACheckpoint(
            f"not a checkpoint directory: {root / MANIFEST}: fences is not a list of objects"
        )
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
        except (ValueError, RecursionError) as exc:
            raise CheckpointFileError(f"{root / name}: not JSON: {exc}") from exc
        if not isinstance(snapshot, dict):
            raise CheckpointFileError(f"{root / name}: not a JSON object")
        snapshots.append(snapshot)
    return manifest, snapshots
