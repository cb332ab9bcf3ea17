"""Tool registry and dispatch: name -> tool, argument binding with the reference's exact texts.

Each toolkit module declares its tools with :meth:`Toolkit.tool`: a pandas function
``func(frames, **arguments) -> output`` written to behave as the reference's pandas code does
(``frames[key]`` is a DataFrame; a write tool mutates or rebinds the frames it declares). That
implementation is the exact one. A tool may also register a fast path with
:meth:`Toolkit.fast_path`: ``fast(tables, **arguments) -> output | FALLBACK`` over the session's
plain-Python tables (:class:`~workplace_env.sandbox.tables.SessionTables`). It handles the
common, well-typed inputs and returns :data:`FALLBACK` for anything else *before* changing a
table, so the pandas implementation decides every unusual case (odd argument types, non-text
cells). Tools know nothing of sessions or transports.

:func:`execute` is the one way a tool runs, on the live route and in verification replay alike
(DESIGN.md: they differ only in argument rules, which their callers apply). It reproduces how the
reference turns failures into model-visible text (REFERENCE.md f, goldens README):

* unknown tool -> ``"Error executing tool '<name>': '<name>'"`` (the reference's KeyError);
* an argument the tool does not take -> CPython 3.13's text,
  ``"<Class>.<method>() got an unexpected keyword argument 'x'"``, with ``". Did you mean 'y'?"``
  when a parameter name is close enough;
* any exception raised inside the tool -> ``"Error executing tool '<name>': <exception text>"``.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from workplace_env import wire
from workplace_env.sandbox.table import Table
from workplace_env.sandbox.tables import SessionTables

ToolFunc = Callable[..., Any]
log = logging.getLogger(__name__)


class _Fallback:
    def __repr__(self) -> str:
        return "FALLBACK"


#: What a fast path returns to hand the call to the pandas implementation.
FALLBACK: Any = _Fallback()


@dataclass(frozen=True)
class Tool:
    """One of the 27 tools.

    ``name`` is the model-visible name (``email_search_emails``); ``qualname`` is the reference's
    method (``EmailTool.search_emails``), used in CPython's argument error texts; ``params`` are
    the keyword parameters in declaration order; ``writes`` are the table keys the tool may
    mutate (copied before it runs); ``schema`` is the JSON schema advertised to the model.
    """

    name: str
    qualname: str
    func: ToolFunc
    params: tuple[str, ...]
    writes: frozenset[str]
    schema: Mapping[str, Any] = field(repr=False)
    fast: ToolFunc | None = field(default=None, repr=False)

    @property
    def read_only(self) -> bool:
        """True when the tool can change no compared table (its calls are neutral in replay)."""
        return not self.writes


#: name -> tool, filled by the toolkit modules' :meth:`Toolkit.tool` decorators.
TOOLS: dict[str, Tool] = {}


class Toolkit:
    """The tools of one reference class, and the decorators that register them.

    ``Toolkit("email")`` names its tools ``email_<method>`` and their reference methods
    ``EmailTool.<method>`` (the qualname of CPython's argument error texts).
    """

    __slots__ = ("owner", "prefix")

    def __init__(self, kit: str) -> None:
        self.prefix = f"{kit}_"
        self.owner = "".join(word.capitalize() for word in kit.split("_")) + "Tool"

    def tool(
        self,
        description: str,
        properties: Mapping[str, Any],
        required: tuple[str, ...] | None = None,
        writes: tuple[str, ...] = (),
    ) -> Callable[[ToolFunc], ToolFunc]:
        """Register ``func(tables, **kwargs)`` as the tool of method ``func.__name__``.

        ``description``, ``properties`` (parameter name -> JSON schema) and ``required`` (every
        property unless given) make the advertised schema, whose ``parameters`` object admits no
        other property; the properties' order gives the keyword parameters' declaration order
        (used for "Did you mean" suggestions). ``writes`` are the table keys the tool may change.
        Raises ValueError for a name registered twice.
        """
        parameters = {
            "type": "object",
            "properties": properties,
            "required": list(properties if required is None else required),
            "additionalProperties": False,
        }

        def register(func: ToolFunc) -> ToolFunc:
            name = self.prefix + func.__name__
            if name in TOOLS:
                raise ValueError(f"tool {name} registered twice")
            TOOLS[name] = Tool(
                name=name,
                qualname=f"{self.owner}.{func.__name__}",
                func=func,
                params=tuple(properties),
                writes=frozenset(writes),
                schema={
                    "type": "function",
                    "name": name,
                    "description": description,
                    "parameters": parameters,
                    "strict": False,
                },
            )
            return func

        return register

    def fast_path(self, method: str) -> Callable[[ToolFunc], ToolFunc]:
        """Register ``fast(tables, **kwargs)`` as the fast path of the registered tool."""
        name = self.prefix + method

        def register(func: ToolFunc) -> ToolFunc:
            TOOLS[name] = replace(TOOLS[name], fast=func)
            return func

        return register


def string(description: str) -> dict[str, str]:
    """The JSON schema of a string parameter."""
    return {"type": "string", "description": description}


def integer(description: str) -> dict[str, str]:
    """The JSON schema of an integer parameter."""
    return {"type": "integer", "description": description}


def listing(lead: str, names: Sequence[str]) -> str:
    """``lead`` followed by the quoted names, comma-separated (the schemas' and messages' lists)."""
    return lead + ", ".join(f"'{n}'" for n in names)


_MOVE_COST = 2  # insert, delete or substitute one character
_CASE_COST = 1  # substitute a character by itself in another case
_MAX_STRING_SIZE = 40  # CPython gives up on longer names


def _edit_distance(a: str, b: str, max_cost: int) -> int:
    """Weighted Levenshtein distance as CPython's suggestion machinery defines it.

    Returns ``max_cost + 1`` when the strings are too long to consider or the distance exceeds
    ``max_cost``.
    """
    if a == b:
        return 0
    if len(a) > _MAX_STRING_SIZE or len(b) > _MAX_STRING_SIZE:
        return max_cost + 1
    previous = [j * _MOVE_COST for j in range(len(b) + 1)]
    for i, ca in enumerate(a, start=1):
        current = [i * _MOVE_COST]
        for j, cb in enumerate(b, start=1):
            if ca == cb:
                substitute = 0
            elif ca.lower() == cb.lower():
                substitute = _CASE_COST
            else:
                substitute = _MOVE_COST
            current.append(
                min(
                    previous[j - 1] + substitute,
                    previous[j] + _MOVE_COST,
                    current[j - 1] + _MOVE_COST,
                )
            )
        previous = current
    result = previous[-1]
    return result if result <= max_cost else max_cost + 1


class FrameView:
    """What a pandas implementation sees: ``view[key]`` is a DataFrame of the session's table.

    Tables the tool may write are handed out as private frames and written back to the
    session by :meth:`commit` (even after an exception: the reference keeps a partial
    mutation too); the others are shared read-only frames.
    """

    __slots__ = ("_frames", "_tables", "_writes")

    def __init__(self, tables: SessionTables, writes: frozenset[str]) -> None:
        self._tables = tables
        self._writes = writes
        self._frames: dict[str, pd.DataFrame] = {}

    def __getitem__(self, key: str) -> pd.DataFrame:
        frame = self._frames.get(key)
        if frame is None:
            if key in self._writes:
                frame = self._frames[key] = self._tables.table(key).to_frame()
            else:
                frame = self._tables.frame(key)
        return frame

    def __setitem__(self, key: str, frame: pd.DataFrame) -> None:
        if key not in self._writes:
            raise KeyError(f"tool may not write {key}")
        self._frames[key] = frame

    def commit(self) -> None:
        """Store every written frame back into the session as a table."""
        for key, frame in self._frames.items():
            if key in self._writes:
                self._tables.set(key, Table.from_frame(frame))


def _suggest(wrong: str, candidates: tuple[str, ...]) -> str | None:
    """CPython 3.13's keyword suggestion: the closest candidate within about a third of the length.

    The interpreter applies it to an unexpected keyword argument over the function's
    keyword-capable parameter names (``self`` included); ties keep the first candidate.
    """
    best: str | None = None
    best_distance = 1 << 30
    for candidate in candidates:
        if candidate == wrong:
            continue
        max_distance = (len(candidate) + len(wrong) + 3) * _MOVE_COST // 6
        max_distance = min(max_distance, best_distance - 1)
        current = _edit_distance(wrong, candidate, max_distance)
        if current > max_distance:
            continue
        if best is None or current < best_distance:
            best, best_distance = candidate, current
    return best


def binding_error(spec: Tool, arguments: Mapping[str, Any]) -> str | None:
    """The TypeError text Python would raise calling the reference's bound method, or None."""
    for key in arguments:
        if key == "self":
            return f"{spec.qualname}() got multiple values for argument 'self'"
        if key not in spec.params:
            text = f"{spec.qualname}() got an unexpected keyword argument '{key}'"
            suggestion = _suggest(key, ("self", *spec.params))
            if suggestion is not None:
                text += f". Did you mean '{suggestion}'?"
            return text
    return None


def write_size(name: str, arguments: str) -> int:
    """The bytes a call of tool ``name`` with ``arguments`` (JSON text) counts towards its
    session's ``max_session_write_bytes``: the UTF-8 length of ``arguments`` for a tool that
    writes (``Tool.writes``), 0 for a read-only or unknown tool. A cheap proxy for how much
    the call can grow the tables: an email body travels in the arguments."""
    spec = TOOLS.get(name)
    if spec is None or spec.read_only:
        return 0
    if arguments.isascii():  # O(1) in CPython: no copy of a long text
        return len(arguments)
    return len(arguments.encode("utf-8", "surrogatepass"))


def execute(
    tables: SessionTables, name: str, arguments: Mapping[str, Any], *, fast: bool = True
) -> Any:
    """Run tool ``name`` with keyword ``arguments`` on ``tables``; return its output value.

    Never raises for anything a model can send: failures become the reference's error texts
    (module docstring). Shared base tables are never mutated. ``fast=False`` skips fast paths
    (tests compare both). The output is a plain Python value (str, list, dict, numbers,
    None); :func:`encode_output` turns it into the wire JSON.
    """
    spec = TOOLS.get(name)
    if spec is None:
        return f"Error executing tool '{name}': {KeyError(name)}"
    problem = binding_error(spec, arguments)
    if problem is not None:
        return f"Error executing tool '{name}': {problem}"
    if fast and spec.fast is not None:
        try:
            output = spec.fast(tables, **arguments)
        except Exception:  # a fast-path bug: it changed nothing yet, so pandas decides
            log.exception("fast path of %s failed; using the pandas implementation", name)
            output = FALLBACK
        if output is not FALLBACK:
            return output
    view = FrameView(tables, spec.writes)
    try:
        return spec.func(view, **arguments)
    except Exception as exc:  # the reference's blanket handler: any failure is model-visible text
        return f"Error executing tool '{name}': {exc}"
    finally:
        view.commit()


def _plain(value: Any) -> Any:
    """Turn numpy scalars/arrays and NaN into JSON-ready Python values (NaN -> None)."""
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, str) else k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    item = getattr(value, "item", None)  # numpy scalar
    if callable(item):
        return _plain(item())
    tolist = getattr(value, "tolist", None)  # numpy array
    if callable(tolist):
        return _plain(tolist())
    return str(value)


def _default(value: Any) -> Any:
    """JSON fallback for numpy scalars and arrays (anything else: its ``str``)."""
    item = getattr(value, "item", None)
    if callable(item):
        return item()
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    return str(value)


def encode_output(value: Any) -> str:
    """The JSON text of a tool's output as the reference's HTTP route writes its ``output``.

    Compact separators, UTF-8 (not ASCII-escaped), NaN as ``null``: the body the reference's
    web stack renders for ``{"output": value}``, minus the envelope.
    """
    try:
        return _OUTPUT_ENCODER.encode(value)
    except ValueError:  # a NaN or infinity somewhere: walk the value and turn them into null
        return _PLAIN_ENCODER.encode(_plain(value))


# The encoders of ``encode_output``, built once (``json.dumps`` with options builds one per
# call); the same settings, so the same texts.
_OUTPUT_ENCODER = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_default
)
_PLAIN_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def drop_nulls(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The live route's argument rule: top-level JSON ``null`` values are dropped (CONTRACT)."""
    return {k: v for k, v in arguments.items() if v is not None}


class InvalidToolArgumentsError(ValueError):
    """``arguments`` is not the JSON text of an object (CONTRACT T3; the reference's HTTP 422)."""


def parse_arguments(text: str) -> dict[str, Any]:
    """Parse a call's ``arguments`` JSON text into keyword arguments.

    Raises :class:`InvalidToolArgumentsError` when the text is not JSON or not a JSON object.
    Integers stay integers; duplicate keys keep the last value (Python's JSON parser).
    """
    try:  # NaN/Infinity parse, as in the reference; values no wire can carry are refused
        value = wire.loads(text, constants=True)
    except wire.JsonRefused as exc:
        where = f"arguments{exc.path}"
        raise InvalidToolArgumentsError(
            f"arguments are {exc.why}" if not exc.path else f"{where}: {exc.why}"
        ) from exc
    if not isinstance(value, dict):
        raise InvalidToolArgumentsError(
            f"arguments must be a JSON object, got {type(value).__name__}"
        )
    return value
