"""One dataset row's typed session, as the training adapters hold it (TRL's and OpenEnv's).

A :class:`RowEpisode` is seeded when it starts, records the calls made through it, verifies
them against the row's ground truth and closes its session. An episode left before its end
(:meth:`RowEpisode.abandon`, or dropped unclosed: garbage collected, or still open at
interpreter exit) has its session closed best effort, with one
:class:`~workplace_env_client.errors.SessionLeftOpenWarning` saying so; a failed close is
logged (logger ``workplace_env_client``), never raised.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any

from workplace_env_client.client import EnvironmentClient
from workplace_env_client.errors import (
    close_failed,
    may_have_run,
    note_close_failed,
    warn_left_open,
)
from workplace_env_client.messages import VerifyResult, arguments_text, session_identity

_log = logging.getLogger("workplace_env_client")
#: Why a dropped episode's session is closed (its :class:`SessionLeftOpenWarning` says it).
DROPPED = "dropped unclosed"


def _close_abandoned(
    client: EnvironmentClient,
    session_id: str,
    episode: tuple[str, int],
    why: str,
    in_flight: BaseException | None = None,
    stacklevel: int = 1,
) -> None:
    """Close the session of an episode left unfinished (``why``), best effort: a failed close
    is logged and noted on ``in_flight``; then one SessionLeftOpenWarning (``stacklevel``
    counted as ``warnings.warn`` counts it from this function's caller) says what became of
    the session."""
    closing: Exception | None = None
    try:
        client.close_session(session_id, episode)
    except Exception as failed:
        closing = failed
        _log.warning("closing session %r (%s) failed: %s", session_id, why, failed)
        if in_flight is not None:
            note_close_failed(in_flight, session_id, failed)
    warn_left_open(session_id, closing, why, stacklevel=stacklevel + 1)


def _close_dropped(client: EnvironmentClient, session_id: str, episode: tuple[str, int]) -> None:
    # Runs from the garbage collector or at exit, where nothing can take an error: the channel
    # may be closed already (ValueError), the server gone, logging or warnings torn down.
    with suppress(Exception):
        _close_abandoned(client, session_id, episode, DROPPED)


class RowEpisode:
    """A typed session seeded for one dataset row (``id, ground_truth, prompt, ...``).

    Use :meth:`start`. ``calls`` are the ``(name, arguments JSON text)`` pairs made so far.
    """

    def __init__(
        self,
        client: EnvironmentClient,
        session_id: str,
        episode: tuple[str, int],
    ) -> None:
        self.client = client
        self.session_id = session_id
        self.episode = episode
        self.calls: list[tuple[str, str]] = []
        self._finalizer = weakref.finalize(self, _close_dropped, client, session_id, episode)

    @classmethod
    def start(
        cls,
        client: EnvironmentClient,
        row: Mapping[str, Any],
        episode: tuple[str, int] | None = None,
        before_seed: Callable[[], None] | None = None,
    ) -> RowEpisode:
        """Seed a session for ``row`` (episode default ``(<uuid>, 0)``); ``before_seed`` (the
        caller's own checks of the row, the close of an episode this one replaces) runs once
        the row is checked, right before the seed: what it raises is raised, nothing sent.
        Raises ArgumentError (nothing sent, ``before_seed`` not run) for a
        malformed row (an id that is not a string: ``task.id``; a ground truth that is not a
        list of calls: ``task.ground_truth``) or episode, and the seed's errors, the id closed
        first when the seed's outcome is unknown (nothing left open)."""
        sid, ep, task, task_id = session_identity(row, episode, None, None)
        if before_seed is not None:
            before_seed()
        try:
            client.seed(sid, ep, task_id, task)
        except BaseException as failed:
            if may_have_run(failed):
                try:
                    client.close_session(sid, ep)
                except Exception as closing:
                    close_failed(sid, closing, failed)
            raise
        return cls(client, sid, ep)

    @property
    def closed(self) -> bool:
        """Whether the session was closed (by :meth:`close` or :meth:`verify_and_close`)."""
        return not self._finalizer.alive

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError(f"the episode of session {self.session_id!r} is closed")

    def call(self, name: str, arguments: str | Mapping[str, Any] | None) -> str:
        """Call tool ``name``; record the call; return its output as JSON text (a bad call
        answers the tool's error text). Raises RuntimeError once closed, ArgumentError for
        arguments that are not a JSON object, and the RPC's errors."""
        self._check_open()
        text = arguments_text(arguments)
        output = self.client.call_tool_raw(self.session_id, name, text)
        self.calls.append((name, text))
        return output

    def verify(self) -> VerifyResult:
        """Score the calls made against the row's ground truth (reward 0.0 or 1.0; a session
        the server lost gives the masked ``session_lost`` sample). Raises RuntimeError once
        closed, and the RPC's errors."""
        self._check_open()
        return self.client.verify(self.session_id, self.calls)

    def verify_and_close(self) -> VerifyResult:
        """:meth:`verify`, then :meth:`close` whatever the verify did; a failed close never
        hides the verify's answer or error (:meth:`close` with ``ending``)."""
        try:
            result = self.verify()
        except BaseException as failed:
            self.close(in_flight=failed)
            raise
        self.close(ending=True)
        return result

    def abandon(
        self, why: str, in_flight: BaseException | None = None, stacklevel: int = 1
    ) -> None:
        """Close the session of this episode, left before its end (``why``: ``reset to a new
        episode``, ...), best effort: a failed close is logged and noted on ``in_flight``,
        never raised; one :class:`~workplace_env_client.errors.SessionLeftOpenWarning`
        (``stacklevel`` counted from the caller) says whether the session was closed. Does
        nothing once closed."""
        if self._finalizer.detach() is not None:
            _close_abandoned(
                self.client, self.session_id, self.episode, why, in_flight, stacklevel + 1
            )

    def close(self, in_flight: BaseException | None = None, ending: bool = False) -> None:
        """Close the session (a second close does nothing); the episode counts as closed
        whatever the close did. A failed close is a note on ``in_flight`` (an exception on its
        way out, never replaced); when ``ending`` a completed episode, a server out of reach
        is a :class:`~workplace_env_client.errors.SessionLeftOpenWarning`
        (:func:`~workplace_env_client.errors.close_failed`); else its error is raised."""
        if self._finalizer.detach() is None:
            return
        try:
            self.client.close_session(self.session_id, self.episode)
        except Exception as closing:
            if in_flight is None and not ending:
                raise
            close_failed(self.session_id, closing, in_flight)
