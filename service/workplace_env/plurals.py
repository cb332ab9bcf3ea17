"""Counts written as words: ``counted(1, "episode")`` is ``"1 episode"``, any other count
takes the plural (``"0 episodes"``, ``"2 episodes"``, ``"1,024 bytes"``)."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str = "") -> str:
    """``count`` and ``noun``, in the plural (``plural``, default ``noun + "s"``) unless
    ``count`` is 1, thousands separated: ``counted(3, "session")`` -> ``"3 sessions"``,
    ``counted(1024, "byte")`` -> ``"1,024 bytes"``."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"
