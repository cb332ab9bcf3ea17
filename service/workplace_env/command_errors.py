"""What a command says when an RPC to its server fails: the SDK's error on one line, then
``fix:`` and what to type, in the CLI's words (flags and environment variables, never the
SDK's arguments), from the SDK's one table of hints
(:func:`~workplace_env_client.errors.fix_hint`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from workplace_env.config import ADMIN_TOKEN_ENV, ENV_PREFIX
from workplace_env.terminal import CommandError
from workplace_env_client import WorkplaceEnvError
from workplace_env_client.channel import DEFAULT_TIMEOUT_S
from workplace_env_client.errors import HintWords, fix_hint

#: The words of a command with ``--target``, ``--token``, the TLS flags and ``--timeout-s``
#: (``checkpoint save`` and ``restore``).
COMMAND_WORDS = HintWords(
    target="name the server with --target HOST:PORT",
    tls_ca=f"--tls-ca (or ${ENV_PREFIX}TLS_CA)",
    client_cert=f"--tls-client-cert and --tls-client-key (or ${ENV_PREFIX}TLS_CLIENT_CERT and "
    f"${ENV_PREFIX}TLS_CLIENT_KEY)",
    token=f"--token (or ${ADMIN_TOKEN_ENV}, or admin_token in the --config file)",
    timeout="raise --timeout-s",
)
#: ``run``'s words: it has no deadline flag (each call waits the SDK's default).
RUN_WORDS = replace(
    COMMAND_WORDS,
    timeout=f"check that it is not overloaded (each call waits {DEFAULT_TIMEOUT_S:g} s at most)",
)
#: How a command names the server it started in its own process.
IN_PROCESS = "the in-process server"


def refusal_text(error: WorkplaceEnvError, server: str, words: HintWords = COMMAND_WORDS) -> str:
    """``error`` (of an RPC to ``server``, its address) as a command says it: the status, the
    reason and the server's words, then ``fix:`` and what to type, when something does."""
    fix = fix_hint(error.code, error.reason, error.message, words, server)
    return f"{error}; fix: {fix}" if fix else str(error)


@contextmanager
def server_errors(
    doing: str, target: str | None, words: HintWords = COMMAND_WORDS
) -> Iterator[None]:
    """Raise an SDK error of the block as :class:`CommandError` (exit 1): ``"<doing>
    failed:"`` and its :func:`refusal_text` for the server at ``target`` (None: the
    in-process one)."""
    try:
        yield
    except WorkplaceEnvError as exc:
        text = refusal_text(exc, target or IN_PROCESS, words)
        raise CommandError(f"{doing} failed:", text, exit_code=1) from exc
