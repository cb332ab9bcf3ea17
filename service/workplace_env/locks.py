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


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (a lock file another holder
    removed on release names a new file, or none)."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def lock_file_of(path: Path) -> Path:
    """The lock file of an output file: ``out.jsonl`` -> ``out.jsonl.lock`` beside it."""
    return path.with_name(path.name + ".lock")


@contextlib.contextmanager
def only_writer(path: Path, busy: str) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` while the block runs, never waiting for it.

    ``path`` is a directory (locked as is) or a lock file: created when missing, it records the
    holder's pid while held and is removed when the block ends, however it ends (an error,
    Ctrl-C). Raises :class:`WriterBusy` at once when another writer holds it, with the message
    ``"<path>: <busy>"`` plus ``" (pid N)"`` when the holder's pid is known; OSError when
    ``path`` cannot be opened.
    """
    is_dir = path.is_dir()
    while True:
        fd = os.open(path, os.O_RDONLY if is_dir else os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            pid = None if is_dir else _recorded_pid(fd)
            os.close(fd)
            holder = f" (pid {pid})" if pid is not None else ""
            raise WriterBusy(f"{path}: {busy}{holder}", pid) from exc
        except BaseException:
            os.close(fd)
            raise
        if is_dir or _same_file(fd, path):
            break
        os.close(fd)  # locked a lock file its holder removed meanwhile: take the new one
    try:
        if not is_dir:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield
    finally:
        if not is_dir:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # still held: no other writer has it open and locked
        os.close(fd)  # releases the lock
