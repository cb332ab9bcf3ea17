"""What the ``workplace-env`` commands show on a terminal, in one place.

* :data:`console`: messages and progress go to stderr (tables and JSONL go to stdout), never
  wrapped mid-path;
* :func:`episode_progress`: the one progress bar of every command that plays episodes;
* :func:`plain`: a value put into a markup string shows as written (every message built with
  f-strings goes through it);
* :func:`print_table`: a table on stdout with every number and id whole at any width;
* :class:`CommandError`: a command that cannot go on; the CLI prints it and exits with its
  status (2 for bad input, as click does for a bad flag; 1 for a refused operation);
* :func:`checked_path`: a path argument that a command reads or writes, or the problem with it
  named (empty, missing, not a directory, ...);
* :func:`refuse_output_over_input`: an output that names one of the command's inputs, refused
  before any work;
* :class:`HelpGroup`: the commands' help, as plain text with each command's summary whole,
  and every command's output closed by its reader (``| head -1``) ending it quietly with
  :data:`BROKEN_PIPE_STATUS` (:func:`broken_pipe_exits`).
"""

from __future__ import annotations

import contextlib
import errno
import inspect
import io
import os
import re
import shlex
import signal
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.segment import Segment
from rich.table import Table
from typer.core import TyperGroup

from workplace_env.locks import WriterBusy, lock_file_of, only_writer
from workplace_env.plurals import counted


class Terminal(Console):
    """A rich console whose output closed by its reader raises :class:`BrokenPipeError` (to
    :func:`broken_pipe_exits`), where rich's own exits with status 1. Every console of the
    commands is one."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


console = Terminal(stderr=True, soft_wrap=True)
#: The exit status of a command whose reader closed its output early: 128 + SIGPIPE, as a
#: shell reports a command that SIGPIPE ended (``yes | head -1``).
BROKEN_PIPE_STATUS = 128 + signal.SIGPIPE


class CommandError(Exception):
    """A command that cannot go on: ``headline`` (shown in red), an optional ``detail`` after
    it, and the process ``exit_code``."""

    def __init__(self, headline: str, detail: object = None, exit_code: int = 2) -> None:
        super().__init__(headline if detail is None else f"{headline} {detail}")
        self.headline = headline
        self.detail = detail
        self.exit_code = exit_code

    def markup(self) -> str:
        """The message in rich markup."""
        if self.detail is None:
            return f"[red]{plain(self.headline)}[/red]"
        return f"[red]{plain(self.headline)}[/red] {plain(self.detail)}"


#: What a path argument names: a file, a directory, or either (a data source).
PathKind = Literal["file", "directory", "any"]


def blank_problem(text: str) -> str | None:
    """``empty value`` for "", ``blank value`` for whitespace only (spaces, tabs, newlines),
    else None: how every refusal of a value with nothing in it words it."""
    if text == "":
        return "empty value"
    return None if text.strip() else "blank value"


def path_problem(value: str | Path, kind: PathKind, *, output: bool = False) -> str | None:
    """What keeps ``value`` from being the ``kind`` a command reads (``output``: writes, in a
    directory that exists), or None: :func:`blank_problem`'s words, ``no such file or
    directory``, ``no such directory`` (an output's parent, with the ``mkdir -p`` that makes
    it), ``not a directory`` (also a file where a parent should be), ``a directory, not a
    file``, ``permission denied``, ``cannot create a file in`` (a file system that takes no
    new file, such as ``/proc``, with the error of the create tried), ``cannot write`` (a file
    that takes no write), ``cannot stat`` (a name too long, ...), a NUL byte."""
    text = os.fspath(value)
    if blank := blank_problem(text):
        return blank
    if "\0" in text:
        return f"a NUL byte in the path: {text!r}"
    path = Path(text).expanduser()
    try:
        if not path.exists():
            if not output:
                return f"no such file or directory: {text}"
            parent = path.absolute().parent
            existing = next(p for p in (parent, *parent.parents) if p.exists())
            if not existing.is_dir():  # a file where a directory should be
                return f"not a directory: {existing}"
            if existing != parent:
                made = shlex.quote(str(path.parent))
                return f"no such directory: {path.parent}; make it first: mkdir -p {made}"
            return _unwritable(parent)
        if kind == "directory" and not path.is_dir():
            return f"not a directory: {text}"
        if kind == "file" and path.is_dir():
            return f"a directory, not a file: {text}"
    except OSError as exc:  # a name too long, a parent without search permission, ...
        return f"cannot stat {text}: {exc.strerror or exc}"
    wanted = os.W_OK if output else os.R_OK
    if path.is_dir():
        wanted |= os.X_OK
    if not os.access(path, wanted):
        return f"permission denied: {text}"
    if output and path.is_dir():
        return _unwritable(path)
    if output and path.is_file():
        try:
            with path.open("ab"):  # appends nothing: the file is left as it is
                pass
        except OSError as exc:
            return f"cannot write {text}: {exc.strerror or exc}"
    return None


def _unwritable(directory: Path) -> str | None:
    """Why no file can be made in ``directory`` (tried with an unnamed temporary file, which
    also catches what permission bits do not say: a read-only or special file system, a root
    user), or None."""
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"permission denied: {directory}"
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        return f"cannot create a file in {directory}: {exc.strerror or exc}"
    return None


def checked_path(value: str | Path, argument: str, kind: PathKind, *, output: bool = False) -> Path:
    """``value`` as a :class:`Path` when :func:`path_problem` finds nothing; else raises
    :class:`CommandError` (exit 2) naming ``argument`` and the problem."""
    problem = path_problem(value, kind, output=output)
    if problem is not None:
        raise CommandError(f"{argument}: {problem}")
    return Path(os.fspath(value)).expanduser()


def same_file(first: Path, second: Path) -> bool:
    """Whether ``first`` and ``second`` name one file: equal once resolved (symlinks, ``..``),
    or one existing file under two names (a hard link)."""
    try:
        if first.expanduser().resolve() == second.expanduser().resolve():
            return True
        return first.exists() and second.exists() and os.path.samefile(first, second)
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL byte, ...
        return False


def refuse_output_over_input(
    outputs: Sequence[tuple[str, Path]], inputs: Sequence[tuple[str, Path]], nothing_done: str
) -> None:
    """Raise :class:`CommandError` (exit 2) when an output names the same file as an input.

    ``outputs`` and ``inputs`` are ``(what, path)`` pairs: ``what`` names the option in the
    message (``"--out in2.jsonl"``, ``"FILE"``); ``nothing_done`` ends the message
    (``"nothing was played"``)."""
    for written, out_path in outputs:
        for read, in_path in inputs:
            if same_file(out_path, in_path):
                raise CommandError(
                    f"{written} is the input {read} ({in_path}): writing it would replace "
                    f"the input; {nothing_done}. Write to another path."
                )


def refuse_existing_outputs(
    outputs: Sequence[tuple[str, Path]], overwrite: bool, nothing_done: str
) -> None:
    """Raise :class:`CommandError` (exit 2) when an output already holds a file that writing it
    would replace, unless ``overwrite``: a non-empty regular file (an empty one loses nothing;
    ``/dev/stdout`` and other device paths are streams, not files kept). ``outputs`` are
    ``(what, path)`` pairs as for :func:`refuse_output_over_input`; the message names the
    option, the file, its size and ``--overwrite``."""
    if overwrite:
        return
    for written, out_path in outputs:
        if str(out_path).startswith(("/dev/", "/proc/")) or not out_path.is_file():
            continue
        size = out_path.stat().st_size
        if size:
            raise CommandError(
                f"{written} exists ({counted(size, 'byte')}); {nothing_done}. Add --overwrite "
                "to replace it, or write to another path."
            )


@contextlib.contextmanager
def writing_alone(outputs: Sequence[tuple[str, Path]], nothing_done: str) -> Iterator[None]:
    """Hold each output file's lock file (:func:`~workplace_env.locks.lock_file_of`) while the
    block runs, so two commands never write one file at once; device paths (``/dev/stdout``)
    are streams and take none. ``outputs`` are ``(what, path)`` pairs as for
    :func:`refuse_existing_outputs`. Raises :class:`CommandError` (exit 2) at once when another
    command holds one (naming the file and the holder's pid) or its lock file cannot be
    written."""
    with contextlib.ExitStack() as held:
        for written, out_path in outputs:
            if str(out_path).startswith(("/dev/", "/proc/")):
                continue
            lock = lock_file_of(out_path)
            try:
                held.enter_context(only_writer(lock, f"another command is writing {out_path}"))
            except WriterBusy as exc:
                raise CommandError(
                    f"{written}: {exc}; {nothing_done}. Wait for it to end, or write to "
                    "another path."
                ) from exc
            except OSError as exc:
                raise CommandError(
                    f"{written}: cannot write {lock}: {exc}; {nothing_done}."
                ) from exc
        yield


def plain(value: object) -> str:
    """``value`` as text for a markup string: its brackets are shown, never read as rich
    markup (``[server]``, an IPv6 ``[fe80::1]``, a list in an error message)."""
    return escape(str(value))


class _Progress(Progress):
    """A progress display that leaves nothing behind when it ends because a reader went away
    (:class:`BrokenPipeError`, ``generate-tasks | head``): the command then ends quietly."""

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None and issubclass(exc_type, BrokenPipeError):
            self.live.transient = True
        super().__exit__(exc_type, exc, tb)


def episode_progress() -> Progress:
    """A progress display on :data:`console` (a context manager): description, bar, done of
    total, elapsed time; it stays on screen when it ends, unless a reader of the command's
    output went away."""
    return _Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


def print_table(table: Table) -> None:
    """Print ``table`` on stdout with every cell whole (a number, an id, a path): no column
    shrinks below its widest cell or header word (headers wrap between words), and a table
    that does not fit the terminal (80 columns in a pipe) so is printed at its natural width,
    never cut. The one way a command prints a table."""
    for column in table.columns:
        words = str(column.header).split()
        cells = [len(str(cell)) for cell in column.cells]
        column.min_width = max([*cells, *map(len, words)], default=1)
        column.overflow = "fold"
    out = Terminal()
    if _rendered_width(table, out.width) > out.width:
        out = Terminal(width=Console(width=10_000).measure(table).maximum)
    out.print(table)


def _rendered_width(table: Table, width: int) -> int:
    """The widest line of ``table`` laid out for ``width`` columns, before any cropping
    (wider than ``width`` when its columns' minimum widths do not fit)."""
    measuring = Console(width=width, file=io.StringIO())
    lines = Segment.split_lines(measuring.render(table, measuring.options))
    return max((Segment.get_line_length(line) for line in lines), default=0)


#: Docstring markup (reStructuredText roles and literals, Markdown emphasis and code) in a
#: help text: ``:role:`~a.b```, a double-backquoted literal, ``**strong**``, a backquoted span.
_HELP_MARKUP = re.compile(r":[\w:]+:`(~?)([^`]+)`|``([^`]+)``|\*\*([^*]+)\*\*|`([^`]+)`")


def plain_help(text: str | None) -> str | None:
    """``text`` (a docstring used as help) with its markup written as the plain text it shows:
    a role's target (its last name after ``~``), a literal's or an emphasis' content."""
    if not text:
        return text

    def shown(match: re.Match[str]) -> str:
        tilde, target, *rest = match.groups()
        if target is not None:
            return target.rsplit(".", 1)[-1] if tilde else target
        return next(g for g in rest if g is not None)

    return _HELP_MARKUP.sub(shown, text)


def summary(command: click.Command) -> str:
    """A command's one-line description for its group's list: its help's first paragraph,
    whole, on one line (click cuts it at ~45 characters)."""
    text = inspect.cleandoc(command.short_help or command.help or "")
    return " ".join(text.split("\n\n", 1)[0].split())


@contextlib.contextmanager
def broken_pipe_exits() -> Iterator[None]:
    """Within the block (and at its end, when stdout is flushed), an output whose reader has
    gone (:class:`BrokenPipeError`: ``workplace-env ... | head -1``) exits the process with
    :data:`BROKEN_PIPE_STATUS`, quietly: no traceback, and what is still buffered for stdout
    and stderr is dropped."""
    try:
        try:
            yield
        finally:
            sys.stdout.flush()
    except BrokenPipeError:
        discard = os.open(os.devnull, os.O_WRONLY)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                os.dup2(discard, stream.fileno())
        os.close(discard)
        raise SystemExit(BROKEN_PIPE_STATUS) from None


class HelpGroup(TyperGroup):
    """A command group whose help (and every command's and option's help under it) is plain
    text, and whose command list shows each command's :func:`summary` whole, wrapped. Its
    help, its commands and their output end as :func:`broken_pipe_exits` says when the
    reader of their output goes away."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.help = plain_help(self.help)
        for command in self.commands.values():
            command.help = plain_help(command.help)
            command.short_help = plain_help(command.short_help)
            for param in command.params:
                if getattr(param, "help", None):
                    param.help = plain_help(param.help)  # type: ignore[attr-defined]

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        with broken_pipe_exits():  # --help, --version
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        with broken_pipe_exits():
            return super().invoke(ctx)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, summary(command)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
