"""The asyncio client (``grpc.aio``): the same surface as :class:`EnvironmentClient`, awaited.

>>> async with AsyncEnvironmentClient("localhost:50051") as env:
...     async with env.session(task_row, episode=("rollout-7", 0)) as s:
...         await s.call_tool("email_search_emails", {"query": "budget"})
...         result = await s.verify([("email_delete_email", '{"email_id": "00000042"}')])

Requests and answers are built by :mod:`workplace_env_client.messages`, exactly as in the sync
client, and carried by an :class:`~workplace_env_client.transport.AsyncTransport` (a
``grpc.aio`` channel's by default): errors are the same typed exceptions, arguments are checked
the same way before anything is sent, and a refusal for concurrency (TOO_MANY_RPCS, X3) is
retried by the same decision (:mod:`workplace_env_client.options`), awaiting its delay (see
:mod:`workplace_env_client.client`). Sessions record, recover and
fence as the sync ones (:mod:`workplace_env_client.handle`). Every RPC and session method is
the sync one's operation run by the async driver (:func:`~workplace_env_client.steps.awaited`:
one logic, two drivers).
"""

from __future__ import annotations

import asyncio
from functools import cached_property, partial

import grpc
import grpc.aio

from workplace_env_client.admin import AdminClient
from workplace_env_client.channel import aio_dialer
from workplace_env_client.client import EnvironmentClient, Session
from workplace_env_client.contexts import AsyncOnly
from workplace_env_client.handle import AsyncSessionBlock, SessionHandle
from workplace_env_client.options import ClientBase
from workplace_env_client.steps import awaited
from workplace_env_client.transport import AsyncTransport, GrpcAioTransport


class AsyncSession(SessionHandle):
    """A seeded session, as handed out by :meth:`AsyncEnvironmentClient.session`: the sync
    :class:`~workplace_env_client.client.Session`'s methods (recording, recovery, fencing:
    :class:`~workplace_env_client.handle.SessionHandle`), awaited; its admin calls
    (checkpoints, restores) run on a worker thread."""

    client: AsyncEnvironmentClient

    call_tool = awaited(Session.call_tool)
    verify = awaited(Session.verify)
    checkpoint = awaited(Session.checkpoint)
    recover = awaited(Session.recover)


class AsyncEnvironmentClient(
    AsyncOnly, ClientBase[grpc.aio.Channel, AsyncTransport, AsyncSessionBlock[AsyncSession]]
):
    """An asyncio client over a ``target`` (as :class:`EnvironmentClient`), a ``grpc.aio``
    ``channel`` or a ``transport``, any
    :class:`~workplace_env_client.transport.AsyncTransport` (e.g. a server's servicer in this
    process, ``workplace_env.server.in_process.in_process_async_client``; ``channel`` and
    ``stub`` are then None). ``timeout_s`` is every RPC's deadline, ``max_attempts`` (1..5) its
    retry bound, refusals (TOO_MANY_RPCS) retried as by :class:`EnvironmentClient`.
    ``credentials`` makes the channel the client creates a TLS one, as for
    :class:`EnvironmentClient` (:func:`~workplace_env_client.channel.tls_credentials`); without
    it the channel is plaintext. ``retry_refusals`` and ``admin_token`` as for
    :class:`EnvironmentClient`. Raises ArgumentError (a ValueError) naming the argument for a
    ``timeout_s``, ``max_attempts``, ``affinity``, ``retry_refusals``, ``admin_token`` or
    ``target`` :class:`EnvironmentClient` refuses; ValueError for a malformed target list or
    unless exactly one of ``target``, ``channel`` and ``transport`` is given. After
    :meth:`close`, every call raises ClientClosedError.

    The client may be made anywhere (at module level, before ``asyncio.run``): the channel it
    dials to ``target`` is made at its first call, in that call's event loop. Every later call
    must run in that loop: another (a second ``asyncio.run``) raises EventLoopError, nothing
    sent; make one client per event loop."""

    _make_channel = staticmethod(aio_dialer)
    _grpc_transport = GrpcAioTransport
    _block = partial(AsyncSessionBlock, AsyncSession)
    _pause = staticmethod(asyncio.sleep)
    _usage = "async with AsyncEnvironmentClient(target) as env:"
    _counterpart = "EnvironmentClient is the synchronous client"

    @cached_property
    def _admins(self) -> dict[str | None, AdminClient]:
        """The admin clients :meth:`admin` made, by token."""
        return {}

    async def __aenter__(self) -> AsyncEnvironmentClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the channel if this client created it (the transport's :meth:`close`), and
        the admin clients it made; every call in flight or started later raises
        ClientClosedError."""
        self.closed = True
        for admin in self._admins.values():
            admin.close()
        await self.transport.close()

    def admin(self, token: str | None = None) -> AdminClient:
        """An :class:`~workplace_env_client.admin.AdminClient` (sync: an :class:`AsyncSession`
        runs its calls on a worker thread) on this client's target, with its affinity and
        credentials, so per-session RPCs reach the server this client's RPCs of that session
        reach; made once per token and closed by :meth:`close`. ``token`` defaults to the
        client's ``admin_token`` (CONTRACT A1). Raises ValueError for a client made over a
        ``channel`` or a ``transport`` (no target to dial)."""
        if self._target is None:
            raise ValueError(
                "admin RPCs need the client's target; this client has a channel or transport"
            )
        token = token or self.admin_token
        admin = self._admins.get(token)
        if admin is None:
            admin = self._admins[token] = AdminClient(
                self._target,
                token=token,
                timeout_s=self.timeout_s,
                affinity=self._affinity,
                credentials=self._credentials,
            )
        return admin

    # -- RPCs: the sync client's operations (EnvironmentClient), awaited ----------------------
    seed = awaited(EnvironmentClient.seed)
    seed_legacy = awaited(EnvironmentClient.seed_legacy)
    call_tool_raw = awaited(EnvironmentClient.call_tool_raw)
    call_tool = awaited(EnvironmentClient.call_tool)
    verify = awaited(EnvironmentClient.verify)
    close_session = awaited(EnvironmentClient.close_session)
    _close = awaited(EnvironmentClient._close)
    list_tools = awaited(EnvironmentClient.list_tools)
    server_sandbox = awaited(EnvironmentClient.server_sandbox)
