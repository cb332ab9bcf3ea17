"""One writer at a time: an exclusive advisory lock (``flock``) on a directory or a lock file."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


class WriterBusy(OSError):
    """Another writer holds the lock; ``pid`` is its process id when it recorded one."""

    def __init__(self, message: str, pid: int | None) -> None:
        super().__init__(message)
        self.pid = pid


def _recorded_pid(fd: int) -> int | None:
    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None


@contextlib.contextmanager
def only_writer(path: Path, busy: str) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` while the block runs, never waiting for it.

    ``path`` is a directory (locked as is) or a lock file (created when missing; it records the
    holder's pid while held). Raises :class:`WriterBusy` at once when another writer holds it,
    with the message ``"<path>: <busy>"`` plus ``" (pid N)"`` when the holder's pid is known;
    OSError when ``path`` cannot be opened.
    """
    is_dir = path.is_dir()
    fd = os.open(path, os.O_RDONLY if is_dir else os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            pid = None if is_dir else _recorded_pid(fd)
            holder = f" (pid {pid})" if pid is not None else ""
            raise WriterBusy(f"{path}: {busy}{holder}", pid) from exc
        if not is_dir:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        try:
            yield
        finally:
            if not is_dir:
                os.ftruncate(fd, 0)  # a later reader finds no stale pid
    finally:
        os.close(fd)  # releases the lock
