"""The session store the transports use: one facade over the store's parts.

Owns :class:`SessionStore`, the object the gRPC servicer, the HTTP gateway's in-process
backend, the runner and the CLI hold. It builds the parts, each with one job, over one
:class:`~.scope.StoreScope` (lock, clock, bounds, hooks), and hands each operation to its part:
:class:`~.lifecycle.LifeCycle` (seed, call_tool, verify, close),
:class:`~.checkpoints.Checkpoints` (export, export_checkpoint, restore, retire),
:class:`~.sweep.IdleSweep` (evict_idle) and :class:`~.table.SessionTable` (live_count,
state_counts, start_draining).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from workplace_env.checkpoint.snapshot import FenceSnapshot, Snapshot
from workplace_env.identity import EpisodeId, Task, TaskId
from workplace_env.sandbox.tables import BaseTables, SessionTables
from workplace_env.sessions.checkpoints import Checkpoints, ExportedCheckpoint
from workplace_env.sessions.hooks import StoreHooks
from workplace_env.sessions.lifecycle import LifeCycle
from workplace_env.sessions.records import Records
from workplace_env.sessions.scope import StoreScope
from workplace_env.sessions.sweep import IdleSweep
from workplace_env.sessions.table import SessionTable
from workplace_env.sessions.types import (
    Clock,
    CloseOutcome,
    SeedResult,
    SessionConfig,
    ToolResult,
    VerifyOutcome,
)
from workplace_env.verify import Verifier


class SessionStore:
    """All sessions of one server process over one sandbox.

    ``SessionStore(base, config=None, clock=time.monotonic, verifier=None)``: ``base`` is the
    parsed sandbox every session starts from; ``config`` the bounds (:class:`~.types.SessionConfig`
    defaults); ``clock`` returns seconds (injectable so tests need no sleeps); ``verifier``
    scores verifies (default: one over ``base`` with ``config.verify_cache_bytes`` of cache).
    Attributes callers may set: ``table_factory`` builds a session's tables; ``hooks`` is the
    :class:`~.hooks.StoreHooks` hook point (no-ops by default); ``on_evicted`` is told how
    many sessions each idle eviction freed (the periodic sweep's and a full store's alike).
    The parts (``scope``, ``table``, ``records``, ``sweep``, ``checkpoints``, ``life_cycle``)
    are for the store's own tests.
    """

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
        self.scope = StoreScope(self.config, clock)
        self.table = SessionTable(self.scope)
        self.records = Records(self.scope)
        self.sweep = IdleSweep(self.scope, self.table, self.records)
        self.checkpoints = Checkpoints(self.scope, self.table, self.records, self.sweep, base)
        self.life_cycle = LifeCycle(
            self.scope, self.table, self.records, self.sweep, base, self.verifier
        )

    @property
    def hooks(self) -> StoreHooks:
        """The hook point every part calls (settable)."""
        return self.scope.hooks

    @hooks.setter
    def hooks(self, hooks: StoreHooks) -> None:
        self.scope.hooks = hooks

    @property
    def table_factory(self) -> Callable[[], SessionTables]:
        """What builds a new session's tables (settable)."""
        return self.life_cycle.table_factory

    @table_factory.setter
    def table_factory(self, factory: Callable[[], SessionTables]) -> None:
        self.life_cycle.table_factory = factory

    @property
    def on_evicted(self) -> Callable[[int], None]:
        """What counts the sessions each idle eviction frees (settable)."""
        return self.sweep.on_evicted

    @on_evicted.setter
    def on_evicted(self, count: Callable[[int], None]) -> None:
        self.sweep.on_evicted = count

    # -- the life cycle (LifeCycle) ------------------------------------------------------------

    def seed(
        self,
        session_id: str,
        episode: EpisodeId | None,
        task_id: TaskId | None,
        task: Task | None,
        legacy: bool = False,
    ) -> SeedResult:
        """Seed a session (S1-S8): :meth:`.LifeCycle.seed`."""
        return self.life_cycle.seed(session_id, episode, task_id, task, legacy)

    def call_tool(
        self, session_id: str, tool_name: str, arguments: str, call_id: str = ""
    ) -> ToolResult:
        """Run one tool (T1-T7): :meth:`.LifeCycle.call_tool`."""
        return self.life_cycle.call_tool(session_id, tool_name, arguments, call_id)

    def verify(
        self,
        session_id: str,
        predicted: list[Any],
        ground_truth: list[Any] | Any | None = None,
    ) -> VerifyOutcome:
        """Score a session's calls (V1-V5): :meth:`.LifeCycle.verify`."""
        return self.life_cycle.verify(session_id, predicted, ground_truth)

    def close(self, session_id: str, episode: EpisodeId) -> CloseOutcome:
        """Close a session (C1-C5): :meth:`.LifeCycle.close`."""
        return self.life_cycle.close(session_id, episode)

    # -- checkpoints (Checkpoints) -------------------------------------------------------------

    def export(
        self, session_ids: Sequence[str] = (), active: Callable[[], bool] = lambda: True
    ) -> tuple[list[Snapshot], list[str], list[tuple[str, str]]]:
        """Snapshots, ids not held, and failures (K1): :meth:`.Checkpoints.export`."""
        return self.checkpoints.export(session_ids, active)

    def export_checkpoint(
        self, session_ids: Sequence[str] = (), active: Callable[[], bool] = lambda: True
    ) -> ExportedCheckpoint:
        """Snapshots, ids not held, failures and fences as one picture (K1):
        :meth:`.Checkpoints.export_checkpoint`."""
        return self.checkpoints.export_checkpoint(session_ids, active)

    def restore(self, snapshots: Sequence[Snapshot], fences: Sequence[FenceSnapshot] = ()) -> int:
        """Install snapshots all or none (K2, K3): :meth:`.Checkpoints.restore`."""
        return self.checkpoints.restore(snapshots, fences)

    def retire(self, session_id: str) -> bool:
        """Discard an exported attempt (K6): :meth:`.Checkpoints.retire`."""
        return self.checkpoints.retire(session_id)

    # -- bounds and store-wide queries ---------------------------------------------------------

    def evict_idle(self) -> int:
        """Evict idle sessions (X1), counted by ``on_evicted``: :meth:`.IdleSweep.evict_idle`."""
        return self.sweep.evict_idle()

    def live_count(self) -> int:
        """Number of sessions holding tables."""
        return len(self.table.sessions)

    def state_counts(self) -> dict[str, int]:
        """Live sessions by state name in lower case (``seeded``, ``verified``,
        ``restored_unclaimed``)."""
        return self.table.state_counts()

    def start_draining(self) -> None:
        """Refuse new seeds from now on (X2: UNAVAILABLE ``DRAINING``); live sessions still work."""
        self.table.draining = True
        self.scope.hooks.hit("drain", "")
