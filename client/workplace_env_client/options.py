"""What the sync and the async environment client decide alike, written once.

:class:`ClientBase` is their constructor: :meth:`ClientOptions.checked` checks and resolves its
arguments, and it opens the client's transport. An :class:`RpcBudget` is one RPC's deadline and
whether a concurrency refusal (TOO_MANY_RPCS, X3) is sent again within it. The clients only
drive them: the sync one sleeps, the async one awaits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, NamedTuple, TypeVar

import grpc
import grpc.aio

from workplace.env.v1 import environment_pb2_grpc as pb_grpc
from workplace_env_client.admin import AdminClient
from workplace_env_client.channel import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_TIMEOUT_S,
    check_client_options,
    check_max_attempts,
    given_or_made,
    refusal_wait,
)
from workplace_env_client.errors import WorkplaceEnvError, client_closed
from workplace_env_client.handle import RecoveryStrategy
from workplace_env_client.messages import TaskLike
from workplace_env_client.routing import Target, session_metadata
from workplace_env_client.steps import Step, Steps


def caller_cancelled() -> bool:
    """Whether the running task is being cancelled by its caller (``Task.cancelling()``), as
    opposed to an RPC cancelled under it by its client's close; True outside a task."""
    try:
        task = asyncio.current_task()
    except RuntimeError:
        return True
    return task is None or task.cancelling() > 0


#: The channel type of a client (``grpc.Channel`` or ``grpc.aio.Channel``).
ChannelT = TypeVar("ChannelT", grpc.Channel, grpc.aio.Channel)
#: The transport type of a client (a ``Transport`` or an ``AsyncTransport``).
TransportT = TypeVar("TransportT")
#: What a client's ``session()`` returns (a ``SessionBlock`` or an ``AsyncSessionBlock``).
BlockT = TypeVar("BlockT")


@dataclass(frozen=True)
class ClientOptions:
    """An environment client's options, checked: ``timeout_s`` (seconds, every RPC's
    deadline), ``admin_token`` and ``retry_refusals`` (resolved to a bool)."""

    timeout_s: float
    admin_token: str | None
    retry_refusals: bool

    @classmethod
    def checked(
        cls,
        over: tuple[object, object, object],
        timeout_s: Any,
        max_attempts: Any,
        affinity: Any,
        admin_token: Any,
        retry_refusals: Any,
    ) -> ClientOptions:
        """The options of a client ``over`` exactly one of its ``(target, channel,
        transport)``; ``retry_refusals`` None follows ``max_attempts`` (on above 1). Raises
        ValueError unless exactly one is given, ArgumentError (a ValueError) naming the
        argument as :func:`~workplace_env_client.channel.check_max_attempts` and
        :func:`~workplace_env_client.channel.check_client_options` do."""
        if list(over).count(None) != 2:
            raise ValueError("pass exactly one of target, channel or transport")
        check_max_attempts(max_attempts)
        timeout_s = check_client_options(timeout_s, affinity, retry_refusals, admin_token)
        retry = max_attempts > 1 if retry_refusals is None else bool(retry_refusals)
        return cls(timeout_s, admin_token, retry)


class RpcBudget(NamedTuple):
    """One RPC's ``deadline`` (a ``time.monotonic()`` instant), retries included, and whether
    a concurrency refusal is sent again before it (``retry_refusals``)."""

    deadline: float
    retry_refusals: bool

    @classmethod
    def start(
        cls, timeout_s: float, retry_refusals: bool, override: bool | None = None
    ) -> RpcBudget:
        """The budget of an RPC sent now with ``timeout_s`` seconds; refusals retried as
        ``override`` says (None: as the client's ``retry_refusals``)."""
        return cls(time.monotonic() + timeout_s, retry_refusals if override is None else override)

    def remaining(self) -> float:
        """Seconds left before the deadline (0 once it passed): the next attempt's timeout."""
        return max(0.0, self.deadline - time.monotonic())

    def wait_after(self, error: WorkplaceEnvError) -> float | None:
        """Seconds to wait before sending the RPC again after ``error``
        (:func:`~workplace_env_client.channel.refusal_wait`); None when it must not be."""
        if not self.retry_refusals:
            return None
        return refusal_wait(error, self.deadline - time.monotonic())


class ClientBase(Generic[ChannelT, TransportT, BlockT]):
    """The constructor of both environment clients (their class docstrings say what each
    argument means and raises): the options checked, and the ``transport`` given, or made by
    ``_grpc_transport`` over the given ``channel`` or what ``_make_channel`` makes of
    ``target`` (a channel; for the async client, what dials one at its first call)."""

    #: Makes the client's own channel (:func:`~workplace_env_client.channel.make_channel`), or
    #: what dials it (:func:`~workplace_env_client.channel.aio_dialer`).
    _make_channel: ClassVar[Callable[..., Any]]
    #: Carries the RPCs over a channel (``GrpcTransport``).
    _grpc_transport: ClassVar[Callable[..., Any]]
    #: Makes the block of :meth:`session` (``SessionBlock`` of a ``Session``).
    _block: ClassVar[Callable[..., Any]]
    #: Waits out a refusal's delay, in seconds (``time.sleep``, awaited ``asyncio.sleep``).
    _pause: ClassVar[Callable[..., Any]]

    def __init__(
        self,
        target: Target | None = None,
        *,
        channel: ChannelT | None = None,
        transport: TransportT | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        affinity: bool | None = None,
        admin_token: str | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        retry_refusals: bool | None = None,
    ) -> None:
        over = (target, channel, transport)
        options = ClientOptions.checked(
            over, timeout_s, max_attempts, affinity, admin_token, retry_refusals
        )
        if transport is None:
            made, owned = given_or_made(
                target,
                channel,
                type(self)._make_channel,
                max_attempts=max_attempts,
                affinity=affinity,
                credentials=credentials,
            )
            transport = type(self)._grpc_transport(made, owned=owned)
        self.transport: TransportT = transport
        self.timeout_s = options.timeout_s
        self.admin_token = options.admin_token
        self._retry_refusals = options.retry_refusals
        self._target, self._affinity, self._credentials = target, affinity, credentials
        #: Set by ``close()``: every RPC in flight or started after it ends ClientClosedError,
        #: ``in_flight`` True for one under way at the close (it may have run), whatever the
        #: transport: one that ran to its end is not answered either.
        self.closed = False

    @property
    def channel(self) -> ChannelT | None:
        """The channel of a gRPC transport: None over another transport, and for an async
        client's own channel until its first call (dialed then, inside its event loop)."""
        return getattr(self.transport, "channel", None)

    @property
    def stub(self) -> pb_grpc.EnvironmentServiceStub | None:
        """The stub of a gRPC transport's channel (None as :attr:`channel`)."""
        return getattr(self.transport, "stub", None)

    def session(
        self,
        task: TaskLike,
        *,
        episode: tuple[str, int] | None = None,
        task_id: tuple[str, str] | None = None,
        session_id: str | None = None,
        recovery: RecoveryStrategy | None = None,
        admin: AdminClient | None = None,
    ) -> BlockT:
        """Seed a session for ``task``, yield its handle (a
        :class:`~workplace_env_client.client.Session`; with ``async with``, an
        :class:`~workplace_env_client.aio.AsyncSession`), and always close it on exit.

        Defaults: a fresh random session id, episode ``(<uuid>, 0)``, task id
        ``("default", <task id>)``. The block's exit closes the session whatever the exit
        (normal, exception, ``KeyboardInterrupt``); a close refused by a server at its limit of
        concurrent RPCs (TOO_MANY_RPCS, X3) is sent again after the refusal's delay until its
        deadline (``timeout_s``), whatever ``max_attempts``. A close that fails never replaces
        an exception leaving the block (a note on it says the close failed too); after a block
        that completed, a close that fails because the server is unreachable (or gives no
        answer within the deadline) is a
        :class:`~workplace_env_client.errors.SessionLeftOpenWarning` naming the session id
        (a server still running keeps it until its idle TTL), not an exception that would hide
        the block's result. When the seed fails with an unknown outcome (a deadline, an unreachable
        server, a lost connection) and the id was generated here, the id is closed too (a
        seed that did land is not leaked; the fence refuses a late one); a seed refused by a
        definite status, or never sent, made no session and closes nothing. The seed's error
        is raised. Raises ArgumentError, sending nothing, for a malformed
        ``task``, ``episode``, ``task_id``, ``session_id`` or ``recovery``.

        ``recovery`` (``"replay"`` or ``"checkpoint"``) makes the handle recover by itself
        when its server is lost (see :class:`~workplace_env_client.client.Session`);
        ``admin`` is the admin client its checkpoints and restores use (default:
        :meth:`admin` on this channel, no token).
        """
        block: BlockT = type(self)._block(self, task, episode, task_id, session_id, recovery, admin)
        return block

    def _rpc(
        self,
        method: str,
        request: Any,
        session_id: str = "",
        *,
        retry_refusals: bool | None = None,
        checked: bool = False,
    ) -> Steps:
        """The steps of one RPC: ``request`` sent within one deadline of ``timeout_s``, again
        after each TOO_MANY_RPCS refusal whose wait ends before it: when ``retry_refusals``
        says so (None: when the client's retries are on). ``checked``: its JSON fields are
        :class:`~workplace_env_client.messages.CheckedJson`. A refusal's delay is waited out
        by the client's ``_pause`` (``time.sleep``; the async client's ``asyncio.sleep``)."""
        budget = RpcBudget.start(self.timeout_s, self._retry_refusals, retry_refusals)
        metadata = session_metadata(session_id)
        while True:
            if self.closed:
                raise client_closed()
            options = {"timeout": budget.remaining(), "metadata": metadata, "checked": checked}
            try:
                response = yield Step(self.transport, "unary", (method, request), options)
            except asyncio.CancelledError:
                if self.closed and not caller_cancelled():
                    raise client_closed(in_flight=True) from None
                raise
            except WorkplaceEnvError as error:
                if self.closed:
                    raise client_closed(in_flight=True) from error
                wait = budget.wait_after(error)
                if wait is None:
                    raise
            else:
                if self.closed:  # closed while it ran: as over gRPC, whatever the transport
                    raise client_closed(in_flight=True)
                return response
            yield Step(self, "_pause", (wait,))
