"""Ctrl-C (SIGINT) and SIGTERM during a command that plays episodes or writes lines.

The first signal only raises a flag (:class:`StopRequest`) that the playing loop reads: no new
episode starts, the ones in flight end (their sessions closed), the command prints what it did
and how to go on, and exits ``128 + signal`` (130 for SIGINT, 143 for SIGTERM). A second signal
exits at once with that status. Outside the main thread, signals are left alone.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import threading
from collections.abc import Iterator, Sequence

from workplace_env.terminal import console

#: The signals that stop a command between two episodes.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequest:
    """Whether a stop signal came (call it: True once one did) and which (``signum``)."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def __call__(self) -> bool:
        return self.signum is not None

    @property
    def name(self) -> str:
        """The signal's name (``SIGINT``), ``""`` before one came."""
        return "" if self.signum is None else signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        """``128 + signum`` (the shell's status of a command a signal ended), 0 before one."""
        return 0 if self.signum is None else 128 + self.signum


@contextlib.contextmanager
def stop_on_signals(doing: str = "episode") -> Iterator[StopRequest]:
    """Within the block, the first SIGINT or SIGTERM sets the yielded :class:`StopRequest` and
    says on stderr that no new ``doing`` starts; a second one exits the process at once with
    ``128 + signum``. The previous handlers come back when the block ends."""
    stop = StopRequest()
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
            f"[yellow]{stop.name}: stopping[/yellow] no new {doing} starts; waiting for "
            f"those in flight to end (press Ctrl-C again to exit at once)"
        )

    previous = {number: signal.signal(number, handle) for number in STOP_SIGNALS}
    try:
        yield stop
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def rerun_command(argv: Sequence[str] | None = None, drop: Sequence[str] = ()) -> str:
    """The command line of this process (``argv``, default :data:`sys.argv`) as a shell line
    starting ``workplace-env``, without the flags in ``drop`` (e.g. ``--overwrite``)."""
    args = list(sys.argv if argv is None else argv)[1:]
    return shlex.join(["workplace-env", *(a for a in args if a not in drop)])
