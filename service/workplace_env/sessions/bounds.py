"""The store's bounds and the idle sweep.

Owns :class:`Bounds`: recording a fence (closed id) within ``max_fences``, pruning fences,
eviction records and legacy markers past their age bounds, pruning a session's ``call_id``
records past ``call_id_ttl_s``, and the idle sweep (:meth:`Bounds.evict_idle`, X1) that frees
sessions idle longer than ``idle_ttl_s``. The live-session count bound (``max_sessions``) is
checked where sessions are admitted (:mod:`.lifecycle`, :mod:`.export_restore`).

A record is valid while younger than its age bound, so when the store prunes old records never
changes an answer.
"""

from __future__ import annotations

from workplace_env import errors
from workplace_env.identity import EpisodeId
from workplace_env.sessions.records import Eviction, detached, drop_older, remember
from workplace_env.sessions.state import StoreState
from workplace_env.sessions.types import Session


class Bounds(StoreState):
    """Count and age bounds of the store's records, and the idle sweep."""

    def evict_idle(self) -> int:
        """Evict sessions idle longer than ``idle_ttl_s`` (X1); return how many were evicted.

        Later calls on an evicted id answer SESSION_EXPIRED. A session with a call in flight is
        in use, not idle: it is skipped without waiting.
        """
        now = self.clock()
        cutoff = now - self.config.idle_ttl_s
        with self._lock:
            self._prune(now)
            idle = [s for s in self._sessions.values() if s.last_used < cutoff]
        # The records outlive the sessions by hours: build them before releasing anything, from
        # fresh copies of the ids, so they do not pin the allocator pages the sessions lived in.
        records = [(detached(s.session_id), Eviction.of(s, now)) for s in idle]
        released: list[tuple[Session, str, Eviction]] = []
        try:
            for session, (key, record) in zip(idle, records, strict=True):
                if not session.lock.acquire(blocking=False):
                    continue  # a call is in flight: in use, not idle
                if session.tables is None or session.last_used >= cutoff:
                    session.lock.release()
                    continue
                try:
                    self._release(session)
                except errors.ReleaseFailed:
                    session.lock.release()
                    continue  # stays live; the next sweep tries again
                released.append((session, key, record))
            with self._lock:  # one step: no call sees a released id without its record
                for session, key, record in released:
                    self._unmap(session)
                    remember(self._evictions, key, record, self.config.max_fences)
        finally:
            for session, _, _ in released:
                session.lock.release()
        return len(released)

    def _fence(self, session_id: str, now: float, episode: EpisodeId | None = None) -> None:
        """Remember ``session_id`` as closed at ``now``; ``episode``: its typed binding, if any
        (C4 after the close). Caller holds the store lock."""
        remember(self._fences, session_id, now, self.config.max_fences)
        if episode is not None:
            remember(self._fence_episodes, session_id, episode, self.config.max_fences)
        else:
            self._fence_episodes.pop(session_id, None)

    def _prune(self, now: float) -> None:
        """Drop records past their age bounds, oldest first (caller holds the store lock)."""
        drop_older(self._fences, lambda at: at, now - self.config.fence_ttl_s)
        fences, episodes = self._fences, self._fence_episodes
        while episodes and next(iter(episodes)) not in fences:  # same order: dropped with them
            episodes.popitem(last=False)
        drop_older(self._evictions, lambda e: e.at, now - self.config.fence_ttl_s)
        drop_older(self._markers, lambda m: m.at, now - self.config.retry_window_s)

    def _prune_calls(self, session: Session, now: float) -> None:
        """Drop call_id records older than ``call_id_ttl_s`` (caller holds the session lock)."""
        calls = session.calls
        while calls:
            record = next(iter(calls.values()))
            if now - record.at <= self.config.call_id_ttl_s:
                break
            calls.popitem(last=False)
