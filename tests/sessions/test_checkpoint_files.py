"""Checkpoint files: atomic writes, a manifest of digests, and refusal of altered files."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil

import pytest

from workplace_env.checkpoint.files import (
    MANIFEST,
    CheckpointFileError,
    read_checkpoint,
    write_checkpoint,
)

SNAPSHOTS = [{"resources_session_id": "a:1", "state_json": "{}"}, {"resources_session_id": "../b"}]
#: JSON texts Python's parser refuses with other errors than JSONDecodeError.
DEEP = "[" * 100_000 + "]" * 100_000
GIANT = '{"n": ' + "9" * 4301 + "}"


def test_round_trip_and_names_never_come_from_ids(tmp_path):
    manifest = write_checkpoint(tmp_path, SNAPSHOTS)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([MANIFEST, *manifest["files"]])
    assert all(name.startswith("session-") for name in manifest["files"])
    again, snapshots = read_checkpoint(tmp_path)
    assert again == manifest and snapshots == SNAPSHOTS


def test_rewrite_removes_files_of_the_older_checkpoint(tmp_path):
    write_checkpoint(tmp_path, SNAPSHOTS)
    write_checkpoint(tmp_path, SNAPSHOTS[:1])
    assert len(list(tmp_path.glob("session-*.json"))) == 1
    assert len(read_checkpoint(tmp_path)[1]) == 1


@pytest.mark.parametrize("text", [DEEP, GIANT], ids=["deep", "giant_int"])
def test_a_file_python_cannot_parse_is_refused_by_name(tmp_path, text):
    """Its digest matches (edited, manifest recomputed): still refused, never a crash."""
    manifest = write_checkpoint(tmp_path, SNAPSHOTS)
    victim = sorted(manifest["files"])[0]
    (tmp_path / victim).write_text(text)
    manifest["files"][victim] = hashlib.sha256(text.encode()).hexdigest()
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(CheckpointFileError) as err:
        read_checkpoint(tmp_path)
    assert victim in str(err.value) and "not JSON" in str(err.value)


def test_altered_file_is_refused_by_name(tmp_path):
    manifest = write_checkpoint(tmp_path, SNAPSHOTS)
    victim = sorted(manifest["files"])[1]
    (tmp_path / victim).write_text(json.dumps({"resources_session_id": "evil"}))
    with pytest.raises(CheckpointFileError) as err:
        read_checkpoint(tmp_path)
    assert victim in str(err.value) and "SHA-256" in str(err.value)


@pytest.mark.parametrize("damage", ["missing_file", "missing_manifest", "bad_name"])
def test_broken_checkpoint_is_refused(tmp_path, damage):
    manifest = write_checkpoint(tmp_path, SNAPSHOTS)
    if damage == "missing_file":
        (tmp_path / sorted(manifest["files"])[0]).unlink()
    elif damage == "missing_manifest":
        (tmp_path / MANIFEST).unlink()
    else:
        manifest["files"]["../../etc/passwd"] = "0" * 64
        (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(CheckpointFileError):
        read_checkpoint(tmp_path)


@pytest.mark.parametrize(
    "manifest", ["[]", '{"schema_version": 1, "files": {"a.json": 5}}', "7", DEEP, GIANT]
)
def test_malformed_manifest_is_refused(tmp_path, manifest):
    (tmp_path / MANIFEST).write_text(manifest)
    with pytest.raises(CheckpointFileError):
        read_checkpoint(tmp_path)


OLD = [{"resources_session_id": f"old-{i}", "state_json": "x" * 100} for i in range(3)]
NEW = [{"resources_session_id": f"new-{i}", "state_json": "y" * 100} for i in range(2)]


def _crash_copies(root, snapshots):
    """Save ``snapshots`` into ``root``, copying ``root`` at every fault point of the save: each
    copy is what a crash (kill -9, power loss) right there would leave, temp files included."""
    copies = []

    def fault(step):
        copy = root.parent / f"crash-{len(copies):03d}"
        shutil.copytree(root, copy)
        copies.append((step, copy))

    write_checkpoint(root, snapshots, fault=fault)
    return copies


@pytest.mark.parametrize("old_names", ["by_checkpoint", "by_position_only"])
def test_a_crash_at_any_step_of_a_save_leaves_the_old_or_the_new_checkpoint(tmp_path, old_names):
    """A save into a directory holding a checkpoint, stopped at each step, leaves the old
    checkpoint whole until the manifest switches, the new one whole after; the next save
    removes what the crash left (temp files, the other checkpoint's files)."""
    root = tmp_path / "ck"
    write_checkpoint(root, OLD)
    if old_names == "by_position_only":  # a checkpoint written before names carried its id
        manifest = json.loads((root / MANIFEST).read_text())
        renamed = {}
        for i, (name, digest) in enumerate(sorted(manifest["files"].items())):
            (root / name).rename(root / f"session-{i:06d}.json")
            renamed[f"session-{i:06d}.json"] = digest
        manifest["files"] = renamed
        (root / MANIFEST).write_text(json.dumps(manifest))
    copies = _crash_copies(root, NEW)
    steps = [step for step, _ in copies]
    switch = steps.index(f"renamed {MANIFEST}")
    assert steps[switch - 1] == f"written {MANIFEST}"
    assert sum(s.startswith("removed session-") for s in steps[switch:]) == len(OLD)
    assert any(p.name.startswith(".session-") for p in copies[0][1].iterdir())  # a temp file
    for i, (step, copy) in enumerate(copies):
        _, snapshots = read_checkpoint(copy)
        assert snapshots == (NEW if i >= switch else OLD), step
        manifest = write_checkpoint(copy, NEW[:1])
        assert sorted(p.name for p in copy.iterdir()) == sorted([MANIFEST, *manifest["files"]])
        assert read_checkpoint(copy)[1] == NEW[:1]


def test_an_interrupted_save_keeps_the_old_checkpoint_and_the_next_save_cleans_up(tmp_path):
    """The save dies after some new session files are in place."""

    def die(step):
        if step.startswith("renamed session-") and step.endswith("-000001.json"):
            raise KeyboardInterrupt

    write_checkpoint(tmp_path, OLD)
    with pytest.raises(KeyboardInterrupt):
        write_checkpoint(tmp_path, NEW, fault=die)
    assert read_checkpoint(tmp_path)[1] == OLD
    manifest = write_checkpoint(tmp_path, NEW)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([MANIFEST, *manifest["files"]])


def test_only_files_of_checkpoints_are_removed(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "session-notes.txt").write_text("mine too")
    write_checkpoint(tmp_path, OLD)
    write_checkpoint(tmp_path, NEW)
    assert (tmp_path / "notes.txt").exists() and (tmp_path / "session-notes.txt").exists()


def test_a_second_save_into_a_directory_being_written_is_refused(tmp_path):
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(OSError, match="another checkpoint save"):
            write_checkpoint(tmp_path, NEW)
    finally:
        os.close(fd)
    write_checkpoint(tmp_path, NEW)
