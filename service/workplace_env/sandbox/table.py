"""A table as plain Python lists: what a session holds, cheap to copy and to scan.

pandas parses the CSVs once per process and stays the exact reference for rare inputs (the
tools' pandas implementations are the fallback, run on a DataFrame view of these tables).
A :class:`Table` carries everything a DataFrame round trip must keep so the fallback sees the
same frame the reference would: the cells as the same Python objects (str, None, float NaN,
numbers a tool stored as given), each column's dtype name, the index labels (duplicates
allowed: a calendar append adds label 0) and whether the index is a ``RangeIndex``.
"""

from __future__ import annotations

import math
from operator import itemgetter
from typing import Any

import numpy as np
import pandas as pd

RangeSpec = tuple[int, int, int]
_TEXT_TYPES = frozenset({str, type(None)})


def is_missing(value: Any) -> bool:
    """True for the cells pandas treats as missing in an object column: None and float NaN."""
    return value is None or (type(value) is float and math.isnan(value))


class Table:
    """Columns of Python values, index labels, dtypes; mutable only through a private copy.

    ``columns``: column names in order. ``data``: column -> list of cells (len = rows).
    ``index``: row labels. ``dtypes``: numpy dtype name per column (``object``, ``bool``,
    ``float64``, ``int64``). ``range_index``: ``(start, stop, step)`` when the index is a
    RangeIndex, else None. ``text_only``: every column is ``object`` and every cell a str or
    missing; fast paths rely on it and fall back to pandas otherwise.
    """

    __slots__ = ("columns", "data", "dtypes", "index", "range_index", "text_only")

    def __init__(
        self,
        columns: tuple[str, ...],
        data: dict[str, list[Any]],
        index: list[int],
        dtypes: tuple[str, ...],
        range_index: RangeSpec | None,
        text_only: bool | None = None,
    ) -> None:
        self.columns = columns
        self.data = data
        self.index = index
        self.dtypes = dtypes
        self.range_index = range_index
        self.text_only = self._scan_text_only() if text_only is None else text_only

    def __len__(self) -> int:
        return len(self.index)

    def _scan_text_only(self) -> bool:
        if any(d != "object" for d in self.dtypes):
            return False
        for column in self.data.values():
            kinds = set(map(type, column))
            if kinds <= _TEXT_TYPES:
                continue
            if not kinds <= _TEXT_TYPES | {float}:
                return False
            if not all(is_missing(v) for v in column if type(v) is float):
                return False
        return True

    def copy(self) -> Table:
        """A private copy: new lists, same (immutable) cells."""
        return Table(
            self.columns,
            {c: list(v) for c, v in self.data.items()},
            list(self.index),
            self.dtypes,
            self.range_index,
            self.text_only,
        )

    def identical(self, other: Table) -> bool:
        """Exactly the same table: columns, dtypes, index, and cells with their types
        (NaN equals NaN only)."""
        if (self.columns, self.dtypes, self.index, self.range_index) != (
            other.columns,
            other.dtypes,
            other.index,
            other.range_index,
        ):
            return False
        return all(_typed(self.data[c]) == _typed(other.data[c]) for c in self.columns)

    def row(self, i: int) -> dict[str, Any]:
        """Row ``i`` (a position, not a label) as a column -> cell dict in column order."""
        return {c: self.data[c][i] for c in self.columns}

    def dtype(self, column: str) -> str:
        """The dtype name of ``column``."""
        return self.dtypes[self.columns.index(column)]

    def all_object(self) -> bool:
        """True when every column is ``object`` dtype (whatever its cells)."""
        return all(d == "object" for d in self.dtypes)

    # -- rows by position (the fast paths' reads and in-place writes) ----------------------------

    def positions(self, column: str, value: Any) -> list[int]:
        """Ascending positions of the cells of ``column`` equal to ``value``.

        Equality is ``list.index``'s (identity, then ``==``); for a str ``value`` that is what
        numpy's element-wise ``==`` on the object column gives.
        """
        cells = self.data[column]
        found = []
        i = -1
        try:
            while True:
                i = cells.index(value, i + 1)
                found.append(i)
        except ValueError:
            return found

    def first(self, column: str, value: Any) -> int | None:
        """The first of :meth:`positions`, or None."""
        try:
            return self.data[column].index(value)
        except ValueError:
            return None

    def records(self, rows: Any) -> list[dict[str, Any]]:
        """``to_dict(orient="records")`` of the rows at positions ``rows``, in column order."""
        columns = self.columns
        if len(rows) > 1:  # itemgetter picks a column's cells in C (it returns a bare cell for one)
            pick = itemgetter(*rows)
            picked = [pick(self.data[column]) for column in columns]
        else:
            picked = [[self.data[column][i] for i in rows] for column in columns]
        return [dict(zip(columns, values, strict=True)) for values in zip(*picked, strict=True)]

    def set_cells(self, rows: list[int], column: str, value: Any) -> None:
        """Set the cells of object column ``column`` at positions ``rows`` to ``value``, stored as
        given (``frame.loc[mask, column] = value``).

        ``text_only`` turns False when ``value`` is not text (it never turns True again here).
        """
        cells = self.data[column]
        for i in rows:
            cells[i] = value
        if rows and not _is_text(value):
            self.text_only = False

    def drop_rows(self, rows: list[int]) -> None:
        """Remove the rows at ascending positions ``rows``, as a boolean mask that drops them does:
        the others keep their labels, under an Int64 index (never a RangeIndex)."""
        for i in reversed(rows):
            for cells in self.data.values():
                del cells[i]
            del self.index[i]
        self.range_index = None

    def append_row(self, values: tuple[Any, ...], label: int | None = None) -> None:
        """Append a row (``values`` in column order) to object columns.

        ``label`` None renumbers as ``pd.concat([frame, row], ignore_index=True)`` does: labels
        ``0..n`` under a RangeIndex. An int ``label`` is the new row's own label under an Int64
        index, as ``pd.concat`` without ``ignore_index`` (label 0) or ``.loc[label] = row``
        enlargement give it; the caller makes sure pandas' index is not a RangeIndex there.
        """
        for cells, value in zip(map(self.data.__getitem__, self.columns), values, strict=True):
            cells.append(value)
        size = len(self.index) + 1
        if label is not None:
            self.index.append(label)
            self.range_index = None
        else:
            if self.range_index == (0, size - 1, 1):
                self.index.append(size - 1)
            else:
                self.index = list(range(size))
            self.range_index = (0, size, 1)
        if self.text_only and not all(map(_is_text, values)):
            self.text_only = False

    # -- the pandas bridge ---------------------------------------------------------------------

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> Table:
        """The table holding exactly ``frame``'s cells, dtypes and index.

        Raises ValueError for what sessions never hold: non-unique column names or a
        non-integer index.
        """
        columns = tuple(str(c) for c in frame.columns)
        if len(set(columns)) != len(columns):
            raise ValueError("column names must be unique")
        index = frame.index
        if isinstance(index, pd.RangeIndex):
            range_index: RangeSpec | None = (index.start, index.stop, index.step)
            labels = list(range(index.start, index.stop, index.step))
        else:
            if len(index) and not pd.api.types.is_integer_dtype(index.dtype):
                raise ValueError(f"index must be integer, got {index.dtype}")
            range_index = None
            labels = [int(x) for x in index]
        dtypes = tuple(dt.name for dt in frame.dtypes)
        if all(d == "object" for d in dtypes):
            values = frame.to_numpy()  # one object block: cells as stored, no conversion
            data = {name: values[:, i].tolist() for i, name in enumerate(columns)}
        else:  # numeric/bool columns become Python scalars of their dtype
            data = {name: frame.iloc[:, i].tolist() for i, name in enumerate(columns)}
        return cls(columns, data, labels, dtypes, range_index)

    def to_frame(self) -> pd.DataFrame:
        """A new DataFrame with exactly this table's cells, dtypes and index."""
        if self.range_index is not None:
            index: pd.Index = pd.RangeIndex(*self.range_index)
        else:
            index = pd.Index(np.asarray(self.index, dtype=np.int64))
        if all(d == "object" for d in self.dtypes):
            # One 2-D object block, as pandas' own reader makes it.
            block = np.empty((len(self.columns), len(self.index)), dtype=object)
            for i, name in enumerate(self.columns):
                _fill(block[i], self.data[name], self.text_only)
            return pd.DataFrame(block.T, index=index, columns=list(self.columns), copy=False)
        columns = {}
        for name, dtype in zip(self.columns, self.dtypes, strict=True):
            if dtype == "object":
                array = np.empty(len(self.index), dtype=object)
                _fill(array, self.data[name], self.text_only)
            else:
                array = np.asarray(self.data[name], dtype=dtype)
            columns[name] = array
        return pd.DataFrame(columns, index=index, columns=list(self.columns), copy=False)


def _is_text(value: Any) -> bool:
    """A cell a text-only table may hold: a str or missing."""
    return type(value) is str or is_missing(value)


def _typed(column: list[Any]) -> list[tuple[type, Any]]:
    """Cells with their types, NaN replaced by a marker so that NaN equals NaN."""
    return [(type(v), "nan" if type(v) is float and math.isnan(v) else v) for v in column]


def _fill(array: np.ndarray, values: list[Any], text_only: bool) -> None:
    """Put ``values`` into a 1-D object array, one cell per element."""
    if text_only:
        array[:] = values
    else:  # cells may be lists or dicts: assign one by one, never broadcast
        for i, value in enumerate(values):
            array[i] = value
