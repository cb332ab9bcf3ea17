"""Shape checks of the Python arguments of the SDK's methods, run before anything is sent.

Each check raises :class:`~workplace_env_client.errors.ArgumentError` (an
``InvalidRequestError``) naming the offending field by the request field the server would name
(``episode_id.rollout_id``, ``task.ground_truth[0].name``, ``arguments.query``), instead of the
``TypeError``, ``AttributeError`` or ``UnicodeEncodeError`` Python or protobuf would raise on
the way. Only what no request can carry is refused here: wrong types, a string UTF-8 cannot
encode (a lone surrogate), a value ``json.dumps`` cannot write, an ``int32`` out of range,
nesting deeper than the server's 128 levels. The rules on values (id formats, ``attempt >= 0``,
tool arguments being a JSON object, ...) stay the server's (CONTRACT S5, T3, V5), so they are
stated once.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from typing import Any

from workplace_env_client import reasons
from workplace_env_client.errors import ArgumentError
from workplace_env_client.id_bounds import id_length_problem
from workplace_env_client.json_types import json_type

#: ``ErrorInfo.reason`` the server gives refused tool-call arguments (CONTRACT T3).
TOOL_ARGUMENTS_REASON = reasons.INVALID_TOOL_ARGUMENTS.name
#: The deepest nesting of arrays and objects the server accepts in JSON text.
MAX_JSON_DEPTH = 128
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# Python's limit on the digits of an int written as text (0: none); json.dumps raises past it.
_INT_MAX_DIGITS = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
_JSON_KEY_TYPES = (str, int, float, bool, type(None))
#: The longest deadline the SDK takes, in seconds (about 31 years: "never" for any run; the
#: server's settings share the bound).
MAX_SECONDS = 1e9


def type_name(value: Any) -> str:
    return type(value).__name__


#: What a dataset row's ``id`` may be (:func:`row_id`).
ROW_ID_SHAPE = "a string or an integer"


def row_id(row: Mapping[str, Any], field: str) -> str:
    """A dataset row's ``id`` as text: a string as it is, an integer (not a boolean) in
    decimal; ``""`` when the row has none (absent, null or ``""``: the caller's default
    applies). Raises ArgumentError naming ``field`` (``task.id``) and the JSON type of any
    other value (an array, an object, a number with a fraction, a boolean)."""
    value = row.get("id")
    if value is None:
        return ""
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return str(value)
        except ValueError as exc:  # past Python's limit on an integer's digits
            raise ArgumentError(field, f"has too many digits ({exc})") from None
    if not isinstance(value, str):
        raise ArgumentError(field, f"must be {ROW_ID_SHAPE}, not {json_type(value)}")
    return text(value, field)


def surrogate_problem(text: str) -> str | None:
    """Why UTF-8 cannot carry ``text`` (its first lone surrogate), or None."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"a lone surrogate (U+{ord(text[exc.start]):04X}) that UTF-8 cannot carry"
    return None


def text(value: Any, field: str, reason: str = reasons.INVALID_REQUEST.name) -> str:
    """``value`` if it is a ``str`` UTF-8 can carry; else raise ArgumentError naming ``field``."""
    if not isinstance(value, str):
        raise ArgumentError(field, f"must be a string, not {type_name(value)}", reason)
    problem = surrogate_problem(value)
    if problem is not None:
        raise ArgumentError(field, problem, reason)
    return value


def bounded_id(value: Any, field: str) -> str:
    """``value`` as :func:`text`, within :func:`id_length_problem`'s bound; else raise
    ArgumentError naming ``field`` (``episode_id.rollout_id``)."""
    if (problem := id_length_problem(text(value, field))) is not None:
        raise ArgumentError(field, problem)
    return str(value)


def int32(value: Any, field: str) -> int:
    """``value`` if it is an ``int`` (not a bool) in the ``int32`` range; else ArgumentError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentError(field, f"must be an int, not {type_name(value)}")
    if not INT32_MIN <= value <= INT32_MAX:
        raise ArgumentError(field, "must fit in 32 bits (int32)")
    return value


def seconds(value: Any, field: str) -> float:
    """``value`` as a float if it is a number of seconds (an int or float, not a bool) that is
    finite and in ``(0, MAX_SECONDS]``; else ArgumentError naming ``field`` (``timeout_s``).
    gRPC reads an infinite deadline as already past, and a NaN or negative one as whatever its
    arithmetic gives, so they are refused rather than sent."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArgumentError(field, f"must be a number of seconds, not {type_name(value)}")
    if not (math.isfinite(value) and 0 < value <= MAX_SECONDS):
        raise ArgumentError(
            field,
            f"must be a finite number of seconds above 0 and at most {MAX_SECONDS:g}, "
            f"not {value!r}",
        )
    return float(value)


def count(value: Any, field: str, low: int, high: int, why: str = "") -> int:
    """``value`` if it is an ``int`` (not a bool) in ``low..high``; else ArgumentError naming
    ``field`` (``max_attempts``), ``why`` after the range."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentError(field, f"must be an int in {low}..{high}, not {type_name(value)}")
    if not low <= value <= high:
        raise ArgumentError(field, f"must be {low}..{high}{why}, not {value}")
    return value


def flag(value: Any, field: str) -> bool | None:
    """``value`` if it is a bool or None (None: the default); else ArgumentError."""
    if value is not None and not isinstance(value, bool):
        raise ArgumentError(field, f"must be True, False or None, not {type_name(value)}")
    return value


def optional_text(value: Any, field: str) -> str | None:
    """``value`` if it is None or a string UTF-8 can carry (:func:`text`); else ArgumentError."""
    return None if value is None else text(value, field)


def pair(value: Any, field: str, shape: str) -> tuple[Any, Any]:
    """``value`` as a 2-tuple when it is a tuple or list of two; else ArgumentError saying
    it must be ``shape``."""
    if isinstance(value, tuple | list) and len(value) == 2:
        return value[0], value[1]
    raise ArgumentError(field, f"must be {shape}, not {_describe(value)}")


def _describe(value: Any) -> str:
    if isinstance(value, tuple | list):
        return f"a {type_name(value)} of {len(value)}"
    return type_name(value)


#: Levels of a JSON value a problem's path spells out; a deeper one is cut (:func:`json_path`).
PATH_LEVELS_SHOWN = 4


def json_path(where: str, segment: str, depth: int) -> str:
    """The path of a child (``segment``: ``.key`` or ``[i]``) of the value at ``where``,
    ``depth`` levels down: spelled out for :data:`PATH_LEVELS_SHOWN` levels, then cut to
    ``...``, so a problem 128 levels down is not named by 128 ``[0]``."""
    if depth < PATH_LEVELS_SHOWN:
        return where + segment
    return where if where.endswith("...") else f"{where}..."


def json_problem(value: Any, path: str, *, strict: bool = False) -> tuple[str, str] | None:
    """``(path, why)`` of the first part of ``value`` that ``json.dumps`` cannot write as JSON
    text the server accepts, or None; a path deeper than :data:`PATH_LEVELS_SHOWN` levels is
    cut, with how deep (``arguments[0][0][0][0]... (128 levels)``). JSON here: dict (keys:
    str, int, float, bool, None), list, tuple, str, int, float, bool, None. ``strict`` also
    refuses NaN, the infinities and integers beyond a float's range, which Python's JSON writes
    but strict readers refuse or cannot hold."""
    found = _first_problem(value, path, strict)
    if found is None:
        return None
    where, depth, why = found
    return (f"{where} ({depth} levels)" if where.endswith("...") else where), why


def _first_problem(value: Any, path: str, strict: bool) -> tuple[str, int, str] | None:
    """``(path, depth, why)`` of :func:`json_problem`'s first problem, or None."""
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, float) and strict and not math.isfinite(item):
            why = f"{item!r} is not JSON (NaN and the infinities have no JSON spelling)"
            return where, depth, why
        if item is None or isinstance(item, bool | float):
            continue
        if isinstance(item, int):
            if strict and abs(item) > sys.float_info.max:
                why = "an integer beyond the range of a float (a strict JSON reader's number)"
                return where, depth, why
            if _INT_MAX_DIGITS and item.bit_length() > 3 * _INT_MAX_DIGITS:
                try:
                    str(item)
                except ValueError:
                    return where, depth, f"an integer of more than {_INT_MAX_DIGITS} digits"
            continue
        if isinstance(item, str):
            problem = surrogate_problem(item)
            if problem is not None:
                return where, depth, problem
            continue
        if not isinstance(item, dict | list | tuple):
            return where, depth, f"a {type_name(item)} is not JSON"
        if depth >= MAX_JSON_DEPTH:
            return where, depth, f"nested deeper than {MAX_JSON_DEPTH} levels"
        if isinstance(item, dict):
            children = []
            for key, child in item.items():
                if not isinstance(key, _JSON_KEY_TYPES):
                    return where, depth, f"a key of type {type_name(key)} is not JSON"
                if isinstance(key, str) and surrogate_problem(key) is not None:
                    return where, depth, "a key holds a lone surrogate that UTF-8 cannot carry"
                children.append((child, json_path(where, f".{key}", depth), depth + 1))
        else:
            children = [
                (child, json_path(where, f"[{i}]", depth), depth + 1)
                for i, child in enumerate(item)
            ]
        stack.extend(reversed(children))
    return None


def json_value(value: Any, field: str, reason: str = reasons.INVALID_REQUEST.name) -> None:
    """Raise ArgumentError naming the path of the first part of ``value`` (under ``field``)
    that cannot be sent as JSON (:func:`json_problem`)."""
    problem = json_problem(value, field)
    if problem is not None:
        raise ArgumentError(problem[0], problem[1], reason)


def json_text(value: str, field: str, reason: str = reasons.INVALID_REQUEST.name) -> str:
    """``value`` (JSON text) if UTF-8 can carry it; else ArgumentError naming the path of the
    lone surrogate in it when the text parses (``arguments.query``), else ``field``."""
    problem = surrogate_problem(value)
    if problem is None:
        return value
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        raise ArgumentError(field, problem, reason) from None
    found = json_problem(parsed, field)
    raise ArgumentError(*(found or (field, problem)), reason)


def json_row(value: Any, field: str, shape: str) -> Mapping[str, Any]:
    """``value`` (a dataset row) if it is a Mapping whose every value :func:`json_problem`
    accepts; else ArgumentError naming ``field`` or the path of the first value that is not
    JSON (``task.x`` for a set, bytes, a Decimal, ...). A tuple is written as a list, and NaN and
    the infinities as ``json.dumps`` writes them (``NaN``, ``Infinity``): both deterministic, so
    accepted; the row is then hashed (the seed's ``data_digest``), so a value whose JSON text
    could change between processes (a set's order follows ``PYTHONHASHSEED``) must be refused."""
    row = mapping(value, field, shape)
    json_value(row if isinstance(row, dict) else dict(row), field)
    return row


def mapping(value: Any, field: str, shape: str) -> Mapping[str, Any]:
    """``value`` if it is a Mapping; else ArgumentError saying it must be ``shape``."""
    if not isinstance(value, Mapping):
        raise ArgumentError(field, f"must be {shape}, not {type_name(value)}")
    return value
