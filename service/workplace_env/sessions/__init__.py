"""Sessions of the environment: their life cycle, checkpoints and bounds (docs/contract.md).

The transports hold one :class:`SessionStore`. Its parts, one job per module, each building on
the ones below it:

- :mod:`.store`: the facade :class:`SessionStore` (store-wide queries, draining);
- :mod:`.lifecycle`: seed, tool calls, verify, close, fences and ``call_id`` records;
- :mod:`.checkpoints`: export, restore, claims and retire of sessions (K1-K6);
- :mod:`.sweep`: count and age bounds of the records, and the idle sweep (X1);
- :mod:`.table`: the maps and locks of one store, and the steps of removing a session;
- :mod:`.records`: what is remembered of ids no longer held, and the bounded-map helpers;
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
    SeedResult,
    Session,
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
    "SeedResult",
    "Session",
    "SessionConfig",
    "SessionState",
    "SessionStore",
    "StoreHooks",
    "ToolResult",
    "VerifyOutcome",
    "task_digest",
]
