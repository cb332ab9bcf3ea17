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

from collections.abc import Sequence
from typing import (
    Any,
    Generic,
    NotRequired,
    Protocol,
    TypedDict,
    TypeVar,
    Unpack,
    runtime_checkable,
)

import grpc
import grpc.aio

from workplace.env.v1 import environment_pb2_grpc as pb_grpc
from workplace_env_client.errors import WorkplaceEnvError, closed_channel_error, from_rpc_error


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

C = TypeVar("C", grpc.Channel, grpc.aio.Channel)


def channel_failure(exc: Exception) -> WorkplaceEnvError:
    """The SDK error of ``exc``, one of :data:`CHANNEL_FAILURES`: a failed RPC's typed error, a
    closed channel's :class:`~workplace_env_client.errors.ClientClosedError`; raises ``exc``
    itself for any other."""
    if isinstance(exc, grpc.RpcError):
        return from_rpc_error(exc)
    if (closed := closed_channel_error(exc)) is None:
        raise exc
    return closed


class GrpcChannelTransport(Generic[C]):
    """What both gRPC transports hold: the ``channel``, its stub, and whether :meth:`close`
    closes the channel (``owned``)."""

    resends = True

    def __init__(self, channel: C, *, owned: bool = False) -> None:
        self.channel: C = channel
        self.stub: pb_grpc.EnvironmentServiceStub | pb_grpc.EnvironmentServiceAsyncStub
        self.stub = pb_grpc.EnvironmentServiceStub(channel)
        self._owned = owned


class GrpcTransport(GrpcChannelTransport[grpc.Channel]):
    """The environment over a gRPC ``channel``; :meth:`close` closes it when ``owned``."""

    blocking = True

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


class GrpcAioTransport(GrpcChannelTransport[grpc.aio.Channel]):
    """:class:`GrpcTransport` over a ``grpc.aio`` ``channel``, awaited (an
    :class:`AsyncTransport`); :meth:`close` closes the channel when ``owned``."""

    async def unary(self, method: str, request: Any, **options: Unpack[CallOptions]) -> Any:
        """As :meth:`GrpcTransport.unary`, awaited."""
        call = getattr(self.stub, method)
        try:
            return await call(request, timeout=options["timeout"], metadata=options["metadata"])
        except CHANNEL_FAILURES as exc:
            raise channel_failure(exc) from exc

    async def close(self) -> None:
        """Close the channel at once if this transport made it (``owned``)."""
        if self._owned:
            await self.channel.close(grace=None)
