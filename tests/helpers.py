"""Helpers the test modules share: servers in this process and in a child process, gateways, hang
guards, status details and answer readers. Fixtures built on them live in ``tests/conftest.py``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from prometheus_client.parser import text_string_to_metric_families

from workplace.env.v1 import admin_pb2 as admin_pb
from workplace.env.v1 import environment_pb2 as pb
from workplace_env.config import Settings
from workplace_env.gateway import GatewaySettings, RunningGateway, start_gateway
from workplace_env.sandbox.tables import BaseTables
from workplace_env.server.app import RunningServer, start_server
from workplace_env.server.in_process import in_process_async_client, in_process_client
from workplace_env.server.status import DOMAIN
from workplace_env.sessions import SessionConfig, SessionStore
from workplace_env.taskgen import generate_tasks
from workplace_env.testing.faults import Faults
from workplace_env_client import (
    AdminClient,
    AsyncEnvironmentClient,
    EnvironmentClient,
    WorkplaceEnvError,
)

#: The tests folder, and the checkout holding it.
TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
#: Upper bound for a wait that only guards against a hang (a deadlock fails, not blocks CI).
HANG_S = 30.0
#: The gateway's two backends: the SDK over gRPC, and the server's servicer in-process.
GATEWAY_BACKENDS = ("remote", "in_process")
SERVE = (sys.executable, "-m", "workplace_env.cli", "serve")
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING

# -- the contract tests' episode: its ids, task and write -----------------------------------------

EP = ("rollout-1", 0)
TID = ("unit", "task-1")
WRITE = ("email_send_email", {"recipient": "a@b.com", "subject": "hello", "body": "hi"})
TASK = {
    "id": "task-1",
    "category": "email",
    "ground_truth": [{"name": WRITE[0], "arguments": json.dumps(WRITE[1])}],
}


#: Every environment RPC as (method, a call of it on a client, sync or async: the async one's
#: call returns the awaitable), for tests that must reach each one.
EVERY_RPC = [
    ("SeedSession", lambda c: c.seed("s", EP, TID, TASK)),
    ("CallTool", lambda c: c.call_tool("s", *WRITE)),
    ("Verify", lambda c: c.verify("s", [WRITE])),
    ("CloseSession", lambda c: c.close_session("s", EP)),
    ("ListTools", lambda c: c.list_tools()),
]


class FakeClock:
    """A settable clock so TTL tests need no sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- The per-session write bound -----------------------------------------------------------


def generated_write_task(sandbox: BaseTables) -> dict[str, Any]:
    """The first task ``generate-tasks`` (seed 0) makes over ``sandbox`` whose ground truth
    makes more than one call (so an empty prediction scores 0.0)."""
    return next(t for t in generate_tasks(sandbox, 40, 0) if len(t["ground_truth"]) > 1)


def send_args(body_chars: int, subject: str = "") -> str:
    """The arguments text of an email_send_email whose body is ``body_chars`` long (subject
    "bound <subject>", found by :data:`BOUND_SEARCH`)."""
    return json.dumps(
        {"recipient": "a@b.com", "subject": f"bound {subject}", "body": "x" * body_chars}
    )


#: The first write of every write-bound scenario, and a bound fitting it and one more of known
#: size: a second write with a body of BOUND_REST chars takes the session exactly to BOUND_LIMIT
#: (BOUND_REST + 1: one byte over).
BOUND_FIRST = send_args(100, "first")
BOUND_LIMIT = 2 * len(BOUND_FIRST) + 50
BOUND_REST = BOUND_LIMIT - len(BOUND_FIRST) - len(send_args(0, "second"))
BOUND_SEARCH = {"query": "bound", "page_size": 50}


# -- waiting -------------------------------------------------------------------------------------


def wait(event: threading.Event, timeout_s: float = HANG_S) -> None:
    """Wait for ``event``; fail (instead of blocking CI) when it never comes."""
    assert event.wait(timeout_s), "hang guard: the awaited step never happened"


def health(target: str, service: str = "", timeout_s: float = 5.0) -> int:
    """The gRPC health status of ``service`` at ``target`` (one Check)."""
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        request = health_pb2.HealthCheckRequest(service=service)
        return stub.Check(request, timeout=timeout_s).status


def wait_serving(target: str, timeout_s: float = 60.0) -> None:
    """Poll gRPC health at ``target`` until SERVING (within ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            try:
                answer = stub.Check(health_pb2.HealthCheckRequest(), timeout=2, wait_for_ready=True)
            except grpc.RpcError:
                continue
            if answer.status == SERVING:
                return
    raise AssertionError(f"{target} never became SERVING")


# -- answers -------------------------------------------------------------------------------------


def error_info(error: grpc.RpcError) -> error_details_pb2.ErrorInfo:
    """The ``google.rpc.ErrorInfo`` of a raw gRPC error (fails when it has none)."""
    status = rpc_status.from_call(error)
    assert status is not None, "error without a rich status"
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    raise AssertionError("error without ErrorInfo")


def assert_refused(
    error: WorkplaceEnvError, code: grpc.StatusCode, reason: str | None, session_id: str
) -> None:
    """The error's status code, and its ErrorInfo: reason, domain, the session it names."""
    assert error.code == code, error
    if reason is not None:
        assert error.reason == reason, error
    assert error.domain == DOMAIN, error
    assert error.session_id == session_id, error


def total_emails(search_output: Any) -> int:
    """``email_search_emails``'s total: 0 when it answered with its no-match text."""
    if isinstance(search_output, str):
        return 0
    return int(search_output["pagination"]["total_emails"])


def emails(client: EnvironmentClient, sid: str) -> int:
    """How many emails of the contract tests' write (subject "hello") session ``sid`` holds."""
    out = client.call_tool(sid, "email_search_emails", {"query": "hello", "page_size": 100})
    return total_emails(out)


def http_total_emails(client: httpx.Client, search: dict[str, Any]) -> int:
    """:func:`total_emails` of a search over the gateway's legacy route."""
    return total_emails(client.post("/email_search_emails", json=search).json()["output"])


# -- servers in this process ---------------------------------------------------------------------


def table_rows(output: str) -> dict[str, list[str]]:
    """The body rows of the rich tables in ``output``: first cell -> the other cells."""
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0]:
            rows[cells[0]] = cells[1:]
    return rows


def local(port: int) -> str:
    return f"127.0.0.1:{port}"


@contextmanager
def serving(
    tables: BaseTables,
    config: SessionConfig | None = None,
    settings: Settings | None = None,
    *,
    grace_s: float = 0.2,
    **start: Any,
) -> Iterator[RunningServer]:
    """A gRPC server in this process on a free loopback port over a fresh store of ``tables``;
    ``start`` goes to :func:`start_server` (``evict_interval_s``, ``max_workers``, ...)."""
    running = start_server(SessionStore(tables, config), "127.0.0.1:0", settings=settings, **start)
    try:
        yield running
    finally:
        running.stop(grace_s=grace_s)


@dataclass
class Env:
    """A server over a fresh store: ``client`` retries like any SDK user; ``raw`` never retries,
    so a test sees each attempt's answer."""

    client: EnvironmentClient
    raw: EnvironmentClient
    store: SessionStore
    clock: FakeClock
    server: RunningServer


@dataclass
class Served:
    """An in-process server with its SDK clients: ``client`` retries like any SDK user, ``raw``
    never retries (a test sees each attempt's answer), ``admin`` carries the admin token."""

    running: RunningServer
    client: EnvironmentClient
    raw: EnvironmentClient
    admin: AdminClient

    @classmethod
    def start(
        cls,
        store: SessionStore,
        settings: Settings | None = None,
        admin_token: str | None = None,
        **start: Any,
    ) -> Served:
        running = start_server(store, "127.0.0.1:0", settings=settings, **start)
        target = local(running.port)
        return cls(
            running,
            EnvironmentClient(target, timeout_s=HANG_S),
            EnvironmentClient(target, timeout_s=HANG_S, max_attempts=1),
            AdminClient(target, token=admin_token, timeout_s=HANG_S),
        )

    @property
    def store(self) -> SessionStore:
        return self.running.store

    @property
    def target(self) -> str:
        return local(self.running.port)

    def stop(self) -> None:
        """Close the clients and stop the server (once; later calls do nothing)."""
        if getattr(self, "_stopped", False):
            return
        self._stopped = True
        self.client.close()
        self.raw.close()
        self.admin.close()
        self.running.stop(grace_s=0.2)


def gateway_on(
    backend: str,
    server: RunningServer,
    client: EnvironmentClient | None = None,
    settings: GatewaySettings | None = None,
    max_message_bytes: int | None = None,
) -> RunningGateway:
    """The HTTP gateway over ``server`` on ``backend`` (one of :data:`GATEWAY_BACKENDS`):
    ``remote`` through ``client`` (or a client of its own), ``in_process`` on its servicer."""
    if backend == "remote":
        if client is not None:
            return start_gateway(client=client, settings=settings)
        return start_gateway(local(server.port), settings=settings)
    return start_gateway(client=in_process_client(server, max_message_bytes), settings=settings)


# -- the scripted workload of the scale-out and proxy tests ---------------------------------------

SCRIPTS = 20  # distinct call scripts; session i runs script i % SCRIPTS
PEOPLE = (
    "micaela.orta@atlas.com",
    "gang.liao@atlas.com",
    "juan.cui@atlas.com",
    "zoe.camacho@atlas.com",
)
READ_ONLY = ("company_directory_find_email_address", '{"name": "a"}')


def script(k: int) -> list[tuple[str, str]]:
    """Script ``k``: 15 calls whose later outputs show the earlier writes (ids, searches)."""
    who = PEOPLE[k % len(PEOPLE)]
    tag = f"scale-{k}"
    day = f"2023-12-{1 + k % 20:02d}"
    calls: list[tuple[str, dict[str, Any]]] = [
        ("email_send_email", {"recipient": who, "subject": f"{tag} first", "body": "b"}),
        (
            "calendar_create_event",
            {
                "event_name": tag,
                "participant_email": who,
                "event_start": f"{day} 10:00:00",
                "duration": "30",
            },
        ),
        (
            "project_management_create_task",
            {
                "task_name": tag,
                "assigned_to_email": who,
                "list_name": "Backlog",
                "due_date": "2023-12-10",
                "board": "Back end",
            },
        ),
        (
            "customer_relationship_manager_add_customer",
            {"customer_name": f"Scale {k}", "assigned_to_email": who, "status": "Lead"},
        ),
        ("email_search_emails", {"query": tag}),
        ("email_delete_email", {"email_id": f"{1 + k:08d}"}),
        ("calendar_search_events", {"query": tag}),
        ("email_send_email", {"recipient": who, "subject": f"{tag} second", "body": "c"}),
        ("project_management_search_tasks", {"task_name": tag}),
        ("customer_relationship_manager_search_customers", {"customer_name": f"Scale {k}"}),
        # after the checkpoint, before the kill
        (
            "calendar_create_event",
            {
                "event_name": f"{tag} b",
                "participant_email": who,
                "event_start": f"{day} 14:00:00",
                "duration": "60",
            },
        ),
        ("email_get_email_information_by_id", {"email_id": f"{1 + k:08d}", "field": "subject"}),
        # after the kill
        ("email_search_emails", {"query": tag}),
        ("calendar_search_events", {"query": tag}),
        (
            "customer_relationship_manager_add_customer",
            {"customer_name": f"Scale {k} b", "assigned_to_email": who, "status": "Qualified"},
        ),
    ]
    return [(name, json.dumps(arguments)) for name, arguments in calls]


WRITES = ("send", "create", "add", "delete")


def task_row(k: int) -> dict[str, Any]:
    """Task ``k``: the script's writes as ground truth (one fewer for odd ``k``: reward 0)."""
    writes = [{"name": n, "arguments": a} for n, a in script(k) if any(w in n for w in WRITES)]
    return {"id": f"t{k}", "ground_truth": writes if k % 2 == 0 else writes[:-1]}


def predicted(k: int) -> list[tuple[str, str]]:
    return [(n, a) for n, a in script(k) if any(w in n for w in WRITES)]


@dataclass
class Expected:
    """A script's outputs, reward and table diffs in an uninterrupted run."""

    outputs: list[Any]
    reward: float
    tables: tuple[Any, ...]


def uninterrupted(tables: BaseTables, taskset: str) -> dict[int, Expected]:
    """Each script's :class:`Expected` on one in-process server, uninterrupted."""
    out = {}
    with serving(tables, grace_s=0) as server, EnvironmentClient(local(server.port)) as env:
        for k in range(SCRIPTS):
            with env.session(task_row(k), task_id=(taskset, f"t{k}")) as s:
                outputs = [s.call_tool(n, a) for n, a in script(k)]
                result = s.verify(predicted(k))
            out[k] = Expected(outputs, result.reward, result.tables)
    assert {e.reward for e in out.values()} == {0.0, 1.0}
    return out


# -- `workplace-env serve` in a child process ----------------------------------------------------


class ServeProcess:
    """``python -m workplace_env.cli serve`` on free loopback ports with ``flags`` added.

    :meth:`ready` reads the addresses it prints (``target``, ``url`` with ``--http-address``,
    ``metrics_url`` with ``--metrics-address``) and waits for SERVING; its stderr is read on in a
    thread into :attr:`lines` so a chatty server never blocks on a full pipe.
    """

    def __init__(self, *flags: str, env: dict[str, str] | None = None) -> None:
        self.flags = flags
        self.proc = subprocess.Popen(
            [*SERVE, "--address", "127.0.0.1:0", *flags],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.target = self.url = self.metrics_url = ""
        self.lines: list[str] = []
        self._more = threading.Condition()
        self._ended = False

    @property
    def port(self) -> int:
        return int(self.target.rsplit(":", 1)[1])

    def ready(self, timeout_s: float = 60.0) -> ServeProcess:
        """Read the printed addresses, keep reading stderr, poll health until SERVING."""
        assert self.proc.stderr is not None
        want_http = "--http-address" in self.flags
        want_metrics = "--metrics-address" in self.flags
        while not (
            self.target and (self.url or not want_http) and (self.metrics_url or not want_metrics)
        ):
            line = self.proc.stderr.readline()
            if not line:
                raise AssertionError(f"serve exited before serving: {self.lines}")
            self.lines.append(line)
            record = json.loads(line)  # serve writes JSON lines only
            if "serving on" in record["message"]:
                self.target = record["address"]
            elif "HTTP gateway on" in record["message"]:
                self.url = record["url"]
            elif "metrics on" in record["message"]:
                self.metrics_url = f"http://{record['address']}/metrics"
        threading.Thread(target=self._read_on, daemon=True).start()
        wait_serving(self.target, timeout_s)
        return self

    def _read_on(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._more:
                self.lines.append(line)
                self._more.notify_all()
        with self._more:
            self._ended = True
            self._more.notify_all()

    def wait_line(self, contains: str, timeout_s: float = HANG_S) -> str:
        """The first stderr line containing ``contains``, waiting for it (bounded)."""
        deadline = time.monotonic() + timeout_s
        with self._more:
            while True:
                found = next((line for line in self.lines if contains in line), None)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                assert left > 0 and not self._ended, f"no line with {contains!r}: {self.lines}"
                self._more.wait(left)

    def metric(self, name: str, **labels: str) -> float:
        """One sample of the process's Prometheus metrics (0 when absent)."""
        text = urllib.request.urlopen(self.metrics_url, timeout=10).read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(
                    sample.labels.get(k) == v for k, v in labels.items()
                ):
                    return float(sample.value)
        return 0.0

    def seeds(self) -> int:
        return int(self.metric("workplace_env_seeds_total"))

    def calls_ok(self) -> int:
        return int(self.metric("workplace_env_rpc_total", method="CallTool", code="OK"))

    def live(self) -> int:
        """Live sessions, seeded or verified."""
        return sum(
            int(self.metric("workplace_env_sessions_live", state=state))
            for state in ("seeded", "verified")
        )

    def stop(self) -> None:
        """Kill it if it still runs (tests that stop it by signal check its exit first)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=HANG_S)


# -- a stand-in EnvironmentService that refuses for concurrency (X3) ------------------------------


#: The stand-in's request type and answer per EnvironmentService method.
_STAND_IN_ANSWERS: dict[str, tuple[Any, Any]] = {
    "SeedSession": (pb.SeedSessionRequest, pb.SeedSessionResponse()),
    "CallTool": (pb.CallToolRequest, pb.CallToolResponse(output='"ok"')),
    "Verify": (pb.VerifyRequest, pb.VerifyResponse()),
    "CloseSession": (
        pb.CloseSessionRequest,
        pb.CloseSessionResponse(outcome=pb.CLOSE_OUTCOME_CLOSED),
    ),
    "ListTools": (pb.ListToolsRequest, pb.ListToolsResponse()),
    "RetireSession": (admin_pb.RetireSessionRequest, admin_pb.RetireSessionResponse(retired=True)),
    "ExportSessions": (admin_pb.ExportSessionsRequest, admin_pb.ExportSessionsResponse()),
    "RestoreSessions": (admin_pb.RestoreSessionsRequest, admin_pb.RestoreSessionsResponse()),
}


class RefusingStandIn:
    """A stand-in EnvironmentService and EnvironmentAdminService on a free loopback port: it
    answers the first ``refusals`` attempts of each RPC RESOURCE_EXHAUSTED ``TOO_MANY_RPCS``
    with a ``RetryInfo`` of ``retry_after_s`` (as a server at its limit of concurrent RPCs
    does, CONTRACT X3), then OK with an empty answer (CloseSession: CLOSED). :attr:`attempts`
    counts every RPC that reached it, by method name, whatever the service (so a test sees
    that nothing was sent)."""

    def __init__(self, refusals: int, retry_after_s: float = 0.01) -> None:
        self.refusals = refusals
        self.retry_after_s = retry_after_s
        self.attempts: dict[str, int] = {}
        self._lock = threading.Lock()
        self.server = grpc.server(ThreadPoolExecutor(4))
        self.server.add_generic_rpc_handlers([_Counting(self)])
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def target(self) -> str:
        return local(self.port)

    def total(self) -> int:
        with self._lock:
            return sum(self.attempts.values())

    def count(self, method: str) -> int:
        with self._lock:
            self.attempts[method] = self.attempts.get(method, 0) + 1
            return self.attempts[method]

    def handler(self, method: str, attempt: int) -> grpc.RpcMethodHandler | None:
        """The handler of ``method``'s ``attempt``-th RPC (None: UNIMPLEMENTED)."""
        if method not in _STAND_IN_ANSWERS:
            return None
        request_type, answer = _STAND_IN_ANSWERS[method]

        def answer_or_refuse(request: Any, context: grpc.ServicerContext) -> Any:
            if attempt <= self.refusals:
                context.abort_with_status(self._refusal())
            return answer

        if method == "ExportSessions":  # unary-stream: one (empty) chunk
            return grpc.unary_stream_rpc_method_handler(
                lambda request, context: iter([answer_or_refuse(request, context)]),
                request_deserializer=request_type.FromString,
                response_serializer=type(answer).SerializeToString,
            )
        if method == "RestoreSessions":  # stream-unary: the chunks are read, then answered
            return grpc.stream_unary_rpc_method_handler(
                lambda requests, context: answer_or_refuse(list(requests), context),
                request_deserializer=request_type.FromString,
                response_serializer=type(answer).SerializeToString,
            )
        return grpc.unary_unary_rpc_method_handler(
            answer_or_refuse,
            request_deserializer=request_type.FromString,
            response_serializer=type(answer).SerializeToString,
        )

    def _refusal(self) -> grpc.Status:
        info = error_details_pb2.ErrorInfo(reason="TOO_MANY_RPCS", domain=DOMAIN)
        retry = error_details_pb2.RetryInfo()
        retry.retry_delay.FromNanoseconds(int(self.retry_after_s * 1e9))
        status = status_pb2.Status(
            code=grpc.StatusCode.RESOURCE_EXHAUSTED.value[0],
            message="the server runs its maximum of 1 concurrent RPCs; retry later",
        )
        for detail in (info, retry):
            status.details.add().Pack(detail)
        return rpc_status.to_status(status)

    def stop(self) -> None:
        self.server.stop(None)


class _Counting(grpc.GenericRpcHandler):
    def __init__(self, stand_in: RefusingStandIn) -> None:
        self.stand_in = stand_in

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        method = str(handler_call_details.method).rsplit("/", 1)[-1]
        return self.stand_in.handler(method, self.stand_in.count(method))


def server_with_a_held_slot(make_server: Any) -> tuple[Any, threading.Event, threading.Event]:
    """A server (``make_server``'s) admitting one RPC at a time, with a live session "holder"
    whose tool calls hold that slot (``arrived`` set) until ``release`` is set: for the X3
    refusal tests. Returns (served, arrived, release); ``Faults.of(served.store).clear()``
    undoes the hold."""
    served = make_server(None, Settings(max_concurrent_rpcs=1, workers=1), evict_interval_s=3600)
    arrived, release = threading.Event(), threading.Event()

    def hold(sid: str) -> None:
        if sid == "holder":
            arrived.set()
            wait(release)

    served.client.seed("holder", ("holder", 0), TID, TASK)
    Faults.of(served.store).on("tool", hold)
    return served, arrived, release


# -- the async SDK driven by sync test code ------------------------------------------------------


class LoopThread:
    """An asyncio event loop on a daemon thread; :meth:`run` waits for a coroutine's result."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coroutine: Any) -> Any:
        """The coroutine's result (or its exception), run on the loop."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(HANG_S)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(HANG_S)
        self.loop.close()


class Blocking:
    """An async SDK object (``AsyncEnvironmentClient``, ``AsyncSession``) with the sync one's
    calls: each coroutine method runs to its end on ``loop``, ``session()`` is a plain context
    manager yielding a Blocking session; other attributes are the object's."""

    def __init__(self, target: Any, loop: LoopThread) -> None:
        self._target = target
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name == "session":
            return self._session(value)
        if inspect.iscoroutinefunction(value):
            return lambda *args, **kwargs: self._loop.run(value(*args, **kwargs))
        return value

    def _session(self, open_session: Any) -> Any:
        @contextmanager
        def session(*args: Any, **kwargs: Any) -> Iterator[Blocking]:
            manager = open_session(*args, **kwargs)
            handle = self._loop.run(manager.__aenter__())
            try:
                yield Blocking(handle, self._loop)
            except BaseException as exc:
                if not self._loop.run(manager.__aexit__(type(exc), exc, exc.__traceback__)):
                    raise
            else:
                self._loop.run(manager.__aexit__(None, None, None))

        return session


def async_client(loop: LoopThread, target: str, **options: Any) -> Blocking:
    """An ``AsyncEnvironmentClient`` on ``target`` (made on ``loop``, as grpc.aio requires),
    driven as the sync client is (:class:`Blocking`)."""

    async def make() -> AsyncEnvironmentClient:
        return AsyncEnvironmentClient(target, **options)

    return Blocking(loop.run(make()), loop)


def async_in_process_client(loop: LoopThread, server: RunningServer, **options: Any) -> Blocking:
    """An ``AsyncEnvironmentClient`` on ``server``'s servicer in this process
    (``in_process_async_client``), made on ``loop`` and driven as the sync client is."""

    async def make() -> AsyncEnvironmentClient:
        return in_process_async_client(server, **options)

    return Blocking(loop.run(make()), loop)
