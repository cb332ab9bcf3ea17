"""The session store the transports use: one object over the store's parts.

Owns :class:`SessionStore`, the facade the gRPC servicer, the HTTP gateway's in-process
backend, the runner and the CLI hold. It adds only the store-wide queries and draining; its
operations are its parts' (:class:`~.lifecycle.LifeCycle`: seed, call_tool, verify, close;
:class:`~.checkpoints.ExportRestore`: export, restore, retire; :class:`~.sweep.Bounds`:
evict_idle), inherited so a call costs no extra hop.
"""

from __future__ import annotations

from workplace_env.sessions.checkpoints import ExportRestore
from workplace_env.sessions.lifecycle import LifeCycle


class SessionStore(LifeCycle, ExportRestore):
    """All sessions of one server process over one sandbox.

    ``SessionStore(base, config=None, clock=time.monotonic, verifier=None)``: ``base`` is the
    parsed sandbox every session starts from; ``config`` the bounds (:class:`~.types.SessionConfig`
    defaults); ``clock`` returns seconds (injectable so tests need no sleeps); ``verifier``
    scores verifies (default: one over ``base`` with ``config.verify_cache_bytes`` of cache).
    Attributes callers may set: ``table_factory`` builds a session's tables; ``hooks`` is the
    :class:`~.hooks.StoreHooks` hook point (no-ops by default).
    """

    def live_count(self) -> int:
        """Number of sessions holding tables."""
        return len(self._sessions)

    def state_counts(self) -> dict[str, int]:
        """Live sessions by state name in lower case (``seeded``, ``verified``,
        ``restored_unclaimed``)."""
        counts: dict[str, int] = {}
        for session in list(self._sessions.values()):
            name = session.state.value.lower()
            counts[name] = counts.get(name, 0) + 1
        return counts

    def start_draining(self) -> None:
        """Refuse new seeds from now on (X2: UNAVAILABLE ``DRAINING``); live sessions still work."""
        self._draining = True
        self.hooks.hit("drain", "")
