"""What the ``workplace-env`` commands show on a terminal, in one place.

* :data:`console`: messages and progress go to stderr (tables and JSONL go to stdout), never
  wrapped mid-path;
* :func:`episode_progress`: the one progress bar of every command that plays episodes;
* :func:`plain`: a value put into a markup string shows as written (every message built with
  f-strings goes through it);
* :func:`print_table`: a summary table on stdout with every number whole at any width;
* :class:`CommandError`: a command that cannot go on; the CLI prints it and exits with its
  status (2 for bad input, as click does for a bad flag; 1 for a refused operation).
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

console = Console(stderr=True, soft_wrap=True)


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


def plain(value: object) -> str:
    """``value`` as text for a markup string: its brackets are shown, never read as rich
    markup (``[server]``, an IPv6 ``[fe80::1]``, a list in an error message)."""
    return escape(str(value))


def episode_progress() -> Progress:
    """A progress display on :data:`console` (a context manager): description, bar, done of
    total, elapsed time; it stays on screen when it ends."""
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


def print_table(table: Table) -> None:
    """Print ``table`` on stdout with every right-justified (numeric) cell and header word whole:
    those columns never wrap nor shrink below their widest cell or header word (other columns
    fold), and a table that still does not fit the terminal (80 columns in a pipe) is printed at
    its own width, never cut."""
    for column in table.columns:
        if column.justify == "right":
            words = str(column.header).split()
            cells = [len(str(cell)) for cell in column.cells]
            column.min_width = max([*cells, *map(len, words)], default=1)
            column.no_wrap = True
        else:
            column.overflow = "fold"
    out = Console()
    needed = Console(width=10_000).measure(table).minimum
    if needed > out.width:
        out = Console(width=needed)
    out.print(table)
