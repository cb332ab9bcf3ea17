"""The SDK's side of the life cycle: what it retries (only idempotent RPCs, on UNAVAILABLE and
CANCELLED; every RPC refused for concurrency, X3, after its RetryInfo delay), its call_ids,
deadlines, and the session context manager closing on every exit.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NoReturn

import grpc
import pytest

from tests.helpers import (
    EP,
    EVERY_RPC,
    HANG_S,
    TASK,
    TID,
    WRITE,
    Env,
    FakeClock,
    LoopThread,
    RefusingStandIn,
    assert_refused,
    async_client,
    async_in_process_client,
    generated_write_task,
    local,
    server_with_a_held_slot,
    wait,
)
from tests.helpers import emails as _emails
from workplace.env.v1 import environment_pb2 as pb
from workplace_env.config import Settings
from workplace_env.server.app import RunningServer
from workplace_env.server.in_process import in_process_client
from workplace_env.sessions import SessionConfig
from workplace_env.testing.faults import Faults
from workplace_env_client import (
    AdminClient,
    AsyncEnvironmentClient,
    CallIdReusedError,
    CapacityError,
    ClientClosedError,
    DeadlineError,
    EnvironmentClient,
    ReleaseFailedError,
    ReplayDivergedError,
    SessionClosedError,
    SessionExpiredError,
    SessionLeftOpenWarning,
    SessionLostError,
    UnauthenticatedError,
    UnavailableError,
    WorkplaceEnvError,
    reasons,
)
from workplace_env_client.channel import (
    REFUSAL_FALLBACK_WAIT_S,
    REFUSAL_MIN_WAIT_S,
    channel_options,
    refusal_wait,
)
from workplace_env_client.client import RETRIED_METHODS, SERVICE, Recovery, retry_service_config
from workplace_env_client.errors import (
    HINTS,
    NO_HINT,
    SDK_WORDS,
    error_class,
    failure_text,
    may_have_run,
)

#: The SDK flavours a session test runs on: (client, transport).
FLAVORS = [(c, t) for c in ("sync", "async") for t in ("grpc", "in_process")]


def _clients(
    kind: str, sync: Callable[..., Any], awaited: Callable[..., Any]
) -> Iterator[Callable[..., Any]]:
    """Yield a maker of SDK clients: ``sync(*args, **options)``, or for the ``"async"`` kind
    ``awaited(loop, *args, **options)`` on a loop of its own; close them all after."""
    made: list[Any] = []
    loop = LoopThread() if kind == "async" else None

    def make(*args: Any, **options: Any) -> Any:
        made.append(sync(*args, **options) if loop is None else awaited(loop, *args, **options))
        return made[-1]

    yield make
    for client in made:
        client.close()
    if loop is not None:
        loop.stop()


@pytest.fixture(params=FLAVORS, ids=["-".join(f) for f in FLAVORS])
def sdk_flavor(request) -> Iterator[Callable[..., Any]]:
    """A maker of SDK clients of a running server, ``(server, **options)``: the sync or the async
    client (driven as the sync one is, :class:`tests.helpers.Blocking`), over gRPC or in this
    process (:mod:`workplace_env.server.in_process`), so one test checks all four."""
    kind, transport = request.param
    if transport == "in_process":
        yield from _clients(kind, in_process_client, async_in_process_client)
        return

    def sync(server: RunningServer, **options: Any) -> EnvironmentClient:
        return EnvironmentClient(local(server.port), **options)

    def awaited(loop: LoopThread, server: RunningServer, **options: Any) -> Any:
        return async_client(loop, local(server.port), **options)

    yield from _clients(kind, sync, awaited)


@pytest.fixture(params=["sync", "async"])
def grpc_flavor(request) -> Iterator[Callable[..., Any]]:
    """A maker of SDK clients of a gRPC ``target``, ``(target, **options)``: the sync client or
    the async one (driven as the sync one is), for the tests of what gRPC carries (stand-ins,
    refusals, deadlines)."""
    yield from _clients(request.param, EnvironmentClient, async_client)


@pytest.fixture
def make_sdk_env(make_env, sdk_flavor) -> Callable[..., Env]:
    """``make_env`` whose ``client`` and ``raw`` are of the test's SDK flavour."""

    def make(**config: Any) -> Env:
        return _flavored(make_env(**config), sdk_flavor)

    return make


def _flavored(served: Any, sdk_flavor: Callable[..., Any]) -> Any:
    """``served`` (an Env or a Served) with its ``client`` and ``raw`` of ``sdk_flavor``."""
    server = served.server if isinstance(served, Env) else served.running
    return dataclasses.replace(
        served,
        client=sdk_flavor(server, timeout_s=HANG_S),
        raw=sdk_flavor(server, timeout_s=HANG_S, max_attempts=1),
    )


def test_retry_policy_covers_only_idempotent_rpcs_on_unavailable_and_cancelled():
    config = json.loads(retry_service_config(4))
    (method_config,) = config["methodConfig"]
    names = {(n["service"], n["method"]) for n in method_config["name"]}
    assert names == {(SERVICE, m) for m in RETRIED_METHODS}
    assert set(RETRIED_METHODS) == {
        "SeedSession",
        "CloseSession",
        "Verify",
        "CallTool",
        "ListTools",
    }
    policy = method_config["retryPolicy"]
    assert policy["retryableStatusCodes"] == ["UNAVAILABLE", "CANCELLED"]
    assert policy["maxAttempts"] == 4


class _CancelsFirst:
    """A stand-in EnvironmentService whose SeedSession answers CANCELLED to its first
    ``cancels`` attempts, as gRPC does to an RPC that races a draining server's listener
    closing (X2), then OK."""

    def __init__(self, cancels: int) -> None:
        self.cancels = cancels
        self.attempts = 0
        self.server = grpc.server(ThreadPoolExecutor(2))
        handler = grpc.unary_unary_rpc_method_handler(
            self._seed,
            request_deserializer=pb.SeedSessionRequest.FromString,
            response_serializer=pb.SeedSessionResponse.SerializeToString,
        )
        self.server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler(SERVICE, {"SeedSession": handler})]
        )
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def _seed(self, request: pb.SeedSessionRequest, context: grpc.ServicerContext):
        self.attempts += 1
        if self.attempts <= self.cancels:
            context.abort(grpc.StatusCode.CANCELLED, "listener closing")
        return pb.SeedSessionResponse()


@pytest.mark.parametrize("max_attempts", [1, 4])
def test_a_seed_cancelled_by_a_closing_listener_is_retried(grpc_flavor, max_attempts):
    stand_in = _CancelsFirst(cancels=1)
    try:
        client = grpc_flavor(
            f"127.0.0.1:{stand_in.port}", timeout_s=HANG_S, max_attempts=max_attempts
        )
        if max_attempts == 1:
            with pytest.raises(WorkplaceEnvError) as err:
                client.seed("s", EP, TID, TASK)
            assert err.value.code == grpc.StatusCode.CANCELLED
        else:
            client.seed("s", EP, TID, TASK)
        assert stand_in.attempts == (1 if max_attempts == 1 else 2)
    finally:
        stand_in.server.stop(None)


def test_sdk_calls_without_call_id_are_distinct_calls(make_sdk_env):
    env: Env = make_sdk_env()
    env.client.seed("s", EP, TID, TASK)
    env.client.call_tool("s", *WRITE)
    env.client.call_tool("s", *WRITE)  # the same call made twice on purpose: it runs twice
    assert _emails(env.client, "s") == 2


def test_without_retries_a_lost_response_surfaces_and_the_call_id_replays(make_sdk_env):
    env: Env = make_sdk_env()
    env.raw.seed("s", EP, TID, TASK)
    Faults.of(env.store).lose_next_response()
    with pytest.raises(UnavailableError) as err:
        env.raw.call_tool("s", *WRITE, call_id="mine")
    assert_refused(err.value, grpc.StatusCode.UNAVAILABLE, "INJECTED_FAULT", "s")
    assert env.raw.call_tool("s", *WRITE, call_id="mine") == "Email sent successfully."
    assert _emails(env.raw, "s") == 1  # ran once: the retry replayed


def test_retries_give_up_after_max_attempts_with_the_last_status(make_env, grpc_flavor):
    """gRPC's retry policy (a transport in this process sends each call once)."""
    env: Env = make_env()
    env = dataclasses.replace(env, client=grpc_flavor(local(env.server.port), timeout_s=HANG_S))
    builds: list[str] = []
    Faults.of(env.store).on("build", builds.append)
    Faults.of(env.store).fail_next_build(10)
    with pytest.raises(UnavailableError) as err:
        env.client.seed("s", EP, TID, TASK)
    assert_refused(err.value, grpc.StatusCode.UNAVAILABLE, "TABLES_UNAVAILABLE", "s")
    assert len(builds) == 4  # DEFAULT_MAX_ATTEMPTS
    assert env.store.live_count() == 0


@pytest.mark.parametrize("case", ["capacity", "release"])
def test_non_retryable_errors_are_not_retried(make_sdk_env, case):
    env: Env = make_sdk_env(max_sessions=1)
    env.client.seed("a", EP, TID, TASK)
    if case == "capacity":
        builds: list[str] = []
        Faults.of(env.store).on("build", builds.append)
        with pytest.raises(CapacityError):
            env.client.seed("b", ("r-b", 0), TID, TASK)
        assert builds == []
    else:
        Faults.of(env.store).fail_next_release(2)  # a retry would hit the second fault too
        with pytest.raises(ReleaseFailedError):
            env.client.close_session("a", EP)
        Faults.of(env.store).clear()
        assert env.client.close_session("a", EP) == "CLOSED"  # one fault was used, not two


def test_every_rpc_has_a_deadline(make_env, grpc_flavor):
    env: Env = make_env()
    env.client.seed("s", EP, TID, TASK)
    held, go = threading.Event(), threading.Event()

    def hold(sid: str) -> None:
        held.set()
        assert go.wait(HANG_S)

    Faults.of(env.store).on("tool", hold)
    impatient = grpc_flavor(local(env.server.port), timeout_s=0.5)
    try:
        with pytest.raises(DeadlineError) as err:
            impatient.call_tool("s", *WRITE)
        assert err.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
        # no ErrorInfo: it carries its registry row's name (the status's)
        assert err.value.reason == "DEADLINE_EXCEEDED" and reasons.is_registry_name(
            "DEADLINE_EXCEEDED"
        )
        assert str(err.value).startswith("DEADLINE_EXCEEDED: ")
    finally:
        go.set()


# -- refusals for concurrency (X3): sent again after their RetryInfo delay, within the deadline --


#: Every admin RPC, as (method, a call of it on an AdminClient).
EVERY_ADMIN_RPC = [
    ("RetireSession", lambda a: a.retire_session("s")),
    ("ExportSessions", lambda a: a.export_sessions(["s"])),
    ("RestoreSessions", lambda a: a.restore_sessions([])),
]


@pytest.mark.parametrize(("method", "call"), EVERY_RPC, ids=[m for m, _ in EVERY_RPC])
def test_every_rpc_refused_for_concurrency_is_sent_again_after_the_retry_delay(
    grpc_flavor, method, call
):
    """A TOO_MANY_RPCS refusal was not run, so every RPC is sent again after its RetryInfo
    delay (gRPC's retry policy cannot read it), by the sync and the async client."""
    stand_in = RefusingStandIn(refusals=2)
    try:
        call(grpc_flavor(stand_in.target, timeout_s=HANG_S))
        assert stand_in.attempts == {method: 3}
    finally:
        stand_in.stop()


@pytest.mark.parametrize(("method", "call"), EVERY_ADMIN_RPC, ids=[m for m, _ in EVERY_ADMIN_RPC])
def test_every_admin_rpc_refused_for_concurrency_is_sent_again_after_the_retry_delay(method, call):
    """As the environment client's (a Session's checkpoint and restore go through the admin
    client); the restore's request stream is made afresh for each attempt."""
    stand_in = RefusingStandIn(refusals=2)
    try:
        with AdminClient(stand_in.target, timeout_s=HANG_S) as client:
            call(client)
        assert stand_in.attempts == {method: 3}
    finally:
        stand_in.stop()


def test_a_refusal_whose_delay_outlasts_the_deadline_raises_at_once(grpc_flavor):
    stand_in = RefusingStandIn(refusals=10, retry_after_s=HANG_S)
    try:
        client = grpc_flavor(stand_in.target, timeout_s=HANG_S / 2)
        with pytest.raises(CapacityError) as err:
            client.close_session("s", EP)
        assert (err.value.reason, err.value.retry_after_s) == ("TOO_MANY_RPCS", HANG_S)
        assert stand_in.attempts == {"CloseSession": 1}
    finally:
        stand_in.stop()


def test_without_retries_a_refusal_surfaces_but_a_session_blocks_close_still_retries(
    grpc_flavor,
):
    """``max_attempts=1`` shows each answer, except for the close of a ``session()`` block:
    it promises the close, so it retries a refusal within its deadline."""
    stand_in = RefusingStandIn(refusals=2)
    try:
        client = grpc_flavor(stand_in.target, timeout_s=HANG_S, max_attempts=1)
        with pytest.raises(CapacityError):
            client.close_session("s", EP)
        stand_in.attempts.clear()
        stand_in.refusals = 0
        with client.session(TASK, episode=EP):
            stand_in.refusals = 2
        assert stand_in.attempts == {"SeedSession": 1, "CloseSession": 3}
    finally:
        stand_in.stop()


def _refusal(reason: str, retry_after_s: float | None) -> CapacityError:
    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    return CapacityError("full", code, reason=reason, retry_after_s=retry_after_s)


def test_refusal_wait_honours_retry_info_within_the_deadline_and_only_for_too_many_rpcs():
    for _ in range(20):  # the jitter is random: up to 25% more, never less
        assert 1.0 <= refusal_wait(_refusal("TOO_MANY_RPCS", 1.0), 10.0) <= 1.25
    assert refusal_wait(_refusal("TOO_MANY_RPCS", 1.0), 0.99) is None  # past the deadline
    assert refusal_wait(_refusal("TOO_MANY_RPCS", 1.0), 1.2) is None  # no time left to send
    assert refusal_wait(_refusal("TOO_MANY_RPCS", 0.0), 10.0) >= REFUSAL_MIN_WAIT_S
    assert refusal_wait(_refusal("TOO_MANY_RPCS", None), 10.0) >= REFUSAL_FALLBACK_WAIT_S
    assert refusal_wait(_refusal("CAPACITY_EXHAUSTED", 1.0), 10.0) is None  # S7: lasts
    assert refusal_wait(_refusal("", None), 10.0) is None  # gRPC's message-size limit
    unavailable = UnavailableError("x", grpc.StatusCode.UNAVAILABLE, reason="TOO_MANY_RPCS")
    assert refusal_wait(unavailable, 10.0) is None


def test_a_seed_refused_until_its_deadline_is_not_fenced(grpc_flavor):
    """A seed refused TOO_MANY_RPCS at every try did not run, so no session exists: no fence
    is sent; the seed's CapacityError is raised."""
    stand_in = RefusingStandIn(refusals=10**9)
    try:
        client = grpc_flavor(stand_in.target, timeout_s=0.5)
        with pytest.raises(CapacityError), client.session(TASK, episode=EP):
            pytest.fail("the block must not run")
        assert stand_in.attempts["SeedSession"] > 1  # retried within its deadline
        assert "CloseSession" not in stand_in.attempts
    finally:
        stand_in.stop()


class _ReleaseOnRefusal(grpc.UnaryUnaryClientInterceptor):
    """Records each refused RPC's method and then sets ``release`` (the held call goes on)."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release
        self.refused: list[str] = []

    def intercept_unary_unary(self, continuation, client_call_details, request):  # type: ignore[no-untyped-def]
        outcome = continuation(client_call_details, request)
        if outcome.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
            self.refused.append(client_call_details.method.rsplit("/", 1)[-1])
            self.release.set()
        return outcome


@pytest.mark.parametrize("max_attempts", [1, 4])
def test_a_session_blocks_close_refused_at_the_rpc_limit_is_retried_not_leaked(
    make_server, max_attempts
):
    """A server admitting one RPC at a time, its slot held by another session's call when
    the block exits: the close is refused TOO_MANY_RPCS, then sent again after the RetryInfo
    delay once the slot is free. Before, the CapacityError left the session live (until the
    idle TTL)."""
    served, arrived, release = server_with_a_held_slot(make_server)
    watch = _ReleaseOnRefusal(release)
    channel = grpc.intercept_channel(
        grpc.insecure_channel(served.target, options=channel_options(max_attempts)), watch
    )
    client = EnvironmentClient(channel=channel, timeout_s=HANG_S, max_attempts=max_attempts)
    try:
        with ThreadPoolExecutor(1) as pool:
            with client.session(TASK, episode=EP, task_id=TID) as s:
                assert s.call_tool(*WRITE) == "Email sent successfully."
                held = pool.submit(served.client.call_tool, "holder", *WRITE)
                wait(arrived)  # the server's one slot is taken
            assert held.result(HANG_S) == "Email sent successfully."
        assert watch.refused and set(watch.refused) == {"CloseSession"}
        assert served.store.live_count() == 1  # the holder's only
        assert served.client.close_session(s.id, EP) == "ALREADY_CLOSED"
    finally:
        release.set()
        Faults.of(served.store).clear()
        channel.close()


# -- the session context manager ---------------------------------------------------------------


class Interrupted(BaseException):
    """Stands in for KeyboardInterrupt / SystemExit."""


def _closed(env: Env, sid: str) -> bool:
    try:
        env.client.call_tool(sid, *WRITE)
    except SessionClosedError:
        return True
    return False


def test_session_closes_on_normal_exit(make_sdk_env):
    env: Env = make_sdk_env()
    with env.client.session(TASK, episode=EP, task_id=TID) as s:
        assert s.call_tool(*WRITE) == "Email sent successfully."
        assert s.verify([WRITE]).reward == 1.0
        assert env.store.live_count() == 1
    assert env.store.live_count() == 0 and _closed(env, s.id)


@pytest.mark.parametrize("exc_type", [ValueError, Interrupted])
def test_session_closes_when_the_block_raises(make_sdk_env, exc_type):
    env: Env = make_sdk_env()
    with pytest.raises(exc_type), env.client.session(TASK) as s:
        s.call_tool(*WRITE)
        raise exc_type("policy crashed")
    assert env.store.live_count() == 0 and _closed(env, s.id)


def test_a_failing_close_does_not_hide_the_blocks_error(make_sdk_env):
    env: Env = make_sdk_env()
    with pytest.raises(ValueError, match="policy crashed"), env.client.session(TASK) as s:
        Faults.of(env.store).fail_next_release()
        raise ValueError("policy crashed")
    assert env.store.live_count() == 1  # the close failed (C5) ...
    assert env.client.close_session(s.id, s.episode) == "CLOSED"  # ... and can be retried


def test_a_failing_close_after_a_clean_block_raises(make_sdk_env):
    env: Env = make_sdk_env()
    with pytest.raises(ReleaseFailedError), env.client.session(TASK) as s:
        Faults.of(env.store).fail_next_release()
    assert env.client.close_session(s.id, s.episode) == "CLOSED"


def test_a_call_id_retry_must_resend_the_identical_arguments_text(make_sdk_env):
    """T6/T7 compare the text as sent: the same mapping again replays (the SDK serialises it
    the same way), the same arguments written as another text are refused, saying so."""
    env: Env = make_sdk_env()
    name, arguments = WRITE
    with env.client.session(TASK) as s:
        first = s.call_tool(name, arguments, call_id="y1")
        assert s.call_tool(name, dict(arguments), call_id="y1") == first
        respaced = json.dumps(arguments, separators=(",", ":"))
        with pytest.raises(CallIdReusedError) as refused:
            s.call_tool(name, respaced, call_id="y1")
    message, hint = refused.value.message, refused.value.hint
    assert "'y1'" in message and name in message
    assert "identical arguments text" in hint and "identical arguments text" not in message
    assert "json.dumps(arguments, ensure_ascii=False)" in hint


def test_a_call_over_the_message_limit_carries_its_registry_reason(make_server, sdk_flavor):
    """A request over the server's message limit (refused by gRPC, or by the in-process
    transport, without ErrorInfo) is CapacityError REQUEST_TOO_LARGE, on every flavour."""
    served = make_server(settings=Settings(max_message_bytes=64 * 1024))
    client = sdk_flavor(served.running, timeout_s=HANG_S)
    with pytest.raises(CapacityError) as refused:
        client.call_tool("s-big", "email_search_emails", {"query": "x" * 100_000})
    assert refused.value.reason == reasons.REQUEST_TOO_LARGE.name
    assert str(refused.value).startswith("RESOURCE_EXHAUSTED REQUEST_TOO_LARGE: ")


def test_an_answer_over_the_server_s_own_limit_is_a_response_too_large(make_server):
    """gRPC's refusal to send an answer over the server's limit (ListTools' 18 KB on a server
    limited to 2 KB) is CapacityError RESPONSE_TOO_LARGE naming the server's limit, not a
    request too large."""
    served = make_server(settings=Settings(max_message_bytes=2048))
    target = f"127.0.0.1:{served.running.port}"
    with (
        EnvironmentClient(target, timeout_s=HANG_S) as client,
        pytest.raises(CapacityError) as refused,
    ):
        client.list_tools()
    assert refused.value.reason == reasons.RESPONSE_TOO_LARGE.name
    assert "over the server's message limit of 2048 bytes" in str(refused.value)


def _warned_left_open(warned: Any, session_id: str) -> None:
    """``warned`` holds one SessionLeftOpenWarning naming ``session_id`` and its TTL."""
    [warning] = [w for w in warned if issubclass(w.category, SessionLeftOpenWarning)]
    assert repr(session_id) in str(warning.message) and "idle TTL" in str(warning.message)
    assert "an hour by default" in str(warning.message)


def test_a_completed_block_whose_release_fails_names_the_session_left_open(make_sdk_env):
    """Any close failure after a completed block warns naming the session and how long it
    stays; an error other than an unreachable server is raised too, with a note saying so."""
    env: Env = make_sdk_env()
    with (
        pytest.warns(SessionLeftOpenWarning) as warned,
        pytest.raises(ReleaseFailedError) as raised,
        env.client.session(TASK) as s,
    ):
        Faults.of(env.store).fail_next_release()
    _warned_left_open(warned, s.id)
    said = f"session {s.id!r} may stay open on the server, if that server is still running"
    assert any(said in note for note in raised.value.__notes__)


@pytest.mark.parametrize("block_raises", [False, True])
def test_a_client_closed_inside_a_session_block_names_the_session_left_open(
    make_server, grpc_flavor, block_raises
):
    """The client closed inside the block (sync or async): the exit warns naming the session
    and its TTL; the ClientClosedError (or the block's own exception, with a note) says so."""
    served = make_server()
    client = grpc_flavor(served.target, timeout_s=HANG_S)
    expected = LookupError if block_raises else ClientClosedError
    with (
        pytest.warns(SessionLeftOpenWarning) as warned,
        pytest.raises(expected) as raised,
        client.session(TASK, episode=EP, task_id=TID) as s,
    ):
        client.close()
        if block_raises:
            raise LookupError("the block's own")
    _warned_left_open(warned, s.id)
    said = f"session {s.id!r} may stay open on the server, if that server is still running"
    assert any(said in note for note in raised.value.__notes__)
    assert served.running.store.live_count() == 1


def test_a_failed_seed_fences_an_sdk_generated_id(make_sdk_env):
    env: Env = make_sdk_env()
    seen: list[str] = []
    Faults.of(env.store).on("build", seen.append)
    Faults.of(env.store).fail_next_build(10)
    with pytest.raises(UnavailableError), env.client.session(TASK):
        pytest.fail("the block must not run")
    Faults.of(env.store).clear()
    # the id is fenced, so a seed of it that arrives late cannot leak a session
    assert env.client.close_session(seen[0], EP) == "ALREADY_CLOSED"
    assert env.store.live_count() == 0


def test_a_failed_seed_leaves_a_callers_id_free(make_sdk_env):
    env: Env = make_sdk_env()
    Faults.of(env.store).fail_next_build(10)
    with pytest.raises(UnavailableError), env.client.session(TASK, session_id="mine", episode=EP):
        pytest.fail("the block must not run")
    Faults.of(env.store).clear()
    with env.client.session(TASK, session_id="mine", episode=EP) as s:  # the caller retries
        assert s.id == "mine"


# -- automatic recovery never does worse than none ---------------------------------------------

#: (recovery, take a checkpoint first): every automatic recovery path, and none.
ADMIN = Settings(admin_token="adm")
RECOVERY_MODES = [(None, False), ("replay", False), ("checkpoint", False), ("checkpoint", True)]


def _evicted_session(make_server):
    """A server on a fake clock (idle TTL 60 s) with admin RPCs, and an admin client of it."""
    clock = FakeClock()
    served = make_server(SessionConfig(idle_ttl_s=60), ADMIN, clock=clock, evict_interval_s=3600)
    admin = AdminClient(served.target, token="adm", timeout_s=HANG_S)
    return served, clock, admin


@pytest.mark.parametrize(("recovery", "checkpointed"), RECOVERY_MODES)
def test_recovery_of_an_evicted_session_degrades_to_the_outcome_without_it(
    make_server, sdk_flavor, recovery, checkpointed
):
    served, clock, admin = _evicted_session(make_server)
    served = _flavored(served, sdk_flavor)
    with admin, served.client.session(TASK, episode=EP, recovery=recovery, admin=admin) as s:
        assert s.call_tool(*WRITE) == "Email sent successfully."
        if checkpointed:
            s.checkpoint()
        clock.now += 61
        assert served.store.evict_idle() == 1
        result = s.verify([WRITE])
        if checkpointed:  # the one way back: restore the snapshot, claim it (K4), verify it
            assert (result.reward, result.mask_sample) == (1.0, False)
            assert s.recoveries == (Recovery("checkpoint", True, 0, False),)
            return
        # verify: the masked V4 sample, as without recovery (was: SessionExpiredError raised)
        assert (result.reward, result.mask_sample, result.failure_kind) == (
            0.0,
            True,
            "session_lost",
        )
        # tool calls: the call's own typed error, as without recovery
        with pytest.raises(SessionExpiredError) as caught:
            s.call_tool(*WRITE)
        assert caught.value.reason == "SESSION_EXPIRED"
        assert s.recoveries == ()
        assert len(s.failed_recoveries) == (0 if recovery is None else 2)
        assert all(isinstance(e, SessionExpiredError) for e in s.failed_recoveries)
        if recovery is not None:
            assert "recovery (" in "".join(getattr(caught.value, "__notes__", []))
    # close (the block's exit) neither recovers nor raises; nothing is left live
    assert served.store.live_count() == 0


@pytest.mark.parametrize("recovery", ["replay", "checkpoint"])
def test_a_failing_recovery_after_a_retire_keeps_the_outcome_without_it(
    make_server, sdk_flavor, recovery
):
    """The other ways a recovery fails: a restore refused (no admin token) and a diverging
    replay; the caller still gets the masked sample / the call's own SESSION_LOST."""
    served = _flavored(make_server(None, ADMIN), sdk_flavor)
    admin = AdminClient(served.target, token="adm", timeout_s=HANG_S)
    tokenless = AdminClient(served.target, timeout_s=HANG_S)
    with admin, tokenless, served.client.session(TASK, recovery=recovery, admin=tokenless) as s:
        s.call_tool(*WRITE)
        if recovery == "checkpoint":
            s.checkpoint(admin)  # a checkpoint exists, but the handle's restores are refused
        else:
            s._calls[0] = dataclasses.replace(s._calls[0], output_digest=bytes(8))
        assert admin.retire_session(s.id) is True  # K6: the server lets the session go
        result = s.verify([WRITE])
        assert (result.mask_sample, result.failure_kind) == (True, "session_lost")
        assert isinstance(
            s.failed_recoveries[0],
            UnauthenticatedError if recovery == "checkpoint" else ReplayDivergedError,
        )


@pytest.mark.parametrize("how", ["automatic", "by_recover"])
def test_a_diverged_replay_fences_the_handle(make_server, sdk_flavor, how):
    """A replay whose output differs from the recorded one leaves the server holding a session
    that is not the lost one: the handle refuses every later call, naming the session, and
    sends nothing more; a verify answers the masked V4 sample."""
    served = _flavored(make_server(None, ADMIN), sdk_flavor)
    admin = AdminClient(served.target, token="adm", timeout_s=HANG_S)
    recovery = "replay" if how == "automatic" else None
    with admin, served.client.session(TASK, episode=EP, recovery=recovery) as s:
        s.call_tool(*WRITE)
        s.checkpoint(admin)
        s._calls[0] = dataclasses.replace(s._calls[0], output_digest=bytes(8))  # will diverge
        assert admin.retire_session(s.id) is True
        if how == "automatic":
            with pytest.raises(SessionLostError) as lost:  # the call's own error
                s.call_tool(*WRITE)
            assert "the handle is fenced" in "".join(lost.value.__notes__)
        else:
            with pytest.raises(ReplayDivergedError):
                s.recover("replay")
        divergence = s.fenced
        assert isinstance(divergence, ReplayDivergedError) and divergence.session_id == s.id
        for refused in (
            lambda: s.call_tool(*WRITE),
            lambda: s.checkpoint(admin),
            lambda: s.recover("replay"),
            lambda: s.recover("checkpoint"),
        ):
            with pytest.raises(ReplayDivergedError, match=f"session {s.id} is fenced") as caught:
                refused()
            assert (caught.value.reason, caught.value.session_id) == ("REPLAY_DIVERGED", s.id)
            assert caught.value.__cause__ is divergence
        result = s.verify([WRITE])
        assert (result.reward, result.mask_sample, result.failure_kind) == (
            0.0,
            True,
            "session_lost",
        )
        assert f"session {s.id} is fenced" in result.failure_reason
        assert s.fenced is divergence and s.recoveries == ()
        # the server's rebuilt session got the replayed write and nothing after it
        assert _emails(served.client, s.id) == 1
    assert served.store.live_count() == 0  # the block's exit still closed it


@pytest.mark.parametrize("recovery", [None, "replay"])
def test_a_replay_that_stops_is_resumed_before_the_handle_is_used_again(
    make_server, sdk_flavor, recovery
):
    """A recovery's replay that stops on an error (a lost response, no SDK retry) leaves the
    server holding the session without some recorded calls. Until a recovery resumes the
    replay, the handle sends nothing on it (calls and checkpoints: SessionLostError, verify:
    the masked sample); the resumed replay resends the call it stopped on under its call_id
    (T6: answered, not run again) and the calls after it."""
    served = _flavored(make_server(None, ADMIN), sdk_flavor)
    admin = AdminClient(served.target, token="adm", timeout_s=HANG_S)
    with admin, served.raw.session(TASK, episode=EP, recovery=recovery) as s:
        s.call_tool(*WRITE)
        s.call_tool(*WRITE)
        assert admin.retire_session(s.id) is True
        Faults.of(served.store).lose_next_response()  # the first replayed call's answer
        if recovery is None:
            with pytest.raises(UnavailableError):
                s.recover("replay")
        else:
            with pytest.raises(SessionLostError):  # the call's own error, as without recovery
                s.call_tool(*WRITE)
            assert isinstance(s.failed_recoveries[0], UnavailableError)
        assert _emails(served.client, s.id) == 1  # the server holds a partial copy
        incomplete = f"session {s.id} is not fully recovered"
        if recovery is None:
            for refused in (lambda: s.call_tool(*WRITE), lambda: s.checkpoint(admin)):
                with pytest.raises(SessionLostError, match=incomplete):
                    refused()
            result = s.verify([WRITE])
            assert (result.mask_sample, result.failure_kind) == (True, "session_lost")
            assert incomplete in result.failure_reason
            assert _emails(served.client, s.id) == 1  # nothing was sent
            assert s.recover("replay") == Recovery("replay", False, 2, True)
            s.call_tool(*WRITE)
        else:  # the next call resumes the replay, then is sent
            s.call_tool(*WRITE)
            assert s.recoveries == (Recovery("replay", False, 2, True),)
        assert _emails(served.client, s.id) == 3 and len(s.calls) == 3
        assert s.checkpoint(admin).call_count == 3


def test_verify_defaults_to_the_calls_the_session_made(make_sdk_env, sandbox):
    task = generated_write_task(sandbox)
    sdk = make_sdk_env().client
    with sdk.session(task) as s:
        for call in task["ground_truth"]:
            s.call_tool(call["name"], call["arguments"])
        assert [c.name for c in s.calls] == [c["name"] for c in task["ground_truth"]]
        assert s.verify().reward == 1.0
        assert s.verify(s.calls).reward == 1.0
        assert s.verify(list(s.calls)[:1]).reward == 0.0  # RecordedCall items are the prediction
        assert s.verify([]).reward == 0.0  # an explicit empty list is an empty prediction
        truth = [(c["name"], c["arguments"]) for c in task["ground_truth"]]
        assert s.verify(truth).reward == 1.0
    with sdk.session(task) as fresh:
        assert fresh.verify().reward == 0.0  # no calls made: nothing to score


def test_an_unreachable_target_says_what_to_check(grpc_flavor):
    env = grpc_flavor("127.0.0.1:1", timeout_s=HANG_S, max_attempts=1)
    with pytest.raises(UnavailableError) as e:
        env.list_tools()
    assert "target" in e.value.hint and "credentials=tls_credentials(" in e.value.hint
    assert f"fix: {e.value.hint}" in e.value.__notes__


def _server_gone(make_server) -> tuple[EnvironmentClient, Callable[[], None]]:
    """A client of a fresh server (one try per call) and what stops that server."""
    served = make_server()
    client = EnvironmentClient(served.target, timeout_s=HANG_S, max_attempts=1)
    return client, lambda: served.running.stop(grace_s=0)


def test_a_completed_session_block_whose_server_died_warns_naming_the_session(make_server):
    """The server died inside the block: the block's result stands; the exit warns
    (SessionLeftOpenWarning, at the with statement) naming the session id and its TTL."""
    client, stop = _server_gone(make_server)
    with (
        client,
        pytest.warns(SessionLeftOpenWarning) as warned,
        client.session(TASK, episode=EP, task_id=TID) as s,
    ):
        stop()
        result = "the block's result"
    assert result == "the block's result"
    [warning] = warned
    assert repr(s.id) in str(warning.message) and "idle TTL" in str(warning.message)
    assert "UNAVAILABLE" in str(warning.message) and warning.filename == __file__


@pytest.mark.parametrize("ending", ["server_died", "client_closed"])
def test_a_session_block_s_own_exception_is_never_replaced_by_the_close(make_server, ending):
    """An exception leaving the block goes on whatever the close does (an unreachable
    server, a client closed inside the block); a note on it says the close failed too."""
    client, stop = _server_gone(make_server)
    with (
        client,
        pytest.raises(LookupError) as raised,
        client.session(TASK, episode=EP, task_id=TID) as s,
    ):
        stop() if ending == "server_died" else client.close()
        raise LookupError("the block's own")
    assert str(raised.value) == "the block's own"
    assert any(f"closing session {s.id!r} also failed" in n for n in raised.value.__notes__)


# -- what a session records: each applied call once ----------------------------------------------


def test_a_call_sent_again_with_its_call_id_is_recorded_and_scored_once(make_sdk_env):
    """A retry answered as a replay (same call_id, T6) is not a new call: ``calls``, what
    verify sends and what a recovery replays hold it once."""
    env: Env = make_sdk_env()
    task = {"id": "t", "ground_truth": [{"name": WRITE[0], "arguments": json.dumps(WRITE[1])}]}
    with env.client.session(task, episode=EP, task_id=TID) as s:
        first = s.call_tool(*WRITE, call_id="k1")
        assert s.call_tool(*WRITE, call_id="k1") == first
        assert [c.call_id for c in s.calls] == ["k1"]
        assert s.verify().reward == 1.0
        assert s.recover("replay").replayed == 0  # the server holds it: nothing to replay
    assert s.calls == (s.calls[0],)


# -- SessionLeftOpenWarning only when a session may exist ----------------------------------------


def _no_left_open_warning(recorded: Any) -> None:
    assert not [w for w in recorded if issubclass(w.category, SessionLeftOpenWarning)]


def test_a_seed_refused_by_a_definite_status_warns_nothing_and_sends_no_fence(make_sdk_env):
    """A seed the server refused (INVALID_ARGUMENT) made no session: no fence, no warning."""
    env: Env = make_sdk_env()
    with warnings.catch_warnings(record=True) as recorded:
        warnings.simplefilter("always")
        with (
            pytest.raises(WorkplaceEnvError) as refused,
            env.client.session(TASK, episode=("r", -1)),
        ):
            pytest.fail("the block must not run")
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    _no_left_open_warning(recorded)
    assert env.store.live_count() == 0


def test_a_seed_refused_for_concurrency_without_retries_warns_nothing(grpc_flavor):
    """A seed refused TOO_MANY_RPCS (not run, ``retry_refusals=False``) made no session: no
    fence is sent and nothing warns."""
    stand_in = RefusingStandIn(refusals=10**9)
    try:
        client = grpc_flavor(stand_in.target, timeout_s=HANG_S, retry_refusals=False)
        with warnings.catch_warnings(record=True) as recorded:
            warnings.simplefilter("always")
            with pytest.raises(CapacityError), client.session(TASK, episode=EP):
                pytest.fail("the block must not run")
        _no_left_open_warning(recorded)
        assert stand_in.attempts == {"SeedSession": 1}
    finally:
        stand_in.stop()


def test_a_seed_never_sent_warns_nothing(grpc_flavor):
    """A session() of a closed client sends nothing and warns nothing."""
    stand_in = RefusingStandIn(refusals=0)
    try:
        client = grpc_flavor(stand_in.target, timeout_s=HANG_S)
        client.close()
        with warnings.catch_warnings(record=True) as recorded:
            warnings.simplefilter("always")
            with pytest.raises(ClientClosedError), client.session(TASK, episode=EP):
                pytest.fail("the block must not run")
        _no_left_open_warning(recorded)
        assert stand_in.total() == 0
    finally:
        stand_in.stop()


def test_a_seed_with_an_unknown_outcome_is_fenced_and_warns_when_the_fence_fails(make_sdk_env):
    """A seed answered UNAVAILABLE may have run: the block's own id is closed; when that close
    fails too, the warning names the session."""
    env: Env = make_sdk_env()
    Faults.of(env.store).fail_next_build(10)
    Faults.of(env.store).fail_next_release(10)
    with pytest.raises(UnavailableError), env.client.session(TASK, episode=EP):
        pytest.fail("the block must not run")
    Faults.of(env.store).clear()
    assert env.store.live_count() == 0


def test_a_failed_fence_warns_at_the_with_line(server):
    """The fence's SessionLeftOpenWarning points at the caller's ``with`` (as the close's
    does), never into the SDK's driver; its reason is the fence's error."""

    def unavailable(*_args: Any, **_kwargs: Any) -> NoReturn:
        raise UnavailableError("connection lost", grpc.StatusCode.UNAVAILABLE)

    with EnvironmentClient(local(server.port), timeout_s=HANG_S) as client:
        client.seed = client._close = unavailable  # type: ignore[method-assign]
        with (
            pytest.warns(SessionLeftOpenWarning, match=r"closed \(UNAVAILABLE: connection lo") as w,
            pytest.raises(UnavailableError),
            client.session(TASK, episode=EP),
        ):
            pytest.fail("the block must not run")
    assert [x.filename for x in w if issubclass(x.category, SessionLeftOpenWarning)] == [__file__]


@pytest.mark.parametrize("reached", [False, True])
def test_a_close_cut_by_ctrl_c_is_sent_again_then_the_interrupt_raised(server, reached):
    """A first KeyboardInterrupt during the block's close (which may or may not have reached
    the server) sends the close once more: the session is closed, nothing warns, and the
    KeyboardInterrupt goes on; a second one is raised at once with the warning."""
    with EnvironmentClient(local(server.port), timeout_s=HANG_S) as client:
        real = client._close
        cuts = [KeyboardInterrupt()]

        def cut_once(*args: Any, **kwargs: Any) -> str:
            if cuts:
                if reached:
                    real(*args, **kwargs)
                raise cuts.pop()
            return real(*args, **kwargs)

        client._close = cut_once  # type: ignore[method-assign]
        with warnings.catch_warnings(record=True) as recorded:
            warnings.simplefilter("always")
            with pytest.raises(KeyboardInterrupt), client.session(TASK, episode=EP) as s:
                pass
        assert not [w for w in recorded if issubclass(w.category, SessionLeftOpenWarning)]
        assert client.close_session(s.id, EP) == "ALREADY_CLOSED"
        cuts[:] = [KeyboardInterrupt(), KeyboardInterrupt()]
        with (
            pytest.warns(SessionLeftOpenWarning, match=r"not closed \(interrupted\)"),
            pytest.raises(KeyboardInterrupt),
            client.session(TASK, episode=EP) as s,
        ):
            pass
        client._close = real  # type: ignore[method-assign]
        client.close_session(s.id, EP)


def test_a_bare_interrupt_is_named_in_messages():
    assert failure_text(asyncio.CancelledError()) == "cancelled"
    assert failure_text(KeyboardInterrupt()) == "interrupted"
    assert failure_text(LookupError()) == "LookupError"
    assert failure_text(LookupError("k")) == "k"


# -- closing a client ends its calls in flight with ClientClosedError ----------------------------


@pytest.mark.parametrize("transport", ["grpc", "in_process"])
def test_a_sync_client_closed_while_a_call_is_in_flight_ends_it_client_closed(
    make_server, transport
):
    """One rule on both transports: a call under way when another thread closes the client
    ends ClientClosedError with ``in_flight`` (it may have run), also when it ran to its end
    (in-process, the close cannot cut it): never an answer, never "not run"."""
    served = make_server()
    arrived, release = threading.Event(), threading.Event()
    if transport == "grpc":
        client = EnvironmentClient(served.target, timeout_s=HANG_S)
    else:
        client = in_process_client(served.running, timeout_s=HANG_S)
    served.client.seed("held", EP, TID, TASK)

    def hold(sid: str) -> None:
        if sid == "held":
            arrived.set()
            wait(release)

    Faults.of(served.store).on("tool", hold)
    try:
        with ThreadPoolExecutor(1) as pool:
            call = pool.submit(client.call_tool, "held", *WRITE)
            wait(arrived)
            client.close()
            release.set()  # in-process the call runs to its end now; over gRPC it was cut
            with pytest.raises(ClientClosedError) as closed:
                call.result(HANG_S)
        assert closed.value.in_flight and may_have_run(closed.value)
        with pytest.raises(ClientClosedError):
            client.list_tools()
    finally:
        release.set()
        Faults.of(served.store).clear()


def test_an_async_client_closed_while_calls_are_in_flight_ends_them_client_closed(make_server):
    """``await env.close()`` while tasks await calls: each ends ClientClosedError (an
    Exception), not a bare CancelledError; a cancellation of the caller's own task still
    propagates as CancelledError."""
    served = make_server()
    arrived = {sid: threading.Event() for sid in ("own", "closed")}
    release = threading.Event()
    for sid in arrived:
        served.client.seed(sid, EP, TID, TASK)

    def hold(sid: str) -> None:
        if sid in arrived:
            arrived[sid].set()
            wait(release)

    async def scenario() -> None:
        env = AsyncEnvironmentClient(served.target, timeout_s=HANG_S)
        own = asyncio.create_task(env.call_tool("own", *WRITE))
        await asyncio.to_thread(wait, arrived["own"])
        own.cancel()
        with pytest.raises(asyncio.CancelledError):
            await own
        calls = [asyncio.create_task(env.call_tool("closed", *WRITE)) for _ in range(3)]
        await asyncio.to_thread(wait, arrived["closed"])
        await env.close()
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert all(isinstance(r, ClientClosedError) for r in results), results
        with pytest.raises(ClientClosedError):
            await env.list_tools()

    Faults.of(served.store).on("tool", hold)
    try:
        asyncio.run(scenario())
    finally:
        release.set()
        Faults.of(served.store).clear()


def _refuse_sending(monkeypatch: pytest.MonkeyPatch, client: Any) -> None:
    """Make every RPC of ``client`` (sync, or the async one under :class:`Blocking`) fail the
    test: what follows must send nothing."""

    def sent(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"an RPC was sent: {args[:1]}")

    monkeypatch.setattr(client.transport, "unary", sent)


@pytest.mark.parametrize("operation", ["call_tool", "verify", "checkpoint", "recover"])
def test_a_handle_used_after_its_block_raises_session_closed_and_sends_nothing(
    make_sdk_env, monkeypatch, operation
):
    """A caller's bug (the handle kept past its block) is an error, never a masked sample that
    training would drop; the client-level verify of the closed id keeps V4's masked answer."""
    env: Env = make_sdk_env()
    with env.client.session(TASK, episode=EP, task_id=TID) as s:
        s.call_tool(*WRITE)
    assert s.closed
    arguments = {"call_tool": WRITE, "verify": (), "checkpoint": (), "recover": ("replay",)}
    with monkeypatch.context() as patched:
        _refuse_sending(patched, env.client)
        with pytest.raises(SessionClosedError) as refused:
            getattr(s, operation)(*arguments[operation])
    assert refused.value.session_id == s.id and "session() block has ended" in refused.value.message
    assert refused.value.reason == reasons.SESSION_CLOSED.name
    answer = env.client.verify(s.id)
    assert (answer.reward, answer.mask_sample, answer.failure_kind) == (0.0, True, "session_lost")


def test_a_handle_whose_close_failed_is_closed_too(make_sdk_env):
    """The block ended: its handle is done whether or not the close reached the server."""
    env: Env = make_sdk_env()
    with pytest.raises(ReleaseFailedError), env.client.session(TASK) as s:
        Faults.of(env.store).fail_next_release()
    with pytest.raises(SessionClosedError):
        s.call_tool(*WRITE)
    assert env.client.close_session(s.id, s.episode) == "CLOSED"


def test_a_full_server_refuses_a_seed_with_a_hint_naming_its_setting(make_sdk_env):
    """CAPACITY_EXHAUSTED: the message says the server is full, the hint what to do (close
    sessions, retry after the delay, or raise --max-sessions)."""
    env: Env = make_sdk_env(max_sessions=1, retry_after_s=2.5)
    env.raw.seed("full-1", EP, TID, TASK)
    with pytest.raises(CapacityError) as refused:
        env.raw.seed("full-2", ("r-full-2", 0), TID, TASK)
    assert refused.value.reason == reasons.CAPACITY_EXHAUSTED.name
    hint = refused.value.hint
    assert "--max-sessions" in hint and "WORKPLACE_ENV_MAX_SESSIONS" in hint
    assert "close the sessions" in hint and "retry" in hint
    assert f"fix: {hint}" in refused.value.__notes__


@pytest.mark.parametrize(
    "row",
    [
        *(r for r in reasons.REASONS.values() if r.sdk_class),
        *reasons.BY_CODE.values(),
    ],
    ids=lambda r: r.name or r.code.name,
)
def test_every_sdk_error_of_the_registry_has_a_hint_or_says_why_not(row):
    """Each registry row an SDK exception carries has a hint in the one table, or a reason in
    NO_HINT why nothing the user types fixes it; the exception made for it carries the hint."""
    code = row.code or grpc.StatusCode.INTERNAL
    made = error_class(code, row.name)("refused", code, reason=row.name)
    key = made.reason  # the row's name, or its status's name for a row without one
    assert (key in HINTS) != (key in NO_HINT), key
    told = HINTS.get(key, "").format(server="the client's target", **vars(SDK_WORDS))
    assert made.hint == told
