"""What one session store holds, its locks, and the steps every removal of a session takes.

Owns :class:`StoreState`, the base the store's parts (:mod:`.bounds`, :mod:`.lifecycle`,
:mod:`.export_restore`) build on: the maps of live sessions, pending builds, fences, eviction
records and legacy markers, the store lock that guards them, and three primitives shared by
close, the idle sweep, a legacy verify and retire: release a session's tables
(:meth:`StoreState._release`), unmap it (:meth:`StoreState._unmap`), and the error for an id
no longer held (:meth:`StoreState._gone`).

Concurrency. The store lock guards the maps and is held only for dictionary work: never across
a table build, a tool call, a verify, or a wait for a session. Each session has its own lock,
held across its tool calls, verifies and release, so calls on one session are serialised and
different sessions never wait for each other. Lock order: a session lock may be held while
taking the store lock, never the reverse (the idle sweep only try-locks sessions and skips busy
ones).

Removal. A session's tables are released under its lock, then it is unmapped and its fence,
eviction record or marker is recorded under the store lock. A call that found the session
earlier sees ``tables is None`` once it holds the session lock, and answers from those records
(closed, expired, lost). So a close racing a tool call either lets the call finish first or
makes it NOT_FOUND.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from workplace_env import errors
from workplace_env.identity import EpisodeId, TaskId
from workplace_env.sandbox.tables import BaseTables, SessionTables
from workplace_env.sessions.hooks import NO_HOOKS, StoreHooks
from workplace_env.sessions.records import Eviction, Marker, is_valid
from workplace_env.sessions.types import Clock, Session, SessionConfig, SessionState
from workplace_env.verify import Verifier


class Latch:
    """Opens once (:meth:`set`); :meth:`wait` blocks until then. One lock: a seed makes one per
    new session, and ``threading.Event`` costs a condition and its lock to build."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def set(self) -> None:
        """Open the latch (call once)."""
        self._lock.release()

    def wait(self) -> None:
        """Block until the latch is open."""
        with self._lock:  # each waiter passes through in turn and leaves it open
            pass


@dataclass
class PendingBuild:
    """A seed building an id's tables; racing seeds and closes wait for ``done``."""

    episode: EpisodeId
    task_id: TaskId
    legacy: bool
    task_digest: bytes
    done: Latch = field(default_factory=Latch)


class StoreState:
    """The fields of a session store (see :class:`~workplace_env.sessions.SessionStore` for the
    arguments) and the removal primitives its parts share."""

    def __init__(
        self,
        base: BaseTables,
        config: SessionConfig | None = None,
        clock: Clock = time.monotonic,
        verifier: Verifier | None = None,
    ) -> None:
        self.base = base
        self.config = config or SessionConfig()
        self.clock = clock
        self.verifier = verifier or Verifier(base, self.config.verify_cache_bytes)
        self.table_factory: Callable[[], SessionTables] = lambda: SessionTables(self.base)
        self.hooks: StoreHooks = NO_HOOKS
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}
        self._building: dict[str, PendingBuild] = {}
        self._fences: OrderedDict[str, float] = OrderedDict()  # closed id -> closed at
        # closed typed id -> its episode (C4 after the close); bounded with the fences
        self._fence_episodes: OrderedDict[str, EpisodeId] = OrderedDict()
        self._evictions: OrderedDict[str, Eviction] = OrderedDict()
        # verified legacy id -> its marker: an identical resent verify scores the same (V3)
        self._markers: OrderedDict[str, Marker] = OrderedDict()
        self._draining = False

    def _release(self, session: Session) -> None:
        """Drop the session's tables and call records (caller holds the session lock).

        Raises ReleaseFailed when the hooks make it fail (C5); nothing changes then.
        """
        if self.hooks.take("release"):
            raise errors.ReleaseFailed(
                f"injected fault: releasing session {session.session_id} failed",
                session.session_id,
            )
        session.tables = None
        session.state = SessionState.CLOSED
        session.calls.clear()

    def _unmap(self, session: Session) -> None:
        """Remove a released session from the live map (caller holds the store lock)."""
        if self._sessions.get(session.session_id) is session:
            del self._sessions[session.session_id]

    def _gone(self, session_id: str) -> errors.SessionError:
        """The error for an id with no live session: closed (T5), expired (X1) or lost (T4)."""
        now = self.clock()
        with self._lock:
            if is_valid(self._fences.get(session_id), self.config.fence_ttl_s, now):
                return errors.SessionClosed(f"session {session_id} was closed", session_id)
            evicted = self._evictions.get(session_id)
            if evicted is not None and now - evicted.at <= self.config.fence_ttl_s:
                return errors.SessionExpired(
                    f"session {session_id} was evicted after {self.config.idle_ttl_s:g} s idle",
                    session_id,
                )
        return errors.SessionLost(f"the server holds no session {session_id}", session_id)
