"""The store's side of checkpoints (docs/contract.md K1-K6): export, restore, claims, retire.

Owns :class:`Checkpoints`: live sessions to :class:`~workplace_env.checkpoint.snapshot.Snapshot`
values (:meth:`~Checkpoints.export`, K1), a batch of snapshots installed all or none as
unclaimed sessions (:meth:`~Checkpoints.restore`, K2-K3), and discarding an exported attempt
(:meth:`~Checkpoints.retire`, K6); and the claims (:func:`claim`, :func:`claim_by_seed`, K4)
the life cycle makes on restored tables. The snapshot format, its codec and checkpoint files
are :mod:`workplace_env.checkpoint`'s.

The fences (closed ids, C1, C3) travel beside the snapshots, with their age at export, read in
one picture with them (:meth:`~Checkpoints.export_checkpoint`: a session closed while the
export runs is a fence, never also a snapshot), so after a restore a late or retried seed of a
closed episode is still refused (S4) until the fence is as old as it would have been.
Eviction records (X1) and legacy verify markers (V2, V3) do not travel: CONTRACT counts an id
lost in a restart as lost (T4, V4), and neither record keeps a closed episode from running
again.

A session's call_id records travel with its snapshot (their age at export), so a call retried
after a restore replays; so does its count of written bytes, so a restore never resets its
``max_session_write_bytes`` budget.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import NamedTuple

from workplace_env import errors
from workplace_env.checkpoint.codec import CodecError, encode_state
from workplace_env.checkpoint.snapshot import (
    CallSnapshot,
    FenceSnapshot,
    Snapshot,
    decode_snapshot,
    fence_violations,
)
from workplace_env.errors import FieldViolation
from workplace_env.identity import TaskId
from workplace_env.plurals import counted
from workplace_env.sandbox.tables import TABLE_KEYS, BaseTables, SessionTables
from workplace_env.sessions.records import RELEASED_BY_RETIRE, Records, Release, detached
from workplace_env.sessions.scope import StoreScope
from workplace_env.sessions.sweep import IdleSweep
from workplace_env.sessions.table import SessionTable
from workplace_env.sessions.types import (
    LEGACY_EPISODE,
    CallRecord,
    LiveSession,
    SeedResult,
    SessionState,
    task_digest,
)

#: Why an export drops a session retired and seeded again while it ran (a failure of K1).
SEEDED_AGAIN = "it was released and seeded again during the export; export it again"


class ExportedCheckpoint(NamedTuple):
    """One export (K1): ``snapshots``, the ids not held (``missing``), the held sessions that
    cannot be encoded with why (``failures``: ``(id, reason)``), and the ``fences`` (closed
    ids with their ages); no id is both a snapshot and a fence."""

    snapshots: list[Snapshot]
    missing: list[str]
    failures: list[tuple[str, str]]
    fences: list[FenceSnapshot]


class Checkpoints:
    """Export, restore and retire of a store's sessions (K1-K3, K6) over ``base``."""

    __slots__ = ("base", "records", "scope", "sweep", "table")

    def __init__(
        self,
        scope: StoreScope,
        table: SessionTable,
        records: Records,
        sweep: IdleSweep,
        base: BaseTables,
    ) -> None:
        self.scope = scope
        self.table = table
        self.records = records
        self.sweep = sweep
        self.base = base

    def export(
        self, session_ids: Sequence[str] = (), active: Callable[[], bool] = lambda: True
    ) -> tuple[list[Snapshot], list[str], list[tuple[str, str]]]:
        """Snapshots, ids not held and failures of :meth:`export_checkpoint`, without fences."""
        snapshots, missing, failures, _ = self.export_checkpoint(session_ids, active)
        return snapshots, missing, failures

    def export_checkpoint(
        self, session_ids: Sequence[str] = (), active: Callable[[], bool] = lambda: True
    ) -> ExportedCheckpoint:
        """Snapshots of the live sessions (or of ``session_ids``), the ids not held, the held
        sessions that cannot be encoded with why, and the fences (of ``session_ids`` only, when
        given): one picture, true at the export's end (K1).

        Each session is read under its own lock, so a snapshot never shows half a tool call.
        One session whose tables the codec cannot write (an infinite float stored by a tool)
        is reported, never a reason to fail the others. ``active`` is asked before each
        session: once it answers False (the client gave up) the export stops there. Last, under
        the store lock, the fences are read and each snapshot whose session is no longer the
        one read is dropped (:meth:`_settle`), so no id is both a snapshot and a fence.
        """
        sessions = self.table.sessions
        with self.scope.lock:
            if session_ids:
                chosen = [(sid, sessions.get(sid)) for sid in dict.fromkeys(session_ids)]
            else:
                chosen = sorted(sessions.items())
        read: list[tuple[LiveSession, Snapshot]] = []
        missing: list[str] = []
        failures: list[tuple[str, str]] = []
        for sid, session in chosen:
            if not active():
                break
            self.scope.hooks.hit("export", sid)
            try:
                snapshot = None if session is None else self._snapshot(session)
            except CodecError as exc:
                failures.append((sid, str(exc)))
                continue
            if snapshot is None or session is None:
                missing.append(sid)
            else:
                read.append((session, snapshot))
        return self._settle(read, missing, failures, session_ids)

    def _settle(
        self,
        read: Sequence[tuple[LiveSession, Snapshot]],
        missing: list[str],
        failures: list[tuple[str, str]],
        session_ids: Sequence[str],
    ) -> ExportedCheckpoint:
        """The export of ``read`` (each session with its snapshot) as the store holds it now.

        Under the store lock, where a close unmaps a session and fences its id in one step:
        the fences, and each snapshot kept only while its session is still held. One closed
        during the export is a fence (and missing), one retired or evicted is missing, one
        retired and seeded again is a failure (its new attempt was not read: export again).
        """
        now = self.scope.clock()
        snapshots: list[Snapshot] = []
        with self.scope.lock:
            fences = self._fences(session_ids, now)
            for session, snapshot in read:
                held = self.table.sessions.get(session.session_id)
                if held is session:
                    snapshots.append(snapshot)
                elif held is None:
                    missing.append(session.session_id)
                else:
                    failures.append((session.session_id, SEEDED_AGAIN))
        return ExportedCheckpoint(snapshots, missing, failures, fences)

    def _fences(self, session_ids: Sequence[str], now: float) -> list[FenceSnapshot]:
        """The fences (of ``session_ids`` only, when given) at ``now`` (store lock held)."""
        self.records.prune(now)
        return self.records.fence_snapshots(session_ids, now)

    def _snapshot(self, session: LiveSession) -> Snapshot | None:
        with session.lock:
            tables = session.tables
            if tables is None:
                return None
            state = session.state
            if state is SessionState.RESTORED_UNCLAIMED:
                state = session.restored_state
            now = self.scope.clock()
            self.sweep.prune_calls(session, now)
            calls = tuple(
                CallSnapshot(call_id, record.call, record.output, max(0.0, now - record.at))
                for call_id, record in session.calls.items()
            )
            return Snapshot(
                session_id=session.session_id,
                episode=None if session.legacy else session.episode,
                task_id=None if session.legacy else session.task_id,
                task=session.task,
                legacy=session.legacy,
                state=encode_state({key: tables.table(key) for key in TABLE_KEYS}),
                session_state=state.value,
                calls=calls,
                write_bytes=session.write_bytes,
            )

    def restore(self, snapshots: Sequence[Snapshot], fences: Sequence[FenceSnapshot] = ()) -> int:
        """Install a batch of snapshots, all or none (K2, K3), and the batch's ``fences``
        (:meth:`~.records.Records.install_fences`); return how many snapshots.

        Every snapshot is decoded and validated before anything is installed. Restored sessions
        are unclaimed until the first matching seed (typed) or request (legacy) claims them
        (K4). Idempotent, so a restore whose answer was lost (a deadline) is safe to retry: a
        snapshot identical to one this store restored and nobody has claimed yet counts as
        restored again. Raises InvalidRequest naming the snapshot and field (K2), SessionLive
        when an id is live otherwise (claimed, seeded here, or restored from another snapshot;
        nothing installed; when every such id was restored from the same snapshot and claimed
        since, it says the batch was restored already, see :func:`_live_refusal`),
        SessionClosed, CapacityExhausted (the batch does not fit even after evicting the
        sessions past their idle TTL, :meth:`.IdleSweep.evict_idle`).
        """
        decoded: list[tuple[Snapshot, SessionTables, bytes]] = []
        seen: set[str] = set()
        for i, snapshot in enumerate(snapshots):
            tables = decode_snapshot(snapshot, self.base, f"snapshots[{i}]")
            if snapshot.session_id in seen:
                raise errors.InvalidRequest(
                    [FieldViolation(f"snapshots[{i}].resources_session_id", "appears twice")],
                    snapshot.session_id,
                )
            seen.add(snapshot.session_id)
            tables_of = SessionTables.from_tables(self.base, tables)
            decoded.append((snapshot, tables_of, snapshot_digest(snapshot)))
        violations = fence_violations(fences, {s.session_id: i for i, s in enumerate(snapshots)})
        if violations:
            raise errors.InvalidRequest(violations)
        swept = False  # a full store evicts its sessions past their TTL once, then decides again
        while not self._install(decoded, seen, fences, swept):
            self.sweep.evict_idle()
            swept = True
        return len(decoded)

    def _install(
        self,
        decoded: Sequence[tuple[Snapshot, SessionTables, bytes]],
        seen: set[str],
        fences: Sequence[FenceSnapshot],
        swept: bool,
    ) -> bool:
        """Install a decoded batch and its fences under the store lock (K2, K3); ``seen``: its ids.

        False, installing nothing: the batch does not fit and this restore has not ``swept``
        yet; the caller runs the idle sweep (a session past its TTL never holds a place) and
        calls again. Raises SessionLive, SessionClosed, CapacityExhausted (still full after
        the sweep).
        """
        scope, table, records = self.scope, self.table, self.records
        config, sessions = scope.config, table.sessions
        now = scope.clock()
        with scope.lock:
            # A retry of a restore whose answer was lost finds its sessions installed and
            # still unclaimed: those count as restored, and only they (idempotent, K3).
            installed = {
                snapshot.session_id
                for snapshot, _, digest in decoded
                if _is_unclaimed_restore_of(sessions.get(snapshot.session_id), digest)
            }
            live = sorted(sid for sid in seen - installed if table.held(sid))
            if live:
                digests = {snapshot.session_id: digest for snapshot, _, digest in decoded}
                raise _live_refusal(live, digests, sessions, len(installed))
            closed = sorted(sid for sid in seen - installed if records.closed(sid, now))
            if closed:  # a closed episode must not run again from an older checkpoint
                raise errors.SessionClosed(
                    f"sessions {closed} were closed here; nothing was restored", closed[0]
                )
            adding = len(decoded) - len(installed)
            if not table.has_room(adding):
                if not swept:
                    return False
                raise errors.CapacityExhausted(
                    f"restoring {counted(adding, 'session')} would pass the maximum of"
                    f" {config.max_sessions}",
                    retry_after_s=config.retry_after_s,
                )
            for snapshot, tables, digest in decoded:
                sid = snapshot.session_id
                if sid in installed:
                    continue
                records.forget(sid)
                task = snapshot.task
                assert task is not None  # validated by decode_snapshot
                sessions[sid] = LiveSession(
                    session_id=sid,
                    episode=snapshot.episode if not snapshot.legacy else LEGACY_EPISODE,
                    task_id=snapshot.task_id
                    if not snapshot.legacy and snapshot.task_id is not None
                    else TaskId("legacy", task.id or "row"),
                    task=task,
                    tables=tables,
                    last_used=now,
                    state=SessionState.RESTORED_UNCLAIMED,
                    legacy=snapshot.legacy,
                    restored=True,
                    restored_state=SessionState(snapshot.session_state),
                    task_digest=task_digest(task),
                    calls=self._restored_calls(snapshot.calls, now),
                    restored_digest=digest,
                    write_bytes=snapshot.write_bytes,
                )
            records.install_fences(fences, now, table.held)
        return True

    def _restored_calls(
        self, calls: Sequence[CallSnapshot], now: float
    ) -> OrderedDict[str, CallRecord]:
        """A snapshot's call records under this store's bounds: those younger than
        ``call_id_ttl_s``, the newest ``max_call_ids`` of them, oldest first."""
        config = self.scope.config
        kept = sorted((c for c in calls if c.age_s <= config.call_id_ttl_s), key=_age_key)
        records: OrderedDict[str, CallRecord] = OrderedDict()
        for c in kept[max(0, len(kept) - config.max_call_ids) :]:
            records[c.call_id] = CallRecord(now - c.age_s, c.call, c.output)
        return records

    def retire(self, session_id: str) -> bool:
        """Discard a session's attempt: free its tables; later calls get NOT_FOUND (K6),
        SESSION_LOST saying it was retired while the record lasts (``fence_ttl_s``). No fence
        (those are C1/C3's, for ended episodes): the id may be seeded or restored again.

        Idempotent: returns False when the server does not hold the session. Raises
        ReleaseFailed (nothing changes then).
        """
        session = self.table.sessions.get(session_id)
        if session is None:
            return False
        with session.lock:
            if session.tables is None:
                return False
            self.table.release(session)
            record = Release(self.scope.clock(), RELEASED_BY_RETIRE)
            with self.scope.lock:
                self.table.unmap(session)
                self.records.release(detached(session_id), record)
        return True


def claim(session: LiveSession) -> None:
    """K4: a request on restored, unclaimed tables claims them (session lock held)."""
    if session.state is SessionState.RESTORED_UNCLAIMED:
        session.state = session.restored_state


def claim_by_seed(session: LiveSession, now: float) -> SeedResult:
    """K4: the first matching seed claims restored tables (no rebuild; store lock held)."""
    session.state = session.restored_state
    session.last_used = now
    return SeedResult(session.state, already_seeded=False, restored=True)


def _live_refusal(
    live: list[str], digests: dict[str, bytes], sessions: dict[str, LiveSession], installed: int
) -> errors.SessionLive:
    """SESSION_LIVE for the ``live`` ids of a batch. When each was restored here from the
    same snapshot and claimed since, the batch is a retry of a restore that installed it all:
    the error says so (``already_restored`` in its ErrorInfo) instead of "nothing restored"."""
    claimed = [sid for sid in live if _is_restore_of(sessions.get(sid), digests[sid])]
    if claimed == live:
        error = errors.SessionLive(
            f"these snapshots were restored here already: sessions {claimed} were claimed "
            f"since (they went on from the snapshot and are not reset), {installed} others "
            "are installed and unclaimed; nothing changed",
            claimed[0],
        )
        error.info = {"already_restored": "true"}
        return error
    others = [sid for sid in live if sid not in claimed]
    also = (
        f" (and {claimed} were restored from these snapshots and claimed since)" if claimed else ""
    )
    return errors.SessionLive(
        f"sessions {others} are live here{also}; nothing was restored", others[0]
    )


def _is_restore_of(session: LiveSession | None, digest: bytes) -> bool:
    """Whether ``session`` was restored from the snapshot of ``digest`` (claimed or not)."""
    return session is not None and session.restored and session.restored_digest == digest


def _is_unclaimed_restore_of(session: LiveSession | None, digest: bytes) -> bool:
    """Whether ``session`` was restored from the snapshot of ``digest`` and is unclaimed."""
    return (
        session is not None
        and session.state is SessionState.RESTORED_UNCLAIMED
        and session.restored_digest == digest
    )


def snapshot_digest(snapshot: Snapshot) -> bytes:
    """BLAKE2b (16 bytes) of everything a snapshot installs: identity, task, state, tables and
    call records (K3: the same snapshot restored twice is one restore)."""
    task = snapshot.task
    canonical = [
        snapshot.session_id,
        repr(snapshot.episode),
        repr(snapshot.task_id),
        repr(task),
        snapshot.legacy,
        snapshot.session_state,
        snapshot.state,
        [[c.call_id, c.call.hex(), c.output, c.age_s] for c in snapshot.calls],
        snapshot.write_bytes,
    ]
    text = json.dumps(canonical, sort_keys=True, default=repr)
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def _age_key(call: CallSnapshot) -> float:
    """Sort key putting the oldest record first."""
    return -call.age_s
