"""The reference's checkpoint table codec (REFERENCE.md (d)): a session's tables as JSON text.

A session's state is ``{"schema_version": 0|1, "containers": {container: {attribute: text}}}``
(no other keys; a missing ``schema_version`` means 0), where each ``text`` is one table:

* **v1** (what we write): ``{"columns", "index", "data", "dtypes", "range_index",
  "index_name", "columns_name", "nan_cells"}``. Float NaN cells are written as ``null`` and
  listed in ``nan_cells`` as ``[row, col]``, so a NaN read from an empty CSV cell and a None
  stored by a tool stay apart. Floats are written exactly (shortest repr); NaN and infinities
  never appear as JSON.
* **v0** (accepted on restore): pandas' ``to_json(orient="split")``, ``{"columns", "index",
  "data"}``; a column holding a null becomes an object column with None for the nulls, and an
  index of exactly ``0..n-1`` becomes a RangeIndex.

Decoding validates everything before building anything and raises :class:`CodecError` naming
the offending field (e.g. ``containers.email._emails.nan_cells[2]``). The container and
attribute sets must be exactly a fresh sandbox's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from workplace_env.sandbox.table import Table
from workplace_env.sandbox.tables import TABLE_KEYS

TABLES_SCHEMA_VERSION = 1
DTYPES = ("object", "bool", "int64", "float64")
_V1_KEYS = frozenset(
    {"columns", "index", "data", "dtypes", "range_index", "index_name", "columns_name", "nan_cells"}
)
_V0_KEYS = frozenset({"columns", "index", "data"})


class CodecError(ValueError):
    """A snapshot that does not decode; ``field`` is the path of the offending field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _containers() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for key in TABLE_KEYS:
        container, attribute = key.split(".", 1)
        out.setdefault(container, set()).add(attribute)
    return out


# -- encoding ------------------------------------------------------------------------------------


def encode_table(table: Table) -> str:
    """One table as v1 JSON text.

    Raises CodecError when a cell cannot be written exactly (an infinite float, or a value that
    is not JSON: the reference's codec forbids both).
    """
    nan_cells: list[list[int]] = []
    rows: list[list[Any]] = [[] for _ in table.index]
    for col, name in enumerate(table.columns):
        for row, value in enumerate(table.data[name]):
            if type(value) is float and math.isnan(value):
                nan_cells.append([row, col])
                value = None
            rows[row].append(value)
    nan_cells.sort()
    document = {
        "columns": list(table.columns),
        "index": list(table.index),
        "data": rows,
        "dtypes": list(table.dtypes),
        "range_index": list(table.range_index) if table.range_index is not None else None,
        "index_name": None,
        "columns_name": None,
        "nan_cells": nan_cells,
    }
    try:
        return json.dumps(document, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (ValueError, TypeError) as exc:
        raise CodecError("data", f"a cell cannot be encoded exactly: {exc}") from exc


def encode_state(tables: Mapping[str, Table]) -> dict[str, Any]:
    """A session's tables (key -> Table, all of :data:`TABLE_KEYS`) as a v1 state dict."""
    containers: dict[str, dict[str, str]] = {}
    for key in TABLE_KEYS:
        container, attribute = key.split(".", 1)
        try:
            text = encode_table(tables[key])
        except CodecError as exc:
            raise CodecError(f"containers.{key}.{exc.field}", exc.message) from exc
        containers.setdefault(container, {})[attribute] = text
    return {"schema_version": TABLES_SCHEMA_VERSION, "containers": containers}


# -- decoding ------------------------------------------------------------------------------------


def _object(value: Any, field: str, keys: frozenset[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise CodecError(field, "must be a JSON object")
    if set(value) != keys:
        missing, extra = sorted(keys - set(value)), sorted(set(value) - keys)
        raise CodecError(
            field, f"keys must be exactly {sorted(keys)} (missing {missing}, extra {extra})"
        )
    return value


def _int_list(value: Any, field: str) -> list[int]:
    if not isinstance(value, list) or not all(type(v) is int for v in value):
        raise CodecError(field, "must be a list of integers")
    return value


def _rows(document: dict[str, Any], width: int, field: str) -> list[list[Any]]:
    rows = document["data"]
    if not isinstance(rows, list) or len(rows) != len(document["index"]):
        raise CodecError(f"{field}.data", "must be a list with one row per index label")
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != width:
            raise CodecError(f"{field}.data[{i}]", f"must be a list of {width} cells")
    return rows


def _columns(document: dict[str, Any], fresh: Table, field: str) -> tuple[str, ...]:
    columns = document["columns"]
    if not isinstance(columns, list) or tuple(columns) != fresh.columns:
        raise CodecError(f"{field}.columns", f"must equal the fresh table's {list(fresh.columns)}")
    return fresh.columns


def decode_table_v1(text: str, fresh: Table, field: str) -> Table:
    """A v1 table; ``fresh`` is the same table of a fresh sandbox (for its columns)."""
    document = _object(_load(text, field), field, _V1_KEYS)
    columns = _columns(document, fresh, field)
    index = _int_list(document["index"], f"{field}.index")
    width = len(columns)
    dtypes = document["dtypes"]
    if not isinstance(dtypes, list) or len(dtypes) != width or not all(d in DTYPES for d in dtypes):
        raise CodecError(f"{field}.dtypes", f"must be {width} of {list(DTYPES)}")
    rows = _rows(document, width, field)
    range_index = document["range_index"]
    if range_index is not None:
        spec = _int_list(range_index, f"{field}.range_index")
        if len(spec) != 3 or spec[2] == 0 or list(range(*spec)) != index:
            raise CodecError(f"{field}.range_index", "must be [start, stop, step] matching index")
        range_index = (spec[0], spec[1], spec[2])
    for name in ("index_name", "columns_name"):
        if document[name] is not None and not isinstance(document[name], str):
            raise CodecError(f"{field}.{name}", "must be a string or null")
    nan: set[tuple[int, int]] = set()
    cells = document["nan_cells"]
    if not isinstance(cells, list):
        raise CodecError(f"{field}.nan_cells", "must be a list of [row, col] pairs")
    for i, pair in enumerate(cells):
        where = f"{field}.nan_cells[{i}]"
        if not (isinstance(pair, list) and len(pair) == 2 and all(type(v) is int for v in pair)):
            raise CodecError(where, "must be a [row, col] pair of integers")
        row, col = pair
        if not (0 <= row < len(rows) and 0 <= col < width):
            raise CodecError(where, "is outside the table")
        if (row, col) in nan:
            raise CodecError(where, "is listed twice")
        if rows[row][col] is not None:
            raise CodecError(where, "must point at a null cell")
        nan.add((row, col))
    data: dict[str, list[Any]] = {}
    for col, (name, dtype) in enumerate(zip(columns, dtypes, strict=True)):
        values = [math.nan if (row, col) in nan else r[col] for row, r in enumerate(rows)]
        data[name] = _typed_column(values, dtype, f"{field}.data[*][{col}]")
    return Table(columns, data, index, tuple(dtypes), range_index)


def _typed_column(values: list[Any], dtype: str, field: str) -> list[Any]:
    """Check a non-object column's JSON types and cast; NaN only in float64 columns."""
    if dtype == "object":
        return values
    # JSON types each dtype accepts (a float64 column also takes ints; NaN is a float).
    accepted = {"float64": (int, float), "int64": (int,), "bool": (bool,)}[dtype]
    for value in values:
        if type(value) not in accepted:
            raise CodecError(field, f"{value!r} is not a valid {dtype} cell")
    return [float(v) for v in values] if dtype == "float64" else values


def decode_table_v0(text: str, fresh: Table, field: str) -> Table:
    """A v0 table (pandas ``to_json(orient="split")``), without dtype or date inference."""
    document = _object(_load(text, field), field, _V0_KEYS)
    columns = _columns(document, fresh, field)
    index = _int_list(document["index"], f"{field}.index")
    rows = _rows(document, len(columns), field)
    data: dict[str, list[Any]] = {}
    dtypes = []
    for col, name in enumerate(columns):
        values = [r[col] for r in rows]
        dtype = _v0_dtype(values)
        data[name] = [float(v) for v in values] if dtype == "float64" else values
        dtypes.append(dtype)
    range_index = (0, len(index), 1) if index == list(range(len(index))) else None
    return Table(columns, data, index, tuple(dtypes), range_index)


def _v0_dtype(values: list[Any]) -> str:
    """The dtype a frame built from these JSON values gets; any null makes it object."""
    if not values or any(v is None for v in values):
        return "object"
    kinds = set(map(type, values))
    if kinds == {bool}:
        return "bool"
    if kinds == {int}:
        return "int64"
    if kinds <= {int, float}:
        return "float64"
    return "object"


def _load(text: Any, field: str) -> Any:
    if not isinstance(text, str):
        raise CodecError(field, "must be a JSON text (string)")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:  # an integer over 4,300 digits, too deep
        raise CodecError(field, f"is not JSON: {exc}") from exc


def decode_state(state: Any, fresh: Mapping[str, Table], field: str = "state") -> dict[str, Table]:
    """Every table of a state dict (v0 or v1), validated against a fresh sandbox's tables.

    Returns key -> Table for all of :data:`TABLE_KEYS`. Raises CodecError naming the field.
    """
    if not isinstance(state, dict):
        raise CodecError(field, "must be a JSON object")
    extra = set(state) - {"schema_version", "containers"}
    if extra:
        raise CodecError(field, f"unexpected keys {sorted(extra)}")
    version = state.get("schema_version", 0)
    if type(version) is not int or version not in (0, 1):
        raise CodecError(f"{field}.schema_version", "must be 0 or 1")
    containers = state.get("containers")
    expected = _containers()
    if not isinstance(containers, dict) or set(containers) != set(expected):
        raise CodecError(f"{field}.containers", f"must hold exactly {sorted(expected)}")
    decode = decode_table_v1 if version == 1 else decode_table_v0
    out: dict[str, Table] = {}
    for container, attributes in expected.items():
        given = containers[container]
        where = f"{field}.containers.{container}"
        if not isinstance(given, dict) or set(given) != attributes:
            raise CodecError(where, f"must hold exactly {sorted(attributes)}")
        for attribute in sorted(attributes):
            key = f"{container}.{attribute}"
            out[key] = decode(given[attribute], fresh[key], f"{where}.{attribute}")
    return out


def tables_equal(a: Table, b: Table) -> bool:
    """Exact equality of two tables (see :meth:`Table.identical`)."""
    return a.identical(b)


__all__ = [
    "CodecError",
    "decode_state",
    "decode_table_v0",
    "decode_table_v1",
    "encode_state",
    "encode_table",
    "tables_equal",
]
