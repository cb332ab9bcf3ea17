"""The SDK's side of the life cycle: what it retries (only idempotent RPCs, on UNAVAILABLE and
CANCELLED),
its call_ids, deadlines, and the session context manager closing on every exit.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from tests.helpers import EP, HANG_S, TASK, TID, WRITE, Env, assert_refused
from tests.helpers import emails as _emails
from workplace.env.v1 import environment_pb2 as pb
from workplace_env.testing.faults import Faults
from workplace_env_client import (
    CapacityError,
    DeadlineError,
    EnvironmentClient,
    ReleaseFailedError,
    SessionClosedError,
    UnavailableError,
    WorkplaceEnvError,
)
from workplace_env_client.client import RETRIED_METHODS, SERVICE, retry_service_config


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
def test_a_seed_cancelled_by_a_closing_listener_is_retried(max_attempts):
    stand_in = _CancelsFirst(cancels=1)
    try:
        with EnvironmentClient(
            f"127.0.0.1:{stand_in.port}", timeout_s=HANG_S, max_attempts=max_attempts
        ) as client:
            if max_attempts == 1:
                with pytest.raises(WorkplaceEnvError) as err:
                    client.seed("s", EP, TID, TASK)
                assert err.value.code == grpc.StatusCode.CANCELLED
            else:
                client.seed("s", EP, TID, TASK)
        assert stand_in.attempts == (1 if max_attempts == 1 else 2)
    finally:
        stand_in.server.stop(None)


def test_sdk_calls_without_call_id_are_distinct_calls(make_env):
    env: Env = make_env()
    env.client.seed("s", EP, TID, TASK)
    env.client.call_tool("s", *WRITE)
    env.client.call_tool("s", *WRITE)  # the same call made twice on purpose: it runs twice
    assert _emails(env.client, "s") == 2


def test_without_retries_a_lost_response_surfaces_and_the_call_id_replays(make_env):
    env: Env = make_env()
    env.raw.seed("s", EP, TID, TASK)
    Faults.of(env.store).lose_next_response()
    with pytest.raises(UnavailableError) as err:
        env.raw.call_tool("s", *WRITE, call_id="mine")
    assert_refused(err.value, grpc.StatusCode.UNAVAILABLE, "INJECTED_FAULT", "s")
    assert env.raw.call_tool("s", *WRITE, call_id="mine") == "Email sent successfully."
    assert _emails(env.raw, "s") == 1  # ran once: the retry replayed


def test_retries_give_up_after_max_attempts_with_the_last_status(make_env):
    env: Env = make_env()
    builds: list[str] = []
    Faults.of(env.store).on("build", builds.append)
    Faults.of(env.store).fail_next_build(10)
    with pytest.raises(UnavailableError) as err:
        env.client.seed("s", EP, TID, TASK)
    assert_refused(err.value, grpc.StatusCode.UNAVAILABLE, "TABLES_UNAVAILABLE", "s")
    assert len(builds) == 4  # DEFAULT_MAX_ATTEMPTS
    assert env.store.live_count() == 0


@pytest.mark.parametrize("case", ["capacity", "release"])
def test_non_retryable_errors_are_not_retried(make_env, case):
    env: Env = make_env(max_sessions=1)
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


def test_every_rpc_has_a_deadline(make_env):
    env: Env = make_env()
    env.client.seed("s", EP, TID, TASK)
    held, go = threading.Event(), threading.Event()

    def hold(sid: str) -> None:
        held.set()
        assert go.wait(HANG_S)

    Faults.of(env.store).on("tool", hold)
    target = f"127.0.0.1:{env.server.port}"
    with EnvironmentClient(target, timeout_s=0.5) as impatient:
        try:
            with pytest.raises(DeadlineError) as err:
                impatient.call_tool("s", *WRITE)
            assert err.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
        finally:
            go.set()


# -- the session context manager ---------------------------------------------------------------


class Interrupted(BaseException):
    """Stands in for KeyboardInterrupt / SystemExit."""


def _closed(env: Env, sid: str) -> bool:
    try:
        env.client.call_tool(sid, *WRITE)
    except SessionClosedError:
        return True
    return False


def test_session_closes_on_normal_exit(make_env):
    env: Env = make_env()
    with env.client.session(TASK, episode=EP, task_id=TID) as s:
        assert s.call_tool(*WRITE) == "Email sent successfully."
        assert s.verify([WRITE]).reward == 1.0
        assert env.store.live_count() == 1
    assert env.store.live_count() == 0 and _closed(env, s.id)


@pytest.mark.parametrize("exc_type", [ValueError, Interrupted])
def test_session_closes_when_the_block_raises(make_env, exc_type):
    env: Env = make_env()
    with pytest.raises(exc_type), env.client.session(TASK) as s:
        s.call_tool(*WRITE)
        raise exc_type("policy crashed")
    assert env.store.live_count() == 0 and _closed(env, s.id)


def test_a_failing_close_does_not_hide_the_blocks_error(make_env):
    env: Env = make_env()
    with pytest.raises(ValueError, match="policy crashed"), env.client.session(TASK) as s:
        Faults.of(env.store).fail_next_release()
        raise ValueError("policy crashed")
    assert env.store.live_count() == 1  # the close failed (C5) ...
    assert env.client.close_session(s.id, s.episode) == "CLOSED"  # ... and can be retried


def test_a_failing_close_after_a_clean_block_raises(make_env):
    env: Env = make_env()
    with pytest.raises(ReleaseFailedError), env.client.session(TASK) as s:
        Faults.of(env.store).fail_next_release()
    assert env.client.close_session(s.id, s.episode) == "CLOSED"


def test_a_failed_seed_fences_an_sdk_generated_id(make_env):
    env: Env = make_env()
    seen: list[str] = []
    Faults.of(env.store).on("build", seen.append)
    Faults.of(env.store).fail_next_build(10)
    with pytest.raises(UnavailableError), env.client.session(TASK):
        pytest.fail("the block must not run")
    Faults.of(env.store).clear()
    # the id is fenced, so a seed of it that arrives late cannot leak a session
    assert env.client.close_session(seen[0], EP) == "ALREADY_CLOSED"
    assert env.store.live_count() == 0


def test_a_failed_seed_leaves_a_callers_id_free(make_env):
    env: Env = make_env()
    Faults.of(env.store).fail_next_build(10)
    with pytest.raises(UnavailableError), env.client.session(TASK, session_id="mine", episode=EP):
        pytest.fail("the block must not run")
    Faults.of(env.store).clear()
    with env.client.session(TASK, session_id="mine", episode=EP) as s:  # the caller retries
        assert s.id == "mine"
