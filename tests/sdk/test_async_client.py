"""The asyncio SDK: the same surface and the same answers as the sync client. Its session and
refusal behaviour is tested with the sync client's, on both (tests/sdk/test_session_sdk.py)."""

from __future__ import annotations

import asyncio
import gc
import inspect
import json
import logging
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import grpc
import grpc.aio
import pytest

from tests.helpers import (
    EP,
    HANG_S,
    TID,
    WRITE,
    local,
    server_with_a_held_slot,
    wait,
)
from tests.helpers import TASK as CONTRACT_TASK
from workplace_env.config import Settings
from workplace_env.server.in_process import in_process_async_client
from workplace_env.testing.faults import Faults
from workplace_env_client import (
    AsyncEnvironmentClient,
    AsyncSession,
    ClientClosedError,
    EnvironmentClient,
    EventLoopError,
    ServerSandbox,
    SessionConflictError,
    SessionLeftOpenWarning,
    SessionLostError,
)
from workplace_env_client.channel import channel_options
from workplace_env_client.client import Recovery, Session

SEND = ("email_send_email", {"recipient": "a@b.com", "subject": "async", "body": "b"})
TASK = {"id": "t1", "ground_truth": [{"name": SEND[0], "arguments": json.dumps(SEND[1])}]}
CALLS = [
    ("company_directory_find_email_address", {"name": "a"}),
    SEND,
    ("email_search_emails", {"query": "async"}),
    ("calendar_create_event", {"event_name": "x", "participant_email": "a@b.com"}),
    ("nope", {}),
]


@pytest.fixture(scope="module")
def target(server) -> str:
    return local(server.port)


@pytest.mark.parametrize("transport", ["grpc", "in_process"])
def test_an_async_client_made_outside_a_loop_serves_its_first_loop_and_refuses_another(
    server, target, transport, caplog
):
    """Made where no event loop runs (module level, after an earlier ``asyncio.run``), an async
    client works in the loop of its first call; a call in another loop (a second
    ``asyncio.run``) is EventLoopError (WRONG_EVENT_LOOP) saying to make one client per loop,
    nothing sent and no pending-task noise; its close from there drops the client."""
    asyncio.run(asyncio.sleep(0))  # no current event loop any more
    env = AsyncEnvironmentClient(target) if transport == "grpc" else in_process_async_client(server)
    assert len(asyncio.run(env.list_tools())) == 27
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        with pytest.raises(EventLoopError) as wrong:
            asyncio.run(env.list_tools())
        asyncio.run(env.close())
        gc.collect()
    assert isinstance(wrong.value, RuntimeError) and wrong.value.reason == "WRONG_EVENT_LOOP"
    assert "one client" in wrong.value.hint and "per event loop" in wrong.value.hint
    assert not [r.getMessage() for r in caplog.records if r.name == "asyncio"]
    if transport == "grpc":
        with pytest.raises(ClientClosedError):
            asyncio.run(env.list_tools())


@pytest.mark.parametrize("transport", ["grpc", "in_process"])
def test_async_episode_matches_the_sync_client(server, target, transport):
    """The async client over gRPC or in this process (``in_process_async_client``) answers
    as the sync client over gRPC."""

    def client() -> AsyncEnvironmentClient:
        if transport == "grpc":
            return AsyncEnvironmentClient(target)
        return in_process_async_client(server)

    async def episode() -> tuple[list, float, list]:
        async with client() as env:
            tools = await env.list_tools()
            async with env.session(TASK, episode=("async-r", 0)) as s:
                outputs = [await s.call_tool(name, args) for name, args in CALLS]
                reward = (await s.verify([SEND])).reward
            return outputs, reward, tools

    outputs, reward, tools = asyncio.run(episode())
    with EnvironmentClient(target) as env, env.session(TASK, episode=("sync-r", 0)) as s:
        assert outputs == [s.call_tool(name, args) for name, args in CALLS]
        assert reward == s.verify([SEND]).reward == 1.0
        assert tools == env.list_tools()


def test_both_clients_name_the_servers_sandbox(server, target):
    """ListTools carries the sandbox's digest and origin (SandboxIdentity's); both clients
    give them as a ServerSandbox."""
    base = server.store.base
    with EnvironmentClient(target) as env:
        sync = env.server_sandbox()

    async def ask() -> ServerSandbox:
        async with AsyncEnvironmentClient(target) as env:
            return await env.server_sandbox()

    assert sync == asyncio.run(ask()) == ServerSandbox(base.digest, base.origin)
    assert sync.digest.startswith("sha256:") and sync.origin == "generated:seed=0,scale=1.0"


def test_async_errors_are_typed(target):
    async def run() -> None:
        async with AsyncEnvironmentClient(target) as env:
            await env.seed("a1", ("r", 0), ("u", "t"), TASK)
            with pytest.raises(SessionConflictError):
                await env.seed("a1", ("other", 0), ("u", "t"), TASK)
            with pytest.raises(SessionLostError):
                await env.call_tool("ghost", *SEND)
            lost = await env.verify("ghost", [])
            assert (lost.mask_sample, lost.failure_kind) == (True, "session_lost")
            assert await env.close_session("a1", ("r", 0)) == "CLOSED"

    asyncio.run(run())


@pytest.mark.parametrize("body_raises", [False, True])
def test_async_session_whose_server_died_never_hides_the_block(make_server, body_raises):
    """As the sync client's: a completed block's exit warns naming the session; an exception
    leaving the block goes on, with a note that the close failed too."""
    served = make_server()

    async def run() -> str:
        async with (
            AsyncEnvironmentClient(served.target, max_attempts=1) as env,
            env.session(TASK, session_id="a3", episode=("r3", 0)),
        ):
            served.running.stop(grace_s=0)
            if body_raises:
                raise LookupError("the block's own")
            return "the block's result"

    if body_raises:
        with pytest.raises(LookupError) as raised:
            asyncio.run(run())
        assert any("closing session 'a3' also failed" in n for n in raised.value.__notes__)
        return
    with pytest.warns(SessionLeftOpenWarning, match="session 'a3' was not closed") as warned:
        assert asyncio.run(run()) == "the block's result"
    assert "idle TTL" in str(warned[0].message)
    assert warned[0].filename == __file__  # at the caller's async with


# -- a refusal for concurrency (X3) seen through a grpc.aio interceptor -------------------------


class _ReleaseOnRefusal(grpc.aio.UnaryUnaryClientInterceptor):
    """Records each refused RPC's method and then sets ``release`` (the held call goes on)."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release
        self.refused: list[str] = []

    async def intercept_unary_unary(self, continuation, client_call_details, request):  # type: ignore[no-untyped-def]
        call = await continuation(client_call_details, request)
        if await call.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
            method = client_call_details.method
            self.refused.append(method.decode() if isinstance(method, bytes) else method)
            self.release.set()
        return call


@pytest.mark.parametrize("max_attempts", [1, 4])
def test_async_session_blocks_close_refused_at_the_rpc_limit_is_retried_not_leaked(
    make_server, max_attempts
):
    """For the async client: the block's close, refused TOO_MANY_RPCS while the server's
    one slot is held, is sent again once the RetryInfo delay has passed; the session is closed."""
    served, arrived, release = server_with_a_held_slot(make_server)
    watch = _ReleaseOnRefusal(release)

    async def run(pool: ThreadPoolExecutor) -> tuple[str, object]:
        channel = grpc.aio.insecure_channel(
            served.target, options=channel_options(max_attempts), interceptors=[watch]
        )
        env = AsyncEnvironmentClient(channel=channel, timeout_s=HANG_S, max_attempts=max_attempts)
        try:
            async with env.session(CONTRACT_TASK, episode=EP, task_id=TID) as s:
                assert await s.call_tool(*WRITE) == "Email sent successfully."
                held = pool.submit(served.client.call_tool, "holder", *WRITE)
                await asyncio.to_thread(wait, arrived)  # the server's one slot is taken
            return s.id, held
        finally:
            await channel.close()

    try:
        with ThreadPoolExecutor(1) as pool:
            sid, held = asyncio.run(run(pool))
            assert held.result(HANG_S) == "Email sent successfully."  # type: ignore[attr-defined]
        assert watch.refused and {m.rsplit("/", 1)[-1] for m in watch.refused} == {"CloseSession"}
        assert served.store.live_count() == 1  # the holder's only
        assert served.client.close_session(sid, EP) == "ALREADY_CLOSED"
    finally:
        release.set()
        Faults.of(served.store).clear()


# -- the same surface as the sync client ----------------------------------------------------------

#: Methods that are no RPC in either client (plain calls in both).
NOT_AWAITED = {"__init__", "admin", "session"}


def _surface(cls: type) -> dict[str, object]:
    """The public methods of ``cls`` (and ``__init__``) with their parameters (name, kind,
    default), and its public properties."""
    out: dict[str, object] = {}
    for name, member in inspect.getmembers(cls):
        if name.startswith("_") and name != "__init__":
            continue
        if isinstance(member, property):
            out[name] = "property"
        elif callable(member) and not inspect.isclass(member):
            params = inspect.signature(member).parameters.values()
            out[name] = [(p.name, p.kind, p.default) for p in params]
    return out


@pytest.mark.parametrize(
    ("sync", "awaited"),
    [(EnvironmentClient, AsyncEnvironmentClient), (Session, AsyncSession)],
)
def test_the_async_client_has_the_sync_ones_methods_arguments_and_properties(sync, awaited):
    """Same names, parameters (kinds, defaults) and properties; every RPC awaited."""
    assert _surface(awaited) == _surface(sync)
    for name, member in inspect.getmembers(awaited, inspect.isfunction):
        if not name.startswith("_") and name not in NOT_AWAITED:
            assert inspect.iscoroutinefunction(member), name


@pytest.mark.parametrize(
    ("sync", "awaited"),
    [(EnvironmentClient, AsyncEnvironmentClient), (Session, AsyncSession)],
)
def test_each_awaited_method_carries_its_sync_twins_signature_and_docstring(sync, awaited):
    """What ``help()``, ``inspect.signature`` and the docs read: the sync method's parameters,
    annotations, return type (never the operation's ``Answer[...]``) and docstring."""
    twins = 0
    for name, member in inspect.getmembers(awaited, inspect.iscoroutinefunction):
        if name.startswith("_") or name == "close":
            continue
        method = getattr(sync, name)
        assert inspect.signature(member) == inspect.signature(method), name
        assert member.__doc__ == method.__doc__ and member.__doc__, name
        assert not inspect.signature(method).return_annotation.startswith("Answer["), name
        assert member.__qualname__ == f"{awaited.__name__}.{name}"
        twins += 1
    assert twins >= 4


def test_async_checkpoints_go_through_the_clients_own_admin_client(make_server):
    """Without an ``admin``, a session's checkpoint uses ``admin()`` on the client's target with
    its ``admin_token`` (one admin client per token, closed with the client); the recovery from
    it restores the checkpoint (K4)."""
    served = make_server(None, Settings(admin_token="adm"), admin_token="adm")

    async def episode() -> tuple[object, object, bool]:
        async with AsyncEnvironmentClient(served.target, admin_token="adm") as env:
            async with env.session(CONTRACT_TASK, episode=EP, task_id=TID) as s:
                await s.call_tool(*WRITE)
                taken = await s.checkpoint()
                assert served.admin.retire_session(s.id) is True
                recovered = await s.recover("checkpoint")
                same = env.admin() is env.admin("adm")
            return taken.call_count, recovered, same

    count, recovered, same = asyncio.run(episode())
    assert (count, same) == (1, True)
    assert recovered == Recovery("checkpoint", True, 0, False)


def test_an_async_client_over_a_channel_has_no_admin_target(target):
    async def ask() -> None:
        channel = grpc.aio.insecure_channel(target)
        async with AsyncEnvironmentClient(channel=channel) as env:
            with pytest.raises(ValueError, match="target"):
                env.admin()
        await channel.close()

    asyncio.run(ask())


def test_a_session_opened_in_another_event_loop_warns_nothing(server, target):
    """A session() in another loop than the client's is EventLoopError before anything is
    sent: no session exists, so no SessionLeftOpenWarning."""
    env = AsyncEnvironmentClient(target)
    assert len(asyncio.run(env.list_tools())) == 27

    async def open_one() -> None:
        async with env.session(TASK, episode=EP):
            pytest.fail("the block must not run")

    with warnings.catch_warnings(record=True) as recorded:
        warnings.simplefilter("always")
        with pytest.raises(EventLoopError):
            asyncio.run(open_one())
    assert not [w for w in recorded if issubclass(w.category, SessionLeftOpenWarning)]
    asyncio.run(env.close())


# -- a cancelled (or timed-out) session block still closes its session ---------------------------


def _cancelled_at(served, point: str, session_id: str | None = None, body: bool = False):
    """Run a session block on ``served`` whose server holds at ``point`` (a
    :class:`Faults` point) until the test has cancelled the block's task; returns the block's
    session id, the task's outcome and the SessionLeftOpenWarnings issued. ``body``: the
    block makes a tool call (the point is reached by the close after it)."""
    arrived, release = threading.Event(), threading.Event()
    seen: list[str] = []

    def hold(sid: str) -> None:
        if not seen:
            seen.append(sid)
            arrived.set()
            wait(release)

    Faults.of(served.store).on(point, hold)

    async def block(env: AsyncEnvironmentClient) -> None:
        async with env.session(TASK, episode=EP, session_id=session_id) as s:
            if body:
                await s.call_tool(*SEND)

    async def run() -> BaseException | None:
        async with AsyncEnvironmentClient(served.target, timeout_s=HANG_S) as env:
            task = asyncio.create_task(block(env))
            await asyncio.to_thread(wait, arrived)
            task.cancel()
            release.set()
            [outcome] = await asyncio.gather(task, return_exceptions=True)
            return outcome  # type: ignore[no-any-return]

    try:
        with warnings.catch_warnings(record=True) as recorded:
            warnings.simplefilter("always")
            outcome = asyncio.run(run())
    finally:
        release.set()
        Faults.of(served.store).clear()
    left_open = [w for w in recorded if issubclass(w.category, SessionLeftOpenWarning)]
    return seen[0], outcome, left_open


def test_a_block_cancelled_during_its_close_waits_for_the_close_then_is_cancelled(make_server):
    """The cancellation lands while the block's close is on the server: the close runs to its
    answer, the session is closed, nothing warns, and the task ends cancelled."""
    served = make_server()
    sid, outcome, left_open = _cancelled_at(served, "release_wait", body=True)
    assert isinstance(outcome, asyncio.CancelledError)
    assert not left_open, [str(w.message) for w in left_open]
    assert served.store.live_count() == 0
    assert served.client.close_session(sid, EP) == "ALREADY_CLOSED"


def test_a_block_cancelled_during_its_call_closes_its_session(make_server):
    served = make_server()
    sid, outcome, left_open = _cancelled_at(served, "tool", body=True)
    assert isinstance(outcome, asyncio.CancelledError) and not left_open
    assert served.client.close_session(sid, EP) == "ALREADY_CLOSED"


@pytest.mark.parametrize("session_id", [None, "given-id"])
def test_a_block_cancelled_during_its_seed_closes_that_id(make_server, session_id):
    """The seed may have reached the server: its id is closed (the SDK's own or the caller's),
    so the seed that completes there leaves no session."""
    served = make_server()
    sid, outcome, left_open = _cancelled_at(served, "build", session_id=session_id)
    assert isinstance(outcome, asyncio.CancelledError) and not left_open
    assert served.store.live_count() == 0
    assert served.client.close_session(sid, EP) == "ALREADY_CLOSED"


def test_a_block_timed_out_during_its_close_still_closes(make_server):
    """``asyncio.timeout`` (as ``wait_for``) cancels the same way: a timeout expiring as the
    close is sent lets the close run to its answer, then raises TimeoutError."""
    served = make_server()

    async def run() -> None:
        async with (
            AsyncEnvironmentClient(served.target, timeout_s=HANG_S) as env,
            asyncio.timeout(None) as bound,
            env.session(TASK, episode=EP),
        ):
            bound.reschedule(asyncio.get_running_loop().time())  # expires at the close

    with warnings.catch_warnings(record=True) as recorded:
        warnings.simplefilter("always")
        with pytest.raises(TimeoutError):
            asyncio.run(run())
    assert not [w for w in recorded if issubclass(w.category, SessionLeftOpenWarning)]
    assert served.store.live_count() == 0
