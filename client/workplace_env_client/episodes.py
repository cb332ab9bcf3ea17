"""One dataset row's typed session, as the training adapters hold it (TRL's and OpenEnv's).

A :class:`RowEpisode` is seeded when it starts, records the calls made through it, verifies
them against the row's ground truth and closes its session; dropped unclosed (garbage
collected, or still open at interpreter exit), it closes the session itself.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from contextlib import suppress
from typing import Any

from workplace_env_client.client import EnvironmentClient
from workplace_env_client.errors import close_failed, may_have_run
from workplace_env_client.messages import VerifyResult, arguments_text, session_identity


def _close_dropped(client: EnvironmentClient, session_id: str, episode: tuple[str, int]) -> None:
    # Runs from the garbage collector or at exit, where nothing can take an error: the channel
    # may be closed already (ValueError) or the server gone.
    with suppress(Exception):
        client.close_session(session_id, episode)


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
    ) -> RowEpisode:
        """Seed a session for ``row`` (episode default ``(<uuid>, 0)``). Raises ArgumentError
        (nothing sent) for a malformed row (a ground truth that is not a list of calls:
        ``task.ground_truth``) or episode, and the seed's errors, the id closed first when the
        seed's outcome is unknown (nothing left open)."""
        sid, ep, task, task_id = session_identity(row, episode, None, None)
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
