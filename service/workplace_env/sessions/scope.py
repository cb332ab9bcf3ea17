"""What every part of one session store shares: its lock, clock, bounds and hook point.

Owns :class:`StoreScope`. The store lock guards the maps of :mod:`.table` and :mod:`.records`
and is held only for dictionary work: never across a table build, a tool call, a verify, or a
wait for a session. Each live session has its own lock, held across its tool calls, verifies
and release, so calls on one session are serialised and different sessions never wait for each
other. Lock order: a session lock may be held while taking the store lock, never the reverse
(the idle sweep only try-locks sessions and skips busy ones). The sweep lock
(:attr:`.sweep.IdleSweep.lock`) comes before both: an eviction pass, periodic or run by a full
store's seed or restore, takes it holding no other lock, and holds it for the whole pass.
"""

from __future__ import annotations

import threading

from workplace_env.sessions.hooks import NO_HOOKS, StoreHooks
from workplace_env.sessions.types import Clock, SessionConfig


class StoreScope:
    """The store lock, the clock (seconds), the bounds, and the hooks (settable: tests install
    :class:`workplace_env.testing.faults.Faults`) of one store."""

    __slots__ = ("clock", "config", "hooks", "lock")

    def __init__(self, config: SessionConfig, clock: Clock) -> None:
        self.lock = threading.Lock()
        self.clock = clock
        self.config = config
        self.hooks: StoreHooks = NO_HOOKS
