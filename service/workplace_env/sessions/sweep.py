"""The idle sweep and the age bound of a session's call records.

Owns :class:`IdleSweep`: :meth:`IdleSweep.evict_idle` (X1) frees sessions idle longer than
``idle_ttl_s``, records their evictions and reports how many to ``on_evicted``;
:meth:`IdleSweep.prune_calls` drops a session's ``call_id`` records past ``call_id_ttl_s``. The
bounds of what is remembered of ids no longer held are :mod:`.records`'. The live-session count
bound (``max_sessions``, :meth:`.table.SessionTable.has_room`) is checked where sessions are
admitted (:mod:`.lifecycle`, :mod:`.checkpoints`); a store that looks full runs
:meth:`IdleSweep.evict_idle` there before it refuses, so a session past its TTL never holds a
place.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from workplace_env import errors
from workplace_env.sessions.records import Eviction, Records, detached
from workplace_env.sessions.scope import StoreScope
from workplace_env.sessions.table import SessionTable
from workplace_env.sessions.types import LiveSession


def _uncounted(evicted: int) -> None:
    """The default ``on_evicted``: evictions are counted nowhere."""


class IdleSweep:
    """Idle eviction of a store's sessions and pruning of their call records.

    ``on_evicted`` (settable; the server's metrics count there) is called with the number of
    sessions each :meth:`evict_idle` freed, whether the periodic sweep or a full store's
    admission ran it.
    """

    __slots__ = ("lock", "on_evicted", "records", "scope", "table")

    def __init__(self, scope: StoreScope, table: SessionTable, records: Records) -> None:
        self.scope = scope
        self.table = table
        self.records = records
        self.on_evicted: Callable[[int], None] = _uncounted
        self.lock = threading.Lock()  # held across one eviction pass (see .scope)

    def evict_idle(self) -> int:
        """Evict sessions idle longer than ``idle_ttl_s`` (X1); return how many were evicted.

        Later calls on an evicted id answer SESSION_EXPIRED. A session with a call in flight is
        in use, not idle: it is skipped without waiting. Passes run one at a time, so a pass
        started while another releases sessions finds them gone, not busy. Takes the sweep lock,
        then the store lock, and only try-locks sessions (:mod:`.scope`): call it holding none.
        """
        scope = self.scope
        scope.hooks.hit("sweep_wait", "")
        with self.lock:  # one pass at a time: a second waits for the first's unmaps
            table, records = self.table, self.records
            now = scope.clock()
            cutoff = now - scope.config.idle_ttl_s
            with scope.lock:
                records.prune(now)
                idle = [s for s in table.sessions.values() if s.last_used < cutoff]
            # The records outlive the sessions by hours: build them before releasing anything,
            # from fresh copies of the ids, so they do not pin the allocator pages the sessions
            # lived in.
            evictions = [(detached(s.session_id), Eviction.of(s, now)) for s in idle]
            released: list[tuple[LiveSession, str, Eviction]] = []
            try:
                for session, (key, record) in zip(idle, evictions, strict=True):
                    if not session.lock.acquire(blocking=False):
                        continue  # a call is in flight: in use, not idle
                    if session.tables is None or session.last_used >= cutoff:
                        session.lock.release()
                        continue
                    try:
                        table.release(session)
                    except errors.ReleaseFailed:
                        session.lock.release()
                        continue  # stays live; the next sweep tries again
                    released.append((session, key, record))
                with scope.lock:  # one step: no call sees a released id without its record
                    for session, key, record in released:
                        table.unmap(session)
                        records.evict(key, record)
            finally:
                for session, _, _ in released:
                    session.lock.release()
        self.on_evicted(len(released))
        return len(released)

    def prune_calls(self, session: LiveSession, now: float) -> None:
        """Drop call_id records older than ``call_id_ttl_s`` (caller holds the session lock)."""
        calls = session.calls
        ttl_s = self.scope.config.call_id_ttl_s
        while calls:
            record = next(iter(calls.values()))
            if now - record.at <= ttl_s:
                break
            calls.popitem(last=False)
