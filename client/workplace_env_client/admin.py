"""The admin SDK: checkpoint export, batch restore and retire (CONTRACT K1-K6).

>>> with AdminClient("localhost:50051", token="s3cret") as admin:
...     snapshots, missing, failures = admin.export_sessions()
...     admin.restore_sessions(snapshots)   # on a fresh server: all or nothing

Snapshots travel as ``SessionSnapshot`` messages (tables, identity and the session's call_id
records, so a call retried after a restore replays, T6); :func:`snapshot_to_json` and
:func:`snapshot_from_json` turn them into plain JSON objects for files.

Over many servers (issue 9): an RPC about one session (an export or restore naming one id,
a retire) carries the ``x-resources-session-id`` header, so on a channel with affinity
(``AdminClient([...targets])``, or :meth:`EnvironmentClient.admin` sharing the environment
client's channel) it reaches the server holding that session. Exports and restores of several
ids go to one server, whichever the channel picks: give such an AdminClient one server.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple, TypeVar

import grpc
from google.protobuf import json_format

from workplace.env.v1 import admin_pb2 as admin_pb
from workplace.env.v1 import admin_pb2_grpc as admin_grpc
from workplace_env_client import checks
from workplace_env_client.channel import DEFAULT_TIMEOUT_S, make_channel, wait_or_raise
from workplace_env_client.errors import ArgumentError
from workplace_env_client.routing import Target, session_metadata


def snapshot_to_json(snapshot: admin_pb.SessionSnapshot) -> dict[str, Any]:
    """A snapshot as a JSON object (proto field names, every field present but a call
    record's ``output_continues``, which a whole snapshot never sets: files stay readable by
    versions before it)."""
    document = json_format.MessageToDict(
        snapshot, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    for record in document.get("call_records", ()):
        if not record.get("output_continues"):
            record.pop("output_continues", None)
    return document


def snapshot_from_json(document: dict[str, Any]) -> admin_pb.SessionSnapshot:
    """The snapshot of :func:`snapshot_to_json`. Raises ValueError for an unknown field."""
    try:
        return json_format.ParseDict(document, admin_pb.SessionSnapshot())
    except json_format.ParseError as exc:
        raise ValueError(str(exc)) from exc


class ExportResult(NamedTuple):
    """What an export gave: snapshots, ids not held, and sessions that failed to encode."""

    snapshots: list[admin_pb.SessionSnapshot]
    missing: list[str]
    failures: dict[str, str]


#: Target size of one streamed chunk of snapshots (bytes): under gRPC's default 4 MiB receive
#: limit, so any client (grpcurl, a plain channel) can read an export.
CHUNK_BYTES = 2 * 1024 * 1024
#: Characters of ``state_json`` per piece of a split snapshot (at most 4 UTF-8 bytes each).
PIECE_CHARS = CHUNK_BYTES // 4


def split_record(record: admin_pb.CallRecord) -> list[admin_pb.CallRecord]:
    """``record`` as pieces of at most about :data:`CHUNK_BYTES`: the first carries its
    call_id, digest, age and the first :data:`PIECE_CHARS` characters of ``output``, each later
    one the call_id and the next piece; all but the last have ``output_continues``."""
    if record.ByteSize() <= CHUNK_BYTES:
        return [record]
    output = record.output
    first = admin_pb.CallRecord()
    first.CopyFrom(record)
    first.output = output[:PIECE_CHARS]
    pieces = [first]
    for start in range(PIECE_CHARS, len(output), PIECE_CHARS):
        pieces.append(
            admin_pb.CallRecord(call_id=record.call_id, output=output[start : start + PIECE_CHARS])
        )
    for piece in pieces[:-1]:
        piece.output_continues = True
    return pieces


def split_snapshot(snapshot: admin_pb.SessionSnapshot) -> list[admin_pb.SessionSnapshot]:
    """``snapshot`` as messages of about :data:`CHUNK_BYTES` each at most: the first carries
    everything but the rest of ``state_json`` and of ``call_records``, each later one the next
    piece of ``state_json`` and/or more call records, all but the last with
    ``state_json_continues``. A record larger than a chunk travels in pieces of its output
    (:func:`split_record`), so a session of any size fits the message limit; only the task,
    which a seed request carried whole, is never split."""
    text = snapshot.state_json
    if len(text) <= PIECE_CHARS and snapshot.ByteSize() <= CHUNK_BYTES:
        return [snapshot]
    first = admin_pb.SessionSnapshot()
    first.CopyFrom(snapshot)
    first.state_json = text[:PIECE_CHARS]
    del first.call_records[:]
    pieces = [first]
    for start in range(PIECE_CHARS, len(text), PIECE_CHARS):
        pieces.append(
            admin_pb.SessionSnapshot(
                resources_session_id=snapshot.resources_session_id,
                state_json=text[start : start + PIECE_CHARS],
            )
        )
    size = pieces[-1].ByteSize()
    for whole in snapshot.call_records:
        for record in split_record(whole):
            grown = record.ByteSize() + 8  # the field's tag and length prefix
            last = pieces[-1]
            if size + grown > CHUNK_BYTES and (
                last is first or last.state_json or last.call_records
            ):
                pieces.append(
                    admin_pb.SessionSnapshot(resources_session_id=snapshot.resources_session_id)
                )
                size = pieces[-1].ByteSize()
            pieces[-1].call_records.append(record)
            size += grown
    for piece in pieces[:-1]:
        piece.state_json_continues = True
    return pieces


Piece = TypeVar("Piece", admin_pb.SessionSnapshot, admin_pb.CallRecord)


def _join_pieces(
    pieces: Iterable[Piece],
    *,
    key: str,
    text: str,
    continues: str,
    where: Callable[[int], str],
    container: str,
    merge: Callable[[Piece, Piece], None] | None = None,
) -> Iterator[Piece]:
    """The one rule for reassembling what :func:`split_snapshot` and :func:`split_record` cut:
    each run of pieces whose ``continues`` flag is set on all but the last becomes one message,
    a copy of its first piece with the ``text`` fields of the run concatenated, the flag cleared
    and ``merge(whole, piece)`` applied for anything else a later piece carries; a piece with
    the flag unset outside a run passes as it is. ``where(n)`` is the field path of the n-th
    message yielded. Raises ValueError ``"<where>.<continues>: <why>"`` when a later piece
    names another ``key`` than the run's first, or ``pieces`` (the ``container``) end inside a
    run."""
    whole: Piece | None = None
    parts: list[str] = []
    count = 0
    for piece in pieces:
        if whole is not None:
            if getattr(piece, key) != getattr(whole, key):
                raise ValueError(
                    f"{where(count)}.{continues}: the next piece names {key} "
                    f"{getattr(piece, key)!r}, not {getattr(whole, key)!r}"
                )
            parts.append(getattr(piece, text))
            if merge is not None:
                merge(whole, piece)
            if getattr(piece, continues):
                continue
            setattr(whole, text, "".join(parts))
            setattr(whole, continues, False)
            piece, whole, parts = whole, None, []
        elif getattr(piece, continues):
            whole = type(piece)()
            whole.CopyFrom(piece)
            parts = [getattr(piece, text)]
            continue
        yield piece
        count += 1
    if whole is not None:
        raise ValueError(
            f"{where(count)}.{continues}: the {container} ended inside the {text} of {key} "
            f"{getattr(whole, key)!r}"
        )


def _join_records(snapshot: admin_pb.SessionSnapshot, index: int) -> admin_pb.SessionSnapshot:
    """``snapshot`` (the ``index``-th of its stream) with the pieces of each split call record
    joined (:func:`_join_pieces`)."""
    records = snapshot.call_records
    if not any(record.output_continues for record in records):
        return snapshot
    joined = list(
        _join_pieces(
            records,
            key="call_id",
            text="output",
            continues="output_continues",
            where=lambda n: f"snapshots[{index}].call_records[{n}]",
            container="snapshot",
        )
    )
    del snapshot.call_records[:]
    snapshot.call_records.extend(joined)
    return snapshot


def join_snapshots(
    messages: Iterable[admin_pb.SessionSnapshot],
) -> Iterator[admin_pb.SessionSnapshot]:
    """Whole snapshots from a stream of :func:`split_snapshot` pieces (whole ones pass as
    they are), the pieces of each split call record joined too. Raises ValueError
    ``"snapshots[i]...: <why>"`` naming the snapshot (and record) when a piece does not follow
    its first (another id) or the stream ends inside a snapshot (or a record)."""
    whole = _join_pieces(
        messages,
        key="resources_session_id",
        text="state_json",
        continues="state_json_continues",
        where=lambda n: f"snapshots[{n}]",
        container="stream",
        merge=lambda snapshot, piece: snapshot.call_records.extend(piece.call_records),
    )
    for index, snapshot in enumerate(whole):
        yield _join_records(snapshot, index)


def group_pieces(pieces: Iterable[admin_pb.SessionSnapshot]) -> Iterator[list[Any]]:
    """Pieces of :func:`split_snapshot` grouped in lists of about :data:`CHUNK_BYTES` (at
    least one list, possibly empty; a piece larger than that alone): the payload of each
    streamed message."""
    chunk: list[admin_pb.SessionSnapshot] = []
    size = 0
    for piece in pieces:
        grown = piece.ByteSize()
        if chunk and size + grown > CHUNK_BYTES:
            yield chunk
            chunk, size = [], 0
        chunk.append(piece)
        size += grown
    yield chunk


def chunk_snapshots(snapshots: Iterable[admin_pb.SessionSnapshot]) -> Iterator[list[Any]]:
    """Snapshots (split as needed) grouped in lists of about :data:`CHUNK_BYTES` (at least
    one list, possibly empty): the payload of each streamed message."""
    return group_pieces(piece for snapshot in snapshots for piece in split_snapshot(snapshot))


def _chunks(
    snapshots: Sequence[admin_pb.SessionSnapshot],
) -> Iterator[admin_pb.RestoreSessionsRequest]:
    """The batch as a stream of requests of about :data:`CHUNK_BYTES` each (at least one)."""
    for chunk in chunk_snapshots(snapshots):
        yield admin_pb.RestoreSessionsRequest(snapshots=chunk)


class AdminClient:
    """Admin RPCs over a ``target`` or a ``channel``; ``token`` is sent as a bearer token.

    ``target`` and ``affinity`` are those of :class:`EnvironmentClient` (a list of ``IP:PORT``
    balances per-session RPCs over the servers by session id). ``timeout_s`` is every RPC's
    deadline; an RPC refused TOO_MANY_RPCS (a server at its ``--max-concurrent-rpcs`` or
    ``--max-admin-rpcs``, X3: not run) is sent again after the refusal's ``RetryInfo`` delay
    while that deadline allows, else CapacityError. Raises ValueError for a malformed target
    list.
    """

    def __init__(
        self,
        target: Target | None = None,
        *,
        channel: grpc.Channel | None = None,
        token: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        affinity: bool | None = None,
    ) -> None:
        if (target is None) == (channel is None):
            raise ValueError("pass exactly one of target or channel")
        self._own_channel = channel is None
        if channel is None:
            assert target is not None
            channel = make_channel(target, max_attempts=1, affinity=affinity)
        self.channel = channel
        self.stub = admin_grpc.EnvironmentAdminServiceStub(self.channel)
        self.timeout_s = timeout_s
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the channel if this client created it."""
        if self._own_channel:
            self.channel.close()

    def _call_metadata(self, session_ids: Iterable[str]) -> tuple[tuple[str, str], ...]:
        """The token, plus the session header when the RPC is about exactly one session."""
        distinct = set(session_ids)
        if len(distinct) != 1:
            return self._metadata
        return self._metadata + session_metadata(distinct.pop())

    def _invoke(
        self, call: Callable[..., Any], request: Callable[[], Any], session_ids: Iterable[str] = ()
    ) -> Any:
        """``call(request(), timeout=..., metadata=...)`` within one deadline of ``timeout_s``,
        again (a fresh ``request()``) after each TOO_MANY_RPCS refusal whose wait ends before it
        (X3: a refused RPC did not run; :func:`~workplace_env_client.channel.refusal_wait`)."""
        deadline = time.monotonic() + self.timeout_s
        metadata = self._call_metadata(session_ids)
        while True:
            try:
                return call(
                    request(), timeout=max(0.0, deadline - time.monotonic()), metadata=metadata
                )
            except grpc.RpcError as exc:
                wait = wait_or_raise(exc, deadline)
            time.sleep(wait)

    def export_sessions(self, session_ids: Iterable[str] = ()) -> ExportResult:
        """Snapshots of every live session (or of ``session_ids``), the ids not held, and the
        held sessions that could not be exported with why (``failures``: id -> reason). Raises
        ArgumentError (nothing sent) naming ``resources_session_ids[i]`` when one is not a
        string UTF-8 can carry."""
        if isinstance(session_ids, str | bytes):
            raise ArgumentError("resources_session_ids", "must be a list of ids, not a string")
        ids = [checks.text(sid, f"resources_session_ids[{i}]") for i, sid in enumerate(session_ids)]
        request = admin_pb.ExportSessionsRequest(resources_session_ids=ids)

        def receive(sent: Any, **options: Any) -> list[admin_pb.ExportSessionsResponse]:
            return list(self.stub.ExportSessions(sent, **options))  # errors arrive while reading

        chunks: list[admin_pb.ExportSessionsResponse] = self._invoke(receive, lambda: request, ids)
        snapshots = [s for chunk in chunks for s in chunk.snapshots]
        missing = [i for chunk in chunks for i in chunk.missing_session_ids]
        failures = {f.resources_session_id: f.reason for c in chunks for f in c.failures}
        return ExportResult(list(join_snapshots(snapshots)), missing, failures)

    def restore_sessions(self, snapshots: Sequence[admin_pb.SessionSnapshot]) -> int:
        """Install ``snapshots`` all or none; return how many. Raises InvalidRequestError
        naming the snapshot and field, SessionLiveError (FAILED_PRECONDITION: live ids);
        ArgumentError (nothing sent) naming ``snapshots[i]`` when one is not a
        ``SessionSnapshot``."""
        snapshots = list(snapshots)
        for i, snapshot in enumerate(snapshots):
            if not isinstance(snapshot, admin_pb.SessionSnapshot):
                raise ArgumentError(
                    f"snapshots[{i}]",
                    f"must be a SessionSnapshot, not {checks.type_name(snapshot)}",
                )
        ids = [s.resources_session_id for s in snapshots]
        response: admin_pb.RestoreSessionsResponse = self._invoke(
            self.stub.RestoreSessions, lambda: _chunks(snapshots), ids
        )
        return response.restored_count

    def retire_session(self, session_id: str) -> bool:
        """Discard a session's attempt; True if the server held it (idempotent). Raises
        ArgumentError (nothing sent) when ``session_id`` is not a string UTF-8 can carry."""
        request = admin_pb.RetireSessionRequest(
            resources_session_id=checks.text(session_id, "resources_session_id")
        )
        response: admin_pb.RetireSessionResponse = self._invoke(
            self.stub.RetireSession, lambda: request, [session_id]
        )
        return response.retired
