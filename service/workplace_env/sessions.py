"""The session life cycle of CONTRACT.md: seed, tool calls, verify, close, fences, bounds.

No gRPC types here: the servicer converts messages to these calls and maps the errors of
:mod:`workplace_env.errors` to status codes.

Concurrency: one short global lock guards the id -> session maps (never held across tool work);
each session has its own lock, so calls on one session are serialised and different sessions
never wait for each other. Building a session's tables is a copy of seven references to the
shared base frames, so it happens under the global lock and racing identical seeds yield one
table set (S8).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from workplace_env import errors
from workplace_env.model import EpisodeId, Task, TaskId, check_seed
from workplace_env.sandbox.tables import BaseTables, SessionTables, TablesUnavailableError
from workplace_env.sandbox.tools import drop_nulls, encode_output, execute
from workplace_env.sandbox.tools.registry import InvalidToolArgumentsError, parse_arguments
from workplace_env.verify import Verifier, VerifyResult

Clock = Callable[[], float]

#: The placeholder identity of legacy (cookie) sessions, which have no episode of their own.
LEGACY_EPISODE = EpisodeId("legacy", 0)


class SessionState(Enum):
    """CONTRACT.md "Session states" (CLOSED sessions live on only as fences)."""

    SEEDED = "SEEDED"
    VERIFIED = "VERIFIED"
    CLOSED = "CLOSED"


class CloseOutcome(Enum):
    """What a close did (C1-C3)."""

    CLOSED = "CLOSED"
    ALREADY_CLOSED = "ALREADY_CLOSED"
    NOT_SEEDED = "NOT_SEEDED"


@dataclass(frozen=True)
class SessionConfig:
    """Bounds of the store; every one is configurable (defaults documented in the README).

    ``max_sessions``: live sessions before seeds get RESOURCE_EXHAUSTED (S7).
    ``idle_ttl_s``: seconds without a request before a session is evicted (X1).
    ``max_fences`` / ``fence_ttl_s``: closed ids remembered (S4, C2), by count and age.
    ``max_call_ids``: idempotency records kept per session (T6), oldest dropped first.
    ``retry_after_s``: the RetryInfo delay suggested when at capacity.
    ``retry_window_s``: how long a verified legacy session's outcome is remembered, so a
    resent verify scores the same (``session_close_retry_window_seconds``, V2-V3).
    ``max_markers``: verified legacy ids remembered at most (oldest dropped first).
    """

    max_sessions: int = 50_000
    idle_ttl_s: float = 3600.0
    max_fences: int = 200_000
    fence_ttl_s: float = 6 * 3600.0
    max_call_ids: int = 1024
    retry_after_s: float = 1.0
    retry_window_s: float = 300.0
    max_markers: int = 100_000


@dataclass(frozen=True)
class SeedResult:
    """Outcome of a seed: the state afterwards and whether it was a retry (S2)."""

    state: SessionState
    already_seeded: bool
    rebuilt: bool = False


@dataclass(frozen=True)
class ToolResult:
    """A tool call's output JSON text, and whether it was replayed for a repeated call_id (T6)."""

    output: str
    replayed: bool = False


@dataclass(frozen=True)
class VerifyOutcome:
    """A verify's answer: the score, or a masked 0 with ``failure_kind`` (V4)."""

    reward: float
    mask_sample: bool = False
    failure_kind: str = ""
    failure_reason: str = ""
    result: VerifyResult | None = None


@dataclass
class Session:
    """One live session: its binding, tables and bookkeeping."""

    session_id: str
    episode: EpisodeId
    task_id: TaskId
    task: Task
    tables: SessionTables | None
    last_used: float
    state: SessionState = SessionState.SEEDED
    legacy: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # call_id -> (tool name, arguments text, result); bounded by SessionConfig.max_call_ids.
    calls: OrderedDict[str, tuple[str, str, ToolResult]] = field(
        default_factory=OrderedDict, repr=False
    )


class SessionStore:
    """All sessions of one server process over one sandbox.

    ``base`` is the parsed sandbox every session starts from; ``clock`` returns seconds
    (injectable so tests need no sleeps); ``table_factory`` builds a session's tables (tests
    replace it to inject build failures, S6).
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
        self.verifier = verifier or Verifier(base)
        self.table_factory: Callable[[], SessionTables] = lambda: SessionTables(self.base)
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}
        self._fences: OrderedDict[str, float] = OrderedDict()  # closed id -> closed at
        self._expired: OrderedDict[str, float] = OrderedDict()  # evicted id -> evicted at
        # verified legacy id -> (verified at, outcome): resent verifies score the same (V3)
        self._markers: OrderedDict[str, tuple[float, VerifyOutcome]] = OrderedDict()
        self._draining = False

    # -- queries -----------------------------------------------------------------------------

    def live_count(self) -> int:
        """Number of sessions holding tables."""
        return len(self._sessions)

    def start_draining(self) -> None:
        """Refuse new seeds from now on (X2); calls on live sessions still run."""
        self._draining = True

    # -- seed --------------------------------------------------------------------------------

    def seed(
        self,
        session_id: str,
        episode: EpisodeId | None,
        task_id: TaskId | None,
        task: Task | None,
        legacy: bool = False,
    ) -> SeedResult:
        """Seed ``session_id`` for ``episode`` and ``task_id`` with ``task`` (S1-S8).

        A ``legacy`` (cookie) seed needs no episode or task id; re-seeding a legacy session
        rebuilds fresh tables, as the reference does. Raises InvalidRequest (S5),
        SessionConflict (S3), SessionClosed (S4), TablesUnavailable (S6), CapacityExhausted
        (S7), Draining (X2).
        """
        if legacy:
            episode = LEGACY_EPISODE
            task_id = TaskId("legacy", (task.id if task is not None else "") or "row")
        check_seed(session_id, episode, task_id, task)
        assert episode is not None and task_id is not None and task is not None
        now = self.clock()
        with self._lock:
            self._forget_old(now)
            existing = self._sessions.get(session_id)
            if existing is not None and legacy and existing.legacy:
                return self._rebuild(existing, task, now)
            if existing is not None:
                if (
                    not legacy
                    and not existing.legacy
                    and (existing.episode == episode and existing.task_id == task_id)
                ):
                    existing.last_used = now
                    return SeedResult(existing.state, already_seeded=True)
                raise errors.SessionConflict(
                    f"session {session_id} is bound to episode "
                    f"{existing.episode.rollout_id}/{existing.episode.attempt} and task "
                    f"{existing.task_id.taskset}/{existing.task_id.task_id}",
                    session_id,
                )
            if session_id in self._fences:
                raise errors.SessionClosed(f"session {session_id} was closed", session_id)
            if self._draining:
                raise errors.Draining("the server is shutting down", session_id)
            if len(self._sessions) >= self.config.max_sessions:
                raise errors.CapacityExhausted(
                    f"the server holds its maximum of {self.config.max_sessions} sessions",
                    session_id,
                    retry_after_s=self.config.retry_after_s,
                )
            try:
                tables = self.table_factory()  # build first ...
            except (TablesUnavailableError, OSError) as exc:
                raise errors.TablesUnavailable(
                    f"could not build the tables: {exc}", session_id
                ) from exc
            self._expired.pop(session_id, None)
            self._markers.pop(session_id, None)
            self._sessions[session_id] = Session(  # ... then bind (S1)
                session_id=session_id,
                episode=episode,
                task_id=task_id,
                task=task,
                tables=tables,
                last_used=now,
                legacy=legacy,
            )
            return SeedResult(SessionState.SEEDED, already_seeded=False)

    def _rebuild(self, session: Session, task: Task, now: float) -> SeedResult:
        """A legacy re-seed: fresh tables for the same cookie (caller holds the store lock)."""
        try:
            tables = self.table_factory()
        except (TablesUnavailableError, OSError) as exc:
            raise errors.TablesUnavailable(
                f"could not build the tables: {exc}", session.session_id
            ) from exc
        with session.lock:
            session.tables = tables
            session.task = task
            session.state = SessionState.SEEDED
            session.calls.clear()
            session.last_used = now
        return SeedResult(SessionState.SEEDED, already_seeded=False, rebuilt=True)

    # -- tool calls --------------------------------------------------------------------------

    def call_tool(
        self, session_id: str, tool_name: str, arguments: str, call_id: str = ""
    ) -> ToolResult:
        """Run one tool on the session's tables (T1-T7); return the output JSON text.

        Raises InvalidToolArguments (T3), SessionLost (T4), SessionClosed (T5),
        SessionExpired (X1), CallIdReused (T7).
        """
        try:
            kwargs = drop_nulls(parse_arguments(arguments))
        except InvalidToolArgumentsError as exc:
            raise errors.InvalidToolArguments(str(exc), session_id) from exc
        session = self._live(session_id)
        with session.lock:
            if session.tables is None:  # closed while we waited for the lock
                raise self._gone(session_id)
            if call_id:
                seen = session.calls.get(call_id)
                if seen is not None:
                    if seen[0] == tool_name and seen[1] == arguments:
                        return ToolResult(seen[2].output, replayed=True)
                    raise errors.CallIdReused(
                        f"call_id {call_id!r} was used for another call", session_id
                    )
            result = ToolResult(encode_output(execute(session.tables, tool_name, kwargs)))
            if call_id:
                session.calls[call_id] = (tool_name, arguments, result)
                while len(session.calls) > self.config.max_call_ids:
                    session.calls.popitem(last=False)
            session.last_used = self.clock()
            return result

    # -- verify ------------------------------------------------------------------------------

    def verify(
        self,
        session_id: str,
        predicted: list[Any],
        ground_truth: list[Any] | Any | None = None,
    ) -> VerifyOutcome:
        """Score ``predicted`` calls against ``ground_truth`` (default: the seeded task's).

        ``predicted`` and ``ground_truth`` hold :class:`FunctionCall` or raw JSON values (see
        :mod:`workplace_env.verify`). A session the server does not hold scores a masked 0 with
        ``failure_kind="session_lost"`` (V4); the live tables are never used (V1).
        """
        session = self._sessions.get(session_id)
        if session is None:
            marker = self._markers.get(session_id)
            if marker is not None and self.clock() - marker[0] <= self.config.retry_window_s:
                return marker[1]  # a resent legacy verify inside the window (V3)
            return VerifyOutcome(
                reward=0.0,
                mask_sample=True,
                failure_kind="session_lost",
                failure_reason=self._gone(session_id).message,
            )
        truth: Any = session.task.ground_truth if ground_truth is None else ground_truth
        result = self.verifier.score(predicted, truth)
        outcome = VerifyOutcome(reward=result.reward, result=result)
        if session.legacy:
            self._release_legacy(session, outcome)
            return outcome
        with session.lock:
            if session.tables is not None:
                session.state = SessionState.VERIFIED
                session.last_used = self.clock()
        return outcome

    def _release_legacy(self, session: Session, outcome: VerifyOutcome) -> None:
        """V2: a verified legacy session's tables are released; its outcome is remembered."""
        now = self.clock()
        with self._lock:
            if self._sessions.get(session.session_id) is session:
                del self._sessions[session.session_id]
            self._markers[session.session_id] = (now, outcome)
            self._markers.move_to_end(session.session_id)
            while len(self._markers) > self.config.max_markers:
                self._markers.popitem(last=False)
        with session.lock:
            session.tables = None
            session.state = SessionState.VERIFIED
            session.calls.clear()

    # -- close -------------------------------------------------------------------------------

    def close(self, session_id: str, episode: EpisodeId) -> CloseOutcome:
        """Close ``session_id`` for ``episode`` (C1-C5): release its tables, record a fence.

        Raises EpisodeMismatch (C4).
        """
        now = self.clock()
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                if session_id in self._fences:
                    return CloseOutcome.ALREADY_CLOSED
                self._fence(session_id, now)
                return CloseOutcome.NOT_SEEDED
            if not session.legacy and session.episode != episode:
                raise errors.EpisodeMismatch(
                    f"session {session_id} belongs to episode "
                    f"{session.episode.rollout_id}/{session.episode.attempt}",
                    session_id,
                )
            del self._sessions[session_id]
            self._fence(session_id, now)
        with session.lock:  # wait for an in-flight call, then release (T4 for later ones)
            session.tables = None
            session.state = SessionState.CLOSED
            session.calls.clear()
        return CloseOutcome.CLOSED

    # -- eviction ----------------------------------------------------------------------------

    def evict_idle(self) -> int:
        """Evict sessions idle longer than ``idle_ttl_s`` (X1); return how many were evicted."""
        now = self.clock()
        cutoff = now - self.config.idle_ttl_s
        evicted: list[Session] = []
        with self._lock:
            for sid, session in list(self._sessions.items()):
                if session.last_used < cutoff:
                    del self._sessions[sid]
                    self._expired[sid] = now
                    evicted.append(session)
            self._forget_old(now)
        for session in evicted:
            with session.lock:
                session.tables = None
        return len(evicted)

    # -- internals ---------------------------------------------------------------------------

    def _live(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise self._gone(session_id)
        return session

    def _gone(self, session_id: str) -> errors.SessionError:
        """The error for an id with no live session: closed, expired, or lost."""
        if session_id in self._fences:
            return errors.SessionClosed(f"session {session_id} was closed", session_id)
        if session_id in self._expired:
            return errors.SessionExpired(
                f"session {session_id} was evicted after {self.config.idle_ttl_s:g} s idle",
                session_id,
            )
        return errors.SessionLost(f"the server holds no session {session_id}", session_id)

    def _fence(self, session_id: str, now: float) -> None:
        self._fences[session_id] = now
        self._fences.move_to_end(session_id)
        while len(self._fences) > self.config.max_fences:
            self._fences.popitem(last=False)

    def _forget_old(self, now: float) -> None:
        """Drop fences and markers past their age bounds (caller holds the lock)."""
        for marks in (self._fences, self._expired):
            while marks:
                _, at = next(iter(marks.items()))
                if now - at <= self.config.fence_ttl_s:
                    break
                marks.popitem(last=False)
        while self._markers:
            _, (at, _) = next(iter(self._markers.items()))
            if now - at <= self.config.retry_window_s:
                break
            self._markers.popitem(last=False)
