"""How an SDK client reaches the environment: the sync and the async seam.

The client builds every request and reads every answer (:mod:`workplace_env_client.messages`);
a transport only carries one request message to the ``EnvironmentService`` method it names
and brings back the response message, or the failure as the SDK's typed exception
(:class:`~workplace_env_client.errors.WorkplaceEnvError`).
:class:`~workplace_env_client.client.EnvironmentClient` takes a :class:`Transport`:

* :class:`GrpcTransport`: a gRPC channel (what ``EnvironmentClient(target)`` makes);
* ``workplace_env.server.in_process.InProcessTransport``: a server's servicer in this process
  (the co-hosted HTTP gateway), no network and no serialization.

:class:`~workplace_env_client.aio.AsyncEnvironmentClient` takes an :class:`AsyncTransport`, the
same call awaited: :class:`GrpcAioTransport` (a ``grpc.aio`` channel) or
``workplace_env.server.in_process.AsyncInProcessTransport``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import (
    Any,
    NotRequired,
    Protocol,
    TypedDict,
    Unpack,
    runtime_checkable,
)

import grpc
import grpc.aio

from workplace.env.v1 import environment_pb2_grpc as pb_grpc
from workplace_env_client.errors import (
    WorkplaceEnvError,
    client_closed,
    closed_channel_error,
    from_rpc_error,
    wrong_event_loop,
)


class CallOptions(TypedDict):
    """The keyword arguments of every transport's ``unary``: ``timeout`` (seconds),
    ``metadata`` (the call's headers: the session header) and ``checked`` (default False: a
    Verify whose JSON texts were :class:`~workplace_env_client.messages.CheckedJson`, so a
    server in this process need not check them again)."""

    timeout: float
    metadata: Sequence[tuple[str, str]]
    checked: NotRequired[bool]


@runtime_checkable
class Transport(Protocol):
    """One unary call of the ``EnvironmentService`` at a time, from any thread."""

    #: True when a call waits on I/O (an event loop then runs it on a worker thread); False
    #: when it is sub-millisecond CPU work in this process.
    blocking: bool
    #: True when a request may reach the server more than once (gRPC's retries): a tool call
    #: then carries an idempotency key (a generated ``call_id``, CONTRACT T6).
    resends: bool

    def unary(self, method: str, request: Any, **options: Unpack[CallOptions]) -> Any:
        """The response message of ``method`` (``"SeedSession"``, ``"CallTool"``, ``"Verify"``,
        ``"CloseSession"``, ``"ListTools"``) for ``request``, within ``timeout`` seconds, with
        ``metadata`` and ``checked`` (:class:`CallOptions`). Raises the failure as a
        :class:`~workplace_env_client.errors.WorkplaceEnvError` subclass."""
        ...

    def close(self) -> None:
        """Release what the transport holds (idempotent)."""
        ...


@runtime_checkable
class AsyncTransport(Protocol):
    """:class:`Transport`'s call and close, awaited on the caller's event loop."""

    #: As :attr:`Transport.resends`.
    resends: bool

    async def unary(self, method: str, request: Any, **options: Unpack[CallOptions]) -> Any:
        """As :meth:`Transport.unary`, awaited."""
        ...

    async def close(self) -> None:
        """Release what the transport holds (idempotent)."""
        ...


#: What a gRPC call raises that :func:`channel_failure` makes an SDK error: a failed RPC, or
#: a refusal to send on a closed channel (sync: ValueError, aio: UsageError).
CHANNEL_FAILURES = (grpc.RpcError, ValueError, grpc.aio.UsageError)


def channel_failure(exc: Exception) -> WorkplaceEnvError:
    """The SDK error of ``exc``, one of :data:`CHANNEL_FAILURES`: a failed RPC's typed error, a
    closed channel's :class:`~workplace_env_client.errors.ClientClosedError`; raises ``exc``
    itself for any other."""
    if isinstance(exc, grpc.RpcError):
        return from_rpc_error(exc)
    if (closed := closed_channel_error(exc)) is None:
        raise exc
    return closed


class GrpcTransport:
    """The environment over a gRPC ``channel``; :meth:`close` closes it when ``owned``."""

    resends = True
    blocking = True

    def __init__(self, channel: grpc.Channel, *, owned: bool = False) -> None:
        self.channel = channel
        self.stub = pb_grpc.EnvironmentServiceStub(channel)
        self._owned = owned

    def unary(self, method: str, request: Any, **options: Unpack[CallOptions]) -> Any:
        """As :meth:`Transport.unary` (``checked`` is moot: the server checks what it receives);
        a failed RPC raises its typed error, chained to the ``grpc.RpcError``; a closed channel
        :class:`~workplace_env_client.errors.ClientClosedError`."""
        try:
            return getattr(self.stub, method)(
                request, timeout=options["timeout"], metadata=options["metadata"]
            )
        except CHANNEL_FAILURES as exc:
            raise channel_failure(exc) from exc

    def close(self) -> None:
        """Close the channel if this transport made it (``owned``)."""
        if self._owned:
            self.channel.close()


class EventLoopBinding:
    """The event loop an async transport belongs to: the one its first call ran in (``loop``,
    None before)."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None

    def enter(self) -> None:
        """Bind to the running loop at the first call; raise
        :class:`~workplace_env_client.errors.EventLoopError` (nothing sent) in another."""
        running = asyncio.get_running_loop()
        if self.loop is None:
            self.loop = running
        elif running is not self.loop:
            raise wrong_event_loop()

    def elsewhere(self) -> bool:
        """Whether the transport belongs to another loop than the running one."""
        return self.loop is not None and self.loop is not asyncio.get_running_loop()


class GrpcAioTransport:
    """:class:`GrpcTransport` over a ``grpc.aio`` channel, awaited (an :class:`AsyncTransport`):
    ``channel``, the caller's, or when ``owned`` what dials the transport's own
    (:func:`~workplace_env_client.channel.aio_dialer`), called at the first call, inside its
    event loop (``channel`` and ``stub`` are None until then). Every call must run in the loop
    of the first one (:class:`EventLoopBinding`); :meth:`close` closes an owned channel."""

    resends = True

    def __init__(
        self, channel: grpc.aio.Channel | Callable[[], grpc.aio.Channel], *, owned: bool = False
    ) -> None:
        self.channel: grpc.aio.Channel | None = None
        self.stub: pb_grpc.EnvironmentServiceAsyncStub | None = None
        self._dial: Callable[[], grpc.aio.Channel] | None = None
        if isinstance(channel, grpc.aio.Channel):
            self.channel = channel
            self.stub = pb_grpc.EnvironmentServiceStub(channel)
        else:
            self._dial = channel
        self._owned = owned
        self._binding = EventLoopBinding()
        self._closed = False

    def _stub_here(self) -> Any:
        """The stub, its channel dialed in the running loop at the first call. Raises
        ClientClosedError after :meth:`close`, EventLoopError in another loop than the first
        call's."""
        if self._closed:
            raise client_closed()
        self._binding.enter()
        if self.stub is None:
            assert self._dial is not None
            self.channel = self._dial()
            self.stub = pb_grpc.EnvironmentServiceStub(self.channel)
        return self.stub

    async def unary(self, method: str, request: Any, **options: Unpack[CallOptions]) -> Any:
        """As :meth:`GrpcTransport.unary`, awaited; EventLoopError in another event loop than
        the first call's."""
        call = getattr(self._stub_here(), method)
        try:
            return await call(request, timeout=options["timeout"], metadata=options["metadata"])
        except CHANNEL_FAILURES as exc:
            raise channel_failure(exc) from exc

    async def close(self) -> None:
        """Close the channel at once if this transport made it (``owned``); later calls raise
        ClientClosedError. From another event loop than its own, the channel is dropped, not
        awaited (its loop may be gone)."""
        if not self._owned:
            return
        self._closed = True
        channel, self.channel = self.channel, None
        if channel is not None and not self._binding.elsewhere():
            await channel.close(grace=None)
