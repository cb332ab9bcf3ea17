"""The admin SDK: checkpoint export, batch restore and retire (CONTRACT K1-K6).

>>> with AdminClient("localhost:50051", token="s3cret") as admin:
...     snapshots, missing, failures = admin.export_sessions()
...     admin.restore_sessions(snapshots)   # on a fresh server: all or nothing

Snapshots travel as ``SessionSnapshot`` messages (tables, identity and the session's call_id
records, so a call retried after a restore replays, T6); :func:`snapshot_to_json` and
:func:`snapshot_from_json` turn them into plain JSON objects for files.

Over many servers: an RPC about one session (an export or restore naming one id,
a retire) carries the ``x-resources-session-id`` header, so on a channel with affinity
(``AdminClient([...targets])``, or :meth:`EnvironmentClient.admin` sharing the environment
client's channel) it reaches the server holding that session. Exports and restores of several
ids go to one server, whichever the channel picks: give such an AdminClient one server.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import Any, Literal, NamedTuple, TypeVar

import grpc
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from workplace.env.v1 import admin_pb2 as admin_pb
from workplace.env.v1 import admin_pb2_grpc as admin_grpc
from workplace_env_client import checks, reasons
from workplace_env_client.channel import (
    DEFAULT_TIMEOUT_S,
    MAX_MESSAGE_BYTES,
    check_client_options,
    make_channel,
    wait_or_raise,
)
from workplace_env_client.contexts import SyncOnly
from workplace_env_client.errors import ArgumentError, CapacityError, closed_channel_error
from workplace_env_client.routing import Target, session_metadata


def snapshot_to_json(snapshot: admin_pb.SessionSnapshot) -> dict[str, Any]:
    """A snapshot as a JSON object (proto field names, every field present but a call
    record's ``output_continues`` and ``header_encoding``, which a whole snapshot never sets,
    and a ``write_bytes`` of 0: files stay readable by versions before them)."""
    document = json_format.MessageToDict(
        snapshot, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    for record in document.get("call_records", ()):
        if not record.get("output_continues"):
            record.pop("output_continues", None)
    for name in ("header_encoding", "write_bytes"):
        if not document.get(name) or document[name] == "0":
            document.pop(name, None)
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
#: The most a piece of :func:`split_snapshot` carries beyond its ``chunk_bytes``: the session
#: id and a record's call_id (256 characters each, up to 4 bytes a character), its digest and
#: age, the flags and the framing of the nested fields.
PIECE_OVERHEAD_BYTES = 2 * 1024
#: The fields of a snapshot's header (:func:`split_snapshot` sends them as
#: ``header_encoding`` when they are too large to travel whole).
HEADER_FIELDS: tuple[
    Literal["episode_id", "task_id", "task", "legacy", "state", "sandbox", "write_bytes"], ...
] = ("episode_id", "task_id", "task", "legacy", "state", "sandbox", "write_bytes")


def split_record(
    record: admin_pb.CallRecord, chunk_bytes: int | None = None
) -> list[admin_pb.CallRecord]:
    """``record`` as pieces of at most about ``chunk_bytes`` (default :data:`CHUNK_BYTES`): the
    first carries its call_id, digest, age and the first ``chunk_bytes // 4`` characters of
    ``output`` (at most 4 UTF-8 bytes each), each later one the call_id and the next piece; all
    but the last have ``output_continues``."""
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    if record.ByteSize() <= chunk_bytes:
        return [record]
    step = max(1, chunk_bytes // 4)
    output = record.output
    first = admin_pb.CallRecord()
    first.CopyFrom(record)
    first.output = output[:step]
    pieces = [first]
    for start in range(step, len(output), step):
        pieces.append(
            admin_pb.CallRecord(call_id=record.call_id, output=output[start : start + step])
        )
    for piece in pieces[:-1]:
        piece.output_continues = True
    return pieces


def split_snapshot(
    snapshot: admin_pb.SessionSnapshot, chunk_bytes: int | None = None
) -> list[admin_pb.SessionSnapshot]:
    """``snapshot`` as messages of at most ``chunk_bytes`` (default :data:`CHUNK_BYTES`) plus
    :data:`PIECE_OVERHEAD_BYTES` each: the first carries everything but the rest of
    ``state_json`` and of ``call_records``, each later one the next piece of ``state_json``
    and/or more call records, all but the last with ``state_json_continues``. A header too
    large to travel beside the first piece of ``state_json`` (a large task, or id) travels as
    its encoding in pieces of ``chunk_bytes`` (``header_encoding``, ahead of the state), and a
    record larger than a chunk in pieces of its output (:func:`split_record`), so no field
    makes a piece larger: a session of any size fits any message limit above
    ``chunk_bytes + PIECE_OVERHEAD_BYTES``."""
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    text = snapshot.state_json
    step = max(1, chunk_bytes // 4)  # characters of state_json: at most 4 UTF-8 bytes each
    if len(text) <= step and snapshot.ByteSize() <= chunk_bytes:
        return [snapshot]
    sid = snapshot.resources_session_id
    first = admin_pb.SessionSnapshot()
    first.CopyFrom(snapshot)
    first.state_json = text[:step]
    del first.call_records[:]
    pieces = [first]
    state_from = step
    if first.ByteSize() > chunk_bytes:
        header = admin_pb.SessionSnapshot()
        header.CopyFrom(first)
        header.ClearField("resources_session_id")
        header.ClearField("state_json")
        for name in HEADER_FIELDS:
            first.ClearField(name)
        encoding = header.SerializeToString()
        first.state_json, state_from = "", 0
        first.header_encoding = encoding[:chunk_bytes]
        for start in range(chunk_bytes, len(encoding), chunk_bytes):
            pieces.append(
                admin_pb.SessionSnapshot(
                    resources_session_id=sid, header_encoding=encoding[start : start + chunk_bytes]
                )
            )
    for start in range(state_from, len(text), step):
        pieces.append(
            admin_pb.SessionSnapshot(
                resources_session_id=sid, state_json=text[start : start + step]
            )
        )
    size = pieces[-1].ByteSize()
    for whole in snapshot.call_records:
        for record in split_record(whole, chunk_bytes):
            grown = record.ByteSize() + 8  # the field's tag and length prefix
            last = pieces[-1]
            if size + grown > chunk_bytes and (
                last is first or last.state_json or last.header_encoding or last.call_records
            ):
                pieces.append(admin_pb.SessionSnapshot(resources_session_id=sid))
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
    texts: tuple[str, ...],
    continues: str,
    where: Callable[[int], str],
    container: str,
    merge: Callable[[Piece, Piece], None] | None = None,
) -> Iterator[Piece]:
    """The one rule for reassembling what :func:`split_snapshot` and :func:`split_record` cut:
    each run of pieces whose ``continues`` flag is set on all but the last becomes one message,
    a copy of its first piece with each of its ``texts`` fields (text or bytes) concatenated
    over the run, the flag cleared and ``merge(whole, piece)`` applied for anything else a
    later piece carries; a piece with the flag unset outside a run passes as it is.
    ``where(n)`` is the field path of the n-th message yielded. Raises ValueError
    ``"<where>.<continues>: <why>"`` when a later piece names another ``key`` than the run's
    first, or ``pieces`` (the ``container``) end inside a run."""
    whole: Piece | None = None
    parts: dict[str, list[Any]] = {}
    count = 0
    for piece in pieces:
        if whole is not None:
            if getattr(piece, key) != getattr(whole, key):
                raise ValueError(
                    f"{where(count)}.{continues}: the next piece names {key} "
                    f"{getattr(piece, key)!r}, not {getattr(whole, key)!r}"
                )
            for name in texts:
                parts[name].append(getattr(piece, name))
            if merge is not None:
                merge(whole, piece)
            if getattr(piece, continues):
                continue
            for name, run in parts.items():
                setattr(whole, name, run[0][:0].join(run))
            setattr(whole, continues, False)
            piece, whole = whole, None
        elif getattr(piece, continues):
            whole = type(piece)()
            whole.CopyFrom(piece)
            parts = {name: [getattr(piece, name)] for name in texts}
            continue
        yield piece
        count += 1
    if whole is not None:
        raise ValueError(
            f"{where(count)}.{continues}: the {container} ended inside the {texts[-1]} of "
            f"{key} {getattr(whole, key)!r}"
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
            texts=("output",),
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
    they are), the pieces of each split header and call record joined too. Raises ValueError
    ``"snapshots[i]...: <why>"`` naming the snapshot (and record) when a piece does not follow
    its first (another id) or the stream ends inside a snapshot (or a record)."""
    whole = _join_pieces(
        messages,
        key="resources_session_id",
        texts=("header_encoding", "state_json"),
        continues="state_json_continues",
        where=lambda n: f"snapshots[{n}]",
        container="stream",
        merge=lambda snapshot, piece: snapshot.call_records.extend(piece.call_records),
    )
    for index, snapshot in enumerate(whole):
        yield _join_records(_join_header(snapshot, index), index)


def _join_header(snapshot: admin_pb.SessionSnapshot, index: int) -> admin_pb.SessionSnapshot:
    """``snapshot`` (the ``index``-th of its stream) with its joined ``header_encoding`` merged
    in as its header fields (:data:`HEADER_FIELDS`). Raises ValueError
    ``"snapshots[i].header_encoding: <why>"`` when the encoding is not a snapshot's, carries
    another field, or comes beside a header field already set."""
    encoding = snapshot.header_encoding
    if not encoding:
        return snapshot
    where = f"snapshots[{index}].header_encoding"
    header = admin_pb.SessionSnapshot()
    try:
        header.MergeFromString(encoding)
    except DecodeError as exc:
        raise ValueError(f"{where}: not the encoding of a SessionSnapshot ({exc})") from exc
    for field, _ in header.ListFields():
        if field.name not in HEADER_FIELDS:
            raise ValueError(f"{where}: carries {field.name}, which is not a header field")
    for field, _ in snapshot.ListFields():
        if field.name in HEADER_FIELDS:
            raise ValueError(
                f"{where}: set beside {field.name} (a header travels whole or encoded)"
            )
    snapshot.header_encoding = b""
    snapshot.MergeFrom(header)
    return snapshot


def framed_bytes(message: Message) -> int:
    """Bytes ``message`` takes as one entry of a repeated field: its size, its field tag (1
    byte) and its length prefix (a varint). A message carrying only it is that large."""
    size = message.ByteSize()
    return 1 + max(1, (size.bit_length() + 6) // 7) + size


def group_pieces(pieces: Iterable[Message], chunk_bytes: int | None = None) -> Iterator[list[Any]]:
    """Pieces of :func:`split_snapshot` (or other messages: fences) grouped in lists whose
    message (the pieces with their framing, :func:`framed_bytes`) is at most ``chunk_bytes``
    (default :data:`CHUNK_BYTES`; at least one list, possibly empty; a piece larger than that
    alone): the payload of each streamed message."""
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    chunk: list[Message] = []
    size = 0
    for piece in pieces:
        grown = framed_bytes(piece)
        if chunk and size + grown > chunk_bytes:
            yield chunk
            chunk, size = [], 0
        chunk.append(piece)
        size += grown
    yield chunk


def chunk_snapshots(
    snapshots: Iterable[admin_pb.SessionSnapshot], chunk_bytes: int | None = None
) -> Iterator[list[Any]]:
    """Snapshots (split as needed) grouped in lists of about ``chunk_bytes`` (default
    :data:`CHUNK_BYTES`; at least one list, possibly empty): the payload of each streamed
    message."""
    return group_pieces(
        (piece for snapshot in snapshots for piece in split_snapshot(snapshot, chunk_bytes)),
        chunk_bytes,
    )


def _chunks(
    snapshots: Sequence[admin_pb.SessionSnapshot],
    chunk_bytes: int,
    fences: Sequence[admin_pb.SessionFence] = (),
) -> Iterator[admin_pb.RestoreSessionsRequest]:
    """The batch as a stream of requests of about ``chunk_bytes`` each (at least one), the
    fences in requests of their own after the snapshots."""
    for chunk in chunk_snapshots(snapshots, chunk_bytes):
        yield admin_pb.RestoreSessionsRequest(snapshots=chunk)
    for group in group_pieces(fences, chunk_bytes) if fences else ():
        yield admin_pb.RestoreSessionsRequest(fences=group)


#: The smallest ``chunk_bytes`` a restore sends with (a server's message limit is at least
#: 1 KiB, and a piece carries up to :data:`PIECE_OVERHEAD_BYTES` beside its chunk).
MIN_CHUNK_BYTES = 256
#: gRPC's own refusal of a message over the receiver's limit: "Received message larger than
#: max (<size> vs. <limit>)".
_TOO_LARGE = re.compile(r"larger than max \((\d+) vs\. (\d+)\)")


def smaller_chunk(error: CapacityError, chunk_bytes: int) -> int | None:
    """The chunk size to resend a restore with after ``error`` refused it sent in pieces of
    ``chunk_bytes``, or None when resending cannot help.

    Only gRPC's own message-size refusal (RESOURCE_EXHAUSTED with no reason of the server's)
    is answered: from the limit it names, the pieces the server's own export would send under
    it (``max(limit - PIECE_OVERHEAD_BYTES, limit // 2)``); without a limit, or when that is
    not smaller, half the last size. None below :data:`MIN_CHUNK_BYTES`."""
    if error.reason != reasons.REQUEST_TOO_LARGE.name:
        return None
    found = _TOO_LARGE.search(error.message)
    if found is None and "larger than max" not in error.message:
        return None
    smaller = chunk_bytes // 2
    if found is not None:
        limit = int(found.group(2))
        fits = max(limit - PIECE_OVERHEAD_BYTES, limit // 2)  # as the export under it
        if fits < chunk_bytes:
            smaller = fits
    return smaller if smaller >= MIN_CHUNK_BYTES else None


class AdminClient(SyncOnly):
    """Admin RPCs over a ``target`` or a ``channel``; ``token`` is sent as a bearer token.

    ``target``, ``affinity`` and ``credentials`` are those of :class:`EnvironmentClient` (a
    list of ``IP:PORT`` balances per-session RPCs over the servers by session id; with
    ``credentials``, e.g. :func:`~workplace_env_client.channel.tls_credentials`, the channel
    this client creates is TLS). ``timeout_s`` is every RPC's
    deadline; an RPC refused TOO_MANY_RPCS (a server at its ``--max-concurrent-rpcs`` or
    ``--max-admin-rpcs``, X3: not run) is sent again after the refusal's ``RetryInfo`` delay
    while that deadline allows, else CapacityError. Raises ArgumentError (a ValueError) naming
    the argument for a ``timeout_s``, ``affinity`` or ``token`` :class:`EnvironmentClient`
    refuses (a finite number of seconds in ``(0, 1e9]``; a bool or None; a string or None);
    a ``target`` that names no server (as :class:`EnvironmentClient`); ValueError for a
    malformed target list. After :meth:`close`, every call raises ClientClosedError.
    """

    def __init__(
        self,
        target: Target | None = None,
        *,
        channel: grpc.Channel | None = None,
        token: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        affinity: bool | None = None,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        if (target is None) == (channel is None):
            raise ValueError("pass exactly one of target or channel")
        timeout_s = check_client_options(timeout_s, affinity, token=token, token_field="token")
        self._own_channel = channel is None
        if channel is None:
            assert target is not None
            channel = make_channel(
                target, max_attempts=1, affinity=affinity, credentials=credentials
            )
        self.channel = channel
        self.stub = admin_grpc.EnvironmentAdminServiceStub(self.channel)
        self.timeout_s = timeout_s
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()

    _usage = "with AdminClient(target, token=...) as admin:"
    _counterpart = "there is no asyncio admin client: call it through asyncio.to_thread"

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
        self,
        call: Callable[..., Any],
        request: Callable[[], Any],
        session_ids: Iterable[str] = (),
        deadline: float | None = None,
    ) -> Any:
        """``call(request(), timeout=..., metadata=...)`` within one deadline of ``timeout_s``
        (or the ``time.monotonic()`` ``deadline`` given), again (a fresh ``request()``) after
        each TOO_MANY_RPCS refusal whose wait ends before it (X3: a refused RPC did not run;
        :func:`~workplace_env_client.channel.refusal_wait`)."""
        if deadline is None:
            deadline = time.monotonic() + self.timeout_s
        metadata = self._call_metadata(session_ids)
        while True:
            try:
                return call(
                    request(), timeout=max(0.0, deadline - time.monotonic()), metadata=metadata
                )
            except grpc.RpcError as exc:
                wait = wait_or_raise(exc, deadline)
            except ValueError as exc:
                if (closed := closed_channel_error(exc)) is None:
                    raise
                raise closed from exc
            time.sleep(wait)

    def export_sessions(self, session_ids: Iterable[str] = ()) -> ExportResult:
        """Snapshots of every live session (or of ``session_ids``), the ids not held, and the
        held sessions that could not be exported with why (``failures``: id -> reason). Raises
        ArgumentError (nothing sent) naming ``resources_session_ids[i]`` when one is not a
        string UTF-8 can carry."""
        return self.export_checkpoint(session_ids)[0]

    def export_checkpoint(
        self, session_ids: Iterable[str] = ()
    ) -> tuple[ExportResult, list[admin_pb.SessionFence]]:
        """:meth:`export_sessions` and the closed ids the server fences (of ``session_ids``,
        or all; S4): pass both to :meth:`restore_sessions` so a restored server keeps refusing
        a late seed of a closed episode. The server reads both as one picture: a session
        closed while the export runs is a fence, not also a snapshot."""
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
        fences = [f for chunk in chunks for f in chunk.fences]
        return ExportResult(list(join_snapshots(snapshots)), missing, failures), fences

    def restore_sessions(
        self,
        snapshots: Sequence[admin_pb.SessionSnapshot],
        fences: Sequence[admin_pb.SessionFence] = (),
        *,
        chunk_bytes: int | None = None,
    ) -> int:
        """Install ``snapshots`` all or none, and ``fences`` (closed ids, from
        :meth:`export_checkpoint`) with them; return how many snapshots. Raises
        InvalidRequestError naming the snapshot or fence and field, SessionLiveError
        (FAILED_PRECONDITION: live ids); ArgumentError (nothing sent) naming ``snapshots[i]``
        when one is not a ``SessionSnapshot``, or ``chunk_bytes`` when it is not an int in
        ``MIN_CHUNK_BYTES..64 MiB``.

        The batch is streamed in messages of about ``chunk_bytes`` (default
        :data:`CHUNK_BYTES`, 2 MiB; each session split in pieces as needed), the fences after
        the snapshots. A server whose message limit is smaller refuses such a message (gRPC's
        RESOURCE_EXHAUSTED "larger than max"): the batch is then sent again, whole, in the
        pieces that limit takes (:func:`smaller_chunk`), within the same ``timeout_s``. That
        resend is safe: a server validates and installs nothing before it has received the
        whole stream (K2), so a refused stream installed nothing; and a restore of snapshots
        already installed and unclaimed counts them as restored again. CapacityError when even
        pieces of :data:`MIN_CHUNK_BYTES` are refused."""
        chunk = CHUNK_BYTES if chunk_bytes is None else chunk_bytes
        checks.count(chunk, "chunk_bytes", MIN_CHUNK_BYTES, MAX_MESSAGE_BYTES)
        snapshots = list(snapshots)
        for i, snapshot in enumerate(snapshots):
            if not isinstance(snapshot, admin_pb.SessionSnapshot):
                raise ArgumentError(
                    f"snapshots[{i}]",
                    f"must be a SessionSnapshot, not {checks.type_name(snapshot)}",
                )
        ids = [s.resources_session_id for s in snapshots]
        fence_list = list(fences)
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                response: admin_pb.RestoreSessionsResponse = self._invoke(
                    self.stub.RestoreSessions,
                    partial(_chunks, snapshots, chunk, fence_list),
                    ids,
                    deadline,
                )
            except CapacityError as exc:
                smaller = smaller_chunk(exc, chunk)
                if smaller is None:
                    raise
                chunk = smaller
                continue
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
