"""Replicas behind a real L7 proxy: HAProxy from Debian runs deploy/haproxy.cfg, the
recipe of docs/operations/replicas.md, in front of three ``workplace-env serve --http-address``
replicas on loopback.

gRPC sessions are routed by a consistent hash of ``x-resources-session-id``; HTTP gateway
sessions by HAProxy's inserted cookie, from the first (cookieless) legacy seed on. Checked:
1,000 sessions x 10 calls per transport with no NOT_FOUND and the single-server outputs and
rewards; a replica SIGKILLed mid-run costs only its own sessions, which answer SESSION_LOST
(gRPC NOT_FOUND, HTTP 404 ``session_lost``; never INTERNAL or 5xx) and recover by checkpoint
restore or replay to the same results; a replica drained by SIGTERM (CONTRACT X2) loses nothing.

The test installs haproxy with apt-get when it is missing and skips, with the reason, only
when that is impossible.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import grpc
import httpx
import pytest

from tests.helpers import READ_ONLY, SCRIPTS, Expected, predicted, script, task_row, uninterrupted
from tests.proxy_cluster import ADMIN_TOKEN, HAPROXY_CONFIG, REPLICA_COOKIE, Cluster, ensure_haproxy
from workplace_env.sandbox.load import load_sandbox
from workplace_env.server.app import start_server
from workplace_env.sessions import SessionStore
from workplace_env_client import (
    SESSION_HEADER,
    EnvironmentClient,
    Session,
    SessionLostError,
    UnavailableError,
    task_from_row,
)

SESSIONS = 1_000  # per transport
CHECKPOINT_AT, KILL_AT = 8, 10  # calls made before the checkpoint, before the SIGKILL
CALLS = len(script(0))  # 15: the last five run after the kill
WORKERS = 8  # client threads per transport


@pytest.fixture(scope="module")
def haproxy() -> str:
    path, reason = ensure_haproxy()
    if path is None:
        pytest.skip(reason)
    return path


@pytest.fixture(scope="module")
def expected(sandbox) -> dict[int, Expected]:
    """Each script's outputs and reward on one in-process server, uninterrupted."""
    return uninterrupted(sandbox, "proxy")


# -- one episode over each transport ------------------------------------------------------------


@dataclass
class GrpcRun:
    """A gRPC episode through the proxy: the SDK's session handle and what happened to it."""

    index: int
    session: Session
    outputs: list[Any] = field(default_factory=list)
    lost: list[SessionLostError] = field(default_factory=list)

    @property
    def k(self) -> int:
        return self.index % SCRIPTS

    def calls(self, start: int, stop: int, recover: str | None = None) -> None:
        """Calls ``start:stop`` of the script; on SESSION_LOST, ``recover`` (or fail)."""
        for name, arguments in script(self.k)[start:stop]:
            try:
                output = self.session.call_tool(name, arguments)
            except SessionLostError as exc:
                if recover is None:
                    raise
                self.lost.append(exc)
                self.session.recover(recover)  # type: ignore[arg-type]
                output = self.session.call_tool(name, arguments)
            self.outputs.append(output)

    def verify(self, recover: str | None = None) -> float:
        """Verify; a ``session_lost`` answer (V4: masked, reward 0) with ``recover``: recover
        and verify again."""
        result = self.session.verify(predicted(self.k))
        if result.failure_kind == "session_lost" and recover is not None:
            self.lost.append(SessionLostError("verify", grpc.StatusCode.NOT_FOUND))
            self.session.recover(recover)  # type: ignore[arg-type]
            result = self.session.verify(predicted(self.k))
        assert not result.mask_sample, (self.session.id, result)
        return result.reward


def start_grpc(env: EnvironmentClient, i: int, seed_attempts: int = 1) -> GrpcRun:
    """Seed session ``i`` (``seed_attempts`` > 1: retry UNAVAILABLE, as a collector would)."""
    k = i % SCRIPTS
    sid, episode, task_id, row = f"proxy-{i}", (f"r{i}", 0), ("proxy", f"t{k}"), task_row(k)
    for attempt in range(seed_attempts):
        try:
            env.seed(sid, episode, task_id, row)
            break
        except UnavailableError as exc:
            if attempt + 1 == seed_attempts:
                raise
            time.sleep(exc.retry_after_s or 0.2)  # a collector's backoff (X2: RetryInfo)
    handle = Session(
        env,
        sid,
        episode,
        task_id=task_id,
        task=task_from_row(row),
        admin=env.admin(ADMIN_TOKEN),
        recovery="replay" if i % 3 == 2 else None,  # a third recover inside call_tool
    )
    return GrpcRun(i, handle)


class HttpStatusError(AssertionError):
    """An HTTP answer the contract does not allow here."""


@dataclass
class HttpRun:
    """A legacy HTTP episode through the proxy, as NeMo Gym's agent drives one: cookies only."""

    index: int
    cookies: dict[str, str] = field(default_factory=dict)
    outputs: list[Any] = field(default_factory=list)
    lost: list[dict[str, Any]] = field(default_factory=list)
    replicas: list[str] = field(default_factory=list)  # the HAProxy cookie of each answer

    @property
    def k(self) -> int:
        return self.index % SCRIPTS

    def post(self, http: httpx.Client, path: str, body: Any) -> httpx.Response:
        answer = http.post(
            path,
            content=json.dumps(body),
            headers={
                "content-type": "application/json",
                "cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items()),
            },
        )
        self.cookies.update(answer.cookies.items())
        # HAProxy sets its cookie on every answer, not only the first.
        self.replicas.append(answer.cookies.get(REPLICA_COOKIE, ""))
        return answer

    def seed(self, http: httpx.Client) -> None:
        answer = self.post(http, "/seed_session", task_row(self.k))
        if answer.status_code != 200:
            raise HttpStatusError(f"seed {self.index}: {answer.status_code} {answer.text}")

    def calls(self, http: httpx.Client, start: int, stop: int, recover: bool = False) -> None:
        """Calls ``start:stop``; on 404 ``session_lost`` with ``recover``: seed again on the
        same cookie and replay every call made so far (their outputs must not change)."""
        for name, arguments in script(self.k)[start:stop]:
            answer = self.post(http, f"/{name}", json.loads(arguments))
            if answer.status_code == 404 and recover:
                problem = answer.json()
                assert problem["failure_kind"] == "session_lost", problem
                self.recover(http, problem)
                answer = self.post(http, f"/{name}", json.loads(arguments))
            if answer.status_code != 200:
                raise HttpStatusError(f"{name} {self.index}: {answer.status_code} {answer.text}")
            self.outputs.append(answer.json()["output"])

    def recover(self, http: httpx.Client, problem: dict[str, Any]) -> None:
        """Seed again on the same cookies (HAProxy has pinned them to a live replica) and
        replay every call made so far; their outputs must not change."""
        self.lost.append(problem)
        self.seed(http)
        done = len(self.outputs)
        for (name, arguments), before in zip(script(self.k)[:done], self.outputs, strict=True):
            again = self.post(http, f"/{name}", json.loads(arguments))
            assert again.status_code == 200 and again.json()["output"] == before

    def verify(self, http: httpx.Client, recover: bool = False) -> float:
        """Verify; a ``session_lost`` answer (V4: 200, masked) with ``recover``: recover and
        verify again."""
        output = [
            {"type": "function_call", "call_id": f"c{j}", "name": n, "arguments": a}
            for j, (n, a) in enumerate(predicted(self.k))
        ]
        body = {**task_row(self.k), "responses_create_params": {}, "response": {"output": output}}
        for attempt in (0, 1):
            answer = self.post(http, "/verify", body)
            if answer.status_code != 200:
                raise HttpStatusError(f"verify {self.index}: {answer.status_code} {answer.text}")
            result = answer.json()
            if result["failure_kind"] == "session_lost" and recover and attempt == 0:
                self.recover(http, result)
                continue
            assert result["mask_sample"] is False, result
            return float(result["reward"])
        raise AssertionError("unreachable")


class HttpClients:
    """One keep-alive httpx client per worker thread, all to the proxy."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.local = threading.local()
        self.made: list[httpx.Client] = []
        self.lock = threading.Lock()

    def get(self) -> httpx.Client:
        client = getattr(self.local, "client", None)
        if client is None:
            client = httpx.Client(base_url=self.url, timeout=60)
            self.local.client = client
            with self.lock:
                self.made.append(client)
        return client

    def close(self) -> None:
        for client in self.made:
            client.close()


def both(pool: ThreadPoolExecutor, grpc_job: Callable[[], Any], http_job: Callable[[], Any]):
    """Run the two transports' jobs side by side; return both results (raising either error)."""
    grpc_future, http_future = pool.submit(grpc_job), pool.submit(http_job)
    return grpc_future.result(), http_future.result()


def held_by(target: str, runs: list[GrpcRun], pool: ThreadPoolExecutor) -> set[int]:
    """The gRPC runs whose session the replica at ``target`` holds (a read-only probe there)."""
    with EnvironmentClient(target, max_attempts=1) as direct:

        def held(run: GrpcRun) -> bool:
            try:
                direct.call_tool_raw(run.session.id, *READ_ONLY)
            except SessionLostError:
                return False
            return True

        return {r.index for r, h in zip(runs, pool.map(held, runs), strict=True) if h}


def typed_http_seeds_land_where_grpc_routes(cluster: Cluster, count: int = 30) -> None:
    """A typed HTTP seed carrying ``x-resources-session-id`` (and no cookie yet) lands where
    gRPC requests for that id land: both backends hash the same ids onto the same servers.
    gRPC then calls a tool of the session and closes it (NOT_FOUND had it landed elsewhere)."""
    before = [r.seeds() for r in cluster.replicas if r.proc.poll() is None]
    with (
        EnvironmentClient(cluster.proxy.grpc_target) as env,
        httpx.Client(base_url=cluster.proxy.http_url) as http,
    ):
        for i in range(count):
            sid = f"both-{i}"
            http.cookies.clear()  # a session of its own: no cookie pins it yet
            answer = http.post(
                "/seed_session",
                json={
                    "resources_session_id": sid,
                    "episode_id": {"rollout_id": f"r{i}", "attempt": 0},
                    "task_id": {"taskset": "proxy", "task_id": "t0"},
                    "task": task_row(0),
                },
                headers={SESSION_HEADER: sid},
            )
            assert answer.status_code == 200, answer.text
            env.call_tool(sid, *READ_ONLY)
            assert env.close_session(sid, (f"r{i}", 0)) == "CLOSED"
    gained = [
        after - b
        for after, b in zip(
            [r.seeds() for r in cluster.replicas if r.proc.poll() is None], before, strict=True
        )
    ]
    assert sum(gained) == count and min(gained) > 0, gained  # spread over every live replica


# -- the tests ----------------------------------------------------------------------------------


def test_sessions_keep_their_replica_through_haproxy_and_survive_a_sigkill(haproxy, expected):
    with (
        Cluster(haproxy) as cluster,
        ThreadPoolExecutor(max_workers=WORKERS) as grpc_pool,
        ThreadPoolExecutor(max_workers=WORKERS) as http_pool,
        ThreadPoolExecutor(max_workers=2) as side,
        EnvironmentClient(cluster.proxy.grpc_target, timeout_s=60) as env,
    ):
        http = HttpClients(cluster.proxy.http_url)
        names = {f"r{i}": replica for i, replica in enumerate(cluster.replicas, start=1)}

        # 1,000 sessions x 10 calls on each transport, side by side: nothing is NOT_FOUND.
        def grpc_start(i: int) -> GrpcRun:
            run = start_grpc(env, i)
            run.calls(0, CHECKPOINT_AT)
            if i % 3 == 0:
                run.session.checkpoint()  # through the proxy, from the replica holding it
            run.calls(CHECKPOINT_AT, KILL_AT)
            return run

        def http_start(i: int) -> HttpRun:
            run = HttpRun(i)
            run.seed(http.get())
            run.calls(http.get(), 0, KILL_AT)
            return run

        grpc_runs, http_runs = both(
            side,
            lambda: list(grpc_pool.map(grpc_start, range(SESSIONS))),
            lambda: list(http_pool.map(http_start, range(SESSIONS))),
        )
        for run in http_runs:  # HAProxy pinned each HTTP session from its first answer on
            assert len(set(run.replicas)) == 1 and run.replicas[0] in names, run.replicas
        assert {r.replicas[0] for r in http_runs} == set(names)  # over all three
        seeds = [r.seeds() for r in cluster.replicas]
        assert sum(seeds) == 2 * SESSIONS, seeds  # each session seeded once, on one replica
        assert min(seeds) > SESSIONS // 5, seeds  # and they spread over all three

        # No replica left the pool under the load so far (a slow one would lose sessions), and
        # no request went to another replica than its session's.
        assert cluster.proxy.went_down() == [] and cluster.proxy.redispatched() == []
        victim_name, victim = "r1", cluster.replicas[0]
        on_victim = held_by(victim.grpc, grpc_runs, grpc_pool)
        http_on_victim = {r.index for r in http_runs if r.replicas[0] == victim_name}
        assert on_victim and http_on_victim
        # The gRPC ring put about a third there, and the victim holds nothing else.
        assert len(on_victim) + len(http_on_victim) == seeds[0]

        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(timeout=30)

        def grpc_finish(run: GrpcRun) -> None:
            strategy = "checkpoint" if run.index % 3 == 0 else "replay"
            run.calls(KILL_AT, CALLS, recover=strategy)
            assert run.verify(recover=strategy) == expected[run.k].reward, run.session.id

        def http_finish(run: HttpRun) -> None:
            run.calls(http.get(), KILL_AT, CALLS, recover=True)
            assert run.verify(http.get(), recover=True) == expected[run.k].reward, run.index

        both(
            side,
            lambda: list(grpc_pool.map(grpc_finish, grpc_runs)),
            lambda: list(http_pool.map(http_finish, http_runs)),
        )
        http.close()
        typed_http_seeds_land_where_grpc_routes(cluster)  # on the two survivors' ring
        # Only the victim left the pool (its gRPC side, and its HTTP side tracking it).
        assert all("_replicas/r1 is DOWN" in line for line in cluster.proxy.went_down())

    for run in grpc_runs:
        assert run.outputs == expected[run.k].outputs, run.session.id
        if run.index not in on_victim:  # the survivors' sessions never noticed
            assert not run.lost and not run.session.recoveries, run.session.id
            continue
        (recovery,) = run.session.recoveries
        if run.index % 3 == 2:  # recovered inside call_tool
            assert not run.lost and recovery.strategy == "replay"
            continue
        (lost,) = run.lost
        assert (lost.code, lost.reason) == (grpc.StatusCode.NOT_FOUND, "SESSION_LOST")
        if run.index % 3 == 0:  # restored onto a surviving replica, then the calls since
            assert (recovery.strategy, recovery.restored) == ("checkpoint", True)
            assert recovery.replayed == KILL_AT - CHECKPOINT_AT
        else:
            assert (recovery.strategy, recovery.replayed) == ("replay", KILL_AT)
    for run in http_runs:
        assert run.outputs == expected[run.k].outputs, run.index
        if run.index in http_on_victim:  # one 404 session_lost, then pinned to a survivor
            (lost,) = run.lost
            assert lost["reason"] == "SESSION_LOST"
            assert run.replicas[-1] in names and run.replicas[-1] != victim_name
        else:
            assert not run.lost and set(run.replicas) == {run.replicas[0]}, run.index


def test_a_drained_replica_loses_nothing(haproxy, expected):
    """SIGTERM on a replica mid-run (X2): its in-flight calls finish, it exits cleanly, seeds
    keep landing on the others, and its sessions continue elsewhere (SESSION_LOST, replay) to
    the uninterrupted results; no request ever answers INTERNAL, CANCELLED or 5xx.

    ``--drain-delay-s 1`` keeps the replica serving, NOT_SERVING, for a second before it stops,
    so HAProxy's checks (every 250 ms) take it out first: without it, RPCs HAProxy sends in
    the last instant before it notices are cancelled by the stopping gRPC server."""
    sessions, fresh, term_after = 300, 150, 1_500  # per transport; calls before SIGTERM
    done = threading.Semaphore(0)
    with (
        Cluster(haproxy, "--grace-s", "10", "--drain-delay-s", "1") as cluster,
        ThreadPoolExecutor(max_workers=WORKERS) as grpc_pool,
        ThreadPoolExecutor(max_workers=WORKERS) as http_pool,
        ThreadPoolExecutor(max_workers=2) as side,
        EnvironmentClient(cluster.proxy.grpc_target, timeout_s=60) as env,
    ):
        http = HttpClients(cluster.proxy.http_url)

        def grpc_start(i: int) -> GrpcRun:
            run = start_grpc(env, i)
            run.calls(0, 5)
            return run

        def http_start(i: int) -> HttpRun:
            run = HttpRun(i)
            run.seed(http.get())
            run.calls(http.get(), 0, 5)
            return run

        grpc_runs, http_runs = both(
            side,
            lambda: list(grpc_pool.map(grpc_start, range(sessions))),
            lambda: list(http_pool.map(http_start, range(sessions))),
        )
        drained = cluster.replicas[1]
        on_drained = held_by(drained.grpc, grpc_runs, grpc_pool)
        http_on_drained = {r.index for r in http_runs if r.replicas[0] == "r2"}
        assert on_drained and http_on_drained

        def step(work: Callable[[], None]) -> None:
            work()
            done.release()

        def grpc_finish(run: GrpcRun) -> GrpcRun:
            for j in range(5, CALLS):
                step(lambda j=j: run.calls(j, j + 1, recover="replay"))
            assert run.verify(recover="replay") == expected[run.k].reward, run.session.id
            return run

        def http_finish(run: HttpRun) -> HttpRun:
            for j in range(5, CALLS):
                step(lambda j=j: run.calls(http.get(), j, j + 1, recover=True))
            assert run.verify(http.get(), recover=True) == expected[run.k].reward, run.index
            return run

        def grpc_fresh(i: int) -> GrpcRun:  # seeded while the drain goes on
            run = start_grpc(env, i, seed_attempts=5)
            run.calls(0, 5, recover="replay")
            return grpc_finish(run)

        def http_fresh(i: int) -> HttpRun:
            run = HttpRun(i)
            run.seed(http.get())
            run.calls(http.get(), 0, 5, recover=True)
            return http_finish(run)

        new = range(sessions, sessions + fresh)
        grpc_jobs = side.submit(
            lambda: (
                list(grpc_pool.map(grpc_finish, grpc_runs)),
                list(grpc_pool.map(grpc_fresh, new)),
            )
        )
        http_jobs = side.submit(
            lambda: (
                list(http_pool.map(http_finish, http_runs)),
                list(http_pool.map(http_fresh, new)),
            )
        )
        for _ in range(term_after):  # mid-run: once this many calls have been answered
            assert done.acquire(timeout=120)
        drained.proc.send_signal(signal.SIGTERM)
        (_, grpc_new), (_, http_new) = grpc_jobs.result(), http_jobs.result()
        assert drained.proc.wait(timeout=60) == 0  # a clean drain, not a crash
        assert all("_replicas/r2 is DOWN" in line for line in cluster.proxy.went_down())
        http.close()

    for run in [*grpc_runs, *grpc_new]:
        assert run.outputs == expected[run.k].outputs, run.session.id
        if run.index < sessions and run.index not in on_drained:  # the others': untouched
            assert not run.session.recoveries, run.session.id
    for run in [*http_runs, *http_new]:
        assert run.outputs == expected[run.k].outputs, run.index
        if run.index < sessions and run.index not in http_on_drained:
            assert not run.lost, run.index
    # The drain did move sessions: some of its own recovered on the others.
    assert any(r.session.recoveries for r in grpc_runs if r.index in on_drained)
    assert any(r.lost for r in http_runs if r.index in http_on_drained)
    # The fresh sessions never landed on the drained replica once it left.
    assert all(r.replicas[-1] != "r2" for r in http_new)


#: How long the stalled replica stays stopped: longer than the 2 s health-check timeout that
#: Took a slow replica out of the pool once, far below today's 30 s.
STALL_S = 5.0


def test_a_stalled_replica_is_slow_not_dead_and_keeps_its_sessions(haproxy, expected):
    """A replica that stops answering for a while is waited for, not taken out.

    SIGSTOP stands in for what a loaded machine does to a process (no CPU for seconds). Before
    the fix, HAProxy failed the replica's health check after 2 s and sent its sessions'
    requests to another replica, which answered SESSION_LOST (the clean-clone failure of
    ``proxy-369`` above); afterwards they would have gone back to stale state. Now the calls
    sent during the stall wait for it and every session finishes where it began.
    """
    sessions, before, during = 30, 2, 5  # per transport; calls before and through the stall
    with (
        Cluster(haproxy) as cluster,
        ThreadPoolExecutor(max_workers=2 * WORKERS) as pool,
        EnvironmentClient(cluster.proxy.grpc_target, timeout_s=60) as env,
    ):
        http = HttpClients(cluster.proxy.http_url)

        def grpc_start(i: int) -> GrpcRun:
            run = start_grpc(env, i)
            run.calls(0, before)
            return run

        def http_start(i: int) -> HttpRun:
            run = HttpRun(i)
            run.seed(http.get())
            run.calls(http.get(), 0, before)
            return run

        grpc_runs = list(pool.map(grpc_start, range(sessions)))
        http_runs = list(pool.map(http_start, range(sessions)))
        stalled = cluster.replicas[0]
        on_stalled = held_by(stalled.grpc, grpc_runs, pool)
        http_on_stalled = {r.index for r in http_runs if r.replicas[0] == "r1"}
        assert on_stalled and http_on_stalled

        stalled.proc.send_signal(signal.SIGSTOP)
        try:
            # No recovery allowed: a SESSION_LOST (gRPC) or 404 (HTTP) fails the test.
            pending = [pool.submit(r.calls, before, during) for r in grpc_runs] + [
                pool.submit(lambda r=r: r.calls(http.get(), before, during)) for r in http_runs
            ]
            time.sleep(STALL_S)  # the length of the fault under test, not a synchronisation
        finally:
            stalled.proc.send_signal(signal.SIGCONT)
        for job in pending:
            job.result(timeout=120)
        assert stalled.proc.poll() is None
        assert cluster.proxy.went_down() == []  # HAProxy waited for it
        assert cluster.proxy.redispatched() == []
        http.close()

    for run in grpc_runs:
        assert not run.lost and not run.session.recoveries, run.session.id
        assert run.outputs == expected[run.k].outputs[:during], run.session.id
    for run in http_runs:
        assert not run.lost and set(run.replicas) == {run.replicas[0]}, run.index
        assert run.outputs == expected[run.k].outputs[:during], run.index


def _check_steps() -> tuple[bytes, str, str]:
    """deploy/haproxy.cfg's gRPC health check: the bytes it sends, and its two expect regexes
    (HAProxy's ``rbinary`` matches them against the hex of all bytes received so far)."""
    text = HAPROXY_CONFIG.read_text()
    sent = bytes.fromhex("".join(re.findall(r"tcp-check send-binary ([0-9a-fA-F]+)", text)))
    wait, judge = re.findall(r"tcp-check expect (?:min-recv 0 )?rbinary (\S+)", text)
    return sent, wait, judge


def test_the_health_check_judges_the_answer_not_a_ping_that_looks_like_it():
    """A live replica is never marked DOWN by a check that judged the wrong bytes. The
    server's first bytes hold an HTTP/2 PING with 8 random bytes, where the bare gRPC frame
    ``000000000208..`` can appear before the answer arrives; the patterns include the DATA
    frame's header, so only the answer itself is judged (a false DOWN sends the replica's
    sessions elsewhere: SESSION_LOST)."""
    sent, wait, judge = _check_steps()
    server = start_server(SessionStore(load_sandbox(None)), "127.0.0.1:0")
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(sent)
            received = b""
            deadline = time.monotonic() + 30
            while not re.search(judge, received.hex().upper()) and time.monotonic() < deadline:
                received += sock.recv(65536)
    finally:
        server.stop(grace_s=0)
    answer = received.hex().upper()
    assert re.search(wait, answer) and re.search(judge, answer)  # SERVING passes both steps
    not_serving = answer.replace("0000000100000000020801", "0000000100000000020802")
    assert re.search(wait, not_serving) and not re.search(judge, not_serving)  # out at once
    # The server's preface up to its PING, whose random payload here begins 02 08 02: all a
    # check may have read when the answer is late (a loaded machine).
    start = answer.index("0000080600")  # the PING frame: length 8, type 6, flags 0
    early = answer[: start + 18] + "020802AABBCCDDEE"
    assert re.search("000000000208[0-9A-F]{2}", early)  # a bare frame pattern would match here
    assert not re.search(wait, early)  # still waiting for the answer, not judging
