"""The session life cycle of docs/contract.md: seed, tool calls, verify, close.

Owns :class:`LifeCycle`: seeds (S1-S8) with their fences and pending builds, tool calls (T1-T7)
with their ``call_id`` records (idempotency), verifies (V1-V5) with the markers of verified
legacy sessions, and closes (C1-C5). No gRPC types here: the servicer converts messages to
these calls and maps the errors of :mod:`workplace_env.errors` to status codes.

Seeds build outside the store lock. The first seed of an id registers a pending build, builds
the tables, then binds (S1). A racing seed of the same id waits for that build and decides
again (S8: one table set, and the S2 answer). A failed build leaves nothing behind (S6).
The lock rules every method here follows are :mod:`.scope`'s; the removal steps
:mod:`.table`'s.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from workplace_env import errors
from workplace_env.identity import (
    EpisodeId,
    FunctionCall,
    Task,
    TaskId,
    call_id_violations,
    check_seed,
)
from workplace_env.plurals import counted
from workplace_env.sandbox.tables import BaseTables, SessionTables, TablesUnavailableError
from workplace_env.sandbox.tools import drop_nulls, encode_output, execute
from workplace_env.sandbox.tools.registry import (
    InvalidToolArgumentsError,
    parse_arguments,
    write_size,
)
from workplace_env.sessions.checkpoints import claim, claim_by_seed
from workplace_env.sessions.records import (
    RELEASED_BY_VERIFY,
    Eviction,
    Marker,
    Records,
    Release,
    detached,
    remember,
)
from workplace_env.sessions.scope import StoreScope
from workplace_env.sessions.sweep import IdleSweep
from workplace_env.sessions.table import PendingBuild, SessionTable
from workplace_env.sessions.types import (
    LEGACY_EPISODE,
    CallRecord,
    CloseOutcome,
    LiveSession,
    SeedResult,
    SessionState,
    ToolResult,
    VerifyOutcome,
    task_digest,
)
from workplace_env.verify import Verifier


class LifeCycle:
    """Seed, tool calls, verify and close of a store's sessions over ``base``, scored by
    ``verifier``. ``table_factory`` (settable) builds a new session's tables."""

    __slots__ = ("records", "scope", "sweep", "table", "table_factory", "verifier")

    def __init__(
        self,
        scope: StoreScope,
        table: SessionTable,
        records: Records,
        sweep: IdleSweep,
        base: BaseTables,
        verifier: Verifier,
    ) -> None:
        self.scope = scope
        self.table = table
        self.records = records
        self.sweep = sweep
        self.verifier = verifier
        self.table_factory: Callable[[], SessionTables] = lambda: SessionTables(base)

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
        fresh tables, as the reference does. A typed seed of an id evicted after its TTL is
        SessionExpired (X1) while its eviction record lasts (``fence_ttl_s``), so a late or
        retried seed never silently drops the episode's mutations. A full store first evicts its
        sessions past their idle TTL (:meth:`.IdleSweep.evict_idle`, as the periodic sweep does),
        then admits or refuses. Raises InvalidRequest (S5), SessionConflict (S3), SessionClosed
        (S4), SessionExpired (X1), TablesUnavailable (S6), CapacityExhausted (S7), Draining (X2).
        """
        if legacy:
            episode = LEGACY_EPISODE
            task_id = TaskId("legacy", (task.id if task is not None else "") or "row")
        check_seed(session_id, episode, task_id, task)
        assert episode is not None and task_id is not None and task is not None
        digest = task_digest(task)
        scope, sessions, building = self.scope, self.table.sessions, self.table.building
        swept = False  # a full store evicts its sessions past their TTL once, then decides again
        while True:
            now = scope.clock()
            build: PendingBuild | None = None
            with scope.lock:
                self.records.prune(now)
                existing = sessions.get(session_id)
                pending = None if existing is not None else building.get(session_id)
                if existing is not None:
                    same = _same_binding(existing, episode, task_id, digest, legacy)
                    if same and existing.state is SessionState.RESTORED_UNCLAIMED:
                        return claim_by_seed(existing, now)
                    if not same:
                        raise _conflict(session_id, existing, digest)
                    if not legacy:
                        existing.last_used = now
                        return SeedResult(existing.state, already_seeded=True)
                elif pending is None and self._admit(
                    session_id, episode, task_id, digest, legacy, now, swept
                ):
                    build = building[session_id] = PendingBuild(episode, task_id, legacy, digest)
            if pending is not None:
                scope.hooks.hit("seed_wait", session_id)
                pending.done.wait()
                continue  # the racing build finished or failed: decide again
            if build is not None:
                return self._build_and_bind(session_id, build, task, now)
            if existing is None:  # the store is full: evict the idle sessions, decide again
                self.sweep.evict_idle()
                swept = True
                continue
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
        swept: bool,
    ) -> bool:
        """Checks of a seed for an id with no live session (caller holds the store lock).

        True: build. False: the store is full and this seed has not ``swept`` yet; the caller
        runs the idle sweep (a session past its TTL never holds a place) and decides again.
        Raises SessionClosed (S4), SessionConflict (S3), SessionExpired (X1), Draining (X2),
        CapacityExhausted (S7: still full after the sweep).
        """
        if self.records.closed(session_id, now):
            raise errors.SessionClosed(f"session {session_id} was closed", session_id)
        evicted = self.records.evicted(session_id, now)
        if evicted is not None:
            if not _same_binding(evicted, episode, task_id, digest, legacy):
                raise _conflict(session_id, evicted, digest)
            if not legacy:  # a late or retried seed must not hide the loss behind fresh tables
                raise errors.SessionExpired(
                    f"session {session_id} was evicted after its idle TTL; its tool calls are "
                    "gone. Seed a new resources_session_id",
                    session_id,
                )
        if self.table.draining:
            raise errors.Draining("the server is shutting down", session_id)
        if self.table.has_room(1):
            return True
        if not swept:
            return False
        config = self.scope.config
        raise errors.CapacityExhausted(
            f"the server holds its maximum of {counted(config.max_sessions, 'session')}",
            session_id,
            retry_after_s=config.retry_after_s,
        )

    def _build_and_bind(
        self, session_id: str, build: PendingBuild, task: Task, now: float
    ) -> SeedResult:
        """S1: build the tables outside the store lock, then bind; on failure leave nothing."""
        lock, building = self.scope.lock, self.table.building
        try:
            tables = self._build_tables(session_id)
        except BaseException:
            with lock:
                del building[session_id]
            build.done.set()
            raise
        records = self.records
        with lock:
            del building[session_id]
            records.evictions.pop(session_id, None)
            records.releases.pop(session_id, None)
            records.markers.pop(session_id, None)
            self.table.sessions[session_id] = LiveSession(
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

    def _rebuild(self, session: LiveSession, task: Task, now: float) -> SeedResult | None:
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
            session.write_bytes = 0
            session.last_used = now
        return SeedResult(SessionState.SEEDED, already_seeded=False, rebuilt=True)

    def _build_tables(self, session_id: str) -> SessionTables:
        """A fresh table set, or TablesUnavailable (S6)."""
        hooks = self.scope.hooks
        hooks.hit("build", session_id)
        try:
            if hooks.take("build"):
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
        without running the tool again (T6). A write call that would take the session's
        written bytes (:func:`write_size`) over ``max_session_write_bytes`` runs nothing and
        records nothing (a replay is not counted again). Raises InvalidRequest for a
        ``call_id`` over MAX_ID_CHARS, InvalidToolArguments (T3), SessionLost (T4),
        SessionClosed (T5), CallIdReused (T7), SessionExpired (X1), SessionTooLarge.
        """
        violations = call_id_violations(call_id)
        if violations:
            raise errors.InvalidRequest(violations, session_id)
        try:
            kwargs = drop_nulls(parse_arguments(arguments))
        except InvalidToolArgumentsError as exc:
            raise errors.InvalidToolArguments(str(exc), session_id) from exc
        session = self.table.sessions.get(session_id)
        if session is None:
            raise self.records.gone(session_id)
        scope = self.scope
        scope.hooks.hit("tool_wait", session_id)
        with session.lock:
            if session.tables is None:  # released while we waited for the lock
                raise self.records.gone(session_id)
            claim(session)
            now = scope.clock()
            session.last_used = now
            if call_id:
                self.sweep.prune_calls(session, now)
                seen = session.calls.get(call_id)
                if seen is not None:
                    if seen.call == CallRecord.digest(tool_name, arguments):
                        return ToolResult(seen.output, replayed=True)
                    raise errors.CallIdReused(
                        f"call_id {call_id!r} was first used for another call: this "
                        f"{tool_name} call's tool name or arguments text differ from that one's",
                        session_id,
                    )
            size = session.write_bytes + write_size(tool_name, arguments)
            limit = scope.config.max_session_write_bytes
            if limit and size > session.write_bytes and size > limit:
                raise errors.SessionTooLarge(
                    f"{tool_name} would take the session's writes to {size} bytes, over the "
                    f"server's bound of {limit} (max_session_write_bytes); nothing was applied",
                    session_id,
                    size_bytes=size,
                    limit_bytes=limit,
                    call_bytes=size - session.write_bytes,
                )
            scope.hooks.hit("tool", session_id)
            output = encode_output(execute(session.tables, tool_name, kwargs))
            session.write_bytes = size
            done = scope.clock()
            session.last_used = done
            if call_id:
                remember(
                    session.calls,
                    call_id,
                    CallRecord(done, CallRecord.digest(tool_name, arguments), output),
                    scope.config.max_call_ids,
                )
            if scope.hooks.take("response"):
                raise errors.InjectedFault("injected fault: the response was lost", session_id)
            return ToolResult(output)

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
        scope = self.scope
        scope.hooks.hit("verify", session_id)
        session = self.table.sessions.get(session_id)
        if session is not None:
            with session.lock:
                if session.tables is not None:
                    claim(session)
                    truth: Any = session.task.ground_truth if ground_truth is None else ground_truth
                    result = self.verifier.score(predicted, truth)
                    outcome = VerifyOutcome.scored(result)
                    if session.legacy:
                        marker = Marker(
                            scope.clock(),
                            _verify_digest(predicted, ground_truth),
                            outcome,
                            session.task.ground_truth,
                        )
                        self._release_legacy(session, marker)
                    else:
                        session.state = SessionState.VERIFIED
                        session.last_used = scope.clock()
                    return outcome
        now = scope.clock()
        with scope.lock:
            remembered = self.records.marker(session_id, now)
        if remembered is not None:
            digest = _verify_digest(predicted, ground_truth)
            if digest == remembered.request:
                return remembered.outcome
            # A different request (best-of-n collectors resend other responses): scored afresh
            # by replay, as the reference scores every request (V3).
            truth = remembered.ground_truth if ground_truth is None else ground_truth
            result = self.verifier.score(predicted, truth)
            return VerifyOutcome.scored(result)
        return VerifyOutcome(
            reward=0.0,
            mask_sample=True,
            failure_kind="session_lost",
            failure_reason=self.records.gone(session_id).message,
        )

    def _release_legacy(self, session: LiveSession, marker: Marker) -> None:
        """V2: release a verified legacy session, remember its outcome (``retry_window_s``) and
        that it was released by its verify (``fence_ttl_s``: later calls say so; session lock
        held).

        If the release fails the session stays live (a resent verify scores it again, and the
        sweep or a close releases it later).
        """
        try:
            self.table.release(session)
        except errors.ReleaseFailed:
            return
        now = self.scope.clock()
        key = detached(session.session_id)  # the marker outlives the session (see records.detached)
        with self.scope.lock:
            self.table.unmap(session)
            self.records.mark(key, replace(marker, at=now))
            self.records.release(key, Release(now, RELEASED_BY_VERIFY))

    # -- close -------------------------------------------------------------------------------

    def close(self, session_id: str, episode: EpisodeId) -> CloseOutcome:
        """Close ``session_id`` for ``episode`` (C1-C5): release its tables, record a fence.

        Returns CLOSED (C1; also for an id whose tables the sweep or a legacy verify already
        released), ALREADY_CLOSED (C2) or NOT_SEEDED (C3: the fence refuses a late seed). Waits
        for an in-flight call on the session, never for other sessions. Raises EpisodeMismatch
        (C4), ReleaseFailed (C5: nothing recorded, a retry can succeed).
        """
        scope, table, records = self.scope, self.table, self.records
        while True:
            now = scope.clock()
            with scope.lock:
                records.prune(now)
                session = table.sessions.get(session_id)
                pending = None if session is not None else table.building.get(session_id)
                if session is None and pending is None:
                    return self._close_unheld(session_id, episode, now)
                if session is not None and not session.legacy and session.episode != episode:
                    raise _mismatch(session_id, session.episode)
            if pending is not None:
                scope.hooks.hit("seed_wait", session_id)
                pending.done.wait()
                continue
            assert session is not None
            scope.hooks.hit("release_wait", session_id)
            with session.lock:  # waits for an in-flight call on this session only
                if session.tables is None:
                    continue  # released by a racing close, sweep or verify: decide again
                table.release(session)
                with scope.lock:
                    table.unmap(session)
                    records.fence(
                        session_id, scope.clock(), None if session.legacy else session.episode
                    )
            return CloseOutcome.CLOSED

    def _close_unheld(self, session_id: str, episode: EpisodeId, now: float) -> CloseOutcome:
        """Close an id with no live session (caller holds the store lock)."""
        records = self.records
        if records.closed(session_id, now):
            bound = records.fence_episodes.get(session_id)
            if bound is not None and bound != episode:  # C4 holds after the close too
                raise _mismatch(session_id, bound)
            return CloseOutcome.ALREADY_CLOSED
        evicted = records.evicted(session_id, now)
        if evicted is not None and not evicted.legacy and evicted.episode != episode:
            raise _mismatch(session_id, evicted.episode)
        records.evictions.pop(session_id, None)
        marker = records.markers.pop(session_id, None)
        verified = marker is not None and now - marker.at <= self.scope.config.retry_window_s
        bound = None if evicted is None or evicted.legacy else evicted.episode
        records.fence(session_id, now, bound)
        return CloseOutcome.CLOSED if evicted is not None or verified else CloseOutcome.NOT_SEEDED


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
        # Fresh random bytes: matches no other request (id() could be reused once freed).
        return os.urandom(16)
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def _same_binding(
    bound: LiveSession | Eviction, episode: EpisodeId, task_id: TaskId, digest: bytes, legacy: bool
) -> bool:
    """Whether a seed names the binding ``bound``: same episode, task id and task (S2, K4);
    any legacy seed names a legacy binding (a legacy re-seed rebuilds, as the reference does)."""
    if bound.legacy or legacy:
        return bound.legacy and legacy
    return bound.episode == episode and bound.task_id == task_id and bound.task_digest == digest


def _conflict(
    session_id: str, bound: LiveSession | Eviction, digest: bytes = b""
) -> errors.SessionError:
    if (
        isinstance(bound, LiveSession)
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
