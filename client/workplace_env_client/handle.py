"""A session handle's logic, written once for the sync and the async client.

:class:`SessionHandle` holds what a handle records (its calls, checkpoints, recoveries, the
fence) and decides what to send; it sends nothing itself. Each operation is a generator of
:class:`~workplace_env_client.steps.Step`: a call on the SDK client or on an admin client, whose
result (or exception) is sent back into it. :class:`~workplace_env_client.client.Session` runs
the steps as plain calls, :class:`~workplace_env_client.aio.AsyncSession` awaits them (an admin
call on a worker thread, :mod:`workplace_env_client.steps`), so both have the same methods,
arguments, recovery and errors. A client's ``session()`` block
is steps too: :func:`open_block` (checks, seed, fence) and :func:`close_block`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import grpc

from workplace_env_client import reasons
from workplace_env_client.admin import AdminClient
from workplace_env_client.contexts import AsyncOnly, SyncOnly
from workplace_env_client.errors import (
    ArgumentError,
    ReplayDivergedError,
    SessionClosedError,
    SessionLiveError,
    SessionLostError,
    WorkplaceEnvError,
    close_failed,
    may_have_run,
)
from workplace_env_client.messages import (
    CallLike,
    EpisodeLike,
    RecordedCall,
    TaskLike,
    VerifyResult,
    arguments_text,
    new_call_id,
    output_digest,
    prediction,
    session_identity,
)
from workplace_env_client.steps import Answer, Step, Steps, run_steps, run_steps_async

if TYPE_CHECKING:
    from workplace.env.v1 import admin_pb2 as admin_pb
    from workplace.env.v1 import environment_pb2 as pb


#: How :meth:`Session.recover` rebuilds a lost session.
RecoveryStrategy = Literal["replay", "checkpoint"]


def check_recovery(recovery: object, field: str = "recovery", optional: bool = True) -> None:
    """Raise ArgumentError unless ``recovery`` is ``"replay"``, ``"checkpoint"`` (or None when
    ``optional``)."""
    if recovery not in (("replay", "checkpoint", None) if optional else ("replay", "checkpoint")):
        allowed = "None, 'replay' or 'checkpoint'" if optional else "'replay' or 'checkpoint'"
        raise ArgumentError(field, f"must be {allowed}, not {recovery!r}")


def check_admin(admin: object) -> None:
    """Raise ArgumentError unless ``admin`` is None or an AdminClient."""
    if admin is not None and not isinstance(admin, AdminClient):
        raise ArgumentError("admin", f"must be an AdminClient or None, not {type(admin).__name__}")


def open_block(
    client: Any,
    task: TaskLike,
    episode: tuple[str, int] | None,
    task_id: tuple[str, str] | None,
    session_id: str | None,
    recovery: object,
    admin: object,
) -> Steps:
    """The steps of a client's ``session()`` up to its block: check the arguments (ArgumentError,
    nothing sent), seed, and when the seed fails with an unknown outcome
    (:func:`~workplace_env_client.errors.may_have_run`), close an id generated here (the fence),
    or any id when an interrupt (``KeyboardInterrupt``, a cancellation) ended the seed (the
    block, left, would have closed it), and raise the seed's error; a seed refused by a
    definite status, or never sent, made no session and is raised as is. A failed fence is the
    SessionLeftOpenWarning at the caller's ``with``. Returns ``(session id, episode, task id,
    task message)``."""
    sid, ep, task_msg, tid = session_identity(task, episode, task_id, session_id)
    check_recovery(recovery)
    check_admin(admin)
    try:
        yield Step(client, "seed", (sid, ep, tid, task_msg))
    except BaseException as failed:
        # Our own id: nobody retries it, so fencing it is safe.
        if may_have_run(failed) and (not session_id or not isinstance(failed, Exception)):
            try:
                yield Step(client, "_close", (sid, ep), {"retry_refusals": True}, shielded=True)
            except BaseException as closing:
                # The caller's with: above this generator, the driver, its runner, the entry.
                close_failed(sid, closing, failed, stacklevel=6)
        raise
    return sid, ep, tid, task_msg


def close_block(
    client: Any, session_id: str, episode: EpisodeLike, in_flight: BaseException | None
) -> Steps:
    """The steps of a ``session()`` block's exit: close the session, refusals retried within
    the deadline. A close that fails, whatever its error, is a
    :class:`~workplace_env_client.errors.SessionLeftOpenWarning` at the caller's ``with``
    naming the session and how long it may stay open, and a note on ``in_flight`` (the block's
    exception); after a completed block, an error other than an unreachable server is raised
    too (:func:`~workplace_env_client.errors.close_failed`), as is an interrupt
    (``KeyboardInterrupt``) of the close. The async close runs to its end when the block's task
    is cancelled meanwhile (:attr:`~workplace_env_client.steps.Step.shielded`, bounded by the
    client's ``timeout_s``); that cancellation is raised after it."""
    try:
        yield Step(client, "_close", (session_id, episode), {"retry_refusals": True}, shielded=True)
    except BaseException as closing:
        # The caller's with: above this generator, the driver, its runner and the block's exit.
        close_failed(session_id, closing, in_flight, stacklevel=6)
        if not isinstance(closing, Exception):
            raise


#: What an automatic recovery may fail with: an SDK error of the seed, restore or replayed
#: calls (e.g. SESSION_EXPIRED: the server refuses to re-seed an evicted id, CONTRACT X1;
#: REPLAY_DIVERGED; UNAUTHENTICATED restores), or ValueError (a handle without its task).
_RECOVERY_FAILURES = (WorkplaceEnvError, ValueError)


@dataclass(frozen=True)
class SessionCheckpoint:
    """A session's snapshot (``SessionSnapshot``, from the admin export) and ``call_count``,
    how many of the session's recorded calls it includes (later ones are replayed on restore).

    :meth:`Session.checkpoint` makes one; build one yourself from
    :meth:`AdminClient.export_sessions` output taken after ``call_count`` calls.
    """

    snapshot: admin_pb.SessionSnapshot
    call_count: int


@dataclass(frozen=True)
class Recovery:
    """What :meth:`Session.recover` did: the ``strategy``; ``restored``, whether a checkpoint
    was installed; ``replayed``, how many recorded calls were sent again; ``already_held``,
    whether the server the id maps to held the session already (nothing was rebuilt)."""

    strategy: RecoveryStrategy
    restored: bool
    replayed: int
    already_held: bool


class SessionHandle:
    """A seeded typed session (:class:`~workplace_env_client.client.Session`, or its awaited twin
    :class:`~workplace_env_client.aio.AsyncSession`).

    The handle records each successful :meth:`call_tool` (:attr:`calls`: name, arguments,
    call_id, output digest) so that a session whose server went away can be rebuilt on the
    server its id now maps to, at the caller's choice:

    * ``recover("replay")``: seed again (fresh tables) and replay every recorded call;
    * ``recover("checkpoint")``: restore the last :meth:`checkpoint` (or a given
      :class:`SessionCheckpoint`), seed again to claim it (CONTRACT K4), and replay the calls
      made after it.

    Replayed calls reuse their ``call_id``, so a recovery sent to a server that still holds the
    session changes nothing (T6); each replayed output must equal the recorded one, else
    :class:`~workplace_env_client.errors.ReplayDivergedError`. With ``recovery`` set, a
    :meth:`call_tool` that gets SESSION_LOST or SESSION_EXPIRED, or a :meth:`verify` answered
    ``failure_kind "session_lost"``, recovers once by that strategy and is sent again
    (``"checkpoint"`` falls back to replay while no checkpoint was taken); :attr:`recoveries`
    lists what was done. A handle is for one caller at a time (calls and checkpoints in order).

    An automatic recovery never leaves the caller worse off than no recovery: when it fails
    (the seed, restore or a replayed call raises, e.g. SESSION_EXPIRED because the server
    refuses to re-seed an evicted id, CONTRACT X1; or the replay diverges), or the call sent
    again after it fails, :meth:`verify` returns the first, masked ``session_lost`` answer
    (CONTRACT V4) and :meth:`call_tool` raises the call's own error (e.g.
    :class:`~workplace_env_client.errors.SessionExpiredError`, with a note naming the recovery's
    error); :attr:`failed_recoveries` keeps those errors. Closing (the ``session()`` block's
    exit) never recovers. :meth:`recover`, called by you, raises its errors.

    A replay that diverges (automatic or by :meth:`recover`) fences the handle: the server now
    holds a session whose state is not the recorded one, so the handle never touches it again.
    Every later :meth:`call_tool`, :meth:`checkpoint` and :meth:`recover` raises
    :class:`~workplace_env_client.errors.ReplayDivergedError` naming the session (its cause:
    the divergence), and :meth:`verify` answers the masked ``session_lost`` sample (CONTRACT
    V4, as for a session the server does not hold) with a ``failure_reason`` saying so,
    without asking the server; :attr:`fenced` is the divergence. The ``session()`` block's exit
    still closes the session on the server.

    A replay that stops on another error (e.g. a deadline, or an answer lost with retries
    spent) leaves the server, if it still holds the session, with only some of the recorded
    calls. Until a recovery resumes that replay the handle sends nothing on the session either:
    :meth:`call_tool` and :meth:`checkpoint` raise SessionLostError ("not fully recovered";
    with ``recovery`` set, the call recovers and is sent as for a lost session) and
    :meth:`verify` answers the masked ``session_lost`` sample. A recovery reaching a server
    that holds the session resumes at the call the replay stopped on (resent with its
    ``call_id``, so not run twice, T6).

    Once its ``session()`` block has ended (closing the session, whether or not the close
    reached the server), the handle is closed: every :meth:`call_tool`, :meth:`verify`,
    :meth:`checkpoint` and :meth:`recover` raises
    :class:`~workplace_env_client.errors.SessionClosedError` naming the session and sends
    nothing (:attr:`closed` is True). ``client.verify(session_id)`` still answers a closed id
    with the masked ``session_lost`` sample (CONTRACT V4).
    """

    def __init__(
        self,
        client: Any,
        session_id: str,
        episode: tuple[str, int],
        *,
        task_id: tuple[str, str] | None = None,
        task: pb.WorkplaceTask | None = None,
        recovery: RecoveryStrategy | None = None,
        admin: AdminClient | None = None,
    ) -> None:
        check_recovery(recovery)
        #: The session: its client, id, episode, and the task id and task it was seeded with.
        self.client, self.id, self.episode = client, session_id, episode
        self.task_id, self.task = task_id, task
        self.recovery, self.admin = recovery, admin
        #: The last checkpoint :meth:`checkpoint` took (None before the first).
        self.last_checkpoint: SessionCheckpoint | None = None
        self._calls: list[RecordedCall] = []
        self._call_ids: set[str] = set()
        self._recoveries: list[Recovery] = []
        self._failed_recoveries: list[Exception] = []
        self._fenced: ReplayDivergedError | None = None
        self._closed = False
        # After a recovery whose replay stopped on an error (not a divergence): the index of the
        # first recorded call the server's copy may lack. None: the server has them all.
        self._resume_at: int | None = None

    @property
    def closed(self) -> bool:
        """Whether the handle's ``session()`` block has ended (every operation then raises
        SessionClosedError, sending nothing)."""
        return self._closed

    def _end_block(self) -> None:
        """Close the handle: its ``session()`` block is ending."""
        self._closed = True

    def _refuse_if_closed(self) -> None:
        """Raise SessionClosedError once the handle's block has ended."""
        if self._closed:
            raise SessionClosedError(
                f"session {self.id} is closed: its session() block has ended, so this handle"
                " sends nothing more (open another session() block for a new episode)",
                grpc.StatusCode.NOT_FOUND,
                reason=reasons.SESSION_CLOSED.name,
                session_id=self.id,
            )

    @property
    def fenced(self) -> ReplayDivergedError | None:
        """The divergence that fenced this handle (see the class docstring), or None."""
        return self._fenced

    def _fence_message(self) -> str:
        assert self._fenced is not None
        return (
            f"session {self.id} is fenced: a recovery replay diverged ({self._fenced.message});"
            " its state on the server is not the recorded one, so this handle refuses every"
            " call (close it and start another episode)"
        )

    def _refuse_if_fenced(self) -> None:
        """Raise ReplayDivergedError when a diverged replay fenced this handle."""
        if self._fenced is not None:
            raise ReplayDivergedError(
                self._fence_message(),
                grpc.StatusCode.DATA_LOSS,
                reason=reasons.REPLAY_DIVERGED.name,
                session_id=self.id,
            ) from self._fenced

    def _incomplete_message(self) -> str:
        return (
            f"session {self.id} is not fully recovered: its replay stopped after"
            f" {self._resume_at} of {len(self._calls)} recorded calls (recover() resumes it)"
        )

    def _refuse_if_incomplete(self) -> None:
        """Raise SessionLostError while a recovery's replay is incomplete: the server's copy
        lacks recorded calls, so the recorded session is not (yet) there."""
        if self._resume_at is not None:
            raise SessionLostError(
                self._incomplete_message(),
                grpc.StatusCode.NOT_FOUND,
                reason=reasons.SESSION_LOST.name,
                session_id=self.id,
            )

    @property
    def calls(self) -> tuple[RecordedCall, ...]:
        """The tool calls this handle's session applied, in order, each once (a call sent again
        with a recorded ``call_id`` is the server's replay of it, T6, not a new call)."""
        return tuple(self._calls)

    @property
    def recoveries(self) -> tuple[Recovery, ...]:
        """Every recovery of this handle (automatic or by :meth:`recover`), in order."""
        return tuple(self._recoveries)

    @property
    def failed_recoveries(self) -> tuple[Exception, ...]:
        """The errors of automatic recoveries that did not succeed, in order (each left the
        caller with the outcome it gets without recovery; see the class docstring)."""
        return tuple(self._failed_recoveries)

    def _call_tool(
        self, name: str, arguments: str | Mapping[str, Any] | None, call_id: str
    ) -> Answer[Any]:
        """The steps of :meth:`Session.call_tool`."""
        self._refuse_if_closed()
        self._refuse_if_fenced()
        text = arguments_text(arguments)
        cid = call_id or new_call_id()
        try:
            self._refuse_if_incomplete()
            output = yield Step(self.client, "call_tool_raw", (self.id, name, text, cid))
        except SessionLostError as lost:
            if self.recovery is None:
                raise
            try:
                yield from self._auto_recover()
                output = yield Step(self.client, "call_tool_raw", (self.id, name, text, cid))
            except _RECOVERY_FAILURES as failed:
                # Never worse than without recovery: the caller gets the call's own error.
                self._failed_recoveries.append(failed)
                fenced = "; the handle is fenced" if failed is self._fenced else ""
                lost.add_note(f"recovery ({self.recovery}) failed: {failed}{fenced}")
                raise lost from lost.__cause__
        self._record(RecordedCall(name, text, cid, output_digest(output)))
        return json.loads(output)

    def _record(self, call: RecordedCall) -> None:
        """Record ``call`` unless its ``call_id`` is recorded already: the server answered it
        as a replay of that call (same id and arguments, T6; other arguments are refused
        CALL_ID_REUSED), which ran once and is recorded once."""
        if call.call_id not in self._call_ids:
            self._call_ids.add(call.call_id)
            self._calls.append(call)

    def _verify(
        self, function_calls: Iterable[CallLike] | None, kwargs: dict[str, Any]
    ) -> Answer[VerifyResult]:
        """The steps of :meth:`Session.verify`."""
        self._refuse_if_closed()
        if self._fenced is not None:
            return VerifyResult(0.0, True, "session_lost", self._fence_message(), ())
        calls = prediction(function_calls, self._calls, kwargs)
        if self._resume_at is not None:  # not asked: the server's copy lacks recorded calls
            result = VerifyResult(0.0, True, "session_lost", self._incomplete_message(), ())
        else:
            result = yield Step(self.client, "verify", (self.id, calls), kwargs)
        if result.failure_kind == "session_lost" and self.recovery is not None:
            try:
                yield from self._auto_recover()
                again: VerifyResult = yield Step(self.client, "verify", (self.id, calls), kwargs)
                return again
            except _RECOVERY_FAILURES as failed:
                # Never worse than without recovery: the masked sample (CONTRACT V4).
                self._failed_recoveries.append(failed)
        return result

    def _admin(self, admin: AdminClient | None) -> AdminClient:
        return admin or self.admin or self.client.admin()

    def _checkpoint(self, admin: AdminClient | None) -> Answer[SessionCheckpoint]:
        """The steps of :meth:`Session.checkpoint`."""
        self._refuse_if_closed()
        self._refuse_if_fenced()
        check_admin(admin)
        self._refuse_if_incomplete()
        count = len(self._calls)
        exported = yield Step(self._admin(admin), "export_sessions", ([self.id],))
        snapshots, _missing, failures = exported
        if failures:
            raise WorkplaceEnvError(
                f"session {self.id} cannot be exported: {failures[self.id]}",
                grpc.StatusCode.FAILED_PRECONDITION,
                reason=reasons.EXPORT_FAILED.name,
                session_id=self.id,
            )
        if not snapshots:
            raise SessionLostError(
                f"the server holds no session {self.id} to checkpoint",
                grpc.StatusCode.NOT_FOUND,
                reason=reasons.SESSION_LOST.name,
                session_id=self.id,
            )
        self.last_checkpoint = SessionCheckpoint(snapshots[0], count)
        return self.last_checkpoint

    def _recover(
        self,
        strategy: RecoveryStrategy,
        checkpoint: SessionCheckpoint | None,
        admin: AdminClient | None,
    ) -> Answer[Recovery]:
        """The steps of :meth:`Session.recover`."""
        self._refuse_if_closed()
        self._refuse_if_fenced()
        check_recovery(strategy, "strategy", optional=False)
        check_admin(admin)
        if checkpoint is not None and not isinstance(checkpoint, SessionCheckpoint):
            raise ArgumentError(
                "checkpoint",
                f"must be a SessionCheckpoint or None, not {type(checkpoint).__name__}",
            )
        if self.task is None or self.task_id is None:
            raise ValueError("recovery needs the session's task and task id")
        start = 0
        restored = False
        if strategy == "checkpoint":
            checkpoint = checkpoint or self.last_checkpoint
            if checkpoint is None:
                raise ValueError("no checkpoint to recover from (take one with checkpoint())")
            if checkpoint.snapshot.resources_session_id != self.id:
                raise ValueError("the checkpoint is of another session")
            try:
                count = yield Step(self._admin(admin), "restore_sessions", ([checkpoint.snapshot],))
                restored = count == 1
            except SessionLiveError:
                restored = False  # that server holds the session: the seed below finds it
            start = checkpoint.call_count
        seeded = yield Step(self.client, "seed", (self.id, self.episode, self.task_id, self.task))
        already_held = seeded.already_seeded
        # A server holding the session has every recorded call, unless an earlier recovery's
        # replay stopped there: then it resumes (the call it stopped on may have run; its
        # call_id makes the resend answer the recorded output, T6).
        begin = start if not already_held else self._resume_at
        replayed = 0
        if begin is not None:
            for at in range(begin, len(self._calls)):
                self._resume_at = at
                call = self._calls[at]
                args = (self.id, call.name, call.arguments, call.call_id)
                output = yield Step(self.client, "call_tool_raw", args)
                if output_digest(output) != call.output_digest:
                    self._fenced = ReplayDivergedError(
                        f"replaying {call.name} (call_id {call.call_id}) gave another output",
                        grpc.StatusCode.DATA_LOSS,
                        reason=reasons.REPLAY_DIVERGED.name,
                        session_id=self.id,
                    )
                    raise self._fenced
                replayed += 1
            self._resume_at = None
        outcome = Recovery(strategy, restored, replayed, already_held)
        self._recoveries.append(outcome)
        return outcome

    def _auto_recover(self) -> Steps:
        use_checkpoint = self.recovery == "checkpoint" and self.last_checkpoint is not None
        yield from self._recover("checkpoint" if use_checkpoint else "replay", None, None)


H = TypeVar("H", bound=SessionHandle)


class _SessionBlock(Generic[H]):
    """A client's ``session()`` block: :func:`open_block` on entry (it yields a ``handle``
    of the seeded session), :func:`close_block` on exit, whatever the exit."""

    def __init__(
        self,
        handle: type[H],
        client: Any,
        task: TaskLike,
        episode: tuple[str, int] | None,
        task_id: tuple[str, str] | None,
        session_id: str | None,
        recovery: RecoveryStrategy | None,
        admin: AdminClient | None,
    ) -> None:
        self._handle, self._client, self._recovery, self._admin = handle, client, recovery, admin
        self._opening = open_block(client, task, episode, task_id, session_id, recovery, admin)
        self._session: tuple[str, EpisodeLike] = ("", ("", 0))
        self._made: H | None = None

    def _opened(self, opened: tuple[str, tuple[str, int], tuple[str, str], pb.WorkplaceTask]) -> H:
        sid, ep, tid, task_msg = opened
        self._session = (sid, ep)
        self._made = self._handle(
            self._client,
            sid,
            ep,
            task_id=tid,
            task=task_msg,
            recovery=self._recovery,
            admin=self._admin,
        )
        return self._made

    def _closing(self, in_flight: BaseException | None) -> Steps:
        if self._made is not None:
            self._made._end_block()
        return close_block(self._client, *self._session, in_flight)


class SessionBlock(SyncOnly, _SessionBlock[H]):
    """:meth:`EnvironmentClient.session`'s block, a ``with`` statement's."""

    _usage = "with env.session(task) as s:"
    _counterpart = "AsyncEnvironmentClient.session is the asyncio block"

    def __enter__(self) -> H:
        return self._opened(run_steps(self._opening))

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        run_steps(self._closing(exc))


class AsyncSessionBlock(AsyncOnly, _SessionBlock[H]):
    """:meth:`AsyncEnvironmentClient.session`'s block, an ``async with`` statement's."""

    _usage = "async with env.session(task) as s:"
    _counterpart = "EnvironmentClient.session is the synchronous block"

    async def __aenter__(self) -> H:
        return self._opened(await run_steps_async(self._opening))

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await run_steps_async(self._closing(exc))
