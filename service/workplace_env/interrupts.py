"""Stopping a command that plays episodes or writes lines: on Ctrl-C (SIGINT), SIGTERM, or a
server found gone.

The first signal only raises a flag (:class:`StopRequest`) that the playing loop reads: no new
episode starts, the ones in flight end (their sessions closed), the command prints what it did
and how to go on, and exits ``128 + signal`` (130 for SIGINT, 143 for SIGTERM). A second signal
exits at once with that status. Outside the main thread, signals are left alone.

An episode that failed UNAVAILABLE makes the loop ask the server's health service
(:meth:`StopRequest.check_server`): a server that does not answer raises the same flag with the
reason :data:`SERVER_LOST`, and the command ends the same way with exit status 1.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from workplace_env.terminal import console, plain

#: The signals that stop a command between two episodes.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: The :attr:`StopRequest.reason` of a run whose server does not answer any more.
SERVER_LOST = "server lost"
#: Seconds the health check of :meth:`StopRequest.check_server` waits for an answer.
HEALTH_CHECK_TIMEOUT_S = 5.0
#: The codes of a health check that mean no server answered.
NO_ANSWER_CODES = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def server_silence(channel: grpc.Channel, timeout_s: float = HEALTH_CHECK_TIMEOUT_S) -> str | None:
    """Why the server behind ``channel`` does not answer a health ``Check`` within
    ``timeout_s`` seconds (its code and details: UNAVAILABLE, DEADLINE_EXCEEDED), or None when
    it answers anything (SERVING, NOT_SERVING, or any other status: some server is there)."""
    try:
        health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=timeout_s
        )
    except grpc.RpcError as exc:
        code = exc.code()  # type: ignore[attr-defined]
        if code in NO_ANSWER_CODES:
            return f"{code.name}: {exc.details()}"  # type: ignore[attr-defined]
    return None


class StopRequest:
    """Whether the command was asked to stop (call it: True once it was) and why: a signal
    (``signum``) or :data:`SERVER_LOST` (``lost``: the health check's answer)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.lost: str | None = None
        self._checking = threading.Lock()

    def __call__(self) -> bool:
        return self.signum is not None or self.lost is not None

    @property
    def name(self) -> str:
        """The signal's name (``SIGINT``), :data:`SERVER_LOST`, ``""`` before a stop."""
        if self.signum is not None:
            return signal.Signals(self.signum).name
        return SERVER_LOST if self.lost is not None else ""

    @property
    def exit_status(self) -> int:
        """``128 + signum`` (the shell's status of a command a signal ended), 1 for a lost
        server, 0 before a stop."""
        if self.signum is not None:
            return 128 + self.signum
        return 1 if self.lost is not None else 0

    def stopped_text(self) -> str:
        """What stopped the command, in rich markup: ``stopped by SIGINT``, or ``stopped: server
        lost`` with the health check's answer."""
        if self.signum is None and self.lost is not None:
            return f"[red]stopped: {SERVER_LOST}[/red] ({plain(self.lost)})"
        return f"[yellow]stopped by {self.name}[/yellow]"

    def check_server(self, channel: grpc.Channel, doing: str = "episode") -> bool:
        """After an episode failed UNAVAILABLE: when the server behind ``channel`` does not
        answer a health check (:func:`server_silence`), stop (:data:`SERVER_LOST`) and say on
        stderr that no new ``doing`` starts. One check at a time; none once stopped. Returns
        whether the command is stopped."""
        with self._checking:
            if self():
                return True
            silence = server_silence(channel)
            if silence is None:
                return False
            self.lost = silence
        console.print(
            f"[red]{SERVER_LOST}:[/red] the server does not answer a health check "
            f"({plain(silence)}); no new {doing} starts; waiting for those in flight to end"
        )
        return True


@contextlib.contextmanager
def stop_on_signals(
    doing: str = "episode", stop: StopRequest | None = None, wait: str = ""
) -> Iterator[StopRequest]:
    """Within the block, the first SIGINT or SIGTERM sets the yielded :class:`StopRequest`
    (``stop``, else a new one) and says on stderr that no new ``doing`` starts and, with
    ``wait``, how long those in flight may take (``at most 120 s (--timeout)``); a second one
    exits the process at once with ``128 + signum``. The previous handlers come back when the
    block ends."""
    stop = StopRequest() if stop is None else stop
    bound = f", {wait}" if wait else ""
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handle(signum: int, _frame: object) -> None:
        if stop.signum is not None:
            console.print(f"[red]{signal.Signals(signum).name} again: exiting at once[/red]")
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(stop.exit_status)
        stop.signum = signum
        console.print(
            f"[yellow]{stop.name}: stopping.[/yellow] No new {doing} starts; waiting for "
            f"those in flight to end{plain(bound)} (press Ctrl-C again to exit at once)."
        )

    previous = {number: signal.signal(number, handle) for number in STOP_SIGNALS}
    try:
        yield stop
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def rerun_command(
    argv: Sequence[str] | None = None,
    drop: Sequence[str] = (),
    replace: Mapping[str, str] | None = None,
) -> str:
    """The command line of this process (``argv``, default :data:`sys.argv`) as a shell line
    starting ``workplace-env``, without the flags in ``drop`` (e.g. ``--overwrite``) and with
    each option of ``replace`` (``{"--base-url": "http://HOST:PORT/v1"}``) given that value at
    the end instead of its own (``--opt value`` or ``--opt=value``)."""
    args = list(sys.argv if argv is None else argv)[1:]
    replace = replace or {}
    kept: list[str] = []
    skip_value = False
    for arg in args:
        if skip_value:
            skip_value = False
        elif arg in replace:
            skip_value = True
        elif arg not in drop and arg.split("=", 1)[0] not in replace:
            kept.append(arg)
    for option, value in replace.items():
        kept += [option, value]
    return shlex.join(["workplace-env", *kept])
