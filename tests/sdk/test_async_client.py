"""The asyncio SDK: the same surface and the same answers as the sync client."""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
import grpc.aio
import pytest

from tests.helpers import (
    EP,
    EVERY_RPC,
    HANG_S,
    TID,
    WRITE,
    RefusingStandIn,
    generated_write_task,
    local,
    server_with_a_held_slot,
    wait,
)
from tests.helpers import TASK as CONTRACT_TASK
from workplace_env.config import Settings
from workplace_env.testing.faults import Faults
from workplace_env_client import (
    AsyncEnvironmentClient,
    AsyncSession,
    CapacityError,
    EnvironmentClient,
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


def test_async_episode_matches_the_sync_client(target):
    async def episode() -> tuple[list, float, list]:
        async with AsyncEnvironmentClient(target) as env:
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


def test_async_session_closes_on_error(target):
    async def run() -> str:
        async with AsyncEnvironmentClient(target) as env:
            with pytest.raises(RuntimeError):
                async with env.session(TASK, session_id="a2", episode=("r2", 0)):
                    raise RuntimeError("agent crashed")
            return await env.close_session("a2", ("r2", 0))

    assert asyncio.run(run()) == "ALREADY_CLOSED"


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


# -- refusals for concurrency (X3), as the sync client (tests/sdk/test_session_sdk.py) -------------


@pytest.mark.parametrize(("method", "call"), EVERY_RPC, ids=[m for m, _ in EVERY_RPC])
def test_async_rpc_refused_for_concurrency_is_sent_again_after_the_retry_delay(method, call):
    stand_in = RefusingStandIn(refusals=2)

    async def run() -> None:
        async with AsyncEnvironmentClient(stand_in.target, timeout_s=HANG_S) as env:
            await call(env)

    try:
        asyncio.run(run())
        assert stand_in.attempts == {method: 3}
    finally:
        stand_in.stop()


def test_async_refusals_without_retries_surface_but_a_session_blocks_close_retries():
    stand_in = RefusingStandIn(refusals=2)

    async def run() -> None:
        async with AsyncEnvironmentClient(stand_in.target, timeout_s=HANG_S, max_attempts=1) as env:
            with pytest.raises(CapacityError):
                await env.close_session("s", EP)
            stand_in.attempts.clear()
            stand_in.refusals = 0
            async with env.session(CONTRACT_TASK, episode=EP):
                stand_in.refusals = 2

    try:
        asyncio.run(run())
        assert stand_in.attempts == {"SeedSession": 1, "CloseSession": 3}
    finally:
        stand_in.stop()


def test_async_seed_refused_until_its_deadline_is_fenced_with_one_try():
    stand_in = RefusingStandIn(refusals=10**9)

    async def run() -> None:
        async with AsyncEnvironmentClient(stand_in.target, timeout_s=0.5) as env:
            with pytest.raises(CapacityError):
                async with env.session(CONTRACT_TASK, episode=EP):
                    pytest.fail("the block must not run")

    try:
        asyncio.run(run())
        assert stand_in.attempts["SeedSession"] > 1  # retried within its deadline
        assert stand_in.attempts["CloseSession"] == 1
    finally:
        stand_in.stop()


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


def test_async_verify_defaults_to_the_calls_the_session_made(target, sandbox):
    task = generated_write_task(sandbox)
    truth = [(c["name"], c["arguments"]) for c in task["ground_truth"]]

    async def episode() -> tuple[list[float], list[str], float]:
        async with AsyncEnvironmentClient(target) as env:
            async with env.session(task) as s:
                for name, arguments in truth:
                    await s.call_tool(name, arguments)
                names = [c.name for c in s.calls]
                rewards = [
                    (await s.verify()).reward,
                    (await s.verify(s.calls)).reward,
                    (await s.verify(list(s.calls)[:1])).reward,
                    (await s.verify([])).reward,
                    (await s.verify(truth)).reward,
                ]
            async with env.session(task) as fresh:
                untouched = (await fresh.verify()).reward
        return rewards, names, untouched

    rewards, names, untouched = asyncio.run(episode())
    assert names == [name for name, _ in truth]
    assert rewards == [1.0, 1.0, 0.0, 0.0, 1.0]
    assert untouched == 0.0


# -- the same surface as the sync client ----------------------------------------------------------

#: What the sync client alone takes: a transport (the in-process one runs the servicer
#: synchronously; the async client speaks grpc.aio).
SYNC_ONLY = {(EnvironmentClient, "__init__"): {"transport"}}
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
            out[name] = [
                (p.name, p.kind, p.default)
                for p in params
                if p.name not in SYNC_ONLY.get((cls, name), ())
            ]
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
