"""Checkpoints of a running server (``workplace-env checkpoint save|restore``): its live
sessions exported into a checkpoint directory, or a directory restored into it, through the
admin RPCs (CONTRACT K1-K5) and the files of :mod:`workplace_env.checkpoint.files`."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format

from workplace.env.v1 import admin_pb2 as admin_pb
from workplace_env.checkpoint.files import (
    CheckpointFileError,
    NotACheckpoint,
    read_checkpoint,
    write_checkpoint,
)
from workplace_env.command_errors import COMMAND_WORDS, refusal_text
from workplace_env.config import ADMIN_TOKEN_ENV
from workplace_env.plurals import counted
from workplace_env.terminal import CommandError, console, plain
from workplace_env_client import (
    AdminClient,
    WorkplaceEnvError,
    snapshot_from_json,
    snapshot_to_json,
)
from workplace_env_client.errors import fix_hint

#: The deadline of a whole checkpoint export or restore stream (seconds): it grows with the
#: number and size of the sessions, so it is far above the SDK's per-call 30 s.
CHECKPOINT_TIMEOUT_S = 600.0


def _admin(
    target: str,
    token: str | None,
    timeout_s: float,
    credentials: grpc.ChannelCredentials | None,
) -> AdminClient:
    return AdminClient(
        target,
        token=token or os.environ.get(ADMIN_TOKEN_ENV),
        timeout_s=timeout_s,
        credentials=credentials,
    )


def save_checkpoint(
    directory: Path,
    target: str,
    token: str | None = None,
    timeout_s: float = CHECKPOINT_TIMEOUT_S,
    credentials: grpc.ChannelCredentials | None = None,
) -> int:
    """Export every live session of the server at ``target`` and write one file each plus a
    manifest into ``directory`` (atomic). ``token``: the admin token (default
    ``$WORKPLACE_ENV_ADMIN_TOKEN``); ``timeout_s``: the deadline of the whole export;
    ``credentials``: TLS for a TLS server (:func:`workplace_env.config.client_credentials`),
    None for plaintext.

    Returns the exit status: 1, after saving the others, when a session cannot be exported
    (each is named on stderr), else 0. Raises :class:`CommandError` (exit 1) when the export
    is refused or the directory cannot be written.
    """
    try:
        with _admin(target, token, timeout_s, credentials) as admin:
            (snapshots, _, failures), fences = admin.export_checkpoint()
    except WorkplaceEnvError as exc:
        raise CommandError("export failed:", refusal_text(exc, target), exit_code=1) from exc
    try:
        manifest = write_checkpoint(
            directory,
            [snapshot_to_json(s) for s in snapshots],
            fences=[_to_json(f) for f in fences],
        )
    except OSError as exc:
        raise CommandError("cannot write the checkpoint:", exc, exit_code=1) from exc
    console.print(
        plain(
            f"saved {counted(len(snapshots), 'session')} to {directory}"
            f" ({manifest['checkpoint_id']}; {counted(len(fences), 'fence')})"
        )
    )
    for sid, why in sorted(failures.items()):
        console.print(f"[red]not saved:[/red] {plain(f'session {sid}: {why}')}")
    return 1 if failures else 0


def _never_connects(channel: grpc.Channel, timeout_s: float) -> str | None:
    """Why ``channel`` fails to connect before anything is sent on it (name resolution or the
    connection failed, or no connection within ``timeout_s``), or None once it is ready.

    Asked before the restore is sent, so a failure here means no byte of it left: the outcome
    is known (nothing installed), unlike a failure of the stream itself.
    """
    settled = threading.Event()
    states: list[grpc.ChannelConnectivity] = []

    def watch(state: grpc.ChannelConnectivity) -> None:
        if state in _SETTLED:
            states.append(state)
            settled.set()

    channel.subscribe(watch, try_to_connect=True)
    try:
        if not settled.wait(timeout_s):
            return f"no connection within {timeout_s:g} s"
    finally:
        channel.unsubscribe(watch)
    if states[0] is grpc.ChannelConnectivity.READY:
        return None
    return "the name did not resolve or the connection was refused"


#: Connectivity states that decide :func:`_never_connects`.
_SETTLED = (
    grpc.ChannelConnectivity.READY,
    grpc.ChannelConnectivity.TRANSIENT_FAILURE,
    grpc.ChannelConnectivity.SHUTDOWN,
)


def restore_checkpoint(
    directory: Path,
    target: str,
    token: str | None = None,
    timeout_s: float = CHECKPOINT_TIMEOUT_S,
    credentials: grpc.ChannelCredentials | None = None,
) -> None:
    """Verify every file's digest in ``directory``, then restore all its sessions into the
    server at ``target`` in one batch (all or nothing) within ``timeout_s`` seconds, over TLS
    with ``credentials`` (as for :func:`save_checkpoint`).

    A session that is both a snapshot and a fence in the checkpoint (saved by an older build
    while it closed) is restored as its fence, closed as at the end of that save, and a note
    names it. A checkpoint this server restored already, some of its sessions claimed since (a retry
    after the first attempt's answer was lost), is said so and is no error (exit 0): its
    claimed sessions are not reset. Raises :class:`CommandError`: exit 2 when ``directory`` is
    not a checkpoint (no readable manifest); exit 1 when a file is
    refused (nothing is sent), when the
    server cannot be reached (the channel never connected: nothing is sent), when the
    server refuses the batch (its answer names why; nothing installed), and when no answer
    came (a deadline, a lost connection): then the outcome is unknown, and the message says
    that retrying the same checkpoint is safe (the server's restore is idempotent, K3).
    """
    try:
        manifest, documents = read_checkpoint(directory)
        snapshots = [snapshot_from_json(d) for d in documents]
        fences = [_fence_from_json(d) for d in manifest.get("fences", [])]
    except NotACheckpoint as exc:
        raise CommandError(str(exc)) from exc
    except (CheckpointFileError, ValueError) as exc:
        raise CommandError("checkpoint refused, nothing sent:", exc, exit_code=1) from exc
    snapshots = _without_fenced(snapshots, fences)
    try:
        with _admin(target, token, timeout_s, credentials) as admin:
            start = time.monotonic()
            unreachable = _never_connects(admin.channel, timeout_s)
            if unreachable:
                fix = fix_hint(grpc.StatusCode.UNAVAILABLE, "", "", COMMAND_WORDS, target)
                raise CommandError(
                    f"restore failed, nothing sent and nothing installed: cannot connect to "
                    f"{target} ({unreachable}); fix: {fix}",
                    exit_code=1,
                )
            admin.timeout_s = max(0.001, timeout_s - (time.monotonic() - start))  # one budget
            count = admin.restore_sessions(snapshots, fences)
    except WorkplaceEnvError as exc:
        if exc.metadata.get("already_restored") == "true":  # a retry after some were claimed
            console.print(plain(f"already restored, nothing changed: {exc.message}"))
            return
        if exc.reason in grpc.StatusCode.__members__:  # no reason: no answer of the server's
            raise CommandError(
                "restore outcome unknown (no answer from the server; some or all sessions may "
                "be installed). Retrying the same checkpoint against the same server is safe: "
                "sessions it already installed count as restored. Do not restore it elsewhere "
                "before that:",
                refusal_text(exc, target),
                exit_code=1,
            ) from exc
        raise CommandError(
            "restore refused, nothing installed:", refusal_text(exc, target), exit_code=1
        ) from exc
    console.print(
        plain(
            f"restored {counted(count, 'session')} from {directory}"
            f" ({counted(len(fences), 'fence')})"
        )
    )


#: How many ids a note names before it says how many more.
_NAMED_IDS = 5


def _without_fenced(
    snapshots: list[admin_pb.SessionSnapshot], fences: list[admin_pb.SessionFence]
) -> list[admin_pb.SessionSnapshot]:
    """``snapshots`` less those whose id is also fenced (a session that closed while an older
    build saved the checkpoint, written both ways): the fence is the truth at the end of the
    save. A note on stderr names them, when there are any."""
    fenced = {f.resources_session_id for f in fences}
    closed = sorted(s.resources_session_id for s in snapshots if s.resources_session_id in fenced)
    if not closed:
        return snapshots
    named = ", ".join(closed[:_NAMED_IDS])
    more = f" and {len(closed) - _NAMED_IDS:,} more" if len(closed) > _NAMED_IDS else ""
    console.print(
        plain(
            f"note: {counted(len(closed), 'session')} ({named}{more}) closed while this "
            "checkpoint was saved and it holds each twice, live and closed: restoring them "
            "closed (their fence), as they were at the end of the save"
        )
    )
    return [s for s in snapshots if s.resources_session_id not in fenced]


def _to_json(fence: admin_pb.SessionFence) -> dict[str, Any]:
    """A fence as a JSON object for the manifest (proto field names)."""
    return json_format.MessageToDict(fence, preserving_proto_field_name=True)


def _fence_from_json(document: dict[str, Any]) -> admin_pb.SessionFence:
    """The fence of :func:`_to_json`. Raises ValueError for an unknown or mistyped field."""
    try:
        return json_format.ParseDict(document, admin_pb.SessionFence())
    except json_format.ParseError as exc:
        raise ValueError(f"manifest fences: {exc}") from exc
