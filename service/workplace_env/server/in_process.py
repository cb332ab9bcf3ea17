"""The environment service in this process: an SDK transport over a server's servicer.

:class:`InProcessTransport` carries an :class:`~workplace_env_client.EnvironmentClient`'s
request messages straight to an :class:`~workplace_env.server.servicer.EnvironmentServicer`
(no network, no serialization); :func:`in_process_client` is the client the co-hosted HTTP
gateway and MCP hold (``workplace-env serve --http-address``). :class:`AsyncInProcessTransport`
and :func:`in_process_async_client` are the same for an
:class:`~workplace_env_client.AsyncEnvironmentClient`. Answers and errors are those of
the same call over gRPC: a domain error becomes the SDK exception of its rich status
(:func:`~workplace_env.server.status.rich_status`), a request over the server's message limit is
refused RESOURCE_EXHAUSTED without a reason (as gRPC refuses it), a bug UNKNOWN. Every call is
counted and logged by the server's own code
(:class:`~workplace_env.server.observability.MethodCount`), as a gRPC RPC of its method.
"""

from __future__ import annotations

import dataclasses
import inspect
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Unpack

import grpc

from workplace_env import errors
from workplace_env.server.observability import MethodCount, Metrics
from workplace_env.server.servicer import EnvironmentServicer
from workplace_env.server.status import rich_status
from workplace_env_client import AsyncEnvironmentClient, EnvironmentClient, WorkplaceEnvError
from workplace_env_client.errors import from_status
from workplace_env_client.transport import CallOptions, EventLoopBinding

if TYPE_CHECKING:
    from workplace_env.server.app import RunningServer

#: The ``EnvironmentService`` methods a transport carries.
METHODS = ("SeedSession", "CallTool", "Verify", "CloseSession", "ListTools")
#: ``google.rpc.Code`` numbers -> grpc's status codes.
_STATUS_CODES = {code.value[0]: code for code in grpc.StatusCode}


def _domain_call(servicer: EnvironmentServicer, method: str) -> Callable[[Any, Any], Any]:
    """``servicer``'s handler of ``method`` without its gRPC abort: a domain error is raised
    (``errors.SessionError``), not turned into an aborted ServicerContext."""
    handler = inspect.unwrap(getattr(type(servicer), method))
    return handler.__get__(servicer)  # type: ignore[no-any-return]


class InProcessTransport:
    """A :class:`~workplace_env_client.transport.Transport` over ``servicer``.

    ``metrics``: the server's :class:`~workplace_env.server.observability.Metrics` (None: not
    counted; the log lines are written either way); ``max_message_bytes``: the server's
    receive limit (None: none). The call's ``timeout`` and ``metadata`` are not used: the work
    is sub-millisecond and the session header is gRPC routing.
    """

    blocking = False
    resends = False  # one call, one run: a tool call needs no generated idempotency key

    def __init__(
        self,
        servicer: EnvironmentServicer,
        *,
        metrics: Metrics | None = None,
        max_message_bytes: int | None = None,
    ) -> None:
        self.servicer = servicer
        self.max_message_bytes = max_message_bytes
        self._calls = {
            method: (
                _domain_call(servicer, method),
                MethodCount(metrics, method) if metrics is not None else None,
            )
            for method in METHODS
        }

    def unary(self, method: str, request: Any, **options: Unpack[CallOptions]) -> Any:
        """``method``'s response for ``request``; its failure as the SDK's typed error (see the
        module docstring). ``checked``: a Verify's JSON texts were checked in this process
        (:class:`~workplace_env_client.messages.CheckedJson`): the servicer parses them only."""
        limit = self.max_message_bytes
        if limit is not None and (size := request.ByteSize()) > limit:
            raise from_status(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"Received message larger than max ({size} vs. {limit})",
            )
        call, count = self._calls[method]
        checked = options.get("checked", False)
        start = time.perf_counter()
        try:
            response = call(request, None, checked=True) if checked else call(request, None)
        except errors.SessionError as exc:
            status = rich_status(exc, method)
            error = from_status(_STATUS_CODES[status.code], status.message, status.details)
            if count is not None:
                count.failed(time.perf_counter() - start, request, error.code.name, exc.reason)
            raise error from None
        except Exception as exc:  # a bug: as gRPC answers a handler's unhandled exception
            if count is not None:
                count.failed(time.perf_counter() - start, request, "UNKNOWN", "")
            raise WorkplaceEnvError(
                f"Exception calling application: {exc}", grpc.StatusCode.UNKNOWN
            ) from exc
        if count is not None:
            count.succeeded(time.perf_counter() - start, request, response)
        return response

    def close(self) -> None:
        """Nothing to release (the servicer is the server's)."""


class AsyncInProcessTransport:
    """An :class:`~workplace_env_client.transport.AsyncTransport` over an
    :class:`InProcessTransport`: each call runs on the caller's event loop (sub-millisecond CPU
    work, as the sync transport's ``blocking`` False says), all in the loop of the first one."""

    resends = False

    def __init__(self, transport: InProcessTransport) -> None:
        self.transport = transport
        self._binding = EventLoopBinding()

    async def unary(self, method: str, request: Any, **options: Unpack[CallOptions]) -> Any:
        """:meth:`InProcessTransport.unary`'s answer or error; EventLoopError (nothing run) in
        another event loop than the first call's, as over gRPC."""
        self._binding.enter()
        return self.transport.unary(method, request, **options)

    async def close(self) -> None:
        """Nothing to release (the servicer is the server's)."""
        self.transport.close()


def in_process_transport(
    server: RunningServer, max_message_bytes: int | None = None
) -> InProcessTransport:
    """An :class:`InProcessTransport` on ``server``'s store: a servicer with the server's
    verify bounds, counted in its metrics. ``max_message_bytes`` (default: the server's
    settings' limit) bounds requests and tool outputs as the server's gRPC limit does
    (RESPONSE_TOO_LARGE for an output over it)."""
    settings = server.settings
    if max_message_bytes is not None:
        settings = dataclasses.replace(settings, max_message_bytes=max_message_bytes)
    limit = settings.max_message_bytes
    servicer = EnvironmentServicer(server.store, settings)
    return InProcessTransport(servicer, metrics=server.metrics, max_message_bytes=limit)


def in_process_client(
    server: RunningServer, max_message_bytes: int | None = None, **options: Any
) -> EnvironmentClient:
    """An :class:`~workplace_env_client.EnvironmentClient` on ``server``'s store, in this
    process (:func:`in_process_transport`; ``max_message_bytes`` as there); ``options`` are the
    client's (``timeout_s``, ...)."""
    return EnvironmentClient(transport=in_process_transport(server, max_message_bytes), **options)


def in_process_async_client(
    server: RunningServer, max_message_bytes: int | None = None, **options: Any
) -> AsyncEnvironmentClient:
    """:func:`in_process_client` for asyncio: an
    :class:`~workplace_env_client.AsyncEnvironmentClient` over an
    :class:`AsyncInProcessTransport`."""
    transport = AsyncInProcessTransport(in_process_transport(server, max_message_bytes))
    return AsyncEnvironmentClient(transport=transport, **options)
