"""Sessions of the environment: their life cycle, checkpoints and bounds (docs/contract.md).

The transports hold one :class:`SessionStore`, a facade over parts with one job each, sharing
one :class:`~.scope.StoreScope`; each module imports only the ones below it:

- :mod:`.store`: the facade :class:`SessionStore` (builds the parts, hands each call to one);
- :mod:`.lifecycle`: seed, tool calls, verify, close (S, T, V, C cases);
- :mod:`.checkpoints`: export, restore, claims and retire of sessions (K1-K6);
- :mod:`.sweep`: the idle sweep (X1) and the age bound of call records;
- :mod:`.table`: the live sessions, pending builds, and the steps of removing a session;
- :mod:`.records`: what is remembered of ids no longer held, and the bounded-map helpers;
- :mod:`.scope`: the lock, clock, bounds and hooks every part shares, and the lock rules;
- :mod:`.hooks`: the no-op hook point tests fill with faults (:mod:`workplace_env.testing`);
- :mod:`.types`: the value types (states, outcomes, bounds, one live session).
"""

from workplace_env.sessions.hooks import StoreHooks
from workplace_env.sessions.store import SessionStore
from workplace_env.sessions.types import (
    LEGACY_EPISODE,
    CallRecord,
    Clock,
    CloseOutcome,
    LiveSession,
    SeedResult,
    SessionConfig,
    SessionState,
    ToolResult,
    VerifyOutcome,
    task_digest,
)

__all__ = [
    "LEGACY_EPISODE",
    "CallRecord",
    "Clock",
    "CloseOutcome",
    "LiveSession",
    "SeedResult",
    "SessionConfig",
    "SessionState",
    "SessionStore",
    "StoreHooks",
    "ToolResult",
    "VerifyOutcome",
    "task_digest",
]
