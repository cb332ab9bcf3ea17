"""The EnvironmentAdminService servicer (CONTRACT K1-K6) and the bearer-token guard of admin RPCs.

Checkpoint export, batch restore and retire, over the store's checkpoint methods. Every exported
snapshot carries the server's sandbox identity, and a restore of snapshots taken on another
sandbox is refused before anything is installed (:func:`sandbox_mismatch`). The admin
service is off unless the server has an ``admin_token`` (or an explicit ``admin_open``):
the :class:`AdminToken` step refuses admin calls without the metadata
``authorization: Bearer <token>`` (UNAUTHENTICATED with ErrorInfo, CONTRACT A1); the
environment service stays open.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Iterator
from typing import Any

import grpc

from workplace.env.v1 import admin_pb2 as admin_pb
from workplace.env.v1 import admin_pb2_grpc as admin_grpc
from workplace_env.checkpoint.codec import CodecError, decode_table_v0, decode_table_v1
from workplace_env.config import Settings, admin_token_problem
from workplace_env.errors import FieldViolation, InvalidRequest, SandboxMismatch, Unauthenticated
from workplace_env.identity import session_id_violations
from workplace_env.sandbox.table import is_missing
from workplace_env.sandbox.tables import DIRECTORY, BaseTables
from workplace_env.server import convert
from workplace_env.server.pipeline import Behaviour, Method
from workplace_env.server.servicer import _rpc, check_truth_bound
from workplace_env.server.status import to_status
from workplace_env.sessions import SessionStore
from workplace_env_client import admin as admin_sdk
from workplace_env_client import reasons
from workplace_env_client.admin import (
    PIECE_OVERHEAD_BYTES,
    framed_bytes,
    group_pieces,
    join_snapshots,
    split_snapshot,
)

ADMIN_SERVICE_NAME = admin_pb.DESCRIPTOR.services_by_name["EnvironmentAdminService"].full_name


class AdminServicer(admin_grpc.EnvironmentAdminServiceServicer):
    """Serves checkpoint export, restore and retire of one :class:`SessionStore`, with the
    bounds of ``settings`` (default: the defaults): ``max_message_bytes`` is the server's
    message limit (bytes); a restored task whose ground truth has more than
    ``max_verify_calls`` calls (0: no bound) is refused, as at seed."""

    def __init__(self, store: SessionStore, settings: Settings | None = None) -> None:
        settings = settings or Settings()
        self.store = store
        self.max_message_bytes = settings.max_message_bytes
        self.max_verify_calls = settings.max_verify_calls

    def ExportSessions(self, request, context):  # type: ignore[no-untyped-def]
        """K1: every session in pieces (header, state, call records and each record's output
        split as needed) grouped in messages of about 2 MiB, or less under a smaller message
        limit, so every session fits. Only under a limit of a few KiB can a piece alone need
        a message over it: its session is named in ``failures`` and the others export; so is a
        session whose snapshot protobuf cannot hold. Once the client has gone (deadline,
        cancel) nothing more is built: the export stops before the next session. Snapshots and
        fences are one picture (:meth:`.SessionStore.export_checkpoint`): a session closed
        while the export runs is sent as a fence only."""
        limit = self.max_message_bytes
        chunk_bytes = min(admin_sdk.CHUNK_BYTES, max(limit - PIECE_OVERHEAD_BYTES, limit // 2))
        ids = list(request.resources_session_ids)
        snapshots, missing, failures, closed = self.store.export_checkpoint(ids, context.is_active)
        sandbox = sandbox_identity(self.store.base)
        pieces: list[admin_pb.SessionSnapshot] = []
        for snapshot in snapshots:
            if not context.is_active():  # the client gave up: build nothing more
                return
            try:
                message = convert.snapshot_message(snapshot)
                message.sandbox.CopyFrom(sandbox)
                split = split_snapshot(message, chunk_bytes)
            except ValueError as exc:  # text no protobuf string can hold (UnicodeEncodeError)
                failures.append((snapshot.session_id, f"its snapshot cannot be encoded: {exc}"))
                continue
            largest = max(framed_bytes(piece) for piece in split)  # its message's size alone
            if largest > limit:
                failures.append(
                    (
                        snapshot.session_id,
                        f"a piece of its snapshot needs a message of {largest} bytes, over the "
                        f"server's message limit of {limit} bytes",
                    )
                )
            else:
                pieces.extend(split)
        if not context.is_active():
            return
        chunks = list(group_pieces(pieces, chunk_bytes))
        for chunk in chunks[:-1]:
            yield admin_pb.ExportSessionsResponse(snapshots=chunk)
        fences = [convert.fence_message(f) for f in closed]
        for group in group_pieces(fences, chunk_bytes) if fences else ():
            yield admin_pb.ExportSessionsResponse(fences=group)
        tail = admin_pb.ExportSessionsResponse(
            missing_session_ids=missing,
            failures=[
                admin_pb.ExportFailure(resources_session_id=sid, reason=why)
                for sid, why in failures
            ],
        )
        last = admin_pb.ExportSessionsResponse(snapshots=chunks[-1])
        if last.ByteSize() + tail.ByteSize() > chunk_bytes:  # many ids: a message of their own
            yield last
            yield tail
        else:
            last.MergeFrom(tail)
            yield last

    @_rpc
    def RestoreSessions(self, request_iterator, context):  # type: ignore[no-untyped-def]
        fences: list[admin_pb.SessionFence] = []

        def pieces() -> Iterator[admin_pb.SessionSnapshot]:
            for request in request_iterator:
                fences.extend(request.fences)
                yield from request.snapshots

        messages = []
        try:
            messages.extend(join_snapshots(pieces()))
        except ValueError as exc:  # "<field>: <why>"
            field, _, why = str(exc).partition(": ")
            raise InvalidRequest([FieldViolation(field, why)]) from exc
        for i, m in enumerate(messages):
            check_truth_bound(
                len(m.task.ground_truth),
                self.max_verify_calls,
                f"snapshots[{i}].task.ground_truth",
                m.resources_session_id,
            )
        snapshots = [convert.snapshot(m, f"snapshots[{i}]") for i, m in enumerate(messages)]
        for message in messages:
            refusal = sandbox_mismatch(message, self.store.base)
            if refusal is not None:
                raise refusal
        closed = [convert.fence(m, f"fences[{i}]") for i, m in enumerate(fences)]
        count = self.store.restore(snapshots, closed)
        return admin_pb.RestoreSessionsResponse(restored_count=count)

    @_rpc
    def RetireSession(self, request, context):  # type: ignore[no-untyped-def]
        violations = session_id_violations(request.resources_session_id)
        if violations:
            raise InvalidRequest(violations, request.resources_session_id)
        return admin_pb.RetireSessionResponse(
            retired=self.store.retire(request.resources_session_id)
        )


def sandbox_identity(base: BaseTables) -> admin_pb.SandboxIdentity:
    """The identity of the sandbox ``base``: its content digest and where it came from."""
    return admin_pb.SandboxIdentity(digest=base.digest, origin=base.origin)


def sandbox_mismatch(message: admin_pb.SessionSnapshot, base: BaseTables) -> SandboxMismatch | None:
    """Why ``message`` must not be restored over the sandbox ``base``, or None.

    A snapshot exported on another sandbox (its ``sandbox.digest`` differs) would install
    tables of that sandbox while Verify replays the ground truth on this one's. A snapshot
    without an identity (written before snapshots carried one) is checked by the one table no
    tool writes, the company directory: when it differs from this server's, the snapshot was
    taken on another sandbox; when it is equal, the snapshot restores as it did before (the
    other tables cannot tell). A directory that does not decode is left to the store's
    validation, which names the field.
    """
    sid = message.resources_session_id
    ours = sandbox_identity(base)
    if message.HasField("sandbox"):
        if message.sandbox.digest == ours.digest:
            return None
        return SandboxMismatch(
            f"session {sid} was exported on the sandbox {message.sandbox.digest} "
            f"({message.sandbox.origin or 'origin unknown'}); this server's sandbox is "
            f"{ours.digest} ({ours.origin or 'origin unknown'}). Restore it into a server over "
            "the same data; nothing was restored",
            sid,
        )
    if _directory_of(message, base) in (None, _cells(base, DIRECTORY)):
        return None
    return SandboxMismatch(
        f"session {sid} records no sandbox (a checkpoint written before snapshots carried one) "
        f"and its company directory differs from this server's sandbox {ours.digest} "
        f"({ours.origin or 'origin unknown'}): it was taken on another sandbox. Restore it "
        "into a server over the same data; nothing was restored",
        sid,
    )


def _cells(tables: BaseTables, key: str) -> list[object]:
    return [None if is_missing(v) else v for v in tables.tables[key].data["email_address"]]


def _directory_of(message: admin_pb.SessionSnapshot, base: BaseTables) -> list[object] | None:
    """The company directory's cells in ``message``'s state, or None when it does not decode."""
    try:
        state = json.loads(message.state_json)
        text = state["containers"]["company_directory"]["_emails"]
        decode = decode_table_v1 if state.get("schema_version", 0) == 1 else decode_table_v0
        table = decode(text, base.tables[DIRECTORY], "directory")
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError, CodecError):
        return None
    return [None if is_missing(v) else v for v in table.data["email_address"]]


class AdminToken:
    """Step: the admin guard (CONTRACT A1): admin RPCs need ``authorization: Bearer <token>``.

    With ``token`` None the admin service is off: every admin RPC is refused
    (``ADMIN_DISABLED``) unless ``open_admin`` was chosen explicitly. Refusals are
    UNAUTHENTICATED with an ``ErrorInfo`` (``ADMIN_TOKEN_REQUIRED``, ``ADMIN_TOKEN_INVALID``,
    ``ADMIN_DISABLED``), before anything else of the RPC; the environment service is never
    guarded. A ``token`` that cannot be one (blank, whitespace at an end, not printable ASCII:
    :func:`~workplace_env.config.admin_token_problem`) is a ValueError.
    """

    def __init__(self, token: str | None, open_admin: bool = False) -> None:
        if token and (problem := admin_token_problem(token, "pass None (admin off)")):
            raise ValueError(f"admin token {problem}")  # "" or None: off
        self._token = token.encode() if token else None
        self._open = open_admin and not token

    def _refusal(self, metadata: object) -> Unauthenticated | None:
        if self._token is None:
            return Unauthenticated(
                "the admin RPCs are off: this server was started without --admin-token",
                reasons.ADMIN_DISABLED.name,
            )
        given = str(dict(metadata or ()).get("authorization", ""))  # type: ignore[call-overload]
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return Unauthenticated(
                "the admin RPC carried no metadata 'authorization: Bearer <token>'",
                reasons.ADMIN_TOKEN_REQUIRED.name,
            )
        # The scheme is case-insensitive (RFC 6750); the token is compared in constant time.
        if not hmac.compare_digest(token.encode("utf-8", "replace"), self._token):
            return Unauthenticated(
                "the admin bearer token is not valid", reasons.ADMIN_TOKEN_INVALID.name
            )
        return None

    def __call__(self, method: Method, behaviour: Behaviour) -> Behaviour:
        if method.service != ADMIN_SERVICE_NAME or self._open:
            return behaviour
        rpc, refusal_of = method.name, self._refusal

        def guarded(request: Any, context: grpc.ServicerContext) -> Any:
            refusal = refusal_of(context.invocation_metadata())
            if refusal is not None:
                context.abort_with_status(to_status(refusal, rpc))
            return behaviour(request, context)

        return guarded
