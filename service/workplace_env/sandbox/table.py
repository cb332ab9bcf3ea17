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
