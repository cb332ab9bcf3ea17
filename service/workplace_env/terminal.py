"""What the ``workplace-env`` commands show on a terminal, in one place.

* :data:`console`: messages and progress go to stderr (tables and JSONL go to stdout), never
  wrapped mid-path;
* :func:`episode_progress`: the one progress bar of every command that plays episodes;
* :class:`CommandError`: a command that cannot go on; the CLI prints it and exits with its
  status (2 for bad input, as click does for a bad flag; 1 for a refused operation).
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

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
            return f"[red]{self.headline}[/red]"
        return f"[red]{self.headline}[/red] {self.detail}"


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
