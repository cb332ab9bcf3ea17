"""JSON for the gateway's hot paths: answers byte-identical to the standard library's.

:func:`loads` is :func:`workplace_env.wire.loads` (``json.loads`` under the one rule for JSON we can
carry), watching the body's floats and constants as it parses them.
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

import contextvars
import json
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar

import orjson
from starlette.concurrency import run_in_threadpool

from workplace_env import wire

# False once this request's body held a float or constant orjson spells otherwise.
_ORJSON_SAFE: ContextVar[bool] = ContextVar("workplace_env_orjson_safe", default=True)


def _observe(value: float, constant: bool) -> None:
    if constant or (value != 0.0 and not 1e-4 <= abs(value) < 1e16):  # repr uses an exponent
        _ORJSON_SAFE.set(False)


def loads(text: str, *, constants: bool = False) -> Any:
    """:func:`workplace_env.wire.loads` (JSON we can carry, else :class:`~workplace_env.wire.
    JsonRefused` naming the path), watching the floats and constants as it parses them."""
    return wire.loads(text, constants=constants, on_float=_observe)


_T = TypeVar("_T")


async def off_loop(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``fn(*args, **kwargs)`` on a worker thread, so the event loop keeps serving meanwhile;
    what its :func:`loads` calls observed about this request's body comes back with it (the
    encoder :func:`dumps` picks). Raises what ``fn`` raises."""
    context = contextvars.copy_context()
    try:
        return await run_in_threadpool(context.run, fn, *args, **kwargs)
    finally:
        if not context.get(_ORJSON_SAFE, True):
            _ORJSON_SAFE.set(False)


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
