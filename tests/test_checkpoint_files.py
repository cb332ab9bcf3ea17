"""Checkpoint files: atomic writes, a manifest of digests, and refusal of altered files."""

from __future__ import annotations

import json

import pytest

from workplace_env.checkpoint.files import (
    MANIFEST,
    CheckpointFileError,
    read_checkpoint,
    write_checkpoint,
)

SNAPSHOTS = [{"resources_session_id": "a:1", "state_json": "{}"}, {"resources_session_id": "../b"}]


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


@pytest.mark.parametrize("manifest", ["[]", '{"schema_version": 1, "files": {"a.json": 5}}', "7"])
def test_malformed_manifest_is_refused(tmp_path, manifest):
    (tmp_path / MANIFEST).write_text(manifest)
    with pytest.raises(CheckpointFileError):
        read_checkpoint(tmp_path)
