"""The asyncio client (``grpc.aio``): the same surface as :class:`EnvironmentClient`, awaited.

>>> async with AsyncEnvironmentClient("localhost:50051") as env:
...     async with env.session(task_row, episode=("rollout-7", 0)) as s:
...         await s.call_tool("email_search_emails", {"query": "budget"})
...         result = await s.verify([("email_delete_email", '{"email_id": "00000042"}')])

Requests and answers are built by :mod:`workplace_env_client.messages`, exactly as in the sync
client: errors are the same typed exceptions, arguments are checked the same way before
anything is sent, and a refusal for concurrency (TOO_MANY_RPCS, X3) is retried the same way,
awaiting its delay (see :mod:`workplace_env_client.client`). Sessions record, recover and
fence as the sync ones (:mod:`workplace_env_client.handle`: one logic, two drivers).
"""

from __future__ import annotations

import asyncio
import json
import time
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
    check_client_options,
    check_max_attempts,
    is_refusal,
    make_aio_channel,
    wait_or_raise,
)
from workplace_env_client.errors import WorkplaceEnvError, close_failed, closed_channel_error
from workplace_env_client.handle import (
    Recovery,
    RecoveryStrategy,
    SessionCheckpoint,
    SessionHandle,
    check_admin,
    check_recovery,
    run_steps_async,
)
from workplace_env_client.messages import (
    CallLike,
    EpisodeLike,
    ServerSandbox,
    TaskLike,
    VerifyResult,
    call_tool_request,
    close_answer,
    close_request,
    legacy_seed_request,
    sandbox_answer,
    seed_request,
    session_identity,
    tools_answer,
    verify_answer,
    verify_request,
)
from workplace_env_client.routing import Target, session_metadata


class AsyncEnvironmentClient:
    """An asyncio client over a ``target`` (as :class:`EnvironmentClient`) or a ``grpc.aio``
    ``channel``; ``timeout_s`` is every RPC's deadline, ``max_attempts`` (1..5) its retry
    bound, refusals (TOO_MANY_RPCS) retried as by :class:`EnvironmentClient`. ``credentials``
    makes the channel the client creates a TLS one, as for :class:`EnvironmentClient`
    (:func:`~workplace_env_client.channel.tls_credentials`); without it the channel is
    plaintext. ``retry_refusals`` and ``admin_token`` as for :class:`EnvironmentClient`.
    Raises ArgumentError (a ValueError) naming the argument for a ``timeout_s``,
    ``max_attempts``, ``affinity``, ``retry_refusals``, ``admin_token`` or ``target``
    :class:`EnvironmentClient` refuses; ValueError for a malformed target list or for both or
    neither of ``target`` and ``channel``. After :meth:`close`, every call raises
    ClientClosedError."""

    def __init__(
        self,
        target: Target | None = None,
        *,
        channel: grpc.aio.Channel | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        affinity: bool | None = None,
        admin_token: str | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        retry_refusals: bool | None = None,
    ) -> None:
        if (target is None) == (channel is None):
            raise ValueError("pass exactly one of target or channel")
        check_max_attempts(max_attempts)
        timeout_s = check_client_options(timeout_s, affinity, retry_refusals, admin_token)
        self._own_channel = channel is None
        if channel is None:
            assert target is not None
            channel = make_aio_channel(
                target, max_attempts=max_attempts, affinity=affinity, credentials=credentials
            )
        self.channel = channel
        self.stub = pb_grpc.EnvironmentServiceStub(channel)
        self.timeout_s = timeout_s
        self.admin_token = admin_token
        self._retry_refusals = max_attempts > 1 if retry_refusals is None else retry_refusals
        self._target, self._affinity, self._credentials = target, affinity, credentials
        self._admins: dict[str | None, AdminClient] = {}

    async def __aenter__(self) -> AsyncEnvironmentClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the channel if this client created it, and the admin clients it made."""
        for admin in self._admins.values():
            admin.close()
        if self._own_channel:
            await self.channel.close(grace=None)

    def admin(self, token: str | None = None) -> AdminClient:
        """An :class:`~workplace_env_client.admin.AdminClient` (sync: an :class:`AsyncSession`
        runs its calls on a worker thread) on this client's target, with its affinity and
        credentials, so per-session RPCs reach the server this client's RPCs of that session
        reach; made once per token and closed by :meth:`close`. ``token`` defaults to the
        client's ``admin_token`` (CONTRACT A1). Raises ValueError for a client made over a
        ``channel`` (no target to dial)."""
        if self._target is None:
            raise ValueError("admin RPCs need the client's target; this client has a channel")
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
        self, method: str, request: Any, session_id: str = "", *, retry_refusals: bool | None = None
    ) -> Any:
        """As :meth:`EnvironmentClient._invoke`: one deadline, refusals retried within it."""
        deadline = time.monotonic() + self.timeout_s
        retry = self._retry_refusals if retry_refusals is None else retry_refusals
        while True:
            try:
                return await getattr(self.stub, method)(
                    request,
                    timeout=max(0.0, deadline - time.monotonic()),
                    metadata=session_metadata(session_id),
                )
            except grpc.RpcError as exc:
                wait = wait_or_raise(exc, deadline, retry)
            except grpc.aio.UsageError as exc:
                if (closed := closed_channel_error(exc)) is None:
                    raise
                raise closed from exc
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
        """Call a tool; return its output JSON text (byte-exact to the reference)."""
        request = call_tool_request(session_id, name, arguments, call_id)
        response = await self._invoke("CallTool", request, session_id)
        return str(response.output)

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
        return verify_answer(await self._invoke("Verify", request, session_id))

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
        sid, ep, task_msg, tid = session_identity(task, episode, task_id, session_id)
        check_recovery(recovery)
        check_admin(admin)
        try:
            await self.seed(sid, ep, tid, task_msg)
        except BaseException as failed:
            if not session_id:  # our own id: nobody retries it, so fencing it is safe
                # A seed refused for concurrency did not run: one try of the fence will do.
                try:
                    await self._close(sid, ep, retry_refusals=not is_refusal(failed))
                except Exception as closing:
                    close_failed(sid, closing, failed)
            raise
        try:
            yield AsyncSession(
                self, sid, ep, task_id=tid, task=task_msg, recovery=recovery, admin=admin
            )
        except BaseException as failed:
            try:
                await self._close(sid, ep, retry_refusals=True)
            except Exception as closing:
                close_failed(sid, closing, failed)
            raise
        else:
            try:
                await self._close(sid, ep, retry_refusals=True)
            except WorkplaceEnvError as closing:
                close_failed(sid, closing, None)


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
