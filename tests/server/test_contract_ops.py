"""CONTRACT X2 (drain, both transports), X3 (admission) and A1 (admin security), with SIGTERM
under --http-address, slow streams that must not starve health, and an open admin.

Named in ``tests/server/test_contract.py``'s scheme (``test_<case>_...``); its coverage test
reads these names too.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any

import grpc
import httpx
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status

from tests.helpers import HANG_S, ServeProcess, gateway_on, server_with_a_held_slot
from tests.helpers import TASK as HELD_TASK
from tests.helpers import TID as HELD_TID
from tests.helpers import error_info as _error_info
from tests.helpers import wait as _wait
from workplace.env.v1 import admin_pb2 as admin_pb
from workplace.env.v1 import admin_pb2_grpc as admin_grpc
from workplace.env.v1 import environment_pb2 as pb
from workplace_env.config import SPECS, ConfigError, Settings, load_settings
from workplace_env.gateway import start_gateway
from workplace_env.server.app import start_server
from workplace_env.server.guard import Admission, Admit
from workplace_env.server.pipeline import Method
from workplace_env.server.serve import drain_and_stop
from workplace_env.server.status import DOMAIN
from workplace_env.sessions import SessionStore
from workplace_env.testing.faults import Faults
from workplace_env_client import (
    AdminClient,
    CapacityError,
    EnvironmentClient,
    UnauthenticatedError,
    UnavailableError,
    WorkplaceEnvError,
    reasons,
)

#: Seconds an agent's model thinks between two calls in the drain-under-load test.
THINK_S = 1.5
EP, TID = ("rollout-ops", 0), ("ops", "t")
TASK = {"id": "t"}
WRITE = ("email_send_email", {"recipient": "a@b.com", "subject": "hello", "body": "hi"})
SENT = "Email sent successfully."
SERVE_FLAGS = ("--http-address", "127.0.0.1:0", "--grace-s", "5")
LOOKUP = ("company_directory_find_email_address", '{"name": "zzzz"}')


# -- X2: drain -----------------------------------------------------------------------------------


def _said(exc: WorkplaceEnvError) -> str:
    """An RPC's refusal as the drain tests record it: its status and its reason, or its
    message when the status came without a reason (the reason is then the status's name)."""
    said = exc.reason if exc.reason in reasons.REASONS else exc.message
    return f"{exc.code.name} {said}"


def test_X2_both_transports_drain_from_the_first_instant_and_finish_in_flight_calls(make_server):
    """The shutdown `serve` runs on SIGTERM, with a gRPC and an HTTP call in flight."""
    served = make_server(evict_interval_s=3600)
    store, running, target, client = served.store, served.running, served.target, served.client
    gateway = start_gateway(target, grace_s=HANG_S)
    channel = grpc.insecure_channel(target)
    in_tool = {sid: threading.Event() for sid in ("x2-grpc", "x2-http")}
    release_tools, draining, stop_now = threading.Event(), threading.Event(), threading.Event()

    def hold_tool(sid: str) -> None:
        if sid in in_tool:
            in_tool[sid].set()
            _wait(release_tools)

    def hold_drain(_: str) -> None:
        draining.set()
        _wait(stop_now)

    Faults.of(store).on("tool", hold_tool)
    Faults.of(store).on("drain", hold_drain)
    http = httpx.Client(base_url=gateway.url, timeout=HANG_S)
    other = httpx.Client(base_url=gateway.url, timeout=HANG_S)
    try:
        client.seed("x2-grpc", EP, TID, TASK)
        typed = {
            "resources_session_id": "x2-http",
            "episode_id": {"rollout_id": "r-http", "attempt": 0},
            "task_id": {"taskset": "ops", "task_id": "t"},
            "task": TASK,
        }
        assert http.post("/seed_session", json=typed).status_code == 200
        assert other.get("/ready").status_code == 200
        with ThreadPoolExecutor(3) as pool:
            grpc_call: Future = pool.submit(client.call_tool, "x2-grpc", *WRITE)
            http_call: Future = pool.submit(http.post, f"/{WRITE[0]}", json=WRITE[1])
            for event in in_tool.values():
                _wait(event)
            stopping = pool.submit(drain_and_stop, running, gateway, HANG_S)
            _wait(draining)  # both transports are draining; nothing has stopped yet
            health = health_pb2_grpc.HealthStub(channel)
            check = health.Check(health_pb2.HealthCheckRequest(), timeout=HANG_S)
            assert check.status == health_pb2.HealthCheckResponse.NOT_SERVING
            ready = other.get("/ready")
            assert ready.status_code == 503 and ready.headers["retry-after"] == "1"
            with pytest.raises(UnavailableError) as err:
                client.seed("x2-new", ("rollout-3", 0), TID, TASK)
            assert err.value.reason == "DRAINING"
            seeded = other.post("/seed_session", json=TASK)
            assert seeded.status_code == 503 and seeded.headers["retry-after"] == "1"
            assert seeded.json()["reason"] == "DRAINING" and "set-cookie" not in seeded.headers
            stop_now.set()  # stop accepting; the calls in flight are let finish
            release_tools.set()
            assert grpc_call.result(HANG_S) == SENT
            answer = http_call.result(HANG_S)
            assert answer.status_code == 200 and answer.json() == {"output": SENT}
            # the admitted episodes are still served, and the drain waits for them to close
            assert not stopping.done()
            assert client.close_session("x2-grpc", EP) == "CLOSED"
            closed = http.post(
                "/close_session",
                json={"resources_session_id": "x2-http", "episode_id": {"rollout_id": "r-http"}},
            )
            assert closed.status_code == 200
            stopping.result(HANG_S)
        assert store.live_count() == 0  # nothing admitted after the signal
    finally:
        Faults.of(store).clear()
        release_tools.set()
        stop_now.set()
        http.close()
        other.close()
        channel.close()
        gateway.stop(timeout_s=1)
        running.stop(0)


@pytest.mark.parametrize("http_workers", [0, 4])
def test_X2_sigterm_under_load_ends_every_rpc_ok_or_explained_and_loses_no_episode(http_workers):
    """SIGTERM under a load of episodes on both transports. Seeds and closes
    came back CANCELLED (no ErrorInfo) and calls of admitted sessions UNAVAILABLE, because the
    listeners closed as soon as the RPCs then running had finished. Now every RPC ends OK or
    UNAVAILABLE ``DRAINING`` with ErrorInfo (HTTP: 503 ``DRAINING``), only a seed may be
    refused, and every episode seeded before the signal runs to its close."""
    serve = ServeProcess(*SERVE_FLAGS[:-1], "60").ready()
    outcomes: list[tuple[str, str]] = []  # (rpc, "OK" or the refusal) of every RPC
    episodes_done, lock = [0], threading.Lock()
    enough = threading.Event()
    stop_at = time.monotonic() + HANG_S * 4

    def record(rpc: str, outcome: str) -> None:
        with lock:
            outcomes.append((rpc, outcome))

    def play(*steps: tuple[str, Callable[[], object]]) -> None:
        """Run each step of an episode in turn, recording OK or the refusal of each."""
        for rpc, call in steps:
            try:
                call()
                record(rpc, "OK")
            except WorkplaceEnvError as exc:
                record(rpc, _said(exc))

    def over_grpc(worker: int) -> None:
        with EnvironmentClient(serve.target, timeout_s=HANG_S, max_attempts=1) as client:
            for n in range(200):
                sid, ep = f"g{worker}-{n}", (f"g{worker}-{n}", 0)
                try:
                    client.seed(sid, ep, TID, TASK)
                except WorkplaceEnvError as exc:
                    record("seed", _said(exc))
                    return  # told: the server takes no new episodes
                record("seed", "OK")
                play(
                    ("call", partial(client.call_tool, sid, *WRITE)),
                    ("call", partial(client.call_tool, sid, *LOOKUP)),
                    ("verify", partial(client.verify, sid, [WRITE])),
                    ("close", partial(client.close_session, sid, ep)),
                )
                with lock:
                    episodes_done[0] += 1
                    if episodes_done[0] >= 40:
                        enough.set()
                if time.monotonic() > stop_at:
                    return

    signalled = threading.Event()

    def thinking(worker: int) -> None:
        """An agent seeded before the signal whose model thinks for THINK_S after it: its
        calls come after the listener used to close (0.3 s), and must still be served."""
        sid, ep = f"t{worker}", (f"t{worker}", 0)
        with EnvironmentClient(serve.target, timeout_s=HANG_S, max_attempts=1) as client:
            client.seed(sid, ep, TID, TASK)
            record("seed", "OK")
            _wait(signalled)
            time.sleep(THINK_S)  # the model's turn, not a synchronisation
            play(
                ("call", partial(client.call_tool, sid, *WRITE)),
                ("verify", partial(client.verify, sid, [WRITE])),
                ("close", partial(client.close_session, sid, ep)),
            )

    def over_http(worker: int) -> None:
        with httpx.Client(base_url=serve.url, timeout=HANG_S) as http:
            for n in range(200):
                sid = f"h{worker}-{n}"
                typed = {
                    "resources_session_id": sid,
                    "episode_id": {"rollout_id": sid, "attempt": 0},
                    "task_id": {"taskset": "ops", "task_id": "t"},
                    "task": TASK,
                }
                try:
                    seeded = http.post("/seed_session", json=typed)
                except httpx.TransportError as exc:
                    record("seed", f"HTTP {type(exc).__name__}")
                    return
                if seeded.status_code != 200:
                    record("seed", f"HTTP {seeded.status_code} {seeded.json().get('reason')}")
                    return
                record("seed", "OK")
                for rpc, path, body in (
                    ("call", f"/{WRITE[0]}", WRITE[1]),
                    (
                        "close",
                        "/close_session",
                        {"resources_session_id": sid, "episode_id": {"rollout_id": sid}},
                    ),
                ):
                    answer = http.post(path, json=body)
                    record(rpc, "OK" if answer.status_code == 200 else f"HTTP {answer.text}")
                if time.monotonic() > stop_at:
                    return

    try:
        with ThreadPoolExecutor(20 + http_workers) as pool:
            work = [pool.submit(thinking, w) for w in range(4)]
            work += [pool.submit(over_grpc, w) for w in range(16)]
            work += [pool.submit(over_http, w) for w in range(http_workers)]
            assert enough.wait(HANG_S * 2), "the load never got going"
            serve.proc.send_signal(signal.SIGTERM)
            signalled.set()
            for job in work:
                job.result(HANG_S * 4)
        assert serve.proc.wait(HANG_S) == 0
    finally:
        serve.stop()
    refused = [(rpc, o) for rpc, o in outcomes if o != "OK"]
    explained = {"UNAVAILABLE DRAINING", "HTTP 503 DRAINING"}

    def unreached(outcome: str) -> bool:
        """A seed sent after the listener closed found no server (nothing admitted)."""
        connect = outcome.startswith("UNAVAILABLE ") and "connect" in outcome.lower()
        return connect or outcome == "HTTP ConnectError"

    assert all(rpc == "seed" for rpc, _ in refused), refused  # no admitted episode cut short
    assert all(o in explained or unreached(o) for _, o in refused), refused
    assert not [o for _, o in refused if "CANCELLED" in o], refused
    assert sum(o in explained for _, o in refused) >= 1, refused
    seeds = sum(1 for rpc, o in outcomes if rpc == "seed" and o == "OK")
    closes = sum(1 for rpc, o in outcomes if rpc == "close" and o == "OK")
    assert seeds == closes  # every episode seeded before the signal ran to its close


def test_X2_sigterm_with_the_http_gateway_admits_no_seed_on_either_transport():
    """GRPC stayed SERVING and took 121 seeds after SIGTERM. The client
    keeps sending with the SDK's default retries, as a user's does: a seed racing the
    listener's close (gRPC answers it CANCELLED, unrun) is retried and ends UNAVAILABLE."""
    serve = ServeProcess(*SERVE_FLAGS).ready()
    try:
        with EnvironmentClient(serve.target, timeout_s=HANG_S) as client:
            health = health_pb2_grpc.HealthStub(client.channel)
            check = health.Check(health_pb2.HealthCheckRequest(), timeout=HANG_S)
            assert check.status == health_pb2.HealthCheckResponse.SERVING
            client.seed("before", EP, TID, TASK)
            serve.proc.send_signal(signal.SIGTERM)
            admitted, refused, attempts = [], 0, 0
            while serve.proc.poll() is None and attempts < 2000:
                attempts += 1
                # A seed may land before the process has run its signal handler; once one
                # has been refused (the drain began), none may be admitted.
                try:
                    client.seed(f"after-{attempts}", (f"r{attempts}", 0), TID, TASK)
                    if refused:
                        admitted.append(attempts)
                except UnavailableError:
                    refused += 1
                try:
                    answer = httpx.post(f"{serve.url}/seed_session", json=TASK, timeout=HANG_S)
                    if answer.status_code == 200 and refused:
                        admitted.append(-attempts)
                    else:
                        assert answer.status_code == 503, answer.text
                except httpx.TransportError:
                    pass  # the gateway has closed its socket
            assert admitted == [], f"seeds admitted after SIGTERM: {admitted}"
            assert refused >= 1
        assert serve.proc.wait(HANG_S) == 0
    finally:
        serve.stop()


# -- X3: admission -------------------------------------------------------------------------------


def test_X3_rpcs_beyond_the_limit_get_resource_exhausted_and_health_always_answers(sandbox):
    store = SessionStore(sandbox)
    limits = Settings(max_concurrent_rpcs=2, max_admin_rpcs=1, workers=2, admin_open=True)
    running = start_server(store, "127.0.0.1:0", settings=limits, evict_interval_s=3600)
    target = f"127.0.0.1:{running.port}"
    held = {sid: threading.Event() for sid in ("x3-a", "x3-b")}
    release = threading.Event()

    def hold(sid: str) -> None:
        if sid in held:
            held[sid].set()
            _wait(release)

    Faults.of(store).on("tool", hold)
    client = EnvironmentClient(target, timeout_s=HANG_S, max_attempts=1)
    try:
        for sid in ("x3-a", "x3-b", "x3-c"):
            client.seed(sid, (sid, 0), TID, TASK)
        with ThreadPoolExecutor(2) as pool:
            calls = [pool.submit(client.call_tool, sid, *WRITE) for sid in held]
            for event in held.values():
                _wait(event)
            request = pb.CallToolRequest(
                resources_session_id="x3-c", tool_name=LOOKUP[0], arguments=LOOKUP[1]
            )
            with pytest.raises(grpc.RpcError) as err:  # the raw status, to read its details
                client.stub.CallTool(request, timeout=HANG_S)
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            info = _error_info(err.value)
            assert (info.reason, info.domain) == ("TOO_MANY_RPCS", DOMAIN)
            status = rpc_status.from_call(err.value)
            assert any(d.Is(error_details_pb2.RetryInfo.DESCRIPTOR) for d in status.details)
            with pytest.raises(CapacityError) as sdk_err:
                client.call_tool("x3-c", *WRITE)
            assert sdk_err.value.retry_after_s == 1.0
            health = health_pb2_grpc.HealthStub(client.channel)
            check = health.Check(health_pb2.HealthCheckRequest(), timeout=3)
            assert check.status == health_pb2.HealthCheckResponse.SERVING
            assert "workplace.env.v1.EnvironmentService" in _reflected_services(client.channel)
            release.set()
            assert [c.result(HANG_S) for c in calls] == [SENT, SENT]
        assert client.call_tool("x3-c", *WRITE) == SENT  # the slots came back
    finally:
        Faults.of(store).clear()
        release.set()
        client.close()
        running.stop(0)


def test_X3_every_ending_of_an_environment_rpc_gives_its_slot_back(sandbox):
    """Environment RPCs are admitted on arrival and their slot is given back by the
    thread that runs them. Refusals, malformed requests, header mismatches, domain errors and
    a call that gave up while it waited for a thread must each give back exactly one slot."""
    store = SessionStore(sandbox)
    limits = Settings(max_concurrent_rpcs=3, workers=2)
    running = start_server(store, "127.0.0.1:0", settings=limits, evict_interval_s=3600)
    arrived = threading.Semaphore(0)
    release = threading.Event()

    def hold(sid: str) -> None:
        if sid.startswith("x3-hold"):
            arrived.release()
            _wait(release)

    Faults.of(store).on("tool", hold)
    client = EnvironmentClient(f"127.0.0.1:{running.port}", timeout_s=HANG_S, max_attempts=1)
    raw_call_tool = client.channel.unary_unary(
        "/workplace.env.v1.EnvironmentService/CallTool",
        response_deserializer=pb.CallToolResponse.FromString,
    )
    lookup = pb.CallToolRequest(
        resources_session_id="x3-free", tool_name=LOOKUP[0], arguments=LOOKUP[1]
    )
    mismatch = (("x-resources-session-id", "x3-other"),)

    def reason_of(call) -> str:  # type: ignore[no-untyped-def]
        with pytest.raises(grpc.RpcError) as err:
            call()
        return str(_error_info(err.value).reason)

    def all_slots_free() -> None:
        """Two calls hold both workers; a third waits and gives up; a fourth is refused."""
        release.clear()
        with ThreadPoolExecutor(2) as pool:
            held = [pool.submit(client.call_tool, f"x3-hold-{i}", *WRITE) for i in (1, 2)]
            for _ in held:
                assert arrived.acquire(timeout=HANG_S), "hang guard: a held call never ran"
            with pytest.raises(grpc.RpcError) as err:
                client.stub.CallTool(lookup, timeout=0.5)
            assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED  # admitted, waited
            assert reason_of(lambda: client.stub.CallTool(lookup, timeout=HANG_S)) == (
                "TOO_MANY_RPCS"
            )
            release.set()
            assert [call.result(HANG_S) for call in held] == [SENT, SENT]

    try:
        for sid in ("x3-hold-1", "x3-hold-2", "x3-free"):
            client.seed(sid, (sid, 0), TID, TASK)
        for _ in range(limits.max_concurrent_rpcs + 1):
            assert reason_of(lambda: raw_call_tool(b"\xff\xff", timeout=HANG_S)) == (
                "MALFORMED_REQUEST"
            )
            assert (
                reason_of(lambda: client.stub.CallTool(lookup, timeout=HANG_S, metadata=mismatch))
                == "SESSION_HEADER_MISMATCH"
            )
            unknown = pb.CallToolRequest(
                resources_session_id="x3-none", tool_name=LOOKUP[0], arguments=LOOKUP[1]
            )
            with pytest.raises(grpc.RpcError) as err:
                client.stub.CallTool(unknown, timeout=HANG_S)
            assert err.value.code() == grpc.StatusCode.NOT_FOUND
        all_slots_free()
        all_slots_free()  # the refused, the waiting and the held calls gave theirs back
    finally:
        Faults.of(store).clear()
        release.set()
        client.close()
        running.stop(0)


def test_X3_an_answered_environment_rpc_no_longer_holds_its_slot(sandbox):
    """A lane gives an RPC's slot back before grpcio sends its answer, so a client's next RPC
    is never refused TOO_MANY_RPCS by one that is over. Here every lane thread is held after
    its RPC's answer went out: with one slot, each next RPC from the same client must still be
    admitted."""
    store = SessionStore(sandbox)
    rpcs = 3
    running = start_server(
        store,
        "127.0.0.1:0",
        settings=Settings(max_concurrent_rpcs=1, workers=rpcs),
        evict_interval_s=3600,
    )
    lane, admission = running._lane, running.admission
    assert lane is not None and admission is not None
    gate = threading.Event()
    run_then_release = lane._run_then_release

    def held_after_the_answer(fn, args, kwargs):  # type: ignore[no-untyped-def]
        def answer_then_hold(*a, **k):  # type: ignore[no-untyped-def]
            try:
                return fn(*a, **k)  # grpcio's pool function: it has sent the answer
            finally:
                _wait(gate)

        return run_then_release(answer_then_hold, args, kwargs)

    lane._run_then_release = held_after_the_answer  # type: ignore[method-assign]
    client = EnvironmentClient(f"127.0.0.1:{running.port}", timeout_s=HANG_S, max_attempts=1)
    try:
        client.seed("x3-next", ("x3-next", 0), TID, TASK)
        assert admission.in_flight() == 0
        assert client.call_tool("x3-next", *WRITE) == SENT
        assert admission.in_flight() == 0
        client.seed("x3-after", ("x3-after", 0), TID, TASK)
        assert admission.in_flight() == 0
    finally:
        gate.set()
        client.close()
        running.stop(0)
    assert admission.in_flight() == 0  # the lane released nothing twice


class _StreamContext:
    """What the guard uses of a servicer context, with the RPC's end under the test's hand."""

    def __init__(self) -> None:
        self.on_end: list[Callable[[], None]] = []

    def add_callback(self, callback: Callable[[], None]) -> bool:
        self.on_end.append(callback)
        return True

    def end(self) -> None:
        for callback in self.on_end:
            callback()


@pytest.mark.parametrize("kind", ["unary_stream", "stream_stream"])
def test_X3_an_admin_stream_gives_its_slot_back_before_its_status_is_sent(kind):
    """An admin response stream's slot was given back by the RPC's end callback, which grpcio
    runs after it has sent the status: now it is free when the stream's last message is out
    (grpcio sends the status only after the iterator ends), exactly once, however it ends."""
    admission = Admission(max_rpcs=1, max_admin_rpcs=1)
    admit = Admit(admission, lane=None, admin_service="admin")  # type: ignore[arg-type]

    def export(_request, _context):  # type: ignore[no-untyped-def]
        yield b"part-1"
        yield b"part-2"

    def broken(_request, _context):  # type: ignore[no-untyped-def]
        yield b"part-1"
        raise RuntimeError("the export failed")

    def call(behaviour, context):  # type: ignore[no-untyped-def]
        method = Method("admin", "Export", kind == "stream_stream", True)
        guarded = admit(method, behaviour)
        return guarded(b"" if kind == "unary_stream" else iter([b""]), context)

    read = _StreamContext()
    responses = call(export, read)
    assert next(responses) == b"part-1"
    assert admission.in_flight() == 1
    assert list(responses) == [b"part-2"]
    assert admission.in_flight() == 0  # before the status (and the end callback)
    read.end()
    assert admission.in_flight() == 0

    failed = _StreamContext()
    responses = call(broken, failed)
    with pytest.raises(RuntimeError):
        list(responses)
    assert admission.in_flight() == 0
    failed.end()

    abandoned = _StreamContext()
    responses = call(export, abandoned)
    assert next(responses) == b"part-1"
    assert admission.in_flight() == 1
    abandoned.end()  # cancelled before grpcio asked for the next message
    assert admission.in_flight() == 0
    del responses
    assert admission.in_flight() == 0


def _reflected_services(channel: grpc.Channel) -> set[str]:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    (answer,) = stub.ServerReflectionInfo(iter([request]), timeout=3)
    return {s.name for s in answer.list_services_response.service}


def _held_restore(
    stub: admin_grpc.EnvironmentAdminServiceStub, gate: threading.Event
) -> grpc.Future:
    """A RestoreSessions stream that stays open until ``gate`` is set (a slow client)."""

    def requests() -> Iterator[admin_pb.RestoreSessionsRequest]:
        yield admin_pb.RestoreSessionsRequest()
        gate.wait(HANG_S)

    return stub.RestoreSessions.future(requests(), timeout=HANG_S)


def test_X3_slow_admin_streams_never_starve_health_or_the_environment(sandbox):
    """4 slow RestoreSessions streams pinned the 4 workers; the health
    Check missed a 3 s deadline and every other RPC queued."""
    store = SessionStore(sandbox)
    # Admin streams never take the threads health and the environment need (whatever the
    # limit); at a limit of 2, the third and fourth stream are refused at once.
    limits = Settings(admin_open=True, max_admin_rpcs=2)
    running = start_server(store, "127.0.0.1:0", settings=limits)
    gate = threading.Event()
    channel = grpc.insecure_channel(f"127.0.0.1:{running.port}")
    try:
        stub = admin_grpc.EnvironmentAdminServiceStub(channel)
        ended = threading.Semaphore(0)
        streams = [_held_restore(stub, gate) for _ in range(4)]
        for stream in streams:
            stream.add_done_callback(lambda _: ended.release())
        for _ in range(2):  # two are refused at once
            assert ended.acquire(timeout=HANG_S), "hang guard: no refusal"
        refused = [s for s in streams if s.done()]
        assert len(refused) == 2  # the other two are admitted and held open by their client
        for stream in refused:
            assert stream.exception().code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert _error_info(stream.exception()).reason == "TOO_MANY_RPCS"
        health = health_pb2_grpc.HealthStub(channel)
        check = health.Check(health_pb2.HealthCheckRequest(), timeout=3)
        assert check.status == health_pb2.HealthCheckResponse.SERVING
        with EnvironmentClient(channel=channel, timeout_s=3) as client:
            assert len(client.list_tools()) == 27
            client.seed("x3-env", EP, TID, TASK)
            assert client.call_tool("x3-env", *WRITE) == SENT
        gate.set()
        admitted = [s for s in streams if s not in refused]
        assert [s.result(HANG_S).restored_count for s in admitted] == [0, 0]
    finally:
        gate.set()
        channel.close()
        running.stop(0)


#: Times each refusal path is driven: more than any limit of :data:`_TIGHT`.
_REPEAT = 4
_TIGHT = Settings(
    max_concurrent_rpcs=3, max_admin_rpcs=2, max_health_streams=2, workers=2, admin_token="tok"
)
_ENV = "/workplace.env.v1.EnvironmentService/"
_ADMIN = "/workplace.env.v1.EnvironmentAdminService/"
_GARBAGE = b"\xff\xff\xff\xff"
_OTHER = (("x-resources-session-id", "someone-else"),)
_TOKEN = (("authorization", "Bearer tok"),)


def _raw(channel: grpc.Channel, kind: str, method: str) -> Callable[..., Any]:
    """A raw ``kind`` callable of ``method`` (bytes in, bytes out)."""
    make = getattr(channel, kind)
    return make(method, request_serializer=_identity, response_deserializer=_identity)


def _identity(data: bytes) -> bytes:
    return data


def _ended(call: Callable[[], Any]) -> grpc.StatusCode:
    """The status ``call()`` ends with (reading every streamed answer); never a crash."""
    try:
        answer = call()
        if isinstance(answer, Iterator):
            list(answer)
    except grpc.RpcError as exc:
        code = exc.code()
        assert code not in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL), exc.details()
        return code
    return grpc.StatusCode.OK


def _blocking(first: bytes, gate: threading.Event) -> Iterator[bytes]:
    """A client stream that sends ``first`` and then stays open until ``gate`` is set."""
    yield first
    gate.wait(HANG_S)


def test_X3_no_refusal_path_of_any_rpc_keeps_its_slot(make_server):
    """Every way an RPC of each service can end without its normal answer (garbage bytes, a
    session header naming another session, no or a wrong admin token, an invalid request, a
    deadline, a stream cancelled while held open), each more times than any limit, leaves
    every slot free: a normal RPC of each service is admitted afterwards."""
    served = make_server(settings=_TIGHT, admin_token="tok")
    served.client.seed("mine", EP, TID, TASK)
    channel = grpc.insecure_channel(served.target)
    gate = threading.Event()
    seed = pb.SeedSessionRequest(
        resources_session_id="mine",
        episode_id=pb.EpisodeId(rollout_id="r", attempt=0),
        task_id=pb.TaskId(taskset="t", task_id="t"),
        task=pb.WorkplaceTask(id="t"),
    ).SerializeToString()
    env_requests = {
        "SeedSession": seed,
        "CallTool": pb.CallToolRequest(
            resources_session_id="mine", tool_name=LOOKUP[0], arguments="not json"
        ).SerializeToString(),
        "Verify": pb.VerifyRequest(resources_session_id="nobody").SerializeToString(),
        "CloseSession": pb.CloseSessionRequest(resources_session_id="bad id!").SerializeToString(),
        "ListTools": pb.ListToolsRequest().SerializeToString(),
    }
    export = admin_pb.ExportSessionsRequest(resources_session_ids=["mine"]).SerializeToString()
    restore = admin_pb.RestoreSessionsRequest(
        snapshots=[admin_pb.SessionSnapshot(resources_session_id="mine", state_json="{")]
    ).SerializeToString()
    retire = admin_pb.RetireSessionRequest(resources_session_id="bad id!").SerializeToString()
    watch = health_pb2.HealthCheckRequest(service="").SerializeToString()
    reflect = reflection_pb2.ServerReflectionRequest(list_services="").SerializeToString()

    def held_open(kind: str, method: str, first: bytes, metadata: tuple = ()) -> None:
        """A stream the client holds open, cancelled once its first answer came (if any)."""
        call = _raw(channel, kind, method)
        if kind == "stream_unary":
            future = call.future(_blocking(first, gate), metadata=metadata, timeout=HANG_S)
            future.cancel()
            return
        body = _blocking(first, gate) if kind == "stream_stream" else first
        stream = call(body, metadata=metadata, timeout=HANG_S)
        next(stream)
        stream.cancel()

    paths: list[Callable[[], Any]] = []
    for name, good in env_requests.items():
        unary = _raw(channel, "unary_unary", _ENV + name)
        paths += [
            partial(unary, _GARBAGE, timeout=HANG_S),
            partial(unary, good, metadata=_OTHER, timeout=HANG_S),
            partial(unary, good, timeout=HANG_S),  # the service's own refusal (or answer)
            partial(unary, good, timeout=0.000_001),
        ]
    export_call = _raw(channel, "unary_stream", _ADMIN + "ExportSessions")
    restore_call = _raw(channel, "stream_unary", _ADMIN + "RestoreSessions")
    retire_call = _raw(channel, "unary_unary", _ADMIN + "RetireSession")
    for call, good in ((export_call, export), (retire_call, retire)):
        paths += [
            partial(call, good, timeout=HANG_S),  # no token
            partial(call, good, metadata=(("authorization", "Bearer nope"),), timeout=HANG_S),
            partial(call, _GARBAGE, metadata=_TOKEN, timeout=HANG_S),
            partial(call, good, metadata=_TOKEN + _OTHER, timeout=HANG_S),
            partial(call, good, metadata=_TOKEN, timeout=0.000_001),
        ]
    paths += [
        partial(restore_call, iter([restore]), timeout=HANG_S),  # no token
        partial(restore_call, iter([_GARBAGE]), metadata=_TOKEN, timeout=HANG_S),
        partial(restore_call, iter([restore]), metadata=_TOKEN + _OTHER, timeout=HANG_S),
        partial(restore_call, iter([restore]), metadata=_TOKEN, timeout=HANG_S),  # not JSON
        partial(held_open, "unary_stream", _ADMIN + "ExportSessions", export, _TOKEN),
        partial(held_open, "stream_unary", _ADMIN + "RestoreSessions", restore, _TOKEN),
        partial(held_open, "unary_stream", "/grpc.health.v1.Health/Watch", watch),
        partial(
            held_open,
            "stream_stream",
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            reflect,
        ),
    ]
    for stream_kind, method in (
        ("unary_stream", "/grpc.health.v1.Health/Watch"),
        ("stream_stream", "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"),
    ):
        call = _raw(channel, stream_kind, method)
        body = _GARBAGE if stream_kind == "unary_stream" else iter([_GARBAGE])
        paths.append(partial(call, body, timeout=HANG_S))
    long_name = health_pb2.HealthCheckRequest(service="s" * 5000).SerializeToString()
    paths.append(partial(_raw(channel, "unary_stream", "/grpc.health.v1.Health/Watch"), long_name))
    try:
        for path in paths:
            for _ in range(_REPEAT):
                _ended(path)
        assert served.running.admission.wait_idle(HANG_S), "a slot was never given back"
        exported = served.admin.export_sessions(["mine"])
        assert [s.resources_session_id for s in exported.snapshots] == ["mine"]
        assert served.raw.call_tool("mine", *WRITE) == SENT
        assert served.admin.retire_session("nobody") is False
        stream = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest())
        assert next(stream).status == health_pb2.HealthCheckResponse.SERVING
        stream.cancel()
        assert "workplace.env.v1.EnvironmentService" in _reflected_services(channel)
    finally:
        gate.set()
        channel.close()


def _first_status(stream: Any) -> grpc.StatusCode:
    """OK when an open stream's first answer came, else the status it ended with."""
    try:
        next(stream)
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


def test_X3_idle_health_and_reflection_streams_beyond_the_limit_never_starve_check_or_admin(
    make_server,
):
    """261 idle Health/Watch streams held every thread of the server's pool, so
    health Check and every admin RPC hung. Now at most max_health_streams (64) are open; the
    others are refused at once, and Check, admin and environment RPCs answer promptly."""
    served = make_server(settings=Settings(admin_token="tok"), admin_token="tok")
    limit = served.running.admission.max_health_streams
    channel = grpc.insecure_channel(served.target)
    gate = threading.Event()
    health = health_pb2_grpc.HealthStub(channel)
    reflect = reflection_pb2_grpc.ServerReflectionStub(channel)
    listing = reflection_pb2.ServerReflectionRequest(list_services="")
    try:
        streams = [health.Watch(health_pb2.HealthCheckRequest()) for _ in range(261)]
        streams += [reflect.ServerReflectionInfo(iter(_blocking(listing, gate))) for _ in range(50)]
        seen = [_first_status(stream) for stream in streams]
        assert seen.count(grpc.StatusCode.OK) == limit
        assert seen.count(grpc.StatusCode.RESOURCE_EXHAUSTED) == len(streams) - limit
        refused = streams[seen.index(grpc.StatusCode.RESOURCE_EXHAUSTED)]
        assert _error_info(refused).reason == "TOO_MANY_RPCS"
        check = health.Check(health_pb2.HealthCheckRequest(), timeout=3)
        assert check.status == health_pb2.HealthCheckResponse.SERVING
        with AdminClient(channel=channel, token="tok", timeout_s=3) as admin:
            assert admin.export_sessions().snapshots == []
        with EnvironmentClient(channel=channel, timeout_s=3) as client:
            assert len(client.list_tools()) == 27
        for stream in streams:
            stream.cancel()
        assert served.running.admission.wait_idle(HANG_S)
    finally:
        gate.set()
        channel.close()


def test_X3_health_names_are_bounded_and_unknown_names_leave_nothing_behind(make_server):
    """Each Watch of a new name stayed in the health servicer for good (100 watches
    of 4 MiB names kept ~430 MB). A name over 1,024 bytes is refused naming ``service``; a
    watched unknown name is answered SERVICE_UNKNOWN and kept nowhere."""
    served = make_server()
    channel = grpc.insecure_channel(served.target)
    health = health_pb2_grpc.HealthStub(channel)
    try:
        for rpc in (health.Check, health.Watch):
            with pytest.raises(grpc.RpcError) as err:
                answer = rpc(health_pb2.HealthCheckRequest(service="s" * 1025), timeout=HANG_S)
                next(answer) if rpc is health.Watch else answer
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            bad = error_details_pb2.BadRequest()
            status = rpc_status.from_call(err.value)
            assert any(d.Unpack(bad) for d in status.details if d.Is(bad.DESCRIPTOR))
            assert [v.field for v in bad.field_violations] == ["service"]
        before = (dict(served.running.health._statuses), set(served.running.health._watchers))
        for i in range(40):
            stream = health.Watch(health_pb2.HealthCheckRequest(service=f"{i:04d}" * 256))
            assert next(stream).status == health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
            stream.cancel()
            with pytest.raises(grpc.RpcError) as err:
                health.Check(health_pb2.HealthCheckRequest(service=f"{i}"), timeout=HANG_S)
            assert err.value.code() == grpc.StatusCode.NOT_FOUND
        assert served.running.admission.wait_idle(HANG_S)
        after = (dict(served.running.health._statuses), set(served.running.health._watchers))
        assert after == before
        watcher = health.Watch(health_pb2.HealthCheckRequest())  # a served name still updates
        assert next(watcher).status == health_pb2.HealthCheckResponse.SERVING
        served.running.start_draining()
        assert next(watcher).status == health_pb2.HealthCheckResponse.NOT_SERVING
        watcher.cancel()
    finally:
        channel.close()


# -- A1: admin security --------------------------------------------------------------------------


def _export(target: str, token: str | None) -> None:
    with AdminClient(target, token=token, timeout_s=HANG_S) as admin:
        admin.export_sessions()


def test_A1_admin_is_off_without_a_token_and_every_refusal_carries_error_info(make_server):
    """Admin RPCs were open by default; UNAUTHENTICATED had no ErrorInfo."""
    servers = {
        "default": make_server().running,
        "token": make_server(settings=Settings(admin_token="s3cret")).running,
        "open": make_server(settings=Settings(admin_open=True)).running,
    }
    targets = {name: f"127.0.0.1:{s.port}" for name, s in servers.items()}
    cases = [
        ("default", None, "ADMIN_DISABLED"),
        ("default", "anything", "ADMIN_DISABLED"),
        ("token", None, "ADMIN_TOKEN_REQUIRED"),
        ("token", "wrong", "ADMIN_TOKEN_INVALID"),
    ]
    for name, token, reason in cases:
        with pytest.raises(UnauthenticatedError) as err:
            _export(targets[name], token)
        assert (err.value.reason, err.value.domain) == (reason, DOMAIN), (name, token)
    with grpc.insecure_channel(targets["default"]) as channel:
        retire = admin_grpc.EnvironmentAdminServiceStub(channel).RetireSession
        with pytest.raises(grpc.RpcError) as raw:
            retire(admin_pb.RetireSessionRequest(resources_session_id="x"), timeout=HANG_S)
        assert raw.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert _error_info(raw.value).reason == "ADMIN_DISABLED"
    _export(targets["token"], "s3cret")
    _export(targets["open"], None)
    with EnvironmentClient(targets["default"], timeout_s=HANG_S) as client:
        client.seed("a1", EP, TID, TASK)  # the environment service needs no token
        assert client.call_tool("a1", *WRITE) == SENT


def test_A1_an_open_admin_is_refused_on_a_non_loopback_address():
    with pytest.raises(ConfigError, match="admin_open"):
        load_settings({"admin_open": True, "address": "0.0.0.0:50051"}, None, {})
    settings, _ = load_settings({"admin_open": "true"}, None, {})
    assert settings.admin_open
    settings, _ = load_settings({"admin_open": True, "admin_token": "t", "address": "[::]:1"})
    assert settings.admin_token == "t"


def _serve_help_shows(*names: str) -> None:
    """``serve --help`` (the console script, as a terminal shows it) has each setting's flag
    of ``names`` followed by that setting's own help with its default filled in."""
    out = subprocess.run(
        [sys.executable, "-m", "workplace_env.cli", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        env={"COLUMNS": "400", "PATH": ""},
    ).stdout
    flat = " ".join(out.split())  # each option's help, wrapped over several lines
    for name in names:
        flag = f"--{name.replace('_', '-')}"
        shown = " ".join(SPECS[name].help_for("serve", getattr(Settings(), name)).split())
        assert re.search(rf"{flag}(?: <\w+>| / --no-{flag[2:]}) {re.escape(shown)}", flat), name


def test_serve_help_names_every_bound_default():
    _serve_help_shows("max_concurrent_rpcs", "max_admin_rpcs", "max_sessions", "admin_open")


def test_serve_help_shows_the_default_drain_delay():
    assert Settings().drain_delay_s == 0  # X2 without a delay: listeners close at once
    _serve_help_shows("drain_delay_s")


def test_X2_a_drain_delay_keeps_ready_503_visible_until_the_listeners_close():
    """``--drain-delay-s``: after SIGTERM, ``/ready`` answers 503 (and gRPC health NOT_SERVING)
    while the listeners stay open; then they close and the process exits 0."""
    serve = ServeProcess(*SERVE_FLAGS, "--drain-delay-s", "5").ready()
    proc, target, url = serve.proc, serve.target, serve.url
    try:
        with httpx.Client(base_url=url, timeout=HANG_S) as http:
            assert http.get("/ready").status_code == 200
            proc.send_signal(signal.SIGTERM)
            answers = []
            while proc.poll() is None and len(answers) < 10_000:  # until the listener closes
                try:
                    answers.append(http.get("/ready").status_code)
                except httpx.TransportError:
                    break
            assert 503 in answers and set(answers) <= {200, 503}, answers
            with grpc.insecure_channel(target) as channel:  # in the window, or already closed
                health = health_pb2_grpc.HealthStub(channel)
                try:
                    status = health.Check(health_pb2.HealthCheckRequest(), timeout=HANG_S).status
                    assert status == health_pb2.HealthCheckResponse.NOT_SERVING
                except grpc.RpcError as exc:
                    assert exc.code() == grpc.StatusCode.UNAVAILABLE
        assert proc.wait(HANG_S) == 0
    finally:
        proc.kill()
        proc.wait(HANG_S)


def test_serve_warns_when_checkpoints_meet_a_per_process_cookie_secret():
    """Restored cookie sessions are orphaned without a fixed secret."""
    serve = ServeProcess(*SERVE_FLAGS, "--admin-token", "t").ready()
    try:
        assert "--cookie-secret" in serve.wait_line("cookie secret")
    finally:
        serve.stop()


def test_X3_the_co_hosted_gateway_is_not_admitted_by_the_rpc_limit(make_server):
    """docs/operations/security.md, Admission: ``serve --http-address`` runs HTTP requests on its
    servicer
    in-process, one at a time on the gateway's event loop, so ``--max-concurrent-rpcs`` (a
    gRPC bound) never refuses them: with the server's one gRPC slot held, a gRPC seed is
    RESOURCE_EXHAUSTED TOO_MANY_RPCS while the co-hosted gateway still seeds and calls (200).
    A remote gateway's requests are RPCs, refused 429 at the limit (tested in test_gateway)."""
    served, arrived, release = server_with_a_held_slot(make_server)
    gateway = gateway_on("in_process", served.running)
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(served.client.call_tool, "holder", "email_search_emails", {"query": "x"})
        try:
            _wait(arrived)
            with pytest.raises(CapacityError):
                served.client.seed("refused", ("refused", 0), HELD_TID, HELD_TASK)
            with httpx.Client(base_url=gateway.url, timeout=HANG_S) as http:
                seeded = http.post("/seed_session", json={"id": 1})
                assert seeded.status_code == 200, seeded.text
                called = http.post("/email_search_emails", json={"query": "x"})
                assert called.status_code == 200, called.text
        finally:
            release.set()
            gateway.stop()
        held.result(timeout=HANG_S)


def test_X2_a_request_the_gateway_had_not_read_when_it_stopped_is_closed_unanswered_unrun(
    make_server,
):
    """docs/operations/serving.md, drain: at its listener's close the gateway (uvicorn's graceful
    shutdown) closes
    every connection on which no request was read whole, without an answer (not a 503): a
    seed whose headers were still arriving gets EOF, and nothing was seeded, so resending it
    is safe."""
    served = make_server()
    gateway = gateway_on("in_process", served.running)
    with socket.create_connection((gateway.host, gateway.port), timeout=HANG_S) as sock:
        sock.sendall(b"POST /seed_session HTTP/1.1\r\nhost: gw\r\n")  # headers unfinished
        gateway.stop()
        try:
            answer = sock.recv(65536)
        except ConnectionResetError:
            answer = b""
    assert answer == b""
    assert served.store.live_count() == 0
