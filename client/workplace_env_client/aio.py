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
fence as the sync ones (:mod:`workplace_env_client.handle`: one logic, two drivers).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import grpc
import grpc.aio

from workplace.env.v1 import environment_pb2 as pb
from workplace.env.v1 import environment_pb2_grpc as pb_grpc
from workplace_env_client.admin import AdminClient
from workplace_env_client.channel import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_TIMEOUT_S,
    given_or_made,
    make_aio_channel,
)
from workplace_env_client.errors import WorkplaceEnvError
from workplace_env_client.handle import (
    Recovery,
    RecoveryStrategy,
    SessionCheckpoint,
    SessionHandle,
    close_block,
    open_block,
    run_steps_async,
)
from workplace_env_client.messages import (
    CallLike,
    EpisodeLike,
    ServerSandbox,
    TaskLike,
    VerifyResult,
    all_checked,
    call_tool_request,
    close_answer,
    close_request,
    legacy_seed_request,
    sandbox_answer,
    seed_request,
    tools_answer,
    verify_answer,
    verify_request,
)
from workplace_env_client.options import ClientOptions, RpcBudget
from workplace_env_client.routing import Target, session_metadata
from workplace_env_client.transport import AsyncTransport, GrpcAioTransport


class AsyncEnvironmentClient:
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
    :meth:`close`, every call raises ClientClosedError."""

    def __init__(
        self,
        target: Target | None = None,
        *,
        channel: grpc.aio.Channel | None = None,
        transport: AsyncTransport | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        affinity: bool | None = None,
        admin_token: str | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        retry_refusals: bool | None = None,
    ) -> None:
        options = ClientOptions.checked(
            (target, channel, transport),
            timeout_s,
            max_attempts,
            affinity,
            admin_token,
            retry_refusals,
        )
        if transport is None:
            made, owned = given_or_made(
                target,
                channel,
                make_aio_channel,
                max_attempts=max_attempts,
                affinity=affinity,
                credentials=credentials,
            )
            transport = GrpcAioTransport(made, owned=owned)
        self.transport: AsyncTransport = transport
        #: The channel and stub of a :class:`GrpcAioTransport` (None over another transport).
        self.channel: grpc.aio.Channel | None = getattr(transport, "channel", None)
        self.stub: pb_grpc.EnvironmentServiceStub | None = getattr(transport, "stub", None)
        self.timeout_s = options.timeout_s
        self.admin_token = options.admin_token
        self._retry_refusals = options.retry_refusals
        self._target, self._affinity, self._credentials = target, affinity, credentials
        self._admins: dict[str | None, AdminClient] = {}

    async def __aenter__(self) -> AsyncEnvironmentClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the channel if this client created it (the transport's :meth:`close`), and
        the admin clients it made."""
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

    async def _invoke(
        self,
        method: str,
        request: Any,
        session_id: str = "",
        *,
        retry_refusals: bool | None = None,
        checked: bool = False,
    ) -> Any:
        """As :meth:`EnvironmentClient._invoke`: one deadline, refusals retried within it."""
        budget = RpcBudget.start(self.timeout_s, self._retry_refusals, retry_refusals)
        metadata = session_metadata(session_id)
        while True:
            try:
                return await self.transport.unary(
                    method, request, timeout=budget.remaining(), metadata=metadata, checked=checked
                )
            except WorkplaceEnvError as error:
                wait = budget.wait_after(error)
                if wait is None:
                    raise
            await asyncio.sleep(wait)

    async def seed(
        self, session_id: str, episode: EpisodeLike, task_id: tuple[str, str], task: TaskLike
    ) -> pb.SeedSessionResponse:
        """Seed ``session_id`` (CONTRACT S1-S8); errors as :meth:`EnvironmentClient.seed`."""
        request = seed_request(session_id, episode, task_id, task)
        response: pb.SeedSessionResponse = await self._invoke("SeedSession", request, session_id)
        return response

    async def seed_legacy(self, session_id: str, task: TaskLike) -> pb.SeedSessionResponse:
        """Seed a legacy (cookie) session (see :meth:`EnvironmentClient.seed_legacy`)."""
        request = legacy_seed_request(session_id, task)
        response: pb.SeedSessionResponse = await self._invoke("SeedSession", request, session_id)
        return response

    async def call_tool_raw(
        self,
        session_id: str,
        name: str,
        arguments: str | Mapping[str, Any] | None = None,
        call_id: str = "",
    ) -> str:
        """Call a tool; return its output JSON text (as :meth:`EnvironmentClient.call_tool_raw`)."""
        request = call_tool_request(
            session_id, name, arguments, call_id, keyed=self.transport.resends
        )
        return str((await self._invoke("CallTool", request, session_id)).output)

    async def call_tool(
        self,
        session_id: str,
        name: str,
        arguments: str | Mapping[str, Any] | None = None,
        call_id: str = "",
    ) -> Any:
        """Call a tool; return its decoded output (see :meth:`EnvironmentClient.call_tool`)."""
        return json.loads(await self.call_tool_raw(session_id, name, arguments, call_id))

    async def verify(
        self,
        session_id: str,
        function_calls: Iterable[CallLike] | None = None,
        *,
        response_output: Sequence[Any] | str | None = None,
        ground_truth: Iterable[CallLike] | None = None,
        ground_truth_json: str | None = None,
    ) -> VerifyResult:
        """Score the model's calls (see :meth:`EnvironmentClient.verify`)."""
        request = verify_request(
            session_id, function_calls, response_output, ground_truth, ground_truth_json
        )
        checked = all_checked(response_output, ground_truth_json)
        return verify_answer(await self._invoke("Verify", request, session_id, checked=checked))

    async def close_session(self, session_id: str, episode: EpisodeLike) -> str:
        """Close a session; return ``"CLOSED"``, ``"ALREADY_CLOSED"`` or ``"NOT_SEEDED"``."""
        return await self._close(session_id, episode, retry_refusals=None)

    async def _close(
        self, session_id: str, episode: EpisodeLike, *, retry_refusals: bool | None
    ) -> str:
        request = close_request(session_id, episode)
        return close_answer(
            await self._invoke("CloseSession", request, session_id, retry_refusals=retry_refusals)
        )

    async def list_tools(self) -> list[dict[str, Any]]:
        """The 27 tool schemas as the model sees them."""
        return tools_answer(await self._invoke("ListTools", pb.ListToolsRequest()))

    async def server_sandbox(self) -> ServerSandbox:
        """The sandbox the server plays every episode on (its ListTools answer); ``""`` digest
        and origin from a server that does not say."""
        return sandbox_answer(await self._invoke("ListTools", pb.ListToolsRequest()))

    @asynccontextmanager
    async def session(
        self,
        task: TaskLike,
        *,
        episode: tuple[str, int] | None = None,
        task_id: tuple[str, str] | None = None,
        session_id: str | None = None,
        recovery: RecoveryStrategy | None = None,
        admin: AdminClient | None = None,
    ) -> AsyncIterator[AsyncSession]:
        """Seed a session for ``task``, yield it, and always close it on exit (defaults,
        refusals of the close, ``recovery``, ``admin`` and errors as
        :meth:`EnvironmentClient.session`)."""
        opened = open_block(self, task, episode, task_id, session_id, recovery, admin)
        sid, ep, tid, task_msg = await run_steps_async(opened)
        try:
            yield AsyncSession(
                self, sid, ep, task_id=tid, task=task_msg, recovery=recovery, admin=admin
            )
        except BaseException as failed:
            await run_steps_async(close_block(self, sid, ep, failed))
            raise
        await run_steps_async(close_block(self, sid, ep, None))


class AsyncSession(SessionHandle):
    """A seeded session, as handed out by :meth:`AsyncEnvironmentClient.session`: the sync
    :class:`~workplace_env_client.client.Session`'s methods (recording, recovery, fencing:
    :class:`~workplace_env_client.handle.SessionHandle`), awaited; its admin calls
    (checkpoints, restores) run on a worker thread."""

    client: AsyncEnvironmentClient

    async def call_tool(
        self, name: str, arguments: str | Mapping[str, Any] | None = None, call_id: str = ""
    ) -> Any:
        """As :meth:`Session.call_tool <workplace_env_client.client.Session.call_tool>`."""
        return await run_steps_async(self._call_tool(name, arguments, call_id))

    async def verify(
        self, function_calls: Iterable[CallLike] | None = None, **kwargs: Any
    ) -> VerifyResult:
        """As :meth:`Session.verify <workplace_env_client.client.Session.verify>`."""
        return await run_steps_async(self._verify(function_calls, kwargs))  # type: ignore[no-any-return]

    async def checkpoint(self, admin: AdminClient | None = None) -> SessionCheckpoint:
        """As :meth:`Session.checkpoint <workplace_env_client.client.Session.checkpoint>`."""
        return await run_steps_async(self._checkpoint(admin))  # type: ignore[no-any-return]

    async def recover(
        self,
        strategy: RecoveryStrategy = "replay",
        *,
        checkpoint: SessionCheckpoint | None = None,
        admin: AdminClient | None = None,
    ) -> Recovery:
        """As :meth:`Session.recover <workplace_env_client.client.Session.recover>`."""
        return await run_steps_async(self._recover(strategy, checkpoint, admin))  # type: ignore[no-any-return]
