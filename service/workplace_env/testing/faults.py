"""Fault injection and sync points for tests, filled into a session store's hook point.

Owns :class:`Faults`, the :class:`~workplace_env.sessions.StoreHooks` a test installs with
:meth:`Faults.of` to make the store's next table builds, releases or responses fail, or to hold
a thread where the store reaches a point (the points are :mod:`workplace_env.sessions.hooks`').
Only code holding the store object can reach it; nothing on the network sets it, and the
server's own code never imports this module (tests/project/test_import_graph.py checks it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from workplace_env.sessions import SessionStore, StoreHooks
from workplace_env.sessions.hooks import KINDS, POINTS


class Faults(StoreHooks):
    """Armed faults and hooks at the store's points; inert until a test arms it.

    * :meth:`fail_next_build`: the next ``times`` table builds fail as TablesUnavailableError
      (a seed answers TABLES_UNAVAILABLE and leaves no binding, S6).
    * :meth:`fail_next_release`: the next ``times`` releases fail (a close answers
      RELEASE_FAILED / INTERNAL and is not recorded, C5; the sweep and a legacy verify leave the
      session live).
    * :meth:`lose_next_response`: the next ``times`` tool calls run and record their call_id,
      then answer INJECTED_FAULT (UNAVAILABLE), as if the response were lost on the way.
    * :meth:`on`: call ``hook(session_id)`` whenever the store reaches ``point`` (one of
      :data:`~workplace_env.sessions.hooks.POINTS`).
    """

    POINTS = POINTS

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed = dict.fromkeys(KINDS, 0)
        self._hooks: dict[str, Callable[[str], None]] = {}

    @classmethod
    def of(cls, store: SessionStore) -> Faults:
        """The Faults installed in ``store``'s hook point, installing an inert one first if the
        store has none."""
        hooks = store.hooks
        if not isinstance(hooks, cls):
            hooks = store.hooks = cls()
        return hooks

    def fail_next_build(self, times: int = 1) -> None:
        """Make the next ``times`` table builds fail (S6)."""
        self._arm("build", times)

    def fail_next_release(self, times: int = 1) -> None:
        """Make the next ``times`` releases of a session's tables fail (C5)."""
        self._arm("release", times)

    def lose_next_response(self, times: int = 1) -> None:
        """Make the next ``times`` tool calls run, then answer UNAVAILABLE (a lost response)."""
        self._arm("response", times)

    def on(self, point: str, hook: Callable[[str], None] | None) -> None:
        """Call ``hook(session_id)`` at ``point`` (one of :attr:`POINTS`); None removes it."""
        if point not in self.POINTS:
            raise ValueError(f"unknown fault point {point!r}")
        with self._lock:
            if hook is None:
                self._hooks.pop(point, None)
            else:
                self._hooks[point] = hook

    def clear(self) -> None:
        """Disarm everything and remove every hook."""
        with self._lock:
            self._armed = dict.fromkeys(self._armed, 0)
            self._hooks.clear()

    def _arm(self, kind: str, times: int) -> None:
        with self._lock:
            self._armed[kind] += times

    def take(self, kind: str) -> bool:
        """Consume one armed fault of ``kind``; True when one was armed."""
        with self._lock:
            if self._armed[kind] <= 0:
                return False
            self._armed[kind] -= 1
            return True

    def hit(self, point: str, session_id: str) -> None:
        """Run the hook registered for ``point``, if any."""
        hook = self._hooks.get(point)
        if hook is not None:
            hook(session_id)
