"""The gateway under hostile clients: slow ones (headers or a body that never finish) are
dropped after the timeouts, connections beyond the limit are refused while the co-hosted gRPC
server keeps answering, and a large body's parsing (every route) and an aggregation run off
the event loop, so ``/health`` answers meanwhile."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from grpc_health.v1.health_pb2 import HealthCheckResponse

from tests.helpers import HANG_S, gateway_on, health, local, wait
from workplace_env.gateway import GatewaySettings, mcp_tools, start_gateway, translate
from workplace_env.gateway.limits import FD_RESERVE, connection_limit
from workplace_env.gateway.routes import episodes as episode_routes
from workplace_env.gateway.routes import offline as offline_routes
from workplace_env.gateway.serve import RunningGateway
from workplace_env.gateway.translate import INLINE_BODY_BYTES
from workplace_env_client import EnvironmentClient

TIMEOUT_S = 0.5
#: asyncio runs a timer up to its clock resolution early; a cut-off may come this much sooner.
EARLY_S = 0.01
MAX_CONNECTIONS = 3
SETTINGS = GatewaySettings(
    header_timeout_s=TIMEOUT_S, body_timeout_s=TIMEOUT_S, max_connections=MAX_CONNECTIONS
)
HEAD = b"POST /seed_session HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"


@pytest.fixture(scope="module")
def limited(server) -> Iterator[RunningGateway]:
    """A co-hosted gateway (in-process client) with short timeouts and 3 connections."""
    running = gateway_on("in_process", server, settings=SETTINGS)
    yield running
    running.stop()


def _connect(gateway: RunningGateway) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", gateway.port), timeout=HANG_S)
    return sock


def _read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer else 0


def _body(answer: bytes) -> dict[str, Any]:
    return json.loads(answer.partition(b"\r\n\r\n")[2])  # type: ignore[no-any-return]


def test_connection_limit_is_derived_from_and_bounded_by_the_open_file_limit():
    assert connection_limit(0, 1024) == (1024 - FD_RESERVE) // 2 == 384
    assert connection_limit(100, 1024) == 100
    assert connection_limit(0, None) > 0  # unlimited descriptors: a fixed limit
    with pytest.raises(ValueError, match=r"more than 384.*RLIMIT_NOFILE 1024"):
        connection_limit(385, 1024)
    with pytest.raises(ValueError, match="leaves no room"):
        connection_limit(0, FD_RESERVE + 1)


def test_a_limit_the_open_file_limit_cannot_keep_fails_the_start(server):
    with pytest.raises(RuntimeError, match="http_max_connections 2000000000 is more than"):
        start_gateway(local(server.port), settings=GatewaySettings(max_connections=2 * 10**9))


def test_headers_sent_byte_by_byte_are_cut_off_at_the_header_timeout(limited):
    started = time.monotonic()  # before the server can accept
    sock = _connect(limited)
    stop = threading.Event()

    def drip() -> None:  # the slow client: one byte at a time, for ever
        for byte in HEAD * 100:
            if stop.wait(0.02):
                return
            try:
                sock.send(bytes([byte]))
            except OSError:
                return

    dripping = threading.Thread(target=drip)
    dripping.start()
    try:
        answer = _read_all(sock)
    finally:
        stop.set()
        dripping.join(HANG_S)
        sock.close()
    assert TIMEOUT_S - EARLY_S <= time.monotonic() - started < HANG_S
    assert _status(answer) == 408
    assert _body(answer)["reason"] == "REQUEST_TIMEOUT"
    assert "headers" in _body(answer)["detail"]


def test_a_body_that_never_comes_is_cut_off_at_the_body_timeout(limited):
    started = time.monotonic()  # before the server can see the headers
    with _connect(limited) as sock:
        sock.sendall(HEAD + b"content-length: 100\r\n\r\n{")  # 1 byte of 100, then nothing
        answer = _read_all(sock)
    assert TIMEOUT_S - EARLY_S <= time.monotonic() - started < HANG_S
    assert _status(answer) == 408 and "body" in _body(answer)["detail"]


def test_a_connection_that_sends_nothing_is_closed_without_an_answer(limited):
    started = time.monotonic()  # before the server can accept
    with _connect(limited) as sock:
        assert _read_all(sock) == b""
    assert TIMEOUT_S - EARLY_S <= time.monotonic() - started < HANG_S


def test_a_kept_alive_connection_serves_requests_slower_than_the_timeouts(limited, server):
    """The header timeout counts from the previous response, not from the connection."""
    with httpx.Client(base_url=limited.url, timeout=HANG_S) as client:
        assert client.post("/seed_session", json={"id": "t"}).status_code == 200
        out: list[httpx.Response] = []
        with _holding(offline_routes, "aggregate_metrics") as (entered, release):
            asking = threading.Thread(
                target=lambda: out.append(
                    client.post("/aggregate_metrics", json={"verify_responses": []})
                )
            )
            asking.start()
            wait(entered)
            time.sleep(TIMEOUT_S * 2)  # answering takes longer than both timeouts
            release.set()
            asking.join(HANG_S)
        assert out[0].status_code == 200


def test_connections_beyond_the_limit_are_refused_and_grpc_still_answers(limited, server, sdk):
    loris = [_connect(limited) for _ in range(MAX_CONNECTIONS)]  # accepted in this order
    try:
        for sock in loris:
            sock.send(b"P")  # a request begun, never finished
        with _connect(limited) as extra:
            answer = _read_all(extra)
        assert _status(answer) == 503
        assert _body(answer)["reason"] == "TOO_MANY_CONNECTIONS"
        assert b"retry-after: 1" in answer.lower()
        # the co-hosted gRPC server: health and a seed answer meanwhile
        assert health(local(server.port)) == HealthCheckResponse.SERVING
        sid = f"limits-{uuid.uuid4()}"
        sdk.seed(sid, ("r", 0), ("t", "1"), {"id": "1"})
        sdk.close_session(sid, ("r", 0))
        for sock in loris:  # the slow ones are dropped at the header timeout
            assert _status(_read_all(sock)) == 408
    finally:
        for sock in loris:
            sock.close()
    deadline = time.monotonic() + HANG_S  # the slots come back once the closes are seen
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{limited.url}/health", timeout=HANG_S).status_code == 200:
                return
        except httpx.TransportError:
            pass
    raise AssertionError("the connection slots never came back")


# -- large bodies off the event loop ------------------------------------------------------------


class _holding:
    """Replace ``module.name`` by a wrapper that signals ``entered`` and waits for ``release``
    before calling the original; restored on exit."""

    def __init__(self, module: Any, name: str) -> None:
        self.module, self.name = module, name
        self.original: Callable[..., Any] = getattr(module, name)

    def __enter__(self) -> tuple[threading.Event, threading.Event]:
        entered, release = threading.Event(), threading.Event()
        original = self.original

        def held(*args: Any, **kwargs: Any) -> Any:
            entered.set()
            wait(release)
            return original(*args, **kwargs)

        setattr(self.module, self.name, held)
        self.release = release
        return entered, release

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        setattr(self.module, self.name, self.original)


PAD = "x" * (INLINE_BODY_BYTES + 1)
#: Every route that reads a body, with a large body, and the function that parses it.
LARGE = {
    "seed": ("/seed_session", {"id": "t", "pad": PAD}, translate, "parse_object"),
    "close": ("/close_session", {"pad": PAD}, translate, "parse_object"),
    "token": ("/session_token", {"pad": PAD}, translate, "parse_object"),
    "tool_without_session": ("/email_send_email", {"pad": PAD}, translate, "parse_object"),
    "verify": ("/verify", {"response": {"output": []}, "pad": PAD}, episode_routes, "parse_object"),
    "aggregate": (
        "/aggregate_metrics",
        {"verify_responses": [], "pad": PAD},
        offline_routes,
        "parse_object",
    ),
    "mcp": (
        "/mcp",
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "pad": PAD},
        mcp_tools,
        "_envelope_problem",
    ),
}


@pytest.mark.parametrize("route,body,module,name", LARGE.values(), ids=LARGE.keys())
def test_health_answers_while_a_large_body_is_parsed(limited, route, body, module, name):
    answers: list[httpx.Response] = []
    headers = {"accept": "application/json, text/event-stream"}
    with (
        _holding(module, name) as (entered, release),
        httpx.Client(base_url=limited.url, timeout=HANG_S) as client,
    ):
        sending = threading.Thread(
            target=lambda: answers.append(client.post(route, json=body, headers=headers))
        )
        sending.start()
        wait(entered)  # the parse is held: the event loop must still serve
        assert httpx.get(f"{limited.url}/health", timeout=HANG_S).json() == {"status": "ok"}
        release.set()
        sending.join(HANG_S)
    assert answers and answers[0].status_code < 500, answers[0].text


def test_health_answers_while_an_aggregation_runs(limited):
    body = {"verify_responses": [{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0}]}
    answers: list[httpx.Response] = []
    with _holding(offline_routes, "aggregate_metrics") as (entered, release):
        sending = threading.Thread(
            target=lambda: answers.append(
                httpx.post(f"{limited.url}/aggregate_metrics", json=body, timeout=HANG_S)
            )
        )
        sending.start()
        wait(entered)
        assert httpx.get(f"{limited.url}/health", timeout=HANG_S).json() == {"status": "ok"}
        release.set()
        sending.join(HANG_S)
    assert answers[0].status_code == 200
    assert answers[0].json()["agent_metrics"]["mean/reward"] == 1.0


def test_a_tool_call_with_a_large_body_reaches_the_service_off_the_loop(limited):
    """The in-process client's servicer parses the arguments again: a large text goes to a
    thread."""
    answers: list[httpx.Response] = []
    with httpx.Client(base_url=limited.url, timeout=HANG_S) as client:
        assert client.post("/seed_session", json={"id": "t"}).status_code == 200
        with _holding(EnvironmentClient, "call_tool_raw") as (entered, release):
            sending = threading.Thread(
                target=lambda: answers.append(
                    client.post("/email_search_emails", json={"query": PAD})
                )
            )
            sending.start()
            wait(entered)
            assert httpx.get(f"{limited.url}/health", timeout=HANG_S).status_code == 200
            release.set()
            sending.join(HANG_S)
    assert answers[0].status_code == 200
