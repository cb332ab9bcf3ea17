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
import importlib
import os
import shlex
import signal
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

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


def _running_command() -> Any:
    """The click command this process runs (typer's bundled click first, then click's), None
    outside one."""
    for module in ("typer._click.globals", "click.globals"):
        try:
            context = importlib.import_module(module).get_current_context(silent=True)
        except (ImportError, AttributeError):
            continue
        if context is not None:
            return context.command
    return None


def _option_shapes(command: Any) -> dict[str, tuple[str, bool]]:
    """Each option string of the click ``command`` (``--json-out``, ``--no-overwrite``) -> its
    parameter's name and whether it takes a value; empty for None."""
    shapes: dict[str, tuple[str, bool]] = {}
    for param in getattr(command, "params", ()):
        if param.param_type_name == "option":
            takes_value = not (param.is_flag or param.count)
            for opt in (*param.opts, *param.secondary_opts):
                shapes[opt] = (str(param.name), takes_value)
    return shapes


def _option_groups(
    args: Sequence[str], shapes: Mapping[str, tuple[str, bool]]
) -> list[tuple[str | None, list[str]]]:
    """``args`` cut into ``(key, tokens)``: an option with its value (``--opt value`` or
    ``--opt=value``) keyed by its parameter's name, a positional argument keyed None. An option
    ``shapes`` does not know is keyed by its own name and takes the next token as its value
    unless that token starts with ``-``; after ``--`` every token is positional."""
    groups: list[tuple[str | None, list[str]]] = []
    at = 0
    while at < len(args):
        arg = args[at]
        name, has_value, _ = arg.partition("=")
        if arg == "--":
            groups += [(None, [rest]) for rest in args[at:]]
            break
        at += 1
        if not arg.startswith("-") or arg == "-":
            groups.append((None, [arg]))
            continue
        key, takes_value = shapes.get(name, (name, None))
        group = [arg]
        if not has_value and at < len(args):
            following = args[at]
            if takes_value or (takes_value is None and not following.startswith("-")):
                group.append(following)
                at += 1
        groups.append((key, group))
    return groups


def program(argv0: str | None = None) -> str:
    """How to start ``workplace-env`` again as this process was started: ``argv0`` (default
    ``sys.argv[0]``) when it is the console script (``.venv/bin/workplace-env`` as typed, so a
    printed command runs without ``.venv/bin`` on PATH), else ``workplace-env``."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    return argv0 if Path(argv0).name == "workplace-env" else "workplace-env"


def rerun_command(
    argv: Sequence[str] | None = None,
    drop: Sequence[str] = (),
    replace: Mapping[str, str] | None = None,
    add: Sequence[str] = (),
) -> str:
    """The command line of this process (``argv``, default :data:`sys.argv`) as a shell line
    starting as it was started (:func:`program` of ``argv[0]``), each option once with its latest
    value (at its first place), without the options in ``drop`` (e.g. ``--overwrite``: the
    flag and its ``--no-`` form), with each option of ``replace`` (``{"--base-url":
    "http://HOST:PORT/v1"}``) given that value at the end instead of its own, and each flag of
    ``add`` (``--overwrite``) set at the end. Options are told apart by the running click
    command's parameters (the flag and its ``--no-`` form are one); without one, an unknown
    option takes the next token as its value unless it starts with ``-``."""
    line = list(sys.argv if argv is None else argv)
    args = line[1:]
    shapes = _option_shapes(_running_command())
    replace = replace or {}

    def key_of(option: str) -> str:
        return shapes.get(option, (option, False))[0]

    gone = {key_of(option) for option in (*drop, *replace, *add)}
    kept: dict[str | int, list[str]] = {}
    for at, (key, tokens) in enumerate(_option_groups(args, shapes)):
        if key is None:
            kept[at] = tokens
        elif key not in gone:
            kept[key] = tokens  # a repeated option keeps its first place, its latest value
    words = [token for tokens in kept.values() for token in tokens]
    for option, value in replace.items():
        words += [option, value]
    words += list(add)
    return shlex.join([program(line[0] if line else ""), *words])
