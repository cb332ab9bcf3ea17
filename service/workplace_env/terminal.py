"""What the ``workplace-env`` commands show on a terminal, in one place.

* :data:`console`: messages and progress go to stderr (tables and JSONL go to stdout), never
  wrapped mid-path;
* :func:`episode_progress`: the one progress bar of every command that plays episodes;
* :func:`plain`: a value put into a markup string shows as written (every message built with
  f-strings goes through it);
* :class:`CommandError`: a command that cannot go on; the CLI prints it and exits with its
  status (2 for bad input, as click does for a bad flag; 1 for a refused operation);
* :func:`refusal_text`: an SDK error as a command says it, with the flag that fixes it;
* :class:`HelpGroup`: the commands' help, as plain text with each command's summary whole.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from typer.core import TyperGroup

from workplace_env.config import ADMIN_TOKEN_ENV, ENV_PREFIX
from workplace_env_client import WorkplaceEnvError

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


def refusal_text(error: WorkplaceEnvError, target: str) -> str:
    """``error`` (of an RPC to the server at ``target``) as a command says it: the status, the
    reason and the server's words, then ``fix:`` and what to type (:func:`command_fix`)."""
    fix = command_fix(error, target)
    return f"{error}; fix: {fix}" if fix else str(error)


def command_fix(error: WorkplaceEnvError, target: str) -> str:
    """The flags or variables of a command talking to ``target`` (``--target``, ``--token``,
    ``--tls-ca``, ``--timeout-s``: the checkpoint commands') that fix ``error``, or ""."""
    token = f"--token (or ${ADMIN_TOKEN_ENV})"
    tls_ca = f"--tls-ca (or ${ENV_PREFIX}TLS_CA)"
    if error.reason == "ADMIN_TOKEN_REQUIRED":
        return f"pass the admin token {target} was started with (its --admin-token) as {token}"
    if error.reason == "ADMIN_TOKEN_INVALID":
        return f"{token} must be the --admin-token {target} was started with"
    if error.reason == "ADMIN_DISABLED":
        return f"start the server with --admin-token, then pass that token as {token}"
    if error.code.name == "UNAVAILABLE" and not error.reason:
        if "handshake" in error.message.lower() or "ssl" in error.message.lower():
            return (
                f"TLS with {target} failed: {tls_ca} must be the CA of the server's --tls-cert,"
                " and a plaintext server takes no --tls-ca"
            )
        return (
            f"no server answered at {target}: name the server with --target HOST:PORT (and check"
            f" it runs); a server started with --tls-cert needs {tls_ca}"
        )
    if error.code.name == "DEADLINE_EXCEEDED" and not error.reason:
        return "no answer in time: raise --timeout-s"
    return ""


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


class HelpGroup(TyperGroup):
    """A command group whose help (and every command's and option's help under it) is plain
    text, and whose command list shows each command's :func:`summary` whole, wrapped."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.help = plain_help(self.help)
        for command in self.commands.values():
            command.help = plain_help(command.help)
            command.short_help = plain_help(command.short_help)
            for param in command.params:
                if isinstance(param, click.Option | click.Argument) and getattr(
                    param, "help", None
                ):
                    param.help = plain_help(param.help)  # type: ignore[union-attr]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, summary(command)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
