"""Property test of the session life cycle: a Hypothesis state machine against a model.

Random sequences of seed (typed and legacy, with injected build failures), tool calls (with and
without call_id, with lost responses), verify, close (with injected release failures), clock
advances and idle sweeps, over a few ids, episodes and tasks, are run against the real
:class:`~workplace_env.sessions.SessionStore` and against a small model of docs/contract.md written
independently here. Every answer is compared: values, and for refusals the ErrorInfo reason, the
status code and the session named. Every write sends an email whose subject names its session;
every read must return exactly that session's own subjects, so no session's tables ever change
through another session.

The main run drives the store in-process (at least :data:`MIN_STEPS` steps); a smaller run
drives the same machine over gRPC through the SDK, one server per example.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import grpc
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from tests.helpers import FakeClock
from workplace.env.v1 import environment_pb2 as pb
from workplace_env import errors
from workplace_env.identity import EpisodeId, FunctionCall, Task, TaskId
from workplace_env.sandbox.load import load_sandbox
from workplace_env.server.app import start_server
from workplace_env.server.status import DOMAIN, status_code
from workplace_env.sessions import LEGACY_EPISODE, SessionConfig, SessionStore
from workplace_env.testing.faults import Faults
from workplace_env.verify import Verifier
from workplace_env_client import EnvironmentClient, WorkplaceEnvError
from workplace_env_client.errors import from_rpc_error

IDS = ("a", "b", "c", "d")
EPISODES = (EpisodeId("r1", 0), EpisodeId("r1", 1), EpisodeId("r2", 0))
GROUND_TRUTH = FunctionCall(
    "email_send_email", json.dumps({"recipient": "gt@x.com", "subject": "gt", "body": "b"})
)
#: Two tasks: one whose ground truth sends an email, one that changes nothing.
TASKS = (
    (TaskId("ts", "t1"), Task(id="t1", ground_truth=(GROUND_TRUTH,))),
    (TaskId("ts", "t2"), Task(id="t2")),
)
#: The binding a well-behaved client of each id uses.
HOME = {sid: (EPISODES[i % len(EPISODES)], TASKS[i % len(TASKS)]) for i, sid in enumerate(IDS)}
#: Small bounds, so capacity, eviction and every count and age bound are reached often.
CONFIG = SessionConfig(
    max_sessions=3,
    idle_ttl_s=100,
    max_fences=3,
    fence_ttl_s=150,
    max_call_ids=2,
    call_id_ttl_s=150,
    retry_after_s=2,
    retry_window_s=50,
    max_markers=2,
)
#: The contract's status code per reason (SESSION_CLOSED depends on the RPC).
CODES = {
    "SESSION_CONFLICT": "ALREADY_EXISTS",
    "SESSION_LOST": "NOT_FOUND",
    "SESSION_EXPIRED": "NOT_FOUND",
    "TABLES_UNAVAILABLE": "UNAVAILABLE",
    "CAPACITY_EXHAUSTED": "RESOURCE_EXHAUSTED",
    "CALL_ID_REUSED": "ALREADY_EXISTS",
    "EPISODE_MISMATCH": "FAILED_PRECONDITION",
    "RELEASE_FAILED": "INTERNAL",
    "INJECTED_FAULT": "UNAVAILABLE",
}
SENT = '"Email sent successfully."'
MIN_STEPS = 10_000

_SANDBOX = load_sandbox(None)
_VERIFIER = Verifier(_SANDBOX)  # shared: its memo of end states is per sandbox
STEPS = {"store": 0, "grpc": 0}


# -- the system under test, behind one interface ------------------------------------------------


@dataclass
class Refusal(Exception):
    """An RPC's refusal as the model sees it."""

    reason: str
    code: str
    session_id: str


class StoreDriver:
    """The store in-process; domain errors become refusals with the server's status code."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.store = SessionStore(_SANDBOX, CONFIG, clock=self.clock, verifier=_VERIFIER)
        self.faults = Faults.of(self.store)

    def _run(self, rpc: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except errors.SessionError as exc:
            raise Refusal(exc.reason, status_code(exc, rpc).name, exc.session_id) from exc

    def seed(self, sid: str, episode: EpisodeId, task_id: TaskId, task: Task, legacy: bool):
        result = self._run(
            "SeedSession",
            lambda: (
                self.store.seed(sid, None, None, task, legacy=True)
                if legacy
                else self.store.seed(sid, episode, task_id, task)
            ),
        )
        return result.state.value, result.already_seeded, result.rebuilt

    def call(self, sid: str, tool: str, arguments: str, call_id: str) -> tuple[str, bool]:
        result = self._run("CallTool", lambda: self.store.call_tool(sid, tool, arguments, call_id))
        return result.output, result.replayed

    def verify(self, sid: str, predicted: list[FunctionCall]) -> tuple[float, bool, str]:
        outcome = self._run("Verify", lambda: self.store.verify(sid, predicted))
        return outcome.reward, outcome.mask_sample, outcome.failure_kind

    def close(self, sid: str, episode: EpisodeId) -> str:
        return self._run("CloseSession", lambda: self.store.close(sid, episode)).value

    def evict(self) -> int:
        return self.store.evict_idle()

    def live_count(self) -> int:
        return self.store.live_count()

    def shutdown(self) -> None:
        pass


class GrpcDriver(StoreDriver):
    """The same store behind a real server, through the SDK (no retries, so each attempt is
    seen); tool calls go through the stub so a call without call_id really has none."""

    def __init__(self) -> None:
        super().__init__()
        self.server = start_server(self.store, "127.0.0.1:0", max_workers=4, evict_interval_s=3600)
        self.client = EnvironmentClient(
            f"127.0.0.1:{self.server.port}", timeout_s=30, max_attempts=1
        )

    def _run(self, rpc: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except grpc.RpcError as exc:
            return self._refuse(from_rpc_error(exc))
        except WorkplaceEnvError as exc:
            return self._refuse(exc)

    @staticmethod
    def _refuse(exc: WorkplaceEnvError) -> Any:
        assert exc.domain == DOMAIN, exc
        raise Refusal(exc.reason, exc.code.name, exc.session_id) from exc

    def seed(self, sid: str, episode: EpisodeId, task_id: TaskId, task: Task, legacy: bool):
        message = pb.WorkplaceTask(
            id=task.id,
            ground_truth=[
                pb.FunctionCall(name=c.name, arguments=c.arguments) for c in task.ground_truth
            ],
        )
        if legacy:
            response = self._run("SeedSession", lambda: self.client.seed_legacy(sid, message))
        else:
            response = self._run(
                "SeedSession",
                lambda: self.client.seed(
                    sid,
                    (episode.rollout_id, episode.attempt),
                    (task_id.taskset, task_id.task_id),
                    message,
                ),
            )
        state = pb.SessionState.Name(response.state).removeprefix("SESSION_STATE_")
        return state, response.already_seeded, response.rebuilt

    def call(self, sid: str, tool: str, arguments: str, call_id: str) -> tuple[str, bool]:
        request = pb.CallToolRequest(
            resources_session_id=sid, tool_name=tool, arguments=arguments, call_id=call_id
        )
        response = self._run("CallTool", lambda: self.client.stub.CallTool(request, timeout=30))
        return response.output, response.replayed

    def verify(self, sid: str, predicted: list[FunctionCall]) -> tuple[float, bool, str]:
        result = self._run(
            "Verify", lambda: self.client.verify(sid, [(c.name, c.arguments) for c in predicted])
        )
        return result.reward, result.mask_sample, result.failure_kind

    def close(self, sid: str, episode: EpisodeId) -> str:
        return self._run(
            "CloseSession",
            lambda: self.client.close_session(sid, (episode.rollout_id, episode.attempt)),
        )

    def shutdown(self) -> None:
        self.client.close()
        self.server.stop(0)


# -- the model ----------------------------------------------------------------------------------


@dataclass
class ModelSession:
    episode: EpisodeId
    task_id: TaskId
    legacy: bool
    task: Task
    last_used: float
    state: str = "SEEDED"
    subjects: list[str] = field(default_factory=list)
    calls: OrderedDict[str, tuple[float, str, str]] = field(default_factory=OrderedDict)


def _remember(records: OrderedDict, key: str, value: Any, limit: int) -> None:
    records[key] = value
    records.move_to_end(key)
    while len(records) > limit:
        records.popitem(last=False)


def _same(bound: Any, episode: EpisodeId, task_id: TaskId, legacy: bool) -> bool:
    if bound.legacy or legacy:
        return bound.legacy and legacy
    return bound.episode == episode and bound.task_id == task_id


@dataclass(frozen=True)
class Evicted:
    at: float
    episode: EpisodeId
    task_id: TaskId
    legacy: bool


class SessionMachine(RuleBasedStateMachine):
    """Drives a driver and the model side by side; each rule asserts they agree."""

    driver_type: ClassVar[type[StoreDriver]] = StoreDriver
    counter: ClassVar[str] = "store"

    def __init__(self) -> None:
        super().__init__()
        self.driver = self.driver_type()
        self.live: dict[str, ModelSession] = {}
        self.fences: OrderedDict[str, float] = OrderedDict()
        # fenced id -> the episode its typed binding had (C4 after the close), set with its fence
        self.fence_episodes: dict[str, EpisodeId | None] = {}
        self.evictions: OrderedDict[str, Evicted] = OrderedDict()
        # verified legacy id -> (time, reward, the verify's `correct`, the task has a truth)
        self.markers: OrderedDict[str, tuple[float, float, bool, bool]] = OrderedDict()
        self.writes = 0

    def teardown(self) -> None:
        self.driver.shutdown()

    @property
    def now(self) -> float:
        return self.driver.clock.now

    # -- helpers ----------------------------------------------------------------------------

    def _check(self, rpc: str, sid: str, actual: Callable[[], Any], expected: Any) -> None:
        """Run ``actual``; its value must equal ``expected``, or its refusal the expected one."""
        STEPS[self.counter] += 1
        try:
            value = actual()
        except Refusal as refusal:
            assert isinstance(expected, str) and expected.isupper(), (rpc, refusal, expected)
            code = "ALREADY_EXISTS" if rpc == "SeedSession" else "NOT_FOUND"
            if expected != "SESSION_CLOSED":
                code = CODES[expected]
            assert refusal == Refusal(expected, code, sid), (rpc, refusal, expected)
        else:
            assert value == expected, (rpc, sid, value, expected)
        finally:
            self.driver.faults.clear()  # an armed fault the call did not reach must not linger

    def _fenced(self, sid: str) -> bool:
        at = self.fences.get(sid)
        return at is not None and self.now - at <= CONFIG.fence_ttl_s

    def _evicted(self, sid: str) -> Evicted | None:
        record = self.evictions.get(sid)
        return record if record is not None and self.now - record.at <= CONFIG.fence_ttl_s else None

    def _gone(self, sid: str) -> str:
        if self._fenced(sid):
            return "SESSION_CLOSED"
        return "SESSION_EXPIRED" if self._evicted(sid) else "SESSION_LOST"

    def _expected_seed(
        self, sid: str, episode: EpisodeId, task_id: TaskId, task: Task, legacy: bool, fail: bool
    ) -> Any:
        held = self.live.get(sid)
        if held is not None:
            if not _same(held, episode, task_id, legacy):
                return "SESSION_CONFLICT"
            if not legacy:
                held.last_used = self.now
                return held.state, True, False
            if fail:
                return "TABLES_UNAVAILABLE"
            held.subjects, held.task, held.state, held.last_used = [], task, "SEEDED", self.now
            held.calls.clear()
            return "SEEDED", False, True
        if self._fenced(sid):
            return "SESSION_CLOSED"
        evicted = self._evicted(sid)
        if evicted is not None and not _same(evicted, episode, task_id, legacy):
            return "SESSION_CONFLICT"
        if evicted is not None and not legacy:
            return "SESSION_EXPIRED"  # X1: a late seed never hides the loss behind fresh tables
        if len(self.live) >= CONFIG.max_sessions:
            self._evict_expired()  # a full store evicts its sessions past their TTL first
        if len(self.live) >= CONFIG.max_sessions:
            return "CAPACITY_EXHAUSTED"
        if fail:
            return "TABLES_UNAVAILABLE"
        self.live[sid] = ModelSession(episode, task_id, legacy, task, self.now)
        self.evictions.pop(sid, None)
        self.markers.pop(sid, None)
        return "SEEDED", False, False

    # -- rules ------------------------------------------------------------------------------

    @rule(
        sid=st.sampled_from(IDS),
        episode=st.sampled_from(EPISODES),
        task=st.sampled_from(TASKS),
        legacy=st.sampled_from((False, False, False, True)),
        fail=st.sampled_from((False,) * 7 + (True,)),
    )
    def seed(self, sid: str, episode: EpisodeId, task: tuple, legacy: bool, fail: bool) -> None:
        self._seed(sid, episode, task, legacy, fail)

    # Typed seeds and writes get a second rule each: rules are drawn uniformly, and without the
    # extra weight most steps would go to ids already closed.
    @rule(sid=st.sampled_from(IDS))
    def seed_home(self, sid: str) -> None:
        """A well-behaved client: the id's own episode and task, retried as often as it likes."""
        episode, task = HOME[sid]
        self._seed(sid, episode, task, legacy=False, fail=False)

    @rule(sid=st.sampled_from(IDS), variant=st.integers(0, 2), call_id=st.sampled_from(("", "k0")))
    def send_plain(self, sid: str, variant: int, call_id: str) -> None:
        self._send(sid, variant, call_id, lose=False)

    def _seed(self, sid: str, episode: EpisodeId, task: tuple, legacy: bool, fail: bool) -> None:
        task_id, data = task
        if legacy:
            episode, task_id = LEGACY_EPISODE, TaskId("legacy", data.id)
        expected = self._expected_seed(sid, episode, task_id, data, legacy, fail)
        if fail:
            self.driver.faults.fail_next_build()
        self._check(
            "SeedSession",
            sid,
            lambda: self.driver.seed(sid, episode, task_id, data, legacy),
            expected,
        )

    @rule(
        sid=st.sampled_from(IDS),
        variant=st.integers(0, 2),
        call_id=st.sampled_from(("", "", "k0", "k1", "k2")),
        lose=st.sampled_from((False,) * 9 + (True,)),
    )
    def send(self, sid: str, variant: int, call_id: str, lose: bool) -> None:
        self._send(sid, variant, call_id, lose)

    def _send(self, sid: str, variant: int, call_id: str, lose: bool) -> None:
        subject = f"zq{sid}{variant}"
        arguments = json.dumps({"recipient": "x@y.com", "subject": subject, "body": "b"})
        expected = self._expected_send(sid, subject, arguments, call_id, lose)
        if lose:
            self.driver.faults.lose_next_response()
        self._check(
            "CallTool",
            sid,
            lambda: self.driver.call(sid, "email_send_email", arguments, call_id),
            expected,
        )

    def _expected_send(self, sid: str, subject: str, arguments: str, call_id: str, lose: bool):
        held = self.live.get(sid)
        if held is None:
            return self._gone(sid)
        held.last_used = self.now
        if call_id:
            while (
                held.calls and self.now - next(iter(held.calls.values()))[0] > CONFIG.call_id_ttl_s
            ):
                held.calls.popitem(last=False)
            seen = held.calls.get(call_id)
            if seen is not None:
                return (seen[2], True) if seen[1] == arguments else "CALL_ID_REUSED"
        held.subjects.append(subject)
        if call_id:
            _remember(held.calls, call_id, (self.now, arguments, SENT), CONFIG.max_call_ids)
        return "INJECTED_FAULT" if lose else (SENT, False)

    @rule(sid=st.sampled_from(IDS))
    def read(self, sid: str) -> None:
        """A session reads back exactly its own writes: nothing of any other session."""
        held = self.live.get(sid)
        if held is None:
            expected: Any = self._gone(sid)
        else:
            held.last_used = self.now
            expected = sorted(held.subjects)

        def subjects() -> list[str]:
            output, _ = self.driver.call(
                sid, "email_search_emails", '{"query": "zq", "page_size": 100}', ""
            )
            found = json.loads(output)
            return (
                [] if found == "No emails found." else sorted(e["subject"] for e in found["emails"])
            )

        self._check("CallTool", sid, subjects, expected)

    @rule(
        sid=st.sampled_from(IDS),
        correct=st.booleans(),
        fail=st.sampled_from((False,) * 5 + (True,)),
    )
    def verify(self, sid: str, correct: bool, fail: bool) -> None:
        predicted = [GROUND_TRUTH] if correct else []
        held = self.live.get(sid)
        expected: Any
        if held is not None:
            reward = 1.0 if correct == bool(held.task.ground_truth) else 0.0
            expected = (reward, False, "")
            if not held.legacy:
                held.state, held.last_used = "VERIFIED", self.now
            elif not fail:  # a failed legacy release keeps the session live
                del self.live[sid]
                truth = bool(held.task.ground_truth)
                _remember(self.markers, sid, (self.now, reward, correct, truth), CONFIG.max_markers)
        else:
            marker = self.markers.get(sid)
            if marker is not None and self.now - marker[0] <= CONFIG.retry_window_s:
                # V3: an identical resend gets the remembered reward; another response is
                # scored afresh against the remembered task
                _, reward, was_correct, truth = marker
                fresh = 1.0 if correct == truth else 0.0
                expected = (reward if correct == was_correct else fresh, False, "")
            else:
                expected = (0.0, True, "session_lost")
        if fail:
            self.driver.faults.fail_next_release()
        self._check("Verify", sid, lambda: self.driver.verify(sid, predicted), expected)

    @rule(
        sid=st.sampled_from(IDS),
        episode=st.sampled_from(EPISODES),
        own=st.booleans(),
        fail=st.sampled_from((False,) * 5 + (True,)),
    )
    def close(self, sid: str, episode: EpisodeId, own: bool, fail: bool) -> None:
        if own and sid in self.live:  # the caller that seeded it (mostly the case)
            episode = self.live[sid].episode
        expected = self._expected_close(sid, episode, fail)
        if fail:
            self.driver.faults.fail_next_release()
        self._check("CloseSession", sid, lambda: self.driver.close(sid, episode), expected)

    def _expected_close(self, sid: str, episode: EpisodeId, fail: bool) -> str:
        held = self.live.get(sid)
        if held is not None:
            if not held.legacy and held.episode != episode:
                return "EPISODE_MISMATCH"
            if fail:
                return "RELEASE_FAILED"
            del self.live[sid]
            _remember(self.fences, sid, self.now, CONFIG.max_fences)
            self.fence_episodes[sid] = None if held.legacy else held.episode
            return "CLOSED"
        if self._fenced(sid):
            bound = self.fence_episodes.get(sid)
            return "EPISODE_MISMATCH" if bound not in (None, episode) else "ALREADY_CLOSED"
        evicted = self._evicted(sid)
        if evicted is not None and not evicted.legacy and evicted.episode != episode:
            return "EPISODE_MISMATCH"
        self.evictions.pop(sid, None)
        marker = self.markers.pop(sid, None)
        verified = marker is not None and self.now - marker[0] <= CONFIG.retry_window_s
        _remember(self.fences, sid, self.now, CONFIG.max_fences)
        self.fence_episodes[sid] = None if evicted is None or evicted.legacy else evicted.episode
        return "CLOSED" if evicted is not None or verified else "NOT_SEEDED"

    @rule(seconds=st.sampled_from((1, 49, 50, 100, 150)))  # hits the bounds exactly
    def advance(self, seconds: int) -> None:
        STEPS[self.counter] += 1
        self.driver.clock.now += seconds

    def _evict_expired(self) -> int:
        """X1 in the model: evict the sessions idle past their TTL; how many."""
        cutoff = self.now - CONFIG.idle_ttl_s
        idle = [sid for sid, held in self.live.items() if held.last_used < cutoff]
        for sid in idle:
            held = self.live.pop(sid)
            record = Evicted(self.now, held.episode, held.task_id, held.legacy)
            _remember(self.evictions, sid, record, CONFIG.max_fences)
        return len(idle)

    @rule()
    def evict(self) -> None:
        self._check("evict", "", self.driver.evict, self._evict_expired())

    @invariant()
    def live_sessions_agree(self) -> None:
        assert self.driver.live_count() == len(self.live)


class GrpcSessionMachine(SessionMachine):
    driver_type = GrpcDriver
    counter = "grpc"


def test_session_life_cycle_matches_the_model_in_process():
    STEPS["store"] = 0
    run_state_machine_as_test(
        SessionMachine,
        settings=settings(
            max_examples=250,
            stateful_step_count=50,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
    assert STEPS["store"] >= MIN_STEPS, STEPS


def test_session_life_cycle_matches_the_model_over_grpc():
    STEPS["grpc"] = 0
    run_state_machine_as_test(
        GrpcSessionMachine,
        settings=settings(
            max_examples=40,
            stateful_step_count=50,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
    assert STEPS["grpc"] >= 1_000, STEPS
