"""The gateway's connection limit and request timeouts, below uvicorn's HTTP/1.1 protocol.

uvicorn accepts every connection and waits for a request's headers and body as long as the
client likes, so slow clients (one byte now and then, or a body that never comes) could hold
sockets until the process runs out of file descriptors, and the co-hosted gRPC server with it.
:class:`LimitedHttpProtocol` bounds both:

* a connection beyond ``max_connections`` open at once is answered ``503`` (``reason``
  TOO_MANY_CONNECTIONS, ``Retry-After: 1``) and closed as soon as it is accepted;
* a request's headers must arrive within ``header_timeout_s`` of the connection opening (or of
  the previous response, on a kept-alive connection), its body within ``body_timeout_s`` of the
  headers; else ``408`` (``reason`` REQUEST_TIMEOUT) and the connection is closed (an idle
  connection that sent nothing is closed without an answer).

:func:`connection_limit` derives the limit from the process's open-file limit
(``RLIMIT_NOFILE``), or checks a given one against it.
"""

from __future__ import annotations

import asyncio
import json
import resource
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from workplace_env_client import reasons

#: File descriptors kept for everything but the gateway's connections: the gRPC server's
#: connections and threads, the sandbox files, logs, the event loop's own.
FD_RESERVE = 256
#: The connection limit when the open-file limit is unlimited.
UNLIMITED_FDS_CONNECTIONS = 10_000


@dataclass(frozen=True)
class Limits:
    """``max_connections`` open at once (>= 1); seconds for a request's headers and body."""

    max_connections: int
    header_timeout_s: float
    body_timeout_s: float


def open_file_limit() -> int | None:
    """The process's soft ``RLIMIT_NOFILE`` (None: unlimited)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def connection_limit(requested: int, fd_limit: int | None) -> int:
    """The gateway's connection limit: ``requested``, or (0) derived from ``fd_limit`` (the
    open-file limit; None: unlimited). Each held connection is one descriptor, and one burst of
    accepts (the listen backlog, as large as the limit) as many again, so the limit is at most
    ``(fd_limit - FD_RESERVE) // 2``: half of what is left after :data:`FD_RESERVE`, which is
    the derived value. Raises ValueError naming the maximum when ``requested`` is over it or
    the open-file limit leaves no room."""
    if fd_limit is None:
        return requested or UNLIMITED_FDS_CONNECTIONS
    most = (fd_limit - FD_RESERVE) // 2
    if most < 1:
        raise ValueError(
            f"the open-file limit (RLIMIT_NOFILE {fd_limit}) leaves no room for HTTP "
            f"connections beside the {FD_RESERVE} descriptors kept for the rest: raise it "
            "(ulimit -n)"
        )
    if requested > most:
        raise ValueError(
            f"http_max_connections {requested} is more than {most}, what the open-file limit "
            f"(RLIMIT_NOFILE {fd_limit}) allows: (limit - {FD_RESERVE}) // 2; lower it or "
            "raise the limit (ulimit -n)"
        )
    return requested or most


def _answer(status: str, body: dict[str, str], headers: str = "") -> bytes:
    """A whole HTTP/1.1 response that closes the connection, with a JSON body."""
    payload = json.dumps(body, separators=(",", ":")).encode()
    head = (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(payload)}\r\n{headers}connection: close\r\n\r\n"
    )
    return head.encode("ascii") + payload


class LimitedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with :class:`Limits` (see the module docstring). Build it
    with ``functools.partial(LimitedHttpProtocol, limits=...)`` as uvicorn's ``http``."""

    def __init__(self, *args: Any, limits: Limits, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits
        self._deadline: asyncio.TimerHandle | None = None
        self._began = False  # a request's first bytes have arrived, its headers not all

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            transport.write(
                _answer(
                    "503 Service Unavailable",
                    {
                        "failure_kind": reasons.TOO_MANY_CONNECTIONS.failure_kind,
                        "reason": reasons.TOO_MANY_CONNECTIONS.name,
                        "detail": f"the gateway holds {self.limits.max_connections} "
                        "connections, its limit (http_max_connections); retry later",
                    },
                    "retry-after: 1\r\n",
                )
            )
            transport.close()
            return
        self._arm(self.limits.header_timeout_s, "headers")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._began = True
        if self._deadline is None:  # a pipelined request: its headers' time starts now
            self._arm(self.limits.header_timeout_s, "headers")

    def on_headers_complete(self) -> None:
        self._began = False
        self._arm(self.limits.body_timeout_s, "body")  # disarmed when the message completes
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and not self.pipeline and self._deadline is None:
            self._arm(self.limits.header_timeout_s, "headers")  # the next request's

    def _arm(self, seconds: float, part: str) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expire, seconds, part)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self, seconds: float, part: str) -> None:
        """The request's ``part`` did not arrive within ``seconds``: 408 (unless nothing was
        sent, or a response already started), then close."""
        self._deadline = None
        if self.transport.is_closing():
            return
        idle = part == "headers" and not self._began
        answering = self.cycle is not None and not self.cycle.response_complete
        if not idle and not (answering and self.cycle.response_started):
            setting = "http_header_timeout_s" if part == "headers" else "http_body_timeout_s"
            self.transport.write(
                _answer(
                    "408 Request Timeout",
                    {
                        "failure_kind": reasons.REQUEST_TIMEOUT.failure_kind,
                        "reason": reasons.REQUEST_TIMEOUT.name,
                        "detail": f"the request's {part} did not arrive within {seconds:g} s "
                        f"({setting})",
                    },
                )
            )
            if answering:
                self.cycle.disconnected = True  # what the app sends now goes nowhere
        self.transport.close()
