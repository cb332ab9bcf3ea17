"""JSON for the gateway's hot paths: answers byte-identical to the standard library's.

:func:`loads` is ``json.loads``, watching the body's floats and constants as it parses them.
(orjson would parse a 30 KB body in half the time, but it turns integers beyond 64 bits into
floats, and a scan of the text for such numbers costs more than ``json.loads`` itself.)

:func:`dumps` gives exactly the bytes of Starlette's ``JSONResponse`` (``json.dumps`` compact,
``ensure_ascii=False``, ``allow_nan=False``, UTF-8). orjson writes them (several times faster)
unless this request's body held a value orjson would spell otherwise: a float Python writes
with an exponent (``1e-05`` / ``0.00001``, ``1e+16`` / ``1e16``), or NaN or an infinity (orjson
writes ``null``, the standard library refuses); :func:`loads` records that per request in a
context variable. Integers beyond 64 bits make orjson refuse, and the standard library writes
them. Values the gateway adds itself (rewards 0.0 and 1.0, counts, strings) are spelled alike.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from typing import Any

import orjson

# False once this request's body held a float or constant orjson spells otherwise.
_ORJSON_SAFE: ContextVar[bool] = ContextVar("workplace_env_orjson_safe", default=True)


def _float(token: str) -> float:
    value = float(token)
    if value != 0.0 and not 1e-4 <= abs(value) < 1e16:  # where repr switches to an exponent
        _ORJSON_SAFE.set(False)
    return value


def _constant(token: str) -> float:
    _ORJSON_SAFE.set(False)
    return float(token)  # NaN, Infinity, -Infinity: json.loads' own values


def loads(text: str) -> Any:
    """``json.loads(text)``. Raises what it raises."""
    return json.loads(text, parse_float=_float, parse_constant=_constant)


def dumps(content: Any, allow_nan: bool = False) -> bytes:
    """``JSONResponse(content).body``, faster. Raises what ``json.dumps`` raises.

    ``allow_nan``: write NaN and infinities as ``json.dumps`` does by default (for JSON text
    handed on to the service, which parses it again) instead of refusing them."""
    if _ORJSON_SAFE.get():
        try:
            return orjson.dumps(content)
        except TypeError:  # an int beyond 64 bits
            pass
    return json.dumps(
        content, ensure_ascii=False, allow_nan=allow_nan, indent=None, separators=(",", ":")
    ).encode("utf-8")
