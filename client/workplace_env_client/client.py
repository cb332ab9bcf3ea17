"""The synchronous Python SDK of the workplace environment service.

>>> with EnvironmentClient("localhost:50051") as env:
...     with env.session(task_row, episode=("rollout-7", 0)) as s:
...         s.call_tool("email_search_emails", {"query": "budget"})
...         reward = s.verify([("email_delete_email", '{"email_id": "00000042"}')]).reward

Every RPC has a deadline (``timeout_s``); failures raise the typed exceptions of
:mod:`workplace_env_client.errors`, never a bare ``grpc.RpcError``.

Retries: only idempotent RPCs are retried, by gRPC itself (the channel's service config,
:func:`retry_service_config`), on UNAVAILABLE and CANCELLED, within the call's deadline:
SeedSession (S2), CloseSession (C2), Verify (V1, V3), ListTools, and CallTool, which the SDK
always sends with a ``call_id`` (generated when the caller gives none) so a retry replays
instead of running the tool twice (T6). A server at its limit of concurrent RPCs refuses an
RPC without running it (RESOURCE_EXHAUSTED TOO_MANY_RPCS, CONTRACT X3); the SDK sends it again
after the refusal's ``RetryInfo`` delay, as long as that wait ends within the call's deadline
(:func:`~workplace_env_client.channel.refusal_wait`; gRPC's retry policy cannot read the delay).

Arguments are checked before anything is sent: one of a shape no request can carry raises
:class:`~workplace_env_client.errors.ArgumentError` (an ``InvalidRequestError``) naming the
field as the server names it (:mod:`workplace_env_client.checks`).

Many servers: ``EnvironmentClient(["10.0.0.1:50051", "10.0.0.2:50051"])`` (or one
DNS name resolving to every replica, with ``affinity=True``) balances sessions over them with
gRPC's ``ring_hash`` policy keyed by the ``x-resources-session-id`` header, which the SDK sends
on every RPC about a session; every RPC of a session reaches the same server
(:mod:`workplace_env_client.routing`). When a server goes away, its sessions answer
SESSION_LOST from the server their id now maps to; :meth:`Session.recover` rebuilds them there,
from a checkpoint or by replaying the session's recorded calls.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Any

import grpc

from workplace.env.v1 import environment_pb2 as pb
from workplace_env_client.admin import AdminClient

# The channel settings live in .channel (shared with .admin and .aio); the names not used here
# stay importable from this module, where they used to live.
from workplace_env_client.channel import (  # noqa: F401
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_TIMEOUT_S,
    KEEPALIVE_TIME_MS,
    KEEPALIVE_TIMEOUT_MS,
    MAX_MESSAGE_BYTES,
    RETRIED_METHODS,
    SERVICE,
    channel_options,
    check_client_options,
    check_max_attempts,
    given_or_made,
    is_refusal,
    make_channel,
    refusal_wait,
    retry_service_config,
    wait_or_raise,
)
from workplace_env_client.contexts import SyncOnly
from workplace_env_client.handle import (
    Recovery,
    RecoveryStrategy,
    SessionBlock,
    SessionCheckpoint,
    SessionHandle,
)
from workplace_env_client.messages import (
    CallLike,
    ServerSandbox,
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
from workplace_env_client.options import ClientBase
from workplace_env_client.steps import Answer, Step, blocking, plan_of
from workplace_env_client.transport import GrpcTransport, Transport


class Session(SessionHandle):
    """A seeded typed session, as handed out by :meth:`EnvironmentClient.session`; its
    recording, recovery and fencing are :class:`~workplace_env_client.handle.SessionHandle`'s."""

    client: EnvironmentClient

    @blocking
    def call_tool(
        self, name: str, arguments: str | Mapping[str, Any] | None = None, call_id: str = ""
    ) -> Answer[Any]:
        """Call a tool on this session; return its decoded output; record the call.

        Raises as :meth:`EnvironmentClient.call_tool`; with ``recovery`` set, a lost session
        is recovered once and the call sent again (same ``call_id``). Raises
        ReplayDivergedError, sending nothing, once the handle is fenced, and
        SessionClosedError, sending nothing, once its ``session()`` block has ended.
        """
        return (yield from self._call_tool(name, arguments, call_id))

    @blocking
    def verify(
        self, /, function_calls: Iterable[CallLike] | None = None, **kwargs: Any
    ) -> Answer[VerifyResult]:
        """Score this session's episode (see :meth:`EnvironmentClient.verify`).

        ``function_calls``: the prediction; None (the default, without ``response_output``)
        scores the calls this handle made (:attr:`calls`), ``[]`` an empty prediction; the
        items are pairs, mappings or :class:`RecordedCall` (``s.verify(s.calls)``). With
        ``recovery`` set, a ``session_lost`` answer recovers once and verifies again. A
        fenced handle answers the masked ``session_lost`` sample (V4) and sends nothing.
        Raises ArgumentError for a malformed call, as :meth:`EnvironmentClient.verify`, and
        SessionClosedError, sending nothing, once the handle's ``session()`` block has ended
        (``EnvironmentClient.verify(session_id)`` answers a closed id masked, V4).
        """
        return (yield from self._verify(function_calls, kwargs))

    @blocking
    def checkpoint(self, admin: AdminClient | None = None) -> Answer[SessionCheckpoint]:
        """Export this session's snapshot (K1) from the server holding it; keep it as
        :attr:`last_checkpoint` and return it. The snapshot carries the session's call_id
        records, so a call made before it and resent after a recovery replays (T6).

        ``admin`` defaults to the handle's, else :meth:`EnvironmentClient.admin`. Raises
        SessionLostError when the server does not hold the session, UnauthenticatedError
        without the server's admin token.
        """
        return (yield from self._checkpoint(admin))

    @blocking
    def recover(
        self,
        strategy: RecoveryStrategy = "replay",
        *,
        checkpoint: SessionCheckpoint | None = None,
        admin: AdminClient | None = None,
    ) -> Answer[Recovery]:
        """Rebuild this session on the server its id maps to now.

        ``"replay"``: seed (S1; S2 when that server holds the session, then nothing is
        replayed, unless an earlier recovery's replay stopped there: it resumes) and replay
        every recorded call. ``"checkpoint"``: restore ``checkpoint``
        (default :attr:`last_checkpoint`) through ``admin`` (as :meth:`checkpoint`; routed by
        the session header, so it lands where the ring maps the id), seed to claim it (K4),
        and replay the calls recorded after it; a server holding the session live refuses the
        restore (SESSION_LIVE) and keeps its state. Returns a :class:`Recovery`. Raises
        ValueError (no task, or no checkpoint), ReplayDivergedError (a replayed output differs
        from the recorded one: the handle is fenced from then on; or it was already), and the
        seed's, restore's and calls' errors (e.g. SessionClosedError once the id was closed;
        SessionLostError or UnavailableError when the new server goes away too: recover again).
        """
        return (yield from self._recover(strategy, checkpoint, admin))


class EnvironmentClient(SyncOnly, ClientBase[grpc.Channel, Transport, SessionBlock[Session]]):
    """A client over a ``target``, an existing ``channel`` or a ``transport``.

    ``target``: ``host:port`` (or any gRPC target URI), or a list of ``IP:PORT`` strings, one
    per server process. ``affinity`` picks the ``ring_hash`` policy on the
    ``x-resources-session-id`` header, so every RPC of a session reaches one server; by default
    it is on when the target names several addresses (a list, or ``ipv4:a:p,b:q``); pass
    ``affinity=True`` for a DNS name resolving to every replica (e.g. a Kubernetes headless
    service, ``dns:///workplace-env.ns.svc.cluster.local:50051``). The header goes on every
    session RPC whatever the channel, so proxies (Envoy) can hash it too.

    ``timeout_s`` is the deadline of every RPC (retries included), in seconds. ``max_attempts``
    (1..5) bounds the attempts of a retried RPC on UNAVAILABLE or CANCELLED; it applies to the
    channel the client creates (for your own channel, see :func:`channel_options`). With
    ``max_attempts`` above 1 an RPC refused TOO_MANY_RPCS (X3) is sent again after the
    refusal's delay while its deadline allows; 1 turns every retry off, except for the close
    of a :meth:`session` block, which always retries a refusal (it promises the close).
    ``retry_refusals`` overrides the refusal half of that (None: as ``max_attempts``; False: a
    relay such as the HTTP gateway, which hands the refusal and its delay to its own caller,
    keeps UNAVAILABLE retries but never waits out a refusal itself). Use as a
    context manager, or call :meth:`close` to release a channel the client created (a
    passed-in channel is the caller's). ``admin_token`` is the bearer token :meth:`admin` (and a
    session's checkpoint recovery) sends by default. ``credentials`` makes the channel the client
    creates a TLS one (:func:`~workplace_env_client.channel.tls_credentials`: a server started
    with ``--tls-cert``, and with ``--tls-client-ca`` this client's certificate); without it the
    channel is plaintext. ``transport`` (instead of a target or channel) is any
    :class:`~workplace_env_client.transport.Transport`, e.g. a server's servicer in this
    process (``workplace_env.server.in_process.in_process_client``); ``channel`` and
    ``stub`` are then None. Raises ArgumentError (a ValueError) naming the argument, before any
    channel is made, for a ``timeout_s`` that is not a finite number of seconds in
    ``(0, 1e9]`` (None, a string, NaN, an infinity, 0 or less), a ``max_attempts`` that is not
    an int in 1..5, an ``affinity`` or ``retry_refusals`` that is not a bool or None, an
    ``admin_token`` that is not a string or None, a ``target`` that names no server
    (:func:`~workplace_env_client.routing.target_problem`: a URL, an IPv6 address without
    brackets, a bad port); ValueError for a malformed target list, RuntimeError when affinity
    is asked for and grpcio's switch for it is off. After :meth:`close`, every call raises
    :class:`~workplace_env_client.errors.ClientClosedError`.
    """

    _make_channel = staticmethod(make_channel)
    _grpc_transport = GrpcTransport
    _block = partial(SessionBlock, Session)
    _pause = staticmethod(time.sleep)
    _usage = "with EnvironmentClient(target) as env:"
    _counterpart = "AsyncEnvironmentClient is the asyncio client"

    def __enter__(self) -> EnvironmentClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the channel if this client created it (the transport's :meth:`close`); every
        call in flight raises ClientClosedError with ``in_flight`` (it may have run), on every
        transport, and every call started later one without."""
        self.closed = True
        self.transport.close()

    def admin(self, token: str | None = None) -> AdminClient:
        """An :class:`~workplace_env_client.admin.AdminClient` on this client's channel, so its
        per-session RPCs reach the server this client's RPCs of that session reach (the ring
        as this channel sees it). Closing it leaves the channel open.

        ``token`` defaults to the client's ``admin_token``: the server's admin RPCs are off
        unless it has a token (or was started with ``--admin-open``), CONTRACT A1. Raises
        ValueError for a client without a gRPC channel (another ``transport``).
        """
        if self.channel is None:
            raise ValueError("admin RPCs need a gRPC channel; this client has another transport")
        return AdminClient(
            channel=self.channel, token=token or self.admin_token, timeout_s=self.timeout_s
        )

    # -- RPCs: each one operation, run here by blocking() and by the async client by awaited() -

    @blocking
    def seed(
        self,
        session_id: str,
        episode: tuple[str, int] | pb.EpisodeId,
        task_id: tuple[str, str],
        task: Mapping[str, Any] | pb.WorkplaceTask,
    ) -> Answer[pb.SeedSessionResponse]:
        """Seed ``session_id`` (CONTRACT S1-S8). Raises SessionConflictError, SessionClosedError,
        InvalidRequestError, UnavailableError, CapacityError."""
        request = seed_request(session_id, episode, task_id, task)
        response: pb.SeedSessionResponse = yield from self._rpc("SeedSession", request, session_id)
        return response

    @blocking
    def seed_legacy(
        self, session_id: str, task: Mapping[str, Any] | pb.WorkplaceTask
    ) -> Answer[pb.SeedSessionResponse]:
        """Seed a legacy (cookie) session: no episode or task id; a re-seed rebuilds fresh
        tables, and verify releases them (CONTRACT V2). Raises SessionConflictError when the id
        is a typed session, SessionClosedError, InvalidRequestError."""
        request = legacy_seed_request(session_id, task)
        response: pb.SeedSessionResponse = yield from self._rpc("SeedSession", request, session_id)
        return response

    @blocking
    def call_tool_raw(
        self,
        session_id: str,
        name: str,
        arguments: str | Mapping[str, Any] | None = None,
        call_id: str = "",
    ) -> Answer[str]:
        """Call a tool; return its output as JSON text (byte-exact to the reference).

        ``call_id`` is the idempotency key (T6); when empty the SDK generates one (over a
        transport that may resend it, as gRPC's), so the call can be retried safely (a retry
        replays the first output).
        """
        request = call_tool_request(
            session_id, name, arguments, call_id, keyed=self.transport.resends
        )
        response: pb.CallToolResponse = yield from self._rpc("CallTool", request, session_id)
        return response.output

    @blocking
    def call_tool(
        self,
        session_id: str,
        name: str,
        arguments: str | Mapping[str, Any] | None = None,
        call_id: str = "",
    ) -> Answer[Any]:
        """Call a tool; return its decoded output (str, list, dict, ...).

        Tool failures are outputs (the reference's error texts), not exceptions. Raises
        InvalidRequestError (arguments not a JSON object), SessionLostError (SessionExpiredError
        after eviction), SessionClosedError, CallIdReusedError.
        """
        output = yield Step(self, "call_tool_raw", (session_id, name, arguments, call_id))
        return json.loads(output)

    @blocking
    def verify(
        self,
        session_id: str,
        function_calls: Iterable[CallLike] | None = None,
        *,
        response_output: Sequence[Any] | str | None = None,
        ground_truth: Iterable[CallLike] | None = None,
        ground_truth_json: str | None = None,
    ) -> Answer[VerifyResult]:
        """Score the model's calls (a list, or the raw Responses-API ``response_output``).

        The ground truth defaults to the seeded task's. A session the server does not hold
        gives ``reward 0, mask_sample True, failure_kind "session_lost"`` (no exception).
        """
        request = verify_request(
            session_id, function_calls, response_output, ground_truth, ground_truth_json
        )
        checked = all_checked(response_output, ground_truth_json)
        return verify_answer((yield from self._rpc("Verify", request, session_id, checked=checked)))

    @blocking
    def close_session(
        self, session_id: str, episode: tuple[str, int] | pb.EpisodeId
    ) -> Answer[str]:
        """Close a session; return the outcome ``"CLOSED"``, ``"ALREADY_CLOSED"`` or
        ``"NOT_SEEDED"``. Raises EpisodeMismatchError (C4), ReleaseFailedError (C5: not closed,
        retry), CapacityError when refused TOO_MANY_RPCS past what the deadline allows."""
        closing = plan_of(EnvironmentClient._close)
        outcome: str = yield from closing(self, session_id, episode, retry_refusals=None)
        return outcome

    @blocking
    def _close(
        self,
        session_id: str,
        episode: tuple[str, int] | pb.EpisodeId,
        *,
        retry_refusals: bool | None,
    ) -> Answer[str]:
        request = close_request(session_id, episode)
        answer = yield from self._rpc(
            "CloseSession", request, session_id, retry_refusals=retry_refusals
        )
        return close_answer(answer)

    @blocking
    def list_tools(self) -> Answer[list[dict[str, Any]]]:
        """The 27 tool schemas as the model sees them (JSON objects, in the reference's order)."""
        return tools_answer((yield from self._rpc("ListTools", pb.ListToolsRequest())))

    @blocking
    def server_sandbox(self) -> Answer[ServerSandbox]:
        """The sandbox the server plays every episode on (its ListTools answer); ``""`` digest
        and origin from a server that does not say."""
        return sandbox_answer((yield from self._rpc("ListTools", pb.ListToolsRequest())))
