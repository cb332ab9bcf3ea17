"""What our wire and encoders can carry: the one rule for JSON that Python parses but we cannot
send on.

Python's JSON parser accepts texts whose values no transport of ours can carry further:

* a lone surrogate (``"\\ud800"``): a ``str`` that UTF-8 cannot encode, so no protobuf string,
  HTTP body or checkpoint file can hold it;
* an integer over Python's 4,300-digit conversion limit (the parser raises ``ValueError``,
  which is not a ``JSONDecodeError``);
* ``NaN`` / ``Infinity`` (and numbers like ``1e999`` that parse to an infinity): not JSON
  (RFC 8259), and refused by the strict encoders of HTTP bodies and checkpoints;
* nesting deeper than :data:`MAX_JSON_DEPTH`: it parses, then the next encoder or tool hits
  the recursion limit.

:func:`loads` parses a text and raises :class:`JsonRefused` naming the path of the first value
of those kinds (a value a later duplicate key hides from the parsed value included: Python's
parser meets it too), so every entry refuses such input as a request error naming the field, before
anything is stored. Where the reference gives a model-visible answer instead, the entry keeps
it (a verify skips a call whose arguments its parser refuses; a tool call with ``NaN``
arguments runs, as the reference's does: pass ``constants=True``).
"""

from __future__ import annotations

import gc
import json
import math
import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

#: The deepest nesting of arrays and objects accepted (the reference's tool arguments are flat;
#: Responses-API output items nest a few levels).
MAX_JSON_DEPTH = 128
#: Python's limit on the digits of an integer parsed from text (``sys.get_int_max_str_digits``).
INT_MAX_DIGITS = sys.get_int_max_str_digits() or 4300

# An escaped surrogate code unit: the only way a lone surrogate enters through JSON text that
# is itself valid Unicode.
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
# An escaped surrogate code unit that is not half of an escaped pair (or a false alarm after an
# escaped backslash): one that could be lone.
_LONE_ESCAPE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F]"
)


#: Texts longer than this (characters) are parsed with the cyclic garbage collector paused
#: (:func:`collector_paused`): a parse builds no cycles, yet each object it makes counts
#: towards a collection, and the full collections it triggers walk every object built so far
#: and the whole heap. For a 45 MB verify body of 300,000 output items that was 75-90% of the
#: parse (1.5-4 s against 0.4 s; bench/verify_body_bench.py).
LARGE_TEXT_CHARS = 1 << 20

_pause_lock = threading.Lock()
_pauses = 0
_resume = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while the block runs (process-wide: any thread
    may be in such a block; the collector resumes when the last one leaves, if it was enabled
    when the first entered). Reference counting still frees everything acyclic meanwhile."""
    global _pauses, _resume
    with _pause_lock:
        if _pauses == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0 and _resume:
                gc.enable()


def paused_if_large(text: str | bytes) -> AbstractContextManager[None]:
    """:func:`collector_paused` for a text over :data:`LARGE_TEXT_CHARS`, else nothing."""
    return collector_paused() if len(text) > LARGE_TEXT_CHARS else nullcontext()


def parse(text: str | bytes) -> Any:
    """``json.loads(text)``, with the collector paused for a text over
    :data:`LARGE_TEXT_CHARS` (:func:`collector_paused`). Raises what ``json.loads`` raises."""
    with paused_if_large(text):
        return json.loads(text)


class JsonRefused(ValueError):
    """A JSON text we cannot carry: ``path`` (``""`` for the whole text, else ``.key`` /
    ``[i]`` steps) and ``why``."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path or 'the text'}: {why}" if path else why)
        self.path = path
        self.why = why


class _GiantInt(str):
    """An integer literal over :data:`INT_MAX_DIGITS` digits, kept as its text."""


def lone_surrogate(text: str) -> int | None:
    """The index of the first lone surrogate in ``text``, or None when UTF-8 can encode it."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def loads(
    text: str,
    *,
    constants: bool = False,
    max_depth: int = MAX_JSON_DEPTH,
    on_float: Callable[[float, bool], None] | None = None,
) -> Any:
    """Parse ``text`` as JSON we can carry; raise :class:`JsonRefused` naming the offending path.

    ``constants``: accept ``NaN``/``Infinity`` and non-finite numbers (Python's parser does,
    and so does the reference's tool route); otherwise they are refused. ``on_float(value,
    is_constant)`` sees every float and constant as it is parsed (the gateway's encoder
    choice, :mod:`workplace_env.gateway.fastjson`).
    """
    if constants and on_float is None:
        # Most texts hold nothing to flag: the shared plain parser gives the same value (its
        # ints, floats and constants are parsed as below), and any text it refuses takes the
        # flagging parse, which raises exactly as before.
        try:
            value = parse(text)
        except (ValueError, RecursionError):
            pass
        else:
            if _ESCAPED_SURROGATE.search(text) is None and not _may_be_deeper(
                text, value, max_depth
            ):
                return value
    flagged: list[str] = []

    def parse_int(digits: str) -> int | str:
        if len(digits) - digits.startswith("-") > INT_MAX_DIGITS:
            flagged.append("int")
            return _GiantInt(digits)
        return int(digits)

    def parse_float(literal: str) -> float:
        value = float(literal)
        if not math.isfinite(value):
            flagged.append("constant")
        if on_float is not None:
            on_float(value, False)
        return value

    def parse_constant(name: str) -> float:
        flagged.append("constant")
        value = float(name)
        if on_float is not None:
            on_float(value, True)
        return value

    try:
        with paused_if_large(text):
            value = json.loads(
                text, parse_int=parse_int, parse_float=parse_float, parse_constant=parse_constant
            )
    except RecursionError as exc:
        raise JsonRefused("", f"nested deeper than {max_depth} levels") from exc
    except ValueError as exc:
        raise JsonRefused("", f"not valid JSON: {exc}") from exc
    refused = "int" in flagged or (not constants and "constant" in flagged)
    suspicious = (
        refused
        or _ESCAPED_SURROGATE.search(text) is not None
        or _may_be_deeper(text, value, max_depth)
    )
    if suspicious:
        problem = find_uncarriable(value, constants=constants, max_depth=max_depth)
        if problem is None and (refused or _LONE_ESCAPE.search(text) is not None):
            problem = _shadowed_problem(text, constants, max_depth)
        if problem is not None:
            raise JsonRefused(*problem)
    return value


class _Pairs(list):  # type: ignore[type-arg]
    """A JSON object as its ``(key, value)`` pairs in text order, a key given twice kept twice."""


def _shadowed_problem(text: str, constants: bool, max_depth: int) -> tuple[str, str] | None:
    """``(path, why)`` of a value we cannot carry that a later duplicate key hid from the parsed
    value, or None. Python's parser (the MCP SDK's, the reference's) still meets such a value
    (an integer over :data:`INT_MAX_DIGITS` digits fails the whole parse), so it is refused as
    if it were kept. Parses ``text`` again, every object as its pairs."""

    def parse_int(digits: str) -> int | str:
        if len(digits) - digits.startswith("-") > INT_MAX_DIGITS:
            return _GiantInt(digits)
        return int(digits)

    with paused_if_large(text):
        pairs = json.loads(text, object_pairs_hook=_Pairs, parse_int=parse_int)
    problem = find_uncarriable(pairs, constants=constants, max_depth=max_depth)
    if problem is None:
        return None
    path, why = problem
    return path, f"{why} (under a key given more than once: every value is checked)"


def _may_be_deeper(text: str, value: Any, max_depth: int) -> bool:
    """Whether the walk of :func:`find_uncarriable` could find something in ``value`` (parsed
    from ``text``, nothing flagged while parsing, no escaped surrogate) that the text's own
    checks cannot rule out: nesting deeper than ``max_depth``, or a lone surrogate the text
    holds as a character (not as an escape).

    At most ``max_depth`` ``[`` and ``{`` rule out the depth at once; a body with more (a
    NeMo Gym row: its tool definitions hold ~200) has its containers counted level by level,
    which costs a fraction of the walk's per-value paths.
    """
    if text.count("[") + text.count("{") <= max_depth:
        return False
    if lone_surrogate(text) is not None:
        return True
    return _nests_deeper(value, max_depth)


# The containers a JSON parse builds (exact types: a type test is cheaper than isinstance).
_CONTAINERS = (dict, list)


def _nests_deeper(value: Any, max_depth: int) -> bool:
    """Whether ``value`` (parsed JSON) has containers more than ``max_depth`` levels deep
    (itself: level 1)."""
    level = [value] if type(value) in _CONTAINERS else []
    for _ in range(max_depth):
        level = [
            child
            for item in level
            for child in (item.values() if type(item) is dict else item)
            if type(child) in _CONTAINERS
        ]
        if not level:
            return False
    return bool(level)


def find_uncarriable(
    value: Any, path: str = "", *, constants: bool = False, max_depth: int = MAX_JSON_DEPTH
) -> tuple[str, str] | None:
    """``(path, why)`` of the first value in a parsed JSON value we cannot carry, or None."""
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, _GiantInt):
            return where, f"an integer of more than {INT_MAX_DIGITS} digits"
        if isinstance(item, str):
            at = lone_surrogate(item)
            if at is not None:
                return where, f"a lone surrogate (U+{ord(item[at]):04X}) that UTF-8 cannot carry"
        elif isinstance(item, float):
            if not constants and not math.isfinite(item):
                return where, f"{item!r} is not a JSON number"
        elif isinstance(item, (dict, list)):
            if depth >= max_depth:
                return where, f"nested deeper than {max_depth} levels"
            if isinstance(item, dict | _Pairs):
                pairs = item if isinstance(item, _Pairs) else item.items()
                children = [(v, f"{where}.{k}", depth + 1) for k, v in pairs]
                for key, _ in pairs:
                    if lone_surrogate(key) is not None:
                        return where, "a key holds a lone surrogate that UTF-8 cannot carry"
            else:
                children = [(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(item)]
            stack.extend(reversed(children))
    return None


def is_json_text(text: str) -> bool:
    """Whether ``text`` is JSON by the reference's parser's grammar (integers of any length;
    ``NaN``/``Infinity`` as Python accepts them), without building big integers."""
    try:
        if isinstance(text, str) and not text.startswith("\ufeff"):
            _GRAMMAR.decode(text)  # what json.loads(text, parse_int=len) runs, built once
        else:
            json.loads(text, parse_int=len)
    except (ValueError, RecursionError):
        return False
    return True


# ``parse_int=len`` checks an integer's digits without converting them; a C callable, so one
# shared decoder serves all threads as ``json.loads``'s own does.
_GRAMMAR = json.JSONDecoder(parse_int=len)
