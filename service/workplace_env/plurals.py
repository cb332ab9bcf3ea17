"""Counts written as words: ``counted(1, "episode")`` is ``"1 episode"``, any other count
takes the plural (``"0 episodes"``, ``"2 episodes"``, ``"1,024 bytes"``)."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str = "") -> str:
    """``count`` and ``noun``, in the plural (``plural``, default ``noun + "s"``) unless
    ``count`` is 1, thousands separated: ``counted(3, "session")`` -> ``"3 sessions"``,
    ``counted(1024, "byte")`` -> ``"1,024 bytes"``."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


def some_of(part: int, whole: int, noun: str, verb: str, plural_verb: str) -> str:
    """``"PART of the WHOLE NOUN(s) VERB"``: the noun agrees with ``whole`` (:func:`counted`),
    the verb with ``part`` (``verb`` for 1, else ``plural_verb``):
    ``some_of(1, 4, "line", "is", "are")`` -> ``"1 of the 4 lines is"``,
    ``some_of(2, 2, "line", "has", "have")`` -> ``"2 of the 2 lines have"``."""
    return f"{part:,} of the {counted(whole, noun)} {verb if part == 1 else plural_verb}"
