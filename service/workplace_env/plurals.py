"""Counts written as words: ``counted(1, "episode")`` is ``"1 episode"``, any other count
takes the plural (``"0 episodes"``, ``"2 episodes"``)."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str = "") -> str:
    """``count`` and ``noun``, in the plural (``plural``, default ``noun + "s"``) unless
    ``count`` is 1: ``counted(3, "session")`` -> ``"3 sessions"``."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
