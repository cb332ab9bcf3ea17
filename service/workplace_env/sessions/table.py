"""The live sessions of one store, the seeds still building theirs, and the removal steps.

Owns :class:`SessionTable`: the map of live sessions, the map of pending builds (a seed
building an id's tables; racing seeds and closes wait for it), the draining flag, and the two
steps every removal of a session takes. Its tables are released under the session lock
(:meth:`SessionTable.release`), then it is unmapped (:meth:`SessionTable.unmap`) under the
store lock in the same critical section that records its fence, eviction record or marker
(:mod:`.records`). A call that found the session earlier sees ``tables is None`` once it holds
the session lock, and answers from those records (closed, expired, lost). So a close racing a
tool call either lets the call finish first or makes it NOT_FOUND. The lock rules are
:mod:`.scope`'s.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from workplace_env import errors
from workplace_env.identity import EpisodeId, TaskId
from workplace_env.sessions.scope import StoreScope
from workplace_env.sessions.types import LiveSession, SessionState


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


class SessionTable:
    """The live sessions (id -> :class:`~.types.LiveSession`) and pending builds (id ->
    :class:`PendingBuild`) of one store; both maps are guarded by the store lock."""

    __slots__ = ("building", "draining", "scope", "sessions")

    def __init__(self, scope: StoreScope) -> None:
        self.scope = scope
        self.sessions: dict[str, LiveSession] = {}
        self.building: dict[str, PendingBuild] = {}
        self.draining = False

    def held(self, session_id: str) -> bool:
        """Whether ``session_id`` is live or building (caller holds the store lock)."""
        return session_id in self.sessions or session_id in self.building

    def count(self) -> int:
        """Live sessions plus pending builds: what ``max_sessions`` bounds."""
        return len(self.sessions) + len(self.building)

    def has_room(self, adding: int) -> bool:
        """Whether ``adding`` more sessions keep :meth:`count` within ``max_sessions`` (caller
        holds the store lock)."""
        return self.count() + adding <= self.scope.config.max_sessions

    def state_counts(self) -> dict[str, int]:
        """Live sessions by state name in lower case."""
        counts: dict[str, int] = {}
        for session in list(self.sessions.values()):
            name = session.state.value.lower()
            counts[name] = counts.get(name, 0) + 1
        return counts

    def release(self, session: LiveSession) -> None:
        """Drop the session's tables and call records (caller holds the session lock).

        Raises ReleaseFailed when the hooks make it fail (C5); nothing changes then.
        """
        if self.scope.hooks.take("release"):
            raise errors.ReleaseFailed(
                f"injected fault: releasing session {session.session_id} failed",
                session.session_id,
            )
        session.tables = None
        session.state = SessionState.CLOSED
        session.calls.clear()

    def unmap(self, session: LiveSession) -> None:
        """Remove a released session from the live map (caller holds the store lock)."""
        if self.sessions.get(session.session_id) is session:
            del self.sessions[session.session_id]
