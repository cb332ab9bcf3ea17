"""What the store remembers of ids it no longer holds, and the helpers that bound it.

Owns the record types (:class:`Eviction` for an id the idle sweep evicted, :class:`Marker` for
a verified legacy id) and the ordered-map helpers every bounded record set uses: insert as the
newest and drop the oldest beyond a count (:func:`remember`), drop entries older than a cutoff
(:func:`drop_older`), and the age test (:func:`is_valid`). Fences (closed ids) are plain
timestamps in the same kind of map.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from workplace_env.identity import EpisodeId, FunctionCall, TaskId
from workplace_env.sessions.types import Session, VerifyOutcome

_V = TypeVar("_V")


@dataclass(frozen=True, slots=True)
class Eviction:
    """An id evicted after its idle TTL, with its binding (later calls: SESSION_EXPIRED)."""

    at: float
    episode: EpisodeId
    task_id: TaskId
    legacy: bool
    task_digest: bytes

    @classmethod
    def of(cls, session: Session, at: float) -> Eviction:
        """The record of ``session``, on fresh copies of its identity (see :func:`detached`)."""
        episode, task_id = session.episode, session.task_id
        return cls(
            at,
            EpisodeId(detached(episode.rollout_id), episode.attempt),
            TaskId(detached(task_id.taskset), detached(task_id.task_id)),
            session.legacy,
            session.task_digest,
        )


@dataclass(frozen=True, slots=True)
class Marker:
    """A verified legacy session (V2, V3): when, a digest of the verify request, its outcome,
    and the task's ground truth (a different resent request is scored afresh against it)."""

    at: float
    request: bytes
    outcome: VerifyOutcome
    ground_truth: tuple[FunctionCall, ...]


def is_valid(at: float | None, ttl_s: float, now: float) -> bool:
    """Whether a record made at ``at`` (None: no record) is still younger than ``ttl_s``."""
    return at is not None and now - at <= ttl_s


def detached(text: str) -> str:
    """A new string equal to ``text``.

    CPython returns small objects to the OS only by whole allocator arenas; a long-lived record
    holding the very string a session was seeded with keeps that session's arena resident.
    """
    return text.encode().decode()


def remember(records: OrderedDict[str, _V], key: str, value: _V, max_count: int) -> None:
    """Record ``key`` as the newest entry; drop the oldest beyond ``max_count``."""
    records[key] = value
    records.move_to_end(key)
    while len(records) > max_count:
        records.popitem(last=False)


def drop_older(records: OrderedDict[str, _V], at: Callable[[_V], float], cutoff: float) -> None:
    """Drop entries recorded before ``cutoff`` from the front (entries are in time order)."""
    while records:
        if at(next(iter(records.values()))) >= cutoff:
            break
        records.popitem(last=False)
