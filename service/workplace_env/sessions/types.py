"""The session store's value types: states, outcomes, bounds, and one live session.

Owns what the store's callers see (:class:`SessionState`, :class:`CloseOutcome`,
:class:`SeedResult`, :class:`ToolResult`, :class:`VerifyOutcome`), its bounds
(:class:`SessionConfig`) and what it keeps per live session (:class:`LiveSession`,
:class:`CallRecord`, :func:`task_digest`). No behaviour beyond digests.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from json.encoder import encode_basestring_ascii as _ascii_json

from workplace_env.identity import EpisodeId, Task, TaskId
from workplace_env.sandbox.tables import SessionTables
from workplace_env.verify import DEFAULT_CACHE_BYTES, Score, TableScore

#: A source of seconds (``time.monotonic``; tests inject a settable one so they need no sleeps).
Clock = Callable[[], float]

#: The placeholder identity of legacy (cookie) sessions, which have no episode of their own.
LEGACY_EPISODE = EpisodeId("legacy", 0)


class SessionState(Enum):
    """docs/contract.md "Session states" (CLOSED sessions live on only as fences)."""

    SEEDED = "SEEDED"
    VERIFIED = "VERIFIED"
    CLOSED = "CLOSED"
    RESTORED_UNCLAIMED = "RESTORED_UNCLAIMED"


class CloseOutcome(Enum):
    """What a close did (C1-C3)."""

    CLOSED = "CLOSED"
    ALREADY_CLOSED = "ALREADY_CLOSED"
    NOT_SEEDED = "NOT_SEEDED"


@dataclass(frozen=True)
class SessionConfig:
    """Bounds of the store; every one is configurable (defaults in docs/reference/configuration.md).

    ``max_sessions``: live sessions (and pending builds) before seeds get RESOURCE_EXHAUSTED (S7).
    ``idle_ttl_s``: seconds without a request before the sweep evicts a session (X1).
    ``max_fences`` / ``fence_ttl_s``: closed ids remembered (S4, T5, C2), by count and age; the
    same bounds apply to the records of evicted ids (which answer SESSION_EXPIRED) and of ids
    released by a legacy verify or a retire (SESSION_LOST saying which).
    ``max_call_ids`` / ``call_id_ttl_s``: idempotency records per session (T6), by count and
    age, oldest dropped first; all released with the session.
    ``retry_after_s``: the RetryInfo delay suggested when at capacity.
    ``retry_window_s``: how long a verified legacy session's outcome is remembered, so a
    resent verify scores the same (``session_close_retry_window_seconds``, V2-V3).
    ``max_markers``: verified legacy ids remembered at most (oldest dropped first).
    ``verify_cache_bytes``: estimated bytes of the verifier's memoised end states.
    ``max_session_write_bytes``: UTF-8 bytes of arguments text a session's write-tool calls
    may add up to (0: no bound); a call beyond it is SESSION_TOO_LARGE.
    """

    max_sessions: int = 50_000
    idle_ttl_s: float = 3600.0
    max_fences: int = 200_000
    fence_ttl_s: float = 6 * 3600.0
    max_call_ids: int = 1024
    call_id_ttl_s: float = 3600.0
    retry_after_s: float = 1.0
    retry_window_s: float = 300.0
    max_markers: int = 100_000
    verify_cache_bytes: int = DEFAULT_CACHE_BYTES
    max_session_write_bytes: int = 64 * 2**20


@dataclass(frozen=True)
class SeedResult:
    """Outcome of a seed: the state afterwards and whether it was a retry (S2)."""

    state: SessionState
    already_seeded: bool
    rebuilt: bool = False
    restored: bool = False  # this seed claimed tables restored from a checkpoint (K4)


@dataclass(frozen=True)
class ToolResult:
    """A tool call's output JSON text, and whether it was replayed for a repeated call_id (T6)."""

    output: str
    replayed: bool = False


@dataclass(frozen=True)
class VerifyOutcome:
    """A verify's answer: the score, or a masked 0 with ``failure_kind`` (V4).

    Its fields are those of the ``VerifyResponse`` message, by name; the servicer copies them
    over by the message's descriptor, so a field added to both reaches the SDK as it is.
    ``failure_kind`` is ``""`` or a ``FailureKind`` name without its prefix, lower-cased
    (``"session_lost"``); ``tables`` is the verifier's per-table comparison (empty when lost).
    """

    reward: float
    mask_sample: bool = False
    failure_kind: str = ""
    failure_reason: str = ""
    tables: tuple[TableScore, ...] = ()

    @classmethod
    def scored(cls, score: Score) -> VerifyOutcome:
        """The outcome of a verify the verifier scored (its tables as it hands them out)."""
        return cls(reward=score.reward, tables=score.tables)


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One remembered tool call of a session: when, which call, and its output (T6, T7).

    ``call`` is a digest of the tool name and the arguments text: enough to tell a retry from
    another call without keeping the arguments (an email body can be long).
    """

    at: float
    call: bytes
    output: str

    @staticmethod
    def digest(tool_name: str, arguments: str) -> bytes:
        """The ``call`` of a tool name and arguments text (BLAKE2b, 16 bytes)."""
        # The text of ``json.dumps([tool_name, arguments])``, without building an encoder per
        # call; ASCII, so any str encodes.
        data = f"[{_ascii_json(tool_name)}, {_ascii_json(arguments)}]".encode()
        return hashlib.blake2b(data, digest_size=16).digest()


@dataclass
class LiveSession:
    """One live session: its binding, tables and bookkeeping."""

    session_id: str
    episode: EpisodeId
    task_id: TaskId
    task: Task
    tables: SessionTables | None
    last_used: float
    state: SessionState = SessionState.SEEDED
    legacy: bool = False
    # Installed by a restore (K3); ``restored_state`` is the state it had when exported.
    restored: bool = False
    restored_state: SessionState = SessionState.SEEDED
    # The digest of the snapshot it was restored from (:func:`snapshot_digest`): a restore
    # retried after a lost answer finds the same one installed and counts it as restored.
    restored_digest: bytes = b""
    # The task's digest (:func:`task_digest`), fixed at bind time: a retry is the same seed.
    task_digest: bytes = b""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # call_id -> record, oldest first; bounded by SessionConfig.max_call_ids / call_id_ttl_s.
    calls: OrderedDict[str, CallRecord] = field(default_factory=OrderedDict, repr=False)
    # UTF-8 bytes of the arguments of the write-tool calls applied (max_session_write_bytes).
    write_bytes: int = 0


def task_digest(task: Task) -> bytes:
    """The task's identity digest (:attr:`~workplace_env.identity.Task.digest`, S2/S3, K4)."""
    return task.digest
