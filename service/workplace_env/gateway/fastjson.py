"""JSON for the gateway's hot paths: orjson where its answer is the standard library's, else
the standard library (the answers stay byte-identical to ``json``'s).

:func:`loads` gives exactly ``json.loads``' value or error: orjson parses (about 5x faster) unless
the text has a number of 19 or more digits (orjson turns integers beyond 64 bits into floats);
anything orjson refuses (``NaN``, ``Infinity``, ``1e400``, lone surrogates, nesting deeper
than 1,024) goes to ``json.loads``, which accepts or refuses it with its own message.

:func:`dumps` gives exactly the bytes of Starlette's ``JSONResponse`` (``json.dumps`` compact,
``ensure_ascii=False``, ``allow_nan=False``, UTF-8): orjson writes them unless its output holds
a float that Python spells otherwise (an exponent: ``1e-05`` / ``0.00001``, ``1e+16`` /
``1e16``; a string that merely looks like one costs the slow path, never a wrong byte), or the
value may hold a NaN or an infinity (orjson writes ``null``, the standard library refuses):
that happens only when this request's body was parsed by ``json.loads`` (see :func:`loads`),
which a context variable records per request.
"""

from __future__ import annotations

import json
import re
from contextvars import ContextVar
from typing import Any

import orjson

_LONG_NUMBER = re.compile(r"[0-9]{19}")
_PYTHON_SPELLS_OTHERWISE = re.compile(rb"[0-9][eE]|0\.0000")
# False once this request's body went through json.loads (it may hold NaN or infinities).
_ORJSON_SAFE: ContextVar[bool] = ContextVar("workplace_env_orjson_safe", default=True)


def loads(text: str) -> Any:
    """``json.loads(text)``, faster. Raises what ``json.loads`` raises."""
    if not _LONG_NUMBER.search(text):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    _ORJSON_SAFE.set(False)
    return json.loads(text)


def dumps(content: Any, allow_nan: bool = False) -> bytes:
    """``JSONResponse(content).body``, faster. Raises what ``json.dumps`` raises.

    ``allow_nan``: write NaN and infinities as ``json.dumps`` does by default (for JSON text
    handed on to the service, which parses it again) instead of refusing them."""
    if _ORJSON_SAFE.get():
        try:
            out = orjson.dumps(content)
        except TypeError:  # an int beyond 64 bits, a non-str key, ...
            pass
        else:
            if not _PYTHON_SPELLS_OTHERWISE.search(out):
                return out
    return json.dumps(
        content, ensure_ascii=False, allow_nan=allow_nan, indent=None, separators=(",", ":")
    ).encode("utf-8")
