"""A memo that stays within a bound: the one cache type of the server.

Lookups go to :attr:`BoundedMemo.entries`, a plain dict (``entries.get``, ``entries[key]``,
``key in entries``, ``map(entries.get, ...)``: the interpreter's fast paths for exact dicts,
which a dict subclass would lose); insertions go through :meth:`BoundedMemo.put`, which applies
the policy first. Thread-safe as far as single dict operations are (a racing insertion at worst
forgets an entry early).
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Hashable
from typing import Any, Generic, TypeVar

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")
_ABSENT = object()


class MemoPolicy(enum.Enum):
    """What a full memo forgets to make room."""

    CLEAR = "clear"  # everything: it starts over
    OLDEST = "oldest"  # the entry inserted first
    LRU = "lru"  # the entry used least recently (:meth:`BoundedMemo.recall` marks a use)


class BoundedMemo(Generic[_K, _V]):
    """At most ``max_entries`` entries and, when ``max_size`` is set, entries whose sizes (in
    the caller's unit, given to :meth:`put`) total at most ``max_size``.

    ``max_entries`` is checked before an insertion (a full memo evicts, then inserts); the size
    budget after it (the oldest entries go until the total fits; an entry over the whole
    budget is never stored). Raises ValueError for a size budget with :attr:`MemoPolicy.CLEAR`.
    """

    __slots__ = ("_sizes", "entries", "max_entries", "max_size", "policy", "size")

    def __init__(
        self,
        max_entries: int = sys.maxsize,
        policy: MemoPolicy = MemoPolicy.CLEAR,
        max_size: int | None = None,
    ) -> None:
        if max_size is not None and policy is MemoPolicy.CLEAR:
            raise ValueError("a size budget needs an order to evict in (OLDEST or LRU)")
        self.entries: dict[_K, _V] = {}
        self.max_entries = max_entries
        self.policy = policy
        self.max_size = max_size
        self.size = 0
        self._sizes: dict[_K, int] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def put(self, key: _K, value: _V, size: int = 0) -> bool:
        """Store ``value`` under ``key`` after making room; False when ``size`` alone is over
        the budget (nothing stored). A key already held keeps its place in the order."""
        entries = self.entries
        if self.max_size is None:
            if len(entries) >= self.max_entries:
                self.evict()
            entries[key] = value
            return True
        if size > self.max_size:
            return False
        if len(entries) >= self.max_entries:
            self.evict()
        entries[key] = value
        self.size += size - self._sizes.get(key, 0)
        self._sizes[key] = size
        while self.size > self.max_size:
            self.evict()
        return True

    def has_room(self, pending: int) -> bool:
        """Whether ``pending`` more insertions cannot reach ``max_entries`` (and there is no
        size budget): plain ``entries[key] = value`` then does exactly what :meth:`put` would,
        at the dict's speed (for a batch of insertions on a hot path)."""
        return self.max_size is None and len(self.entries) + pending < self.max_entries

    def recall(self, key: _K, default: Any = None) -> Any:
        """``entries.get(key, default)``, marking a use of a held key (LRU: now the newest)."""
        entries = self.entries
        if self.policy is not MemoPolicy.LRU:
            return entries.get(key, default)
        value = entries.pop(key, _ABSENT)
        if value is _ABSENT:
            return default
        entries[key] = value
        return value

    def make_room(self, pending: int = 0) -> None:
        """Evict once if ``len + pending`` reaches ``max_entries``: before a batch of up to
        ``pending`` plain ``entries[key] = value`` insertions, not checked one by one."""
        if len(self.entries) + pending >= self.max_entries:
            self.evict()

    def evict(self) -> None:
        """Forget what the policy forgets: everything (CLEAR) or the first entry in order."""
        if self.policy is MemoPolicy.CLEAR:
            self.entries.clear()
            return
        oldest = next(iter(self.entries), None)
        self.entries.pop(oldest, None)  # type: ignore[arg-type]
        if self.max_size is not None:
            self.size -= self._sizes.pop(oldest, 0)  # type: ignore[arg-type]

    def clear(self) -> None:
        """Forget every entry (and their sizes)."""
        self.entries.clear()
        self._sizes.clear()
        self.size = 0
