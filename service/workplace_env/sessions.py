"""The session life cycle of CONTRACT.md: seed, tool calls, verify, close, eviction, bounds.

No gRPC types here: the servicer converts messages to these calls and maps the errors of
:mod:`workplace_env.errors` to status codes.

Concurrency. One store lock guards the maps (live sessions, pending builds, fences, eviction
records, legacy markers) and is held only for dictionary work: never across a table build, a
tool call, a verify, or a wait for a session. Each session has its own lock, held across its
tool calls, verifies and release, so calls on one session are serialised and different sessions
never wait for each other. Lock order: a session lock may be held while taking the store lock,
never the reverse (the idle sweep only try-locks sessions and skips busy ones).

Removal. A session's tables are released under its lock, then it is unmapped and its fence,
eviction record or marker is recorded under the store lock. A call that found the session
earlier sees ``tables is None`` once it holds the session lock, and answers from those records
(closed, expired, lost). So a close racing a tool call either lets the call finish first or
makes it NOT_FOUND.

Seeds build outside the store lock. The first seed of an id registers a pending build, builds
the tables, then binds (S1). A racing seed of the same id waits for that build and decides
again (S8: one table set, and the S2 answer). A failed build leaves nothing behind (S6).

Bounds (:class:`SessionConfig`): live sessions by count; idle sessions by age (the sweep,
:meth:`SessionStore.evict_idle`); fences, eviction records, legacy markers and per-session
``call_id`` records by count and age. A record is valid while younger than its age bound, so
when the store prunes old records never changes an answer. A session's call_id records travel
with its checkpoint snapshot (their age at export), so a call retried after a restore replays.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, TypeVar

from workplace_env import errors
from workplace_env.checkpoint.codec import CodecError, encode_state
from workplace_env.checkpoint.snapshot import CallSnapshot, Snapshot, decode_snapshot
from workplace_env.errors import FieldViolation
from workplace_env.model import (
    EpisodeId,
    FunctionCall,
    Task,
    TaskId,
    call_id_violations,
    check_seed,
)
from workplace_env.sandbox.tables import (
    TABLE_KEYS,
    BaseTables,
    SessionTables,
    TablesUnavailableError,
)
from workplace_env.sandbox.tools import drop_nulls, encode_output, execute
from workplace_env.sandbox.tools.registry import InvalidToolArgumentsError, parse_arguments
from workplace_env.verify import DEFAULT_CACHE_BYTES, Verifier, VerifyResult

Clock = Callable[[], float]
_V = TypeVar("_V")

#: The placeholder identity of legacy (cookie) sessions, which have no episode of their own.
LEGACY_EPISODE = EpisodeId("legacy", 0)


class SessionState(Enum):
    """CONTRACT.md "Session states" (CLOSED sessions live on only as fences)."""

    SEEDED = "SEEDED"
    VERIFIED = "VERIFIED"
    CLOSED = "CLOSED"
    RESTORED_UNCLAIMED = "RESTORED_UNCLAIMED"


class CloseOutcome(Enum):
    """What a close did (C1-C3)."""

    CLOSED = "CLOSED"
    ALREADY_CLOSED = "ALREADY_CLOSED"
    NOT_SEEDED = "NOT_SEEDED"


@dataclass(frozen=True)
class SessionConfig:
    """Bounds of the store; every one is configurable (defaults documented in the README).

    ``max_sessions``: live sessions (and pending builds) before seeds get RESOURCE_EXHAUSTED (S7).
    ``idle_ttl_s``: seconds without a request before the sweep evicts a session (X1).
    ``max_fences`` / ``fence_ttl_s``: closed ids remembered (S4, T5, C2), by count and age; the
    same bounds apply to the records of evicted ids (which answer SESSION_EXPIRED).
    ``max_call_ids`` / ``call_id_ttl_s``: idempotency records per session (T6), by count and
    age, oldest dropped first; all released with the session.
    ``retry_after_s``: the RetryInfo delay suggested when at capacity.
    ``retry_window_s``: how long a verified legacy session's outcome is remembered, so a
    resent verify scores the same (``session_close_retry_window_seconds``, V2-V3).
    ``max_markers``: verified legacy ids remembered at most (oldest dropped first).
    ``verify_cache_bytes``: estimated bytes of the verifier's memoised end states (issue 15).
    """

    max_sessions: int = 50_000
    idle_ttl_s: float = 3600.0
    max_fences: int = 200_000
    fence_ttl_s: float = 6 * 3600.0
    max_call_ids: int = 1024
    call_id_ttl_s: float = 3600.0
    retry_after_s: float = 1.0
    retry_window_s: float = 300.0
    max_markers: int = 100_000
    verify_cache_bytes: int = DEFAULT_CACHE_BYTES


@dataclass(frozen=True)
class SeedResult:
    """Outcome of a seed: the state afterwards and whether it was a retry (S2)."""

    state: SessionState
    already_seeded: bool
    rebuilt: bool = False
    restored: bool = False  # this seed claimed tables restored from a checkpoint (K4)


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


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One remembered tool call of a session: when, which call, and its output (T6, T7).

    ``call`` is a digest of the tool name and the arguments text: enough to tell a retry from
    another call without keeping the arguments (an email body can be long).
    """

    at: float
    call: bytes
    output: str

    @staticmethod
    def digest(tool_name: str, arguments: str) -> bytes:
        """The ``call`` of a tool name and arguments text (BLAKE2b, 16 bytes)."""
        data = json.dumps([tool_name, arguments]).encode()  # ASCII: any str encodes
        return hashlib.blake2b(data, digest_size=16).digest()


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
    # Installed by a restore (K3); ``restored_state`` is the state it had when exported.
    restored: bool = False
    restored_state: SessionState = SessionState.SEEDED
    # The task's digest (:func:`task_digest`), fixed at bind time: a retry is the same seed.
    task_digest: bytes = b""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # call_id -> record, oldest first; bounded by SessionConfig.max_call_ids / call_id_ttl_s.
    calls: OrderedDict[str, CallRecord] = field(default_factory=OrderedDict, repr=False)


@dataclass(frozen=True, slots=True)
class _Marker:
    """A verified legacy session (V2, V3): when, a digest of the verify request, its outcome,
    and the task's ground truth (a different resent request is scored afresh against it)."""

    at: float
    request: bytes
    outcome: VerifyOutcome
    ground_truth: tuple[FunctionCall, ...]


def _plain(value: Any) -> Any:
    """A verify input as plain JSON values (calls as ``[name, arguments]``)."""
    if isinstance(value, FunctionCall):
        return [value.name, value.arguments]
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _verify_digest(predicted: Sequence[Any], ground_truth: Any) -> bytes:
    """BLAKE2b of a verify request's calls and ground truth (V3: identical resends only)."""
    try:
        text = json.dumps([_plain(predicted), _plain(ground_truth)], sort_keys=True)
    except (ValueError, TypeError, RecursionError):
        text = repr(("unhashable", id(predicted)))  # matches nothing else
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


@dataclass
class _Build:
    """A seed building an id's tables; racing seeds and closes wait for ``done``."""

    episode: EpisodeId
    task_id: TaskId
    legacy: bool
    task_digest: bytes
    done: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True, slots=True)
class _Eviction:
    """An id evicted after its idle TTL, with its binding (later calls: SESSION_EXPIRED)."""

    at: float
    episode: EpisodeId
    task_id: TaskId
    legacy: bool
    task_digest: bytes

    @classmethod
    def of(cls, session: Session, at: float) -> _Eviction:
        """The record of ``session``, on fresh copies of its identity (see :func:`_detached`)."""
        episode, task_id = session.episode, session.task_id
        return cls(
            at,
            EpisodeId(_detached(episode.rollout_id), episode.attempt),
            TaskId(_detached(task_id.taskset), _detached(task_id.task_id)),
            session.legacy,
            session.task_digest,
        )


class Faults:
    """Fault injection and sync points for tests; inert unless a test arms it.

    Only code holding the store object can reach it; nothing on the network sets it.

    * :meth:`fail_next_build`: the next ``times`` table builds fail as TablesUnavailableError
      (a seed answers TABLES_UNAVAILABLE and leaves no binding, S6).
    * :meth:`fail_next_release`: the next ``times`` releases fail (a close answers
      RELEASE_FAILED / INTERNAL and is not recorded, C5; the sweep and a legacy verify leave the
      session live).
    * :meth:`lose_next_response`: the next ``times`` tool calls run and record their call_id,
      then answer INJECTED_FAULT (UNAVAILABLE), as if the response were lost on the way.
    * :meth:`on`: call ``hook(session_id)`` whenever the store reaches ``point``:

      - ``"build"``: a seed is about to build tables (outside the store lock);
      - ``"seed_wait"``: a seed or close is about to wait for a racing seed's build;
      - ``"tool_wait"``: a tool call is about to take its session's lock;
      - ``"tool"``: a tool is about to run (the session's lock held);
      - ``"release_wait"``: a close is about to take its session's lock to release it;
      - ``"drain"``: :meth:`SessionStore.start_draining` has refused new seeds.
    """

    POINTS = frozenset({"build", "seed_wait", "tool_wait", "tool", "release_wait", "drain"})

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed = {"build": 0, "release": 0, "response": 0}
        self._hooks: dict[str, Callable[[str], None]] = {}

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


class SessionStore:
    """All sessions of one server process over one sandbox.

    ``base`` is the parsed sandbox every session starts from; ``clock`` returns seconds
    (injectable so tests need no sleeps); ``table_factory`` builds a session's tables;
    ``faults`` is the test-only :class:`Faults` hook (inert by default).
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
        self.table_factory: Callable[[], SessionTables] = lambda: SessionTables(self.base)
        self.faults = Faults()
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}
        self._building: dict[str, _Build] = {}
        self._fences: OrderedDict[str, float] = OrderedDict()  # closed id -> closed at
        # closed typed id -> its episode (C4 after the close); bounded with the fences
        self._fence_episodes: OrderedDict[str, EpisodeId] = OrderedDict()
        self._evictions: OrderedDict[str, _Eviction] = OrderedDict()
        # verified legacy id -> its marker: an identical resent verify scores the same (V3)
        self._markers: OrderedDict[str, _Marker] = OrderedDict()
        self._draining = False

    # -- queries -----------------------------------------------------------------------------

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
        self.faults.hit("drain", "")

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

        Builds the tables, then records the binding (S1); an identical retry answers the same
        and rebuilds nothing (S2); racing identical seeds build one table set (S8). A ``legacy``
        (cookie) seed needs no episode or task id, and re-seeding a legacy session rebuilds
        fresh tables, as the reference does. An id evicted after its TTL may be seeded again by
        its own binding (fresh tables). Raises InvalidRequest (S5), SessionConflict (S3),
        SessionClosed (S4), TablesUnavailable (S6), CapacityExhausted (S7), Draining (X2).
        """
        if legacy:
            episode = LEGACY_EPISODE
            task_id = TaskId("legacy", (task.id if task is not None else "") or "row")
        check_seed(session_id, episode, task_id, task)
        assert episode is not None and task_id is not None and task is not None
        digest = task_digest(task)
        while True:
            now = self.clock()
            build: _Build | None = None
            with self._lock:
                self._prune(now)
                existing = self._sessions.get(session_id)
                pending = None if existing is not None else self._building.get(session_id)
                if existing is not None:
                    same = _same_binding(existing, episode, task_id, digest, legacy)
                    if same and existing.state is SessionState.RESTORED_UNCLAIMED:
                        return self._claim_by_seed(existing, now)
                    if not same:
                        raise _conflict(session_id, existing, digest)
                    if not legacy:
                        existing.last_used = now
                        return SeedResult(existing.state, already_seeded=True)
                elif pending is None:
                    self._admit(session_id, episode, task_id, digest, legacy, now)
                    build = self._building[session_id] = _Build(episode, task_id, legacy, digest)
            if pending is not None:
                self.faults.hit("seed_wait", session_id)
                pending.done.wait()
                continue  # the racing build finished or failed: decide again
            if build is not None:
                return self._build_and_bind(session_id, build, task, now)
            assert existing is not None
            rebuilt = self._rebuild(existing, task, now)
            if rebuilt is not None:
                return rebuilt
            # the legacy session was released while we built: decide again

    def _admit(
        self,
        session_id: str,
        episode: EpisodeId,
        task_id: TaskId,
        digest: bytes,
        legacy: bool,
        now: float,
    ) -> None:
        """Checks of a seed for an id with no live session (caller holds the store lock)."""
        if self._valid(self._fences.get(session_id), self.config.fence_ttl_s, now):
            raise errors.SessionClosed(f"session {session_id} was closed", session_id)
        evicted = self._evictions.get(session_id)
        if (
            evicted is not None
            and now - evicted.at <= self.config.fence_ttl_s
            and not _same_binding(evicted, episode, task_id, digest, legacy)
        ):
            raise _conflict(session_id, evicted, digest)
        if self._draining:
            raise errors.Draining("the server is shutting down", session_id)
        if len(self._sessions) + len(self._building) >= self.config.max_sessions:
            raise errors.CapacityExhausted(
                f"the server holds its maximum of {self.config.max_sessions} sessions",
                session_id,
                retry_after_s=self.config.retry_after_s,
            )

    def _build_and_bind(self, session_id: str, build: _Build, task: Task, now: float) -> SeedResult:
        """S1: build the tables outside the store lock, then bind; on failure leave nothing."""
        try:
            tables = self._build_tables(session_id)
        except BaseException:
            with self._lock:
                del self._building[session_id]
            build.done.set()
            raise
        with self._lock:
            del self._building[session_id]
            self._evictions.pop(session_id, None)
            self._markers.pop(session_id, None)
            self._sessions[session_id] = Session(
                session_id=session_id,
                episode=build.episode,
                task_id=build.task_id,
                task=task,
                tables=tables,
                last_used=now,
                legacy=build.legacy,
                task_digest=build.task_digest,
            )
        build.done.set()
        return SeedResult(SessionState.SEEDED, already_seeded=False)

    def _rebuild(self, session: Session, task: Task, now: float) -> SeedResult | None:
        """A legacy re-seed: fresh tables for the same cookie; None if it was released meanwhile.

        A failed build raises TablesUnavailable and leaves the old tables in place.
        """
        tables = self._build_tables(session.session_id)
        with session.lock:
            if session.tables is None:
                return None
            session.tables = tables
            session.task = task
            session.task_digest = task_digest(task)
            session.state = SessionState.SEEDED
            session.calls.clear()
            session.last_used = now
        return SeedResult(SessionState.SEEDED, already_seeded=False, rebuilt=True)

    def _build_tables(self, session_id: str) -> SessionTables:
        """A fresh table set, or TablesUnavailable (S6)."""
        self.faults.hit("build", session_id)
        try:
            if self.faults.take("build"):
                raise TablesUnavailableError("injected fault: the table build failed")
            return self.table_factory()
        except (TablesUnavailableError, OSError) as exc:
            raise errors.TablesUnavailable(
                f"could not build the tables: {exc}", session_id
            ) from exc

    # -- tool calls --------------------------------------------------------------------------

    def call_tool(
        self, session_id: str, tool_name: str, arguments: str, call_id: str = ""
    ) -> ToolResult:
        """Run one tool on the session's tables (T1, T2); return the output JSON text.

        With a ``call_id``, a repeat with the same tool and arguments returns the first output
        without running the tool again (T6). Raises InvalidRequest for a ``call_id`` over
        MAX_CALL_ID_CHARS, InvalidToolArguments (T3), SessionLost (T4), SessionClosed (T5),
        CallIdReused (T7), SessionExpired (X1).
        """
        violations = call_id_violations(call_id)
        if violations:
            raise errors.InvalidRequest(violations, session_id)
        try:
            kwargs = drop_nulls(parse_arguments(arguments))
        except InvalidToolArgumentsError as exc:
            raise errors.InvalidToolArguments(str(exc), session_id) from exc
        session = self._sessions.get(session_id)
        if session is None:
            raise self._gone(session_id)
        self.faults.hit("tool_wait", session_id)
        with session.lock:
            if session.tables is None:  # released while we waited for the lock
                raise self._gone(session_id)
            _claim(session)
            now = self.clock()
            session.last_used = now
            if call_id:
                self._prune_calls(session, now)
                seen = session.calls.get(call_id)
                if seen is not None:
                    if seen.call == CallRecord.digest(tool_name, arguments):
                        return ToolResult(seen.output, replayed=True)
                    raise errors.CallIdReused(
                        f"call_id {call_id!r} was used for another call", session_id
                    )
            self.faults.hit("tool", session_id)
            output = encode_output(execute(session.tables, tool_name, kwargs))
            done = self.clock()
            session.last_used = done
            if call_id:
                _remember(
                    session.calls,
                    call_id,
                    CallRecord(done, CallRecord.digest(tool_name, arguments), output),
                    self.config.max_call_ids,
                )
            if self.faults.take("response"):
                raise errors.InjectedFault("injected fault: the response was lost", session_id)
            return ToolResult(output)

    def _prune_calls(self, session: Session, now: float) -> None:
        """Drop call_id records older than ``call_id_ttl_s`` (caller holds the session lock)."""
        calls = session.calls
        while calls:
            record = next(iter(calls.values()))
            if now - record.at <= self.config.call_id_ttl_s:
                break
            calls.popitem(last=False)

    # -- verify ------------------------------------------------------------------------------

    def verify(
        self,
        session_id: str,
        predicted: list[Any],
        ground_truth: list[Any] | Any | None = None,
    ) -> VerifyOutcome:
        """Score ``predicted`` calls against ``ground_truth`` (default: the seeded task's).

        ``predicted`` and ``ground_truth`` hold :class:`FunctionCall` or raw JSON values (see
        :mod:`workplace_env.verify`); the live tables are never used (V1). A legacy session is
        then released and its outcome remembered for ``retry_window_s`` (V2), so an identical
        resent verify answers the same, and a different one is scored afresh (V3). A session
        the server does not hold scores a masked 0 with ``failure_kind="session_lost"`` (V4).
        Raises nothing of its own (V5 is the servicer's).
        """
        session = self._sessions.get(session_id)
        if session is not None:
            with session.lock:
                if session.tables is not None:
                    _claim(session)
                    truth: Any = session.task.ground_truth if ground_truth is None else ground_truth
                    result = self.verifier.score(predicted, truth)
                    outcome = VerifyOutcome(reward=result.reward, result=result)
                    if session.legacy:
                        marker = _Marker(
                            self.clock(),
                            _verify_digest(predicted, ground_truth),
                            outcome,
                            session.task.ground_truth,
                        )
                        self._release_legacy(session, marker)
                    else:
                        session.state = SessionState.VERIFIED
                        session.last_used = self.clock()
                    return outcome
        now = self.clock()
        with self._lock:
            marker = self._markers.get(session_id)
            if marker is not None and now - marker.at > self.config.retry_window_s:
                marker = None
        if marker is not None:
            digest = _verify_digest(predicted, ground_truth)
            if digest == marker.request:
                return marker.outcome
            # A different request (best-of-n collectors resend other responses): scored afresh
            # by replay, as the reference scores every request (V3).
            truth = marker.ground_truth if ground_truth is None else ground_truth
            result = self.verifier.score(predicted, truth)
            return VerifyOutcome(reward=result.reward, result=result)
        return VerifyOutcome(
            reward=0.0,
            mask_sample=True,
            failure_kind="session_lost",
            failure_reason=self._gone(session_id).message,
        )

    def _release_legacy(self, session: Session, marker: _Marker) -> None:
        """V2: release a verified legacy session and remember its outcome (session lock held).

        If the release fails the session stays live (a resent verify scores it again, and the
        sweep or a close releases it later).
        """
        try:
            self._release(session)
        except errors.ReleaseFailed:
            return
        now = self.clock()
        key = _detached(session.session_id)  # the marker outlives the session (see _detached)
        with self._lock:
            self._unmap(session)
            _remember(self._markers, key, replace(marker, at=now), self.config.max_markers)

    # -- close -------------------------------------------------------------------------------

    def close(self, session_id: str, episode: EpisodeId) -> CloseOutcome:
        """Close ``session_id`` for ``episode`` (C1-C5): release its tables, record a fence.

        Returns CLOSED (C1; also for an id whose tables the sweep or a legacy verify already
        released), ALREADY_CLOSED (C2) or NOT_SEEDED (C3: the fence refuses a late seed). Waits
        for an in-flight call on the session, never for other sessions. Raises EpisodeMismatch
        (C4), ReleaseFailed (C5: nothing recorded, a retry can succeed).
        """
        while True:
            now = self.clock()
            with self._lock:
                self._prune(now)
                session = self._sessions.get(session_id)
                pending = None if session is not None else self._building.get(session_id)
                if session is None and pending is None:
                    return self._close_unheld(session_id, episode, now)
                if session is not None and not session.legacy and session.episode != episode:
                    raise _mismatch(session_id, session.episode)
            if pending is not None:
                self.faults.hit("seed_wait", session_id)
                pending.done.wait()
                continue
            assert session is not None
            self.faults.hit("release_wait", session_id)
            with session.lock:  # waits for an in-flight call on this session only
                if session.tables is None:
                    continue  # released by a racing close, sweep or verify: decide again
                self._release(session)
                with self._lock:
                    self._unmap(session)
                    self._fence(session_id, self.clock(), _bound_episode(session))
            return CloseOutcome.CLOSED

    def _close_unheld(self, session_id: str, episode: EpisodeId, now: float) -> CloseOutcome:
        """Close an id with no live session (caller holds the store lock)."""
        if self._valid(self._fences.get(session_id), self.config.fence_ttl_s, now):
            bound = self._fence_episodes.get(session_id)
            if bound is not None and bound != episode:  # C4 holds after the close too
                raise _mismatch(session_id, bound)
            return CloseOutcome.ALREADY_CLOSED
        evicted = self._evictions.get(session_id)
        if evicted is not None and now - evicted.at > self.config.fence_ttl_s:
            evicted = None
        if evicted is not None and not evicted.legacy and evicted.episode != episode:
            raise _mismatch(session_id, evicted.episode)
        self._evictions.pop(session_id, None)
        marker = self._markers.pop(session_id, None)
        verified = marker is not None and now - marker.at <= self.config.retry_window_s
        self._fence(session_id, now, None if evicted is None else _bound_episode(evicted))
        return CloseOutcome.CLOSED if evicted is not None or verified else CloseOutcome.NOT_SEEDED

    # -- checkpoint (K1-K6) ------------------------------------------------------------------

    def export(
        self, session_ids: Sequence[str] = ()
    ) -> tuple[list[Snapshot], list[str], list[tuple[str, str]]]:
        """Snapshots of the live sessions (or of ``session_ids``), the ids not held, and the
        held sessions that cannot be encoded, with why (K1).

        Each session is read under its own lock, so a snapshot never shows half a tool call.
        One session whose tables the codec cannot write (an infinite float stored by a tool)
        is reported, never a reason to fail the others.
        """
        with self._lock:
            if session_ids:
                chosen = [(sid, self._sessions.get(sid)) for sid in dict.fromkeys(session_ids)]
            else:
                chosen = sorted(self._sessions.items())
        snapshots: list[Snapshot] = []
        missing: list[str] = []
        failures: list[tuple[str, str]] = []
        for sid, session in chosen:
            try:
                snapshot = None if session is None else self._snapshot(session)
            except CodecError as exc:
                failures.append((sid, str(exc)))
                continue
            if snapshot is None:
                missing.append(sid)
            else:
                snapshots.append(snapshot)
        return snapshots, missing, failures

    def _snapshot(self, session: Session) -> Snapshot | None:
        with session.lock:
            tables = session.tables
            if tables is None:
                return None
            state = session.state
            if state is SessionState.RESTORED_UNCLAIMED:
                state = session.restored_state
            now = self.clock()
            self._prune_calls(session, now)
            calls = tuple(
                CallSnapshot(call_id, record.call, record.output, max(0.0, now - record.at))
                for call_id, record in session.calls.items()
            )
            return Snapshot(
                session_id=session.session_id,
                episode=None if session.legacy else session.episode,
                task_id=None if session.legacy else session.task_id,
                task=session.task,
                legacy=session.legacy,
                state=encode_state({key: tables.table(key) for key in TABLE_KEYS}),
                session_state=state.value,
                calls=calls,
            )

    def restore(self, snapshots: Sequence[Snapshot]) -> int:
        """Install a batch of snapshots, all or none (K2, K3); return how many.

        Every snapshot is decoded and validated before anything is installed. Restored sessions
        are unclaimed until the first matching seed (typed) or request (legacy) claims them
        (K4). Raises InvalidRequest naming the snapshot and field (K2), SessionLive when an id
        is live (nothing installed), CapacityExhausted.
        """
        decoded: list[tuple[Snapshot, SessionTables]] = []
        seen: set[str] = set()
        for i, snapshot in enumerate(snapshots):
            tables = decode_snapshot(snapshot, self.base, f"snapshots[{i}]")
            if snapshot.session_id in seen:
                raise errors.InvalidRequest(
                    [FieldViolation(f"snapshots[{i}].resources_session_id", "appears twice")],
                    snapshot.session_id,
                )
            seen.add(snapshot.session_id)
            decoded.append((snapshot, SessionTables.from_tables(self.base, tables)))
        now = self.clock()
        with self._lock:
            live = sorted(sid for sid in seen if sid in self._sessions or sid in self._building)
            if live:
                raise errors.SessionLive(
                    f"sessions {live} are live here; nothing was restored", live[0]
                )
            closed = sorted(
                sid
                for sid in seen
                if self._valid(self._fences.get(sid), self.config.fence_ttl_s, now)
            )
            if closed:  # a closed episode must not run again from an older checkpoint
                raise errors.SessionClosed(
                    f"sessions {closed} were closed here; nothing was restored", closed[0]
                )
            if len(self._sessions) + len(self._building) + len(decoded) > self.config.max_sessions:
                raise errors.CapacityExhausted(
                    f"restoring {len(decoded)} sessions would pass the maximum of "
                    f"{self.config.max_sessions}",
                    retry_after_s=self.config.retry_after_s,
                )
            for snapshot, tables in decoded:
                sid = snapshot.session_id
                for records in (self._fences, self._fence_episodes, self._evictions, self._markers):
                    records.pop(sid, None)
                task = snapshot.task
                assert task is not None  # validated by decode_snapshot
                self._sessions[sid] = Session(
                    session_id=sid,
                    episode=snapshot.episode if not snapshot.legacy else LEGACY_EPISODE,
                    task_id=snapshot.task_id
                    if not snapshot.legacy and snapshot.task_id is not None
                    else TaskId("legacy", task.id or "row"),
                    task=task,
                    tables=tables,
                    last_used=now,
                    state=SessionState.RESTORED_UNCLAIMED,
                    legacy=snapshot.legacy,
                    restored=True,
                    restored_state=SessionState(snapshot.session_state),
                    task_digest=task_digest(task),
                    calls=self._restored_calls(snapshot.calls, now),
                )
        return len(decoded)

    def _restored_calls(
        self, calls: Sequence[CallSnapshot], now: float
    ) -> OrderedDict[str, CallRecord]:
        """A snapshot's call records under this store's bounds: those younger than
        ``call_id_ttl_s``, the newest ``max_call_ids`` of them, oldest first."""
        kept = sorted((c for c in calls if c.age_s <= self.config.call_id_ttl_s), key=_age_key)
        records: OrderedDict[str, CallRecord] = OrderedDict()
        for c in kept[max(0, len(kept) - self.config.max_call_ids) :]:
            records[c.call_id] = CallRecord(now - c.age_s, c.call, c.output)
        return records

    def retire(self, session_id: str) -> bool:
        """Discard a session's attempt: free its tables; later calls get NOT_FOUND (K6).

        Idempotent: returns False when the server does not hold the session. Raises
        ReleaseFailed (nothing changes then).
        """
        session = self._sessions.get(session_id)
        if session is None:
            return False
        with session.lock:
            if session.tables is None:
                return False
            self._release(session)
            with self._lock:
                self._unmap(session)
        return True

    def _claim_by_seed(self, session: Session, now: float) -> SeedResult:
        """K4: the first matching seed claims restored tables (no rebuild; store lock held)."""
        session.state = session.restored_state
        session.last_used = now
        return SeedResult(session.state, already_seeded=False, restored=True)

    # -- eviction ----------------------------------------------------------------------------

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
        records = [(_detached(s.session_id), _Eviction.of(s, now)) for s in idle]
        released: list[tuple[Session, str, _Eviction]] = []
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
                    _remember(self._evictions, key, record, self.config.max_fences)
        finally:
            for session, _, _ in released:
                session.lock.release()
        return len(released)

    # -- internals ---------------------------------------------------------------------------

    def _release(self, session: Session) -> None:
        """Drop the session's tables and call records (caller holds the session lock).

        Raises ReleaseFailed when a fault is injected (C5); nothing changes then.
        """
        if self.faults.take("release"):
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
            if self._valid(self._fences.get(session_id), self.config.fence_ttl_s, now):
                return errors.SessionClosed(f"session {session_id} was closed", session_id)
            evicted = self._evictions.get(session_id)
            if evicted is not None and now - evicted.at <= self.config.fence_ttl_s:
                return errors.SessionExpired(
                    f"session {session_id} was evicted after {self.config.idle_ttl_s:g} s idle",
                    session_id,
                )
        return errors.SessionLost(f"the server holds no session {session_id}", session_id)

    def _fence(self, session_id: str, now: float, episode: EpisodeId | None = None) -> None:
        """Record ``session_id`` as closed; ``episode``: its typed binding, if any (C4)."""
        _remember(self._fences, session_id, now, self.config.max_fences)
        if episode is not None:
            _remember(self._fence_episodes, session_id, episode, self.config.max_fences)
        else:
            self._fence_episodes.pop(session_id, None)

    @staticmethod
    def _valid(at: float | None, ttl_s: float, now: float) -> bool:
        return at is not None and now - at <= ttl_s

    def _prune(self, now: float) -> None:
        """Drop records past their age bounds, oldest first (caller holds the store lock)."""
        _drop_older(self._fences, lambda at: at, now - self.config.fence_ttl_s)
        fences, episodes = self._fences, self._fence_episodes
        while episodes and next(iter(episodes)) not in fences:  # same order: dropped with them
            episodes.popitem(last=False)
        _drop_older(self._evictions, lambda e: e.at, now - self.config.fence_ttl_s)
        _drop_older(self._markers, lambda m: m.at, now - self.config.retry_window_s)


def task_digest(task: Task) -> bytes:
    """BLAKE2b (16 bytes) of ``task``'s canonical JSON: the fields a verify scores and a
    checkpoint keeps (id, category, environment name, ground-truth calls, the row's digest when
    set), not the prompt.

    S2/S3, K4: a seed is a retry only when it carries the same task as the binding.
    """
    canonical = [
        task.id,
        task.category,
        task.environment_name,
        [[call.name, call.arguments] for call in task.ground_truth],
    ]
    if task.data_digest:  # the whole row's (S3: the same identity with another row conflicts)
        canonical.append(task.data_digest)
    return hashlib.blake2b(json.dumps(canonical).encode(), digest_size=16).digest()


def _age_key(call: CallSnapshot) -> float:
    """Sort key putting the oldest record first."""
    return -call.age_s


def _same_binding(
    bound: Session | _Eviction, episode: EpisodeId, task_id: TaskId, digest: bytes, legacy: bool
) -> bool:
    """Whether a seed names the binding ``bound``: same episode, task id and task (S2, K4);
    any legacy seed names a legacy binding (a legacy re-seed rebuilds, as the reference does)."""
    if bound.legacy or legacy:
        return bound.legacy and legacy
    return bound.episode == episode and bound.task_id == task_id and bound.task_digest == digest


def _claim(session: Session) -> None:
    """K4: a request on restored, unclaimed tables claims them (session lock held)."""
    if session.state is SessionState.RESTORED_UNCLAIMED:
        session.state = session.restored_state


def _conflict(
    session_id: str, bound: Session | _Eviction, digest: bytes = b""
) -> errors.SessionError:
    if (
        isinstance(bound, Session)
        and bound.restored
        and (bound.state is not SessionState.RESTORED_UNCLAIMED)
    ):
        return errors.SessionClaimed(
            f"session {session_id} was restored and claimed by its own binding", session_id
        )
    if bound.legacy:
        return errors.SessionConflict(
            f"session {session_id} is a legacy (cookie) session", session_id
        )
    differs = (
        " (the seed's task data differs from the bound task's)"
        if (digest and digest != bound.task_digest)
        else ""
    )
    return errors.SessionConflict(
        f"session {session_id} is bound to episode "
        f"{bound.episode.rollout_id}/{bound.episode.attempt} and task "
        f"{bound.task_id.taskset}/{bound.task_id.task_id}{differs}",
        session_id,
    )


def _mismatch(session_id: str, episode: EpisodeId) -> errors.EpisodeMismatch:
    return errors.EpisodeMismatch(
        f"session {session_id} belongs to episode {episode.rollout_id}/{episode.attempt}",
        session_id,
    )


def _detached(text: str) -> str:
    """A new string equal to ``text``.

    CPython returns small objects to the OS only by whole allocator arenas; a long-lived record
    holding the very string a session was seeded with keeps that session's arena resident.
    """
    return text.encode().decode()


def _bound_episode(record: Any) -> EpisodeId | None:
    """The episode a session or eviction record is bound to; None for a legacy one."""
    return None if record.legacy else record.episode


def _remember(records: OrderedDict[str, _V], key: str, value: _V, max_count: int) -> None:
    """Record ``key`` as the newest entry; drop the oldest beyond ``max_count``."""
    records[key] = value
    records.move_to_end(key)
    while len(records) > max_count:
        records.popitem(last=False)


def _drop_older(records: OrderedDict[str, _V], at: Callable[[_V], float], cutoff: float) -> None:
    """Drop entries recorded before ``cutoff`` from the front (entries are in time order)."""
    while records:
        if at(next(iter(records.values()))) >= cutoff:
            break
        records.popitem(last=False)
