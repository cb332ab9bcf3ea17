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
from typing import Any, Protocol, runtime_checkable

import grpc
import grpc.aio

from workplace.env.v1 import environment_pb2_grpc as pb_grpc
from workplace_env_client.errors import closed_channel_error, from_rpc_error


@runtime_checkable
class Transport(Protocol):
    """One unary call of the ``EnvironmentService`` at a time, from any thread."""

    #: True when a call waits on I/O (an event loop then runs it on a worker thread); False
    #: when it is sub-millisecond CPU work in this process.
    blocking: bool
    #: True when a request may reach the server more than once (gRPC's retries): a tool call
    #: then carries an idempotency key (a generated ``call_id``, CONTRACT T6).
    resends: bool

    def unary(
        self,
        method: str,
        request: Any,
        *,
        timeout: float,
        metadata: Sequence[tuple[str, str]],
        checked: bool = False,
    ) -> Any:
        """The response message of ``method`` (``"SeedSession"``, ``"CallTool"``, ``"Verify"``,
        ``"CloseSession"``, ``"ListTools"``) for ``request``, within ``timeout`` seconds;
        ``metadata``: the call's headers (the session header); ``checked``: a Verify whose JSON
        texts were :class:`~workplace_env_client.messages.CheckedJson` (a server in this
        process need not check them again). Raises the failure as a
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

    async def unary(
        self,
        method: str,
        request: Any,
        *,
        timeout: float,
        metadata: Sequence[tuple[str, str]],
        checked: bool = False,
    ) -> Any:
        """As :meth:`Transport.unary`, awaited."""
        ...

    async def close(self) -> None:
        """Release what the transport holds (idempotent)."""
        ...


class GrpcTransport:
    """The environment over a gRPC ``channel``; :meth:`close` closes it when ``owned``."""

    blocking = True
    resends = True

    def __init__(self, channel: grpc.Channel, *, owned: bool = False) -> None:
        self.channel = channel
        self.stub = pb_grpc.EnvironmentServiceStub(channel)
        self._owned = owned

    def unary(
        self,
        method: str,
        request: Any,
        *,
        timeout: float,
        metadata: Sequence[tuple[str, str]],
        checked: bool = False,
    ) -> Any:
        """As :meth:`Transport.unary` (``checked`` is moot: the server checks what it receives);
        a failed RPC raises its typed error, chained to the ``grpc.RpcError``; a closed channel
        :class:`~workplace_env_client.errors.ClientClosedError`."""
        try:
            return getattr(self.stub, method)(request, timeout=timeout, metadata=metadata)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from exc
        except ValueError as exc:
            if (closed := closed_channel_error(exc)) is None:
                raise
            raise closed from exc

    def close(self) -> None:
        """Close the channel if this transport made it (``owned``)."""
        if self._owned:
            self.channel.close()


class GrpcAioTransport:
    """:class:`GrpcTransport` over a ``grpc.aio`` ``channel``, awaited (an
    :class:`AsyncTransport`); :meth:`close` closes the channel when ``owned``."""

    resends = True

    def __init__(self, channel: grpc.aio.Channel, *, owned: bool = False) -> None:
        self.channel = channel
        self.stub = pb_grpc.EnvironmentServiceStub(channel)
        self._owned = owned

    async def unary(
        self,
        method: str,
        request: Any,
        *,
        timeout: float,
        metadata: Sequence[tuple[str, str]],
        checked: bool = False,
    ) -> Any:
        """As :meth:`GrpcTransport.unary`, awaited."""
        try:
            return await getattr(self.stub, method)(request, timeout=timeout, metadata=metadata)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from exc
        except grpc.aio.UsageError as exc:
            if (closed := closed_channel_error(exc)) is None:
                raise
            raise closed from exc

    async def close(self) -> None:
        """Close the channel at once if this transport made it (``owned``)."""
        if self._owned:
            await self.channel.close(grace=None)
