"""What the store remembers of ids it no longer holds, and the helpers that bound it.

Owns :class:`Records`: the fences (closed ids, with the typed episode each was bound to), the
eviction records (:class:`Eviction`, ids the idle sweep evicted), the release records
(:class:`Release`, ids released by a legacy verify or a retire) and the markers of verified
legacy ids (:class:`Marker`), each map oldest first and bounded by count and age; and the
ordered-map helpers every bounded record set uses: insert as the newest and drop the oldest
beyond a count (:func:`remember`), drop entries older than a cutoff (:func:`drop_older`), and
the age test (:func:`is_valid`).

A record is valid while younger than its age bound, so when the store prunes old records never
changes an answer.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from workplace_env import errors
from workplace_env.checkpoint.snapshot import FenceSnapshot
from workplace_env.identity import EpisodeId, FunctionCall, TaskId
from workplace_env.sessions.scope import StoreScope
from workplace_env.sessions.types import LiveSession, VerifyOutcome

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
    def of(cls, session: LiveSession, at: float) -> Eviction:
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
class Release:
    """An id released without a fence (later calls: SESSION_LOST saying how): ``how`` is
    :data:`RELEASED_BY_VERIFY` or :data:`RELEASED_BY_RETIRE`."""

    at: float
    how: str


#: How a released id ended (:attr:`Release.how`), as the detail of a later call says it.
RELEASED_BY_VERIFY = (
    "was verified and released (a legacy session ends at its verify; seed it again)"
)
RELEASED_BY_RETIRE = "was retired (its attempt discarded; seed or restore it again)"


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


class Records:
    """The fences, eviction and release records and legacy markers of one store. Every method but
    :meth:`gone` expects the caller to hold the store lock."""

    __slots__ = ("evictions", "fence_episodes", "fences", "markers", "releases", "scope")

    def __init__(self, scope: StoreScope) -> None:
        self.scope = scope
        self.fences: OrderedDict[str, float] = OrderedDict()  # closed id -> closed at
        # closed typed id -> its episode (C4 after the close); bounded with the fences
        self.fence_episodes: OrderedDict[str, EpisodeId] = OrderedDict()
        self.evictions: OrderedDict[str, Eviction] = OrderedDict()
        self.releases: OrderedDict[str, Release] = OrderedDict()
        # verified legacy id -> its marker: an identical resent verify scores the same (V3)
        self.markers: OrderedDict[str, Marker] = OrderedDict()

    def closed(self, session_id: str, now: float) -> bool:
        """Whether ``session_id`` has a fence younger than ``fence_ttl_s``."""
        return is_valid(self.fences.get(session_id), self.scope.config.fence_ttl_s, now)

    def evicted(self, session_id: str, now: float) -> Eviction | None:
        """The eviction record of ``session_id`` if younger than ``fence_ttl_s``."""
        evicted = self.evictions.get(session_id)
        if evicted is not None and now - evicted.at <= self.scope.config.fence_ttl_s:
            return evicted
        return None

    def released(self, session_id: str, now: float) -> Release | None:
        """The release record of ``session_id`` if younger than ``fence_ttl_s``."""
        release = self.releases.get(session_id)
        if release is not None and is_valid(release.at, self.scope.config.fence_ttl_s, now):
            return release
        return None

    def marker(self, session_id: str, now: float) -> Marker | None:
        """The verify marker of legacy ``session_id`` if younger than ``retry_window_s``."""
        marker = self.markers.get(session_id)
        if marker is not None and now - marker.at > self.scope.config.retry_window_s:
            return None
        return marker

    def fence(self, session_id: str, now: float, episode: EpisodeId | None = None) -> None:
        """Remember ``session_id`` as closed at ``now``; ``episode``: its typed binding, if any
        (C4 after the close)."""
        max_fences = self.scope.config.max_fences
        remember(self.fences, session_id, now, max_fences)
        if episode is not None:
            remember(self.fence_episodes, session_id, episode, max_fences)
        else:
            self.fence_episodes.pop(session_id, None)

    def evict(self, session_id: str, record: Eviction) -> None:
        """Remember ``session_id`` as evicted (bounded by ``max_fences``)."""
        remember(self.evictions, session_id, record, self.scope.config.max_fences)

    def release(self, session_id: str, record: Release) -> None:
        """Remember ``session_id`` as released (bounded by ``max_fences``)."""
        remember(self.releases, session_id, record, self.scope.config.max_fences)

    def mark(self, session_id: str, marker: Marker) -> None:
        """Remember legacy ``session_id`` as verified (bounded by ``max_markers``)."""
        remember(self.markers, session_id, marker, self.scope.config.max_markers)

    def forget(self, session_id: str) -> None:
        """Drop every record of ``session_id`` (a restore installs it afresh)."""
        held = (self.fences, self.fence_episodes, self.evictions, self.releases, self.markers)
        for records in held:
            records.pop(session_id, None)

    def prune(self, now: float) -> None:
        """Drop records past their age bounds, oldest first."""
        config = self.scope.config
        drop_older(self.fences, lambda at: at, now - config.fence_ttl_s)
        fences, episodes = self.fences, self.fence_episodes
        while episodes and next(iter(episodes)) not in fences:  # same order: dropped with them
            episodes.popitem(last=False)
        drop_older(self.evictions, lambda e: e.at, now - config.fence_ttl_s)
        drop_older(self.releases, lambda r: r.at, now - config.fence_ttl_s)
        drop_older(self.markers, lambda m: m.at, now - config.retry_window_s)

    def gone(self, session_id: str) -> errors.SessionError:
        """The error for an id with no live session: closed (T5), expired (X1), or lost (T4):
        released by a legacy verify or a retire (saying which), or unknown to this server.

        Takes the store lock (the caller must not hold it).
        """
        scope = self.scope
        now = scope.clock()
        with scope.lock:
            if self.closed(session_id, now):
                return errors.SessionClosed(f"session {session_id} was closed", session_id)
            if self.evicted(session_id, now) is not None:
                return errors.SessionExpired(
                    f"session {session_id} was evicted after {scope.config.idle_ttl_s:g} s idle",
                    session_id,
                )
            release = self.released(session_id, now)
        if release is not None:
            return errors.SessionLost(f"session {session_id} {release.how}", session_id)
        return errors.SessionLost(
            f"the server holds no session {session_id}: never seeded on this server, or lost "
            "when it restarted",
            session_id,
        )

    def fence_snapshots(self, session_ids: Sequence[str], now: float) -> list[FenceSnapshot]:
        """The fences (of ``session_ids`` only, when given), oldest first, each with its age at
        ``now`` and its episode."""
        chosen = set(session_ids) or self.fences.keys()
        return [
            FenceSnapshot(sid, now - at, self.fence_episodes.get(sid))
            for sid, at in self.fences.items()
            if sid in chosen
        ]

    def install_fences(
        self, fences: Sequence[FenceSnapshot], now: float, held: Callable[[str], bool]
    ) -> None:
        """Fence each id of ``fences`` as closed ``age_s`` before ``now`` (S4 and C4 as on the
        exporting server, until the fence is ``fence_ttl_s`` old), then keep the newest
        ``max_fences``. Skipped: a fence past this store's TTL, one naming an id ``held``
        (restore never ends a session), one older than this store's own fence of the id."""
        config = self.scope.config
        closed_at = dict(self.fences)
        episodes = dict(self.fence_episodes)
        for fence in fences:
            sid, at = fence.session_id, now - fence.age_s
            if held(sid) or fence.age_s > config.fence_ttl_s or closed_at.get(sid, at) > at:
                continue
            closed_at[sid] = at
            episodes.pop(sid, None)
            if fence.episode is not None:
                episodes[sid] = fence.episode
        newest = sorted(closed_at.items(), key=_closed_at)[-config.max_fences :]
        self.fences = OrderedDict(newest)  # time order, as drop_older needs
        self.fence_episodes = OrderedDict(
            (sid, episodes[sid]) for sid, _ in newest if sid in episodes
        )


def _closed_at(entry: tuple[str, float]) -> float:
    """Sort key of a fence entry: when it was closed."""
    return entry[1]
