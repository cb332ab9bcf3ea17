"""Scoring: replay the prediction and the ground truth on fresh sandboxes, compare end states.

Implements REFERENCE.md (c) exactly, with no file reads:

1. the prediction's calls and the ground truth's calls are each replayed, in order, on a fresh
   copy of the base tables (copy-on-write views of the parsed tables);
2. a call runs only if its name is a tool, its ``arguments`` parse as JSON and give an object;
   otherwise it is skipped (the reference catches the exception). JSON ``null`` arguments are
   **kept** in replay, unlike the live route;
3. the five compared tables are normalised (every column ``.str.lower()`` except ``status``,
   ``list_name`` and ``board``; a non-string cell becomes NaN) and compared with
   ``DataFrame.equals``; the reward is 1.0 iff all five are equal.

Normalisation and comparison run on the plain-Python tables: :func:`normal_form` is the
``.str.lower()`` rule cell by cell, and two normal forms are equal exactly when pandas'
``DataFrame.equals`` would be: same columns in order, same dtypes, same index labels in order
(the index type does not matter), and equal cells, where None and NaN are the same missing
value and numbers compare by value (``1 == 1.0``) as in an object array.

Speed without changing the answer:

* a call whose tool can write no compared table cannot change the outcome and is not replayed
  (read tools, and the average-session-duration side effect on the uncompared analytics table);
* end states are memoised by the sequence of replayed writes (same writes from the same base,
  same state), so a task's ground truth is replayed once per process;
* a table no replayed call wrote is still the base frame; its normalised form is computed once;
* with the memo on, the result of a pair (predicted writes, ground-truth writes) is remembered
  too, and each arguments text's canonical form is remembered (bounded), so a task's repeated
  rollouts neither re-parse their calls nor compare tables again.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workplace_env.identity import FunctionCall
from workplace_env.memo import BoundedMemo, MemoPolicy
from workplace_env.sandbox.table import Table, is_missing
from workplace_env.sandbox.tables import COMPARED_TABLES, BaseTables, SessionTables
from workplace_env.sandbox.tools import TOOLS, execute

#: The MCP server name this service's tools are exposed under (NeMo Gym's config name of the
#: environment; the ``server_name`` of the seed's ``resources_tools``, CONTRACT H6).
MCP_SERVER_NAME = "workplace_assistant"

#: Columns the verifier leaves as they are (REFERENCE.md c.5): matched by name in every table.
CASE_SENSITIVE_COLUMNS = frozenset({"status", "list_name", "board"})

_COMPARED = frozenset(COMPARED_TABLES)

#: Default bound of the verifier's memoised end states, in estimated bytes (``Verifier``).
DEFAULT_CACHE_BYTES = 64 * 1024 * 1024
# Fixed estimated bytes of a cache entry (key tuple, dict, the memo's entries) and per table.
_ENTRY_OVERHEAD = 600
_TABLE_OVERHEAD = 400

# ``json.dumps(value, sort_keys=True)``, with its encoder built once instead of per call.
_CANONICAL = json.JSONEncoder(sort_keys=True)

# Bounds of the memo of results: pairs of write sequences of at most this many characters
# (about 4 MB at most), emptied when it holds this many.
_RESULT_KEY_CHARS = 4096
_RESULT_ENTRIES = 1024

# A replayable write: (tool name, canonical JSON of the parsed arguments).
WriteKey = tuple[tuple[str, str], ...]
# A table's normal form: (columns, dtypes, index labels, cells per column).
NormalForm = tuple[tuple[str, ...], tuple[str, ...], tuple[int, ...], tuple[tuple[Any, ...], ...]]


@dataclass(frozen=True)
class TableScore:
    """One compared table: equal or not, with the row counts of both end states."""

    table: str
    equal: bool
    predicted_rows: int
    expected_rows: int


@dataclass(frozen=True)
class Score:
    """A score: ``reward`` in {0.0, 1.0} and the per-table comparison behind it."""

    reward: float
    tables: tuple[TableScore, ...]


def normal_form(table: Table) -> NormalForm:
    """The verifier's normal form of a table: every column lower-cased but the exempt ones.

    A non-string cell of a lower-cased column becomes missing (None), as ``.str.lower()``
    makes it NaN; missing cells of exempt columns become None too, since ``equals`` counts
    None and NaN alike. Raises AttributeError for a non-object column, as the reference does
    (REFERENCE.md c.6).
    """
    if any(d != "object" for d in table.dtypes):
        raise AttributeError("Can only use .str accessor with string values!")
    cells = []
    for name in table.columns:
        column = table.data[name]
        if name in CASE_SENSITIVE_COLUMNS:
            cells.append(tuple([None if is_missing(v) else v for v in column]))
        else:
            cells.append(tuple([v.lower() if isinstance(v, str) else None for v in column]))
    return table.columns, table.dtypes, tuple(table.index), tuple(cells)


def _replayable(calls: Iterable[Any]) -> list[tuple[str, str, str]]:
    """The calls of a prediction or ground truth that can change a compared table: each as
    its tool, its ``arguments`` text and the canonical JSON of the parsed arguments.

    ``calls`` holds :class:`FunctionCall` or raw JSON values (the wire form of a ground truth
    may be anything; a string yields characters). Anything that would raise in the reference's
    replay loop is skipped here, as it is there.
    """
    out: list[tuple[str, str, str]] = []
    for call in calls:
        if isinstance(call, FunctionCall):
            name, arguments = call.name, call.arguments
        elif isinstance(call, dict):
            name, arguments = call.get("name"), call.get("arguments")
        else:
            continue
        spec = TOOLS.get(name) if isinstance(name, str) else None
        if spec is None or not (spec.writes & _COMPARED) or not isinstance(arguments, str):
            continue
        key = _canonical_arguments(arguments)
        if key is not None:
            out.append((spec.name, arguments, key))
    return out


def _canonical_arguments(arguments: str) -> str | None:
    """The canonical JSON of ``arguments`` when they parse to an object, else None (skipped).

    Remembered per text (``_CANONICAL_MEMO``): a task's ground truth, and often its rollouts'
    calls, come back with every verify.
    """
    key = _CANONICAL_MEMO.entries.get(arguments, _UNSEEN)
    if key is not _UNSEEN:
        return key
    try:  # ValueError: not JSON, or an integer over Python's digit limit (skipped there too)
        parsed = json.loads(arguments)
        # Canonical JSON keeps 1, 1.0 and true apart (they can store different cells).
        key = _CANONICAL.encode(parsed) if isinstance(parsed, dict) else None
    except (ValueError, RecursionError):
        key = None
    if len(arguments) <= _CANONICAL_MEMO_CHARS:
        _CANONICAL_MEMO.put(arguments, key)
    return key


# arguments text -> canonical JSON (None: skipped); bounded in entries and in text length.
_CANONICAL_MEMO: BoundedMemo[str, str | None] = BoundedMemo(2048)
_CANONICAL_MEMO_CHARS = 2048
_UNSEEN = object()


def _write_key(writes: Sequence[tuple[str, str, str]]) -> WriteKey:
    return tuple((name, key) for name, _, key in writes)


class Verifier:
    """Scores predictions against ground truths over one sandbox (REFERENCE.md (c)).

    Thread-safe. ``cache_bytes`` bounds the memoised end states by their estimated size (each
    holds the normalised form of only the tables its writes touched; about 330 KB for the
    WorkBench email table), least recently used dropped first; 0 keeps none.
    """

    def __init__(self, base: BaseTables, cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self._base = base
        self.cache_bytes = cache_bytes
        self._states: BoundedMemo[WriteKey, Mapping[str, NormalForm]] = BoundedMemo(
            policy=MemoPolicy.LRU, max_size=cache_bytes
        )
        self._lock = threading.Lock()
        # (predicted key, ground-truth key) -> result; bounded in entries and key size
        self._results: BoundedMemo[tuple[WriteKey, WriteKey], Score] = BoundedMemo(_RESULT_ENTRIES)
        self._base_normal = {key: normal_form(base.tables[key]) for key in COMPARED_TABLES}
        # Estimated bytes per row of each table's normal form (its cells are new strings).
        self._row_bytes = {
            key: _deep_size(form) / max(1, len(form[2])) for key, form in self._base_normal.items()
        }

    def _estimate(self, key: WriteKey, state: Mapping[str, NormalForm]) -> int:
        """Estimated bytes an end state and its key hold (see :func:`_deep_size`)."""
        size = _ENTRY_OVERHEAD + sum(len(name) + len(args) + 120 for name, args in key)
        for table, form in state.items():
            size += int(len(form[2]) * self._row_bytes[table]) + _TABLE_OVERHEAD
        return size

    @property
    def cached_bytes(self) -> int:
        """Estimated bytes of the memoised end states (at most ``cache_bytes``)."""
        return self._states.size

    def cached_states(self) -> int:
        """Number of memoised end states."""
        return len(self._states)

    def end_state(self, calls: Iterable[Any]) -> Mapping[str, NormalForm]:
        """The normalised compared tables after replaying ``calls`` on a fresh sandbox.

        Only the tables a replayed call wrote are present; the others are the base tables.
        """
        writes = _replayable(calls)
        return self._end_state(writes, _write_key(writes))

    def _end_state(
        self, writes: Sequence[tuple[str, str, str]], key: WriteKey
    ) -> Mapping[str, NormalForm]:
        with self._lock:
            cached = self._states.recall(key)
            if cached is not None:
                return cached
        tables = SessionTables(self._base)
        for name, arguments, _ in writes:
            execute(tables, name, json.loads(arguments))
        state = {
            k: normal_form(tables.table(k)) for k in COMPARED_TABLES if not tables.is_shared(k)
        }
        size = self._estimate(key, state)
        with self._lock:
            if key not in self._states.entries:
                self._states.put(key, state, size)
        return state

    def score(self, predicted: Iterable[Any], ground_truth: Iterable[Any]) -> Score:
        """Reward of ``predicted`` calls against ``ground_truth`` calls, with per-table results.

        Both are iterables of :class:`FunctionCall` or raw JSON values (see :func:`_replayable`).
        With the memo on, the result of a pair of write sequences is remembered too (the same
        pair scores the same from the same base): a task's rollouts that make the same writes
        skip the table comparisons.
        """
        got_writes, want_writes = _replayable(predicted), _replayable(ground_truth)
        pair = (_write_key(got_writes), _write_key(want_writes))
        result = self._results.entries.get(pair)
        if result is not None:
            return result
        got = self._end_state(got_writes, pair[0])
        want = self._end_state(want_writes, pair[1])
        results = []
        for key in COMPARED_TABLES:
            p, e = got.get(key), want.get(key)
            if p is None and e is None:
                rows = len(self._base_normal[key][2])
                results.append(TableScore(key, True, rows, rows))
                continue
            p = self._base_normal[key] if p is None else p
            e = self._base_normal[key] if e is None else e
            results.append(TableScore(key, p == e, len(p[2]), len(e[2])))
        reward = 1.0 if all(r.equal for r in results) else 0.0
        result = Score(reward=reward, tables=tuple(results))
        if self.cache_bytes > 0 and _key_chars(pair) <= _RESULT_KEY_CHARS:
            self._results.put(pair, result)
        return result


def _key_chars(pair: tuple[WriteKey, WriteKey]) -> int:
    return sum(len(name) + len(args) for key in pair for name, args in key)


def _deep_size(form: NormalForm) -> int:
    """Bytes of a normal form: its tuples and every cell (``sys.getsizeof``; cells of the
    lower-cased columns are strings of their own, the rest are counted too)."""
    index, cells = form[2], form[3]
    size = sum(sys.getsizeof(part) for part in form) + sys.getsizeof(form)
    size += sum(sys.getsizeof(v) for v in index)
    for column in cells:
        size += sys.getsizeof(column) + sum(sys.getsizeof(v) for v in column if v is not None)
    return size


def mcp_bare_name(name: str, server_name: str = MCP_SERVER_NAME) -> str:
    """``name`` without the ``mcp__<server_name>__`` prefix MCP clients namespace tools with.

    Only that one server's prefix comes off, once; any other name is returned as it is (the
    format of NeMo Gym 0.7.0's ``normalize_tool_name`` with a server name).
    """
    prefix = f"mcp__{server_name}__"
    return name[len(prefix) :] if name.startswith(prefix) else name


def bare_predicted_names(calls: Iterable[Any], server_name: str = MCP_SERVER_NAME) -> list[Any]:
    """The predicted ``calls`` with their names as :func:`mcp_bare_name` gives them, for scoring.

    REFERENCE.md (c)1: with the tools exposed over MCP, the prediction's tool-call names are
    scored without the server's MCP namespace, so a rollout scores the same whether the agent
    called the tools over HTTP or MCP. Works on copies (a caller echoing the request keeps the
    names the model emitted); calls of other shapes, and the ground truth, are not touched.
    """
    out: list[Any] = []
    for call in calls:
        if isinstance(call, FunctionCall):
            bare = mcp_bare_name(call.name, server_name)
            if bare != call.name:
                call = FunctionCall(bare, call.arguments)
        elif isinstance(call, dict) and isinstance(call.get("name"), str):
            bare = mcp_bare_name(call["name"], server_name)
            if bare != call["name"]:
                call = {**call, "name": bare}
        out.append(call)
    return out
