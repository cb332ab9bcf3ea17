"""Mechanisms the toolkits share: one place for each, so a fix lands everywhere at once.

Row operations on a single :class:`~workplace_env.sandbox.table.Table` (positions of a value,
dropping and appending rows, setting cells, records) are methods of the Table; this module holds
what the fast paths do over a session (:class:`~workplace_env.sandbox.tables.SessionTables`) and
the small pieces of the reference's semantics several toolkits repeat: pandas'
``str.contains(pattern, case=False)`` as a per-cell test, the paging arithmetic, the next
zero-padded id. Fast paths run on text-only tables (every cell a str, None or NaN) with str
arguments and return ``FALLBACK`` before changing anything for what pandas must decide.

The last two sections serve the pandas implementations (the exact ones): helpers that only avoid
frame copies where every cell involved is a string, with the same results and errors, and the
mechanisms the write tools and searches share on DataFrames (filter steps and the narrowing loop,
id lookups, appends, new ids). :class:`IdRecords` then declares the CRM and project-management
delete and update by id, both implementations, from one description of each toolkit.
"""

from __future__ import annotations

import inspect
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from itertools import compress, repeat
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

from workplace_env.memo import BoundedMemo
from workplace_env.sandbox.table import Table
from workplace_env.sandbox.tables import COLUMNS, SessionTables
from workplace_env.sandbox.tools.registry import FALLBACK, Toolkit, listing, string

# pandas warns when a search pattern has capture groups; the reference only printed it to stderr.
warnings.filterwarnings(
    "ignore", message="This pattern is interpreted as a regular expression", category=UserWarning
)


# -- tables of a session ----------------------------------------------------------------------


def text_table(tables: SessionTables, key: str) -> Table | None:
    """Table ``key`` when it is text-only with its standard columns (the fast paths that build
    rows rely on both), else None."""
    table = tables.table(key)
    if table.text_only and table.columns == COLUMNS[key]:
        return table
    return None


def only_str(cells: Any) -> bool:
    """True when every cell is a str (no missing ones): fast paths compare or parse only those."""
    return set(map(type, cells)) <= {str}


def delete_where(tables: SessionTables, key: str, column: str, value: str) -> bool:
    """Drop every row of table ``key`` whose ``column`` equals ``value``; False when none does.

    ``frame[frame[column] != value]`` for a str value: the other rows keep their labels.
    """
    doomed = tables.table(key).positions(column, value)
    if not doomed:
        return False
    tables.writable(key).drop_rows(doomed)
    return True


def update_where(
    tables: SessionTables, key: str, column: str, value: str, field: str, new_value: Any
) -> None:
    """``frame.loc[frame[column] == value, field] = new_value`` on table ``key`` (object field)."""
    table = tables.writable(key)
    table.set_cells(table.positions(column, value), field, new_value)


def next_id(ids: list[Any], *, zero_pad: bool = True) -> str | None:
    """``str(int(ids.max()) + 1)``, zero-padded to 8 unless ``zero_pad`` is False, for str ids;
    None when pandas should decide.

    ``max`` compares the strings as numpy's object max does (same result); a missing id (no
    order with str), an empty table or a non-numeric maximum makes it None. The email toolkit
    does not pad (``"00000499"`` -> ``"500"``), the others do (REFERENCE.md c.7).
    """
    try:
        number = str(int(max(ids)) + 1)
    except (TypeError, ValueError):
        return None
    return number.zfill(8) if zero_pad else number


# -- pandas' str.contains(pattern, case=False) and exact-match tests, cell by cell --------------
#
# A regex test applied to a missing cell raises TypeError or AttributeError: pandas' str.contains
# leaves NA in the mask there, and indexing with that mask raises NA_MASK (golden text).

#: pandas' error for a boolean mask holding NA (a regex filter that met a missing cell).
NA_MASK = "Cannot mask with non-boolean array containing NA / NaN values"

#: Cell tests remembered: at most this many tests (all are forgotten when exceeded) ...
_MEMO_TESTS = 256
#: ... and this many cell results per test (that test's results are forgotten when exceeded).
_MEMO_CELLS = 1024
_REGEX_SPECIAL = frozenset(".^$*+?{}[]\\|()")

CellTest = tuple[Callable[[str], bool], BoundedMemo[str, bool]]
_memo: BoundedMemo[Any, CellTest | None] = BoundedMemo(_MEMO_TESTS)


def contains_search(pattern: Any) -> Callable[[str], Any]:
    """The ``search`` pandas' ``str.contains(pattern, case=False)`` applies to each str cell.

    pandas compiles the pattern without flags first (its match-group warning), then with
    IGNORECASE; a bad pattern raises the same errors here, in the same order.
    """
    re.compile(pattern)
    return re.compile(pattern, re.IGNORECASE).search


def _contains_test(pattern: str) -> Callable[[str], bool] | None:
    """``cell -> pandas str.contains(pattern, case=False)`` for a str cell, None if pandas raises.

    A pattern without metacharacters is a literal: for ASCII pattern and cell, the
    case-insensitive search is plain containment of the lower-cased texts (the engine's extra
    case pairs, like ``k``/Kelvin sign, all involve a non-ASCII character).
    """
    try:
        search = contains_search(pattern)
    except Exception:  # re.error, RecursionError, OverflowError, a warning raised as error...
        return None
    if pattern.isascii() and _REGEX_SPECIAL.isdisjoint(pattern):
        lowered = pattern.lower()
        return lambda cell: lowered in cell.lower() if cell.isascii() else bool(search(cell))
    return lambda cell: search(cell) is not None


def cell_test(key: str | tuple[str, str]) -> CellTest | None:
    """The test ``key`` names with its memo of results by cell text, or None (pattern error).

    ``key`` is a regex pattern (pandas ``str.contains(key, case=False)``; raises on a missing
    cell) or ``("=", text)`` (pandas ``column.str.lower() == text``: a missing cell is False).
    Results depend on the cell only, so they are shared by all sessions; models repeat their
    searches, which then cost a dict lookup per cell.
    """
    try:
        return _memo.entries[key]
    except KeyError:
        pass
    if isinstance(key, tuple):
        text = key[1]
        entry: CellTest | None = (
            lambda cell: type(cell) is str and cell.lower() == text,
            BoundedMemo(_MEMO_CELLS),
        )
    else:
        test = _contains_test(key)
        entry = None if test is None else (test, BoundedMemo(_MEMO_CELLS))
    _memo.put(key, entry)
    return entry


def cell_flags(entry: CellTest, cells: list[Any]) -> list[bool]:
    """The test's result for each cell (a regex test raises TypeError/AttributeError on a
    missing cell)."""
    test, bounded = entry
    flags = list(map(bounded.entries.get, cells))
    if None in flags:
        bounded.make_room()
        memo = bounded.entries
        for i, flag in enumerate(flags):
            if flag is None:
                cell = cells[i]
                flag = memo.get(cell)
                if flag is None:
                    flag = memo[cell] = test(cell)
                flags[i] = flag
    return flags


def _narrow(entry: CellTest, cells: list[Any], rows: list[int] | None) -> list[int]:
    """The positions among ``rows`` (every row when None) whose cell passes the test, in order."""
    if rows is None:
        return list(compress(range(len(cells)), cell_flags(entry, cells)))
    return list(compress(rows, cell_flags(entry, [cells[i] for i in rows])))


def filtered_rows(tool: str, table: Table, filters: list[tuple[str, Any]]) -> Any:
    """The rows passing every ``(column, cell_test key)`` filter, narrowed in the given order.

    pandas filters one frame after another, so a later filter only sees the rows left (which
    decides whether a missing cell makes its mask NA). Returns the ascending positions (None
    when there is no filter), FALLBACK when a pattern does not compile (pandas words the error,
    whatever the order), or tool ``tool``'s NA-mask error text.
    """
    tests = []
    for column, key in filters:
        entry = cell_test(key)
        if entry is None:
            return FALLBACK
        tests.append((column, entry))
    rows = None
    try:
        for column, entry in tests:
            rows = _narrow(entry, table.data[column], rows)
    except (TypeError, AttributeError):  # only a missing cell makes a test raise
        return f"Error executing tool '{tool}': {NA_MASK}"
    return rows


# -- paging ------------------------------------------------------------------------------------


class PageWindow(NamedTuple):
    """Where one page of a result list starts and stops, and the ``pagination`` object to show.

    Unpacks as ``start, stop, pagination``; ``items[start:stop]`` is the page.
    """

    start: Any
    stop: Any
    pagination: dict[str, Any]


def paginate(total_key: str, total: int, page: Any, page_size: Any) -> PageWindow:
    """The page window of the three paginated searches, with Python's own errors for odd values.

    Observed behaviour (goldens README, ``fuzz_pagination``; REFERENCE.md f.3/f.9/f.24):

    * page count = ceiling of ``total / page_size`` computed as ``(total + page_size - 1) //
      page_size``: a str or list size fails on the ``+`` (``unsupported operand type(s) for +:
      'int' and 'str'``), 0 or false on the ``//`` (``integer division or modulo by zero``), a
      negative size gives a count of 1 for one hit and a negative count for more;
    * when the count is positive the page is clamped into ``[1, count]``, lowest bound last
      (``max(1, min(page, count))``: a str page fails with ``'<' not supported between
      instances of 'int' and 'str'``); when it is not (no hits, negative sizes) the page is 1,
      whatever was sent;
    * the window is ``[(page - 1) * size, that + size)``: a float page or size that survives
      the clamp makes the caller's slice fail (``slice indices must be integers ...``);
    * ``pagination`` reports the total, the clamped page, the size as sent and the count.

    Raises TypeError or ZeroDivisionError with those texts; the callers word them.
    """
    pages = (total + page_size - 1) // page_size
    shown = max(1, min(page, pages)) if pages > 0 else 1
    start = (shown - 1) * page_size
    pagination = {total_key: total, "page": shown, "page_size": page_size, "total_pages": pages}
    return PageWindow(start, start + page_size, pagination)


def frame_records(frame: pd.DataFrame, rows: Any = slice(None)) -> list[dict[str, Any]]:
    """``frame.to_dict(orient="records")`` of the rows at positions ``rows`` (all by default).

    For object columns pandas would only box numpy scalars, which the caller turns into plain
    values anyway: the JSON is the same, at a fraction of the cost.
    """
    values = frame.to_numpy(dtype=object)[rows].tolist()
    return list(map(dict, map(zip, repeat(frame.columns.tolist()), values)))


def all_text(frame: pd.DataFrame, column: str) -> bool:
    """True when every cell of ``column`` is a ``str`` (no missing or non-string values)."""
    return infer_dtype(frame[column].to_numpy(), skipna=False) == "string"


def regex_keep(values: np.ndarray, pattern: str) -> np.ndarray:
    """``Series(values).str.contains(pattern, case=False)`` for string ``values``, as a bool array.

    A bad pattern raises the same ``re.error`` as pandas, even when no row is left.
    """
    search = contains_search(pattern)
    return np.array([search(v) is not None for v in values.tolist()], dtype=bool)


# -- mechanisms of the pandas implementations: filters, id lookups, appends, new ids -------------
#
# These run on DataFrames whatever their cells hold, so odd values fail where and how pandas and
# numpy make them fail; those texts are golden outputs. Which operation decides each failure was
# read off the goldens and black-box calls to the reference server (see each docstring).

#: A filter step: the boolean Series of the cells of one column that pass.
Predicate = Callable[[pd.Series], pd.Series]


def matches_pattern(pattern: Any) -> Predicate:
    """Cells that ``str.contains(pattern, case=False)`` (a regex filter of the searches).

    pandas compiles the pattern before it looks at a cell, so a bad pattern fails even on no
    rows (``first argument must be string or compiled pattern`` for a number, ``unhashable type``
    for a list); a column left with no text cell fails in the ``.str`` accessor, and a missing or
    non-text cell among text ones makes the mask NA (:data:`NA_MASK` when it is applied).
    """
    return lambda cells: cells.str.contains(pattern, case=False)


def equals_lowered(text: str) -> Predicate:
    """Cells whose lower-cased text equals ``text`` (a missing or non-text cell never does)."""
    return lambda cells: cells.str.lower() == text


def narrow(frame: pd.DataFrame, steps: list[tuple[str, Predicate]]) -> list[int]:
    """Positions (ascending) of the rows of ``frame`` that pass every ``(column, predicate)`` step.

    Each step sees only the rows the steps before it kept, as chained ``frame[mask]`` filters do:
    whether a later predicate meets a missing cell, or any text at all, depends on what is left.
    Exceptions of a predicate or of applying its mask propagate.
    """
    left = frame.assign(**{_POSITION: np.arange(len(frame))})
    for column, predicate in steps:
        left = left[predicate(left[column])]
    return left[_POSITION].tolist()


_POSITION = "\x00position"  # a column name no table has


def id_rows(frame: pd.DataFrame, column: str, value: Any) -> pd.Series | None:
    """The boolean mask of the rows whose ``column`` equals ``value``; None when none does.

    The lookup of the write tools (PM/CRM update and delete). Presence is numpy's ``value in
    cells`` (a list of two ids fails there: ``operands could not be broadcast together with
    shapes (300,) (2,)``), the mask is pandas' ``==`` (a one-id list that is present fails there:
    ``('Lengths must match to compare', (300,), (1,))``); goldens fuzz_type_confusion. A value
    of another type than the cells is simply absent (black-box: ``7``, ``true``, ``{}``).
    """
    if value not in frame[column].to_numpy():
        return None
    return frame[column] == value


def without_rows(frame: pd.DataFrame, mask: pd.Series) -> pd.DataFrame:
    """``frame`` minus the rows ``mask`` marks; the others keep their index labels (goldens
    README: a delete leaves gaps)."""
    return frame.take(np.flatnonzero(~mask.to_numpy(dtype=bool)))


def with_row(frame: pd.DataFrame, values: dict[str, Any], *, renumber: bool) -> pd.DataFrame:
    """``frame`` with one row appended; every value is stored as given (a list, dict, number or
    bool keeps its type: black-box read-backs return it unchanged).

    ``renumber`` True relabels the rows 0..n (the PM, CRM and email creates); False gives the new
    row label 0 and keeps the others (the calendar create): goldens README, table hashes.
    """
    row = pd.DataFrame([values], columns=frame.columns, dtype=object)
    return pd.concat([frame, row], ignore_index=renumber)


def frame_next_id(ids: pd.Series, *, zero_pad: bool = True) -> str:
    """The id a create gives: the column's pandas ``max`` as an int, plus one, zero-padded to 8
    unless ``zero_pad`` is False (REFERENCE.md c.7).

    pandas' max skips missing cells and is NaN on an empty column, so a create on an emptied table
    fails with ``cannot convert float NaN to integer`` (goldens fuzz_empty_table); a str id among
    numbers fails in numpy's comparison (``'>=' not supported between instances of 'str' and
    'int'``) and a non-numeric maximum in ``int()`` (black-box observations).
    """
    number = str(int(ids.max()) + 1)
    return number.zfill(8) if zero_pad else number


def frame_append(tables: Any, key: str, cells: tuple[Any, ...], *, renumber: bool = True) -> str:
    """Append a row to table ``key`` (pandas) and return its id: the next id
    (:func:`frame_next_id`, its errors included), then ``cells`` for the other standard columns
    in order; ``renumber`` as :func:`with_row` has it."""
    frame = tables[key]
    columns = COLUMNS[key]
    new_id = frame_next_id(frame[columns[0]])
    row = dict(zip(columns, (new_id, *cells), strict=True))
    tables[key] = with_row(frame, row, renumber=renumber)
    return new_id


def append_text_row(tables: SessionTables, key: str, cells: tuple[Any, ...]) -> Any:
    """:func:`frame_append` with renumbering on the session's text-only table ``key``; FALLBACK
    (nothing changed) for another table or when the next id needs pandas (:func:`next_id`)."""
    table = text_table(tables, key)
    if table is None:
        return FALLBACK
    new_id = next_id(table.data[COLUMNS[key][0]])
    if new_id is None:
        return FALLBACK
    tables.writable(key).append_row((new_id, *cells))
    return new_id


#: ``column(name)``: the cells of a column of the table a rule reads (:attr:`FieldRule.known`).
Column = Callable[[str], list[Any]]


class FieldRule(NamedTuple):
    """What an update by id requires of the new value of one field, checked before the lookup.

    ``choices``: the value must be one of them, else ``refusal``. ``lower``: the value is
    lower-cased (a non-str fails on ``lower``). ``known``: the lower-cased value must equal a text
    cell of the field's column (:func:`column_knows`), else ``refusal``.
    """

    choices: tuple[str, ...] = ()
    refusal: str = ""
    lower: bool = False
    known: bool = False


def column_knows(cells: list[Any], lowered: str) -> bool:
    """True when some text cell of ``cells``, lower-cased, equals ``lowered`` (lower-case text):
    the team members a task may name (REFERENCE.md f.21). A missing or non-text cell equals
    nothing."""
    if lowered in cells and lowered.lower() == lowered:  # an exact hit lower-cases to itself
        return True
    entry = cell_test(("=", lowered))
    assert entry is not None
    return any(cell_flags(entry, cells))


class NewRow(NamedTuple):
    """What a create requires of its arguments (:meth:`IdRecords.new_cells`).

    ``required``: arguments that must be truthy, else ``refusal``; ``checked``: fields whose
    truthy value must pass its :class:`FieldRule`, in this order; ``defaults``: the value of an
    omitted argument other than None.
    """

    required: tuple[str, ...]
    refusal: str
    checked: tuple[str, ...]
    defaults: Mapping[str, Any] = {}


class IdRecords:
    """The delete and update by id of the CRM and project-management toolkits, on table ``key``.

    ``noun`` makes the reference's strings ("<noun> ID not provided.", "<noun> not found.",
    "<noun> updated successfully.", ...); the id is the table's first column and the tools'
    id parameter, advertised with ``id_schema``. An update lists ``updatable`` in its schema,
    applies the :class:`FieldRule` of ``rules`` for its field and refuses a field that is no
    column with ``bad_field``. :meth:`declare_delete` and :meth:`declare_update` register the
    tools with their fast paths (where they stand decides the advertised order).
    """

    __slots__ = (
        "_bad_field",
        "_deleted",
        "_missing_id",
        "_no_update",
        "_not_found",
        "_updated",
        "id_column",
        "id_schema",
        "key",
        "noun",
        "rules",
        "updatable",
    )

    def __init__(
        self,
        key: str,
        noun: str,
        id_schema: dict[str, str],
        updatable: Sequence[str],
        rules: dict[str, FieldRule],
        bad_field: str,
    ) -> None:
        self.key = key
        self.noun = noun
        self.id_column = COLUMNS[key][0]
        self.id_schema = id_schema
        self.updatable = updatable
        self.rules = rules
        self._bad_field = bad_field
        self._missing_id = f"{noun} ID not provided."
        self._no_update = f"{noun} ID, field, or new value not provided."
        self._not_found = f"{noun} not found."
        self._updated = f"{noun} updated successfully."
        self._deleted = f"{noun} deleted successfully."

    def delete(self, tables: Any, arguments: Mapping[str, Any]) -> str:
        """Drop every row whose id equals the id argument (pandas; :func:`id_rows`, labels kept).

        ``arguments`` are the call's keyword arguments (so are those of the methods below).
        """
        id_value = arguments.get(self.id_column)
        if not id_value:
            return self._missing_id
        frame = tables[self.key]
        doomed = id_rows(frame, self.id_column, id_value)
        if doomed is None:
            return self._not_found
        tables[self.key] = without_rows(frame, doomed)
        return self._deleted

    def delete_fast(self, tables: SessionTables, arguments: Mapping[str, Any]) -> Any:
        """:meth:`delete` for a str id on a text-only table; ``FALLBACK`` otherwise."""
        id_value = arguments.get(self.id_column)
        if not id_value:
            return self._missing_id
        if type(id_value) is not str or not tables.table(self.key).text_only:
            return FALLBACK
        if not delete_where(tables, self.key, self.id_column, id_value):
            return self._not_found
        return self._deleted

    def vetted(self, field: Any, new_value: Any, column: Column | None) -> tuple[Any, str | None]:
        """The value an update stores and None, or None and the message refusing it.

        ``column(name)`` gives a column's cells, read only for a ``known`` rule. A non-str
        field has no rule (it is never hashed here: pandas decides what it does).
        """
        rule = self.rules.get(field) if type(field) is str else None
        if rule is None:
            return new_value, None
        if rule.choices and new_value not in rule.choices:
            return None, rule.refusal
        if rule.lower:
            new_value = new_value.lower()
        if rule.known:
            assert column is not None, f"the rule of {field} reads its column"
            if not column_knows(column(field), new_value):
                return None, rule.refusal
        return new_value, None

    def update(self, tables: Any, arguments: Mapping[str, Any]) -> str:
        """``frame.loc[rows, field] = new_value`` for the id's rows (pandas).

        Checks, in order: all three truthy; the field's rule (before the lookup); the id must
        be present (:func:`id_rows`); the field must be a column, the id column included (an
        unhashable field fails there). pandas stores any type: a one-item list is unpacked, a
        dict stores a missing cell, a longer list fails (black-box and goldens).
        """
        id_value, field, new_value = map(arguments.get, (self.id_column, "field", "new_value"))
        if not id_value or not field or not new_value:
            return self._no_update
        new_value, problem = self.vetted(
            field, new_value, lambda name: tables[self.key][name].tolist()
        )
        if problem is not None:
            return problem
        frame = tables[self.key]
        rows = id_rows(frame, self.id_column, id_value)
        if rows is None:
            return self._not_found
        if field not in frame.columns:
            return self._bad_field
        frame.loc[rows, field] = new_value
        return self._updated

    def update_fast(self, tables: SessionTables, arguments: Mapping[str, Any]) -> Any:
        """:meth:`update` for str arguments on a text-only table; ``FALLBACK`` otherwise (an int
        value is stored as sent, an int id compares in numpy, ``lower`` fails on an int)."""
        id_value, field, new_value = map(arguments.get, (self.id_column, "field", "new_value"))
        if not id_value or not field or not new_value:
            return self._no_update
        if type(id_value) is not str or type(field) is not str or type(new_value) is not str:
            return FALLBACK
        table = tables.table(self.key)
        if not table.text_only:
            return FALLBACK
        new_value, problem = self.vetted(field, new_value, table.data.__getitem__)
        if problem is not None:
            return problem
        if id_value not in table.data[self.id_column]:
            return self._not_found
        if field not in table.data:
            return self._bad_field
        update_where(tables, self.key, self.id_column, id_value, field, new_value)
        return self._updated

    def new_cells(
        self, spec: NewRow, arguments: dict[str, Any], column: Column | None = None
    ) -> tuple[Any, ...] | str:
        """The cells after the id of the row a create appends, in column order, or the refusal.

        Each standard column takes its argument, else ``spec.defaults``' value, else None.
        Checks, in order: the required arguments truthy; the rule of each checked field whose
        value is truthy, as an update applies it (:meth:`vetted`; ``column`` likewise, needed only
        for a ``known`` rule).
        """
        cells = {c: arguments.get(c, spec.defaults.get(c)) for c in COLUMNS[self.key][1:]}
        if not all([cells[c] for c in spec.required]):
            return spec.refusal
        for field in spec.checked:
            if cells[field]:
                cells[field], problem = self.vetted(field, cells[field], column)
                if problem is not None:
                    return problem
        return tuple(cells.values())

    def declare_delete(self, kit: Toolkit, record: str, reference: str) -> None:
        """Register ``delete_<noun>`` ("Deletes a <record> by ID.") and its fast path."""
        noun = self.noun.lower()
        doc = (
            f"Remove every {noun} with this id (REFERENCE.md {reference}); the other rows keep "
            "their labels: :meth:`IdRecords.delete`."
        )
        properties = {self.id_column: self.id_schema}
        self._declare(kit, "delete", f"Deletes a {record} by ID.", properties, doc)

    def declare_update(self, kit: Toolkit, record: str, reference: str) -> None:
        """Register ``update_<noun>`` ("Updates a <record> by ID.") and its fast path."""
        noun = self.noun.lower()
        doc = (
            f"Set ``field`` of every {noun} with this id to ``new_value`` (REFERENCE.md "
            f"{reference}): :meth:`IdRecords.update`."
        )
        properties = {
            self.id_column: self.id_schema,
            "field": string(listing("Field to update. Available fields are: ", self.updatable)),
            "new_value": string("New value for the field"),
        }
        self._declare(kit, "update", f"Updates a {record} by ID.", properties, doc)

    def _declare(
        self, kit: Toolkit, verb: str, description: str, properties: dict[str, Any], doc: str
    ) -> None:
        """Register tool ``<verb>_<noun>`` (every property required, writes the table) and its
        fast path: functions named, documented and signed as hand-written ones would be, that
        hand the keyword arguments to method ``verb`` and ``<verb>_fast``."""
        method = f"{verb}_{self.noun.lower()}"
        names = tuple(properties)
        run, run_fast = getattr(self, verb), getattr(self, f"{verb}_fast")

        def pandas_tool(tables: Any, **arguments: Any) -> str:
            return run(tables, arguments)

        def fast_tool(tables: SessionTables, **arguments: Any) -> Any:
            return run_fast(tables, arguments)

        keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD
        signature = inspect.Signature(
            [
                inspect.Parameter("tables", keyword, annotation="SessionTables"),
                *(inspect.Parameter(name, keyword, default=None) for name in names),
            ]
        )
        for func, name in ((pandas_tool, method), (fast_tool, f"_{method}_fast")):
            func.__name__ = func.__qualname__ = name
            func.__signature__ = signature  # type: ignore[attr-defined]
        pandas_tool.__doc__ = doc
        fast_tool.__doc__ = f":meth:`IdRecords.{verb}_fast`: str arguments, text-only table."
        kit.tool(description, properties, names, (self.key,))(pandas_tool)
        kit.fast_path(method)(fast_tool)
