"""Analytics tools (REFERENCE.md f.13-f.18): ``analytics._analytics_data`` and ``_plots_data``.

The visit table is object dtype except the boolean ``user_engaged``. Date bounds are compared
as **strings** against ``date_of_visit`` (``"2023-11"`` works as a prefix bound, ``"bad"``
excludes everything, an int raises ``'>=' not supported between instances of 'str' and 'int'``,
a list raises pandas' ``('Lengths must match to compare', (n,), (1,))`` where ``n`` is the
length of the data being filtered). The per-date results are ``groupby("date_of_visit")``
aggregates, as ``{date: value}``.

Each tool has a pandas implementation (exact for every input, its errors included) and a fast
path over the session's plain-list tables for str bounds on str dates, which returns
``FALLBACK`` (before changing anything) for everything else.

Quirk kept on purpose (REFERENCE.md c.7): ``analytics_get_average_session_duration`` with no
(truthy) bound converts the session's ``session_duration_seconds`` column to float in place;
later visitor lookups then show ``4.0`` instead of ``"4"``. With a bound it works on a filtered
copy and changes nothing.
"""

from __future__ import annotations

import contextlib
import operator
from collections import Counter
from collections.abc import Callable
from itertools import compress
from typing import Any

import numpy as np
import pandas as pd

from workplace_env.sandbox.tables import ANALYTICS, PLOTS
from workplace_env.sandbox.tools.common import only_str
from workplace_env.sandbox.tools.registry import FALLBACK, Toolkit, listing, string

_KIT = Toolkit("analytics")

_DATE = "date_of_visit"

_PLOT_VALUES = (
    "total_visits",
    "session_duration_seconds",
    "user_engaged",
    "visits_direct",
    "visits_referral",
    "visits_search_engine",
    "visits_social_media",
)
_PLOT_TYPES = ("bar", "line", "scatter", "histogram")

_TIME_MIN = string("Start date of the time range. Date format is YYYY-MM-DD")
_TIME_MAX = string("End date of the time range. Date format is YYYY-MM-DD")
_RANGE = {"time_min": _TIME_MIN, "time_max": _TIME_MAX}


# -- the tools' advertised parameters (their schema's properties), by method -----------------------

_GET_VISITOR_INFORMATION_BY_ID = {"visitor_id": string("ID of the visitor")}
_CREATE_PLOT = {
    "time_min": _TIME_MIN,
    "time_max": _TIME_MAX,
    "value_to_plot": string(listing("Value to plot. Available values are: ", _PLOT_VALUES)),
    "plot_type": string("Type of plot. Can be 'bar', 'line', 'scatter' or 'histogram'"),
}
_TRAFFIC_SOURCE_COUNT = {
    "time_min": _TIME_MIN,
    "time_max": _TIME_MAX,
    "traffic_source": string(
        "Traffic source to filter the visits. Available values are: "
        "'direct', 'referral', 'search engine', 'social media'"
    ),
}


def _compare(column: pd.Series, op: Callable[[Any, Any], Any], other: Any) -> np.ndarray:
    """``op(column, other)`` as a bool array: pandas' result and pandas' errors.

    A str operand is compared by numpy on the object array first (the same per-cell Python
    comparisons, without pandas' overhead); when that cannot answer (a missing cell, an
    unusual operand) pandas does it, and its errors (``'>=' not supported between instances
    of 'str' and 'int'``, ``('Lengths must match to compare', (n,), (1,))``) are the output.
    """
    if type(other) is str:
        values = column.to_numpy()
        if values.dtype == object:
            # On failure, pandas below gives the exact answer or error.
            with contextlib.suppress(Exception):
                return np.asarray(op(values, other), dtype=bool)
    return np.asarray(op(column, other), dtype=bool)


def _in_range(frame: pd.DataFrame, time_min: Any, time_max: Any) -> np.ndarray | None:
    """Positions of the rows within the bounds, or None for "all rows" (no truthy bound).

    The lower bound is compared on the whole column and the upper bound on the rows that are
    left, as the reference filters in two steps (so a length error names the filtered length).
    """
    if not time_min and not time_max:
        return None
    dates = frame[_DATE]
    positions = np.arange(len(dates))
    if time_min:
        positions = positions[_compare(dates, operator.ge, time_min)]
        dates = dates.iloc[positions]
    if time_max:
        positions = positions[_compare(dates, operator.le, time_max)]
    return positions


def _column(frame: pd.DataFrame, name: str, positions: np.ndarray | None) -> pd.Series:
    """Column ``name`` restricted to ``positions`` (all rows when None)."""
    column = frame[name]
    return column if positions is None else column.iloc[positions]


def _plot_problem(time_min: Any, time_max: Any, value_to_plot: Any, plot_type: Any) -> str | None:
    """create_plot's argument messages, in the reference's order (pure Python checks)."""
    if not time_min:
        return "Start date not provided."
    if not time_max:
        return "End date not provided."
    if value_to_plot not in _PLOT_VALUES:
        return listing("Value to plot must be one of ", _PLOT_VALUES)
    if plot_type not in _PLOT_TYPES:
        return "Plot type must be one of 'bar', 'line', 'scatter', or 'histogram'"
    return None


# -- fast-path helpers over the session's plain-list tables ------------------------------------


def _in_range_flags(table: Any, time_min: Any, time_max: Any) -> Any:
    """Per row, whether its date is within str bounds (None: no truthy bound), or FALLBACK.

    On str cells, ``date >= time_min`` is the same comparison pandas makes cell by cell.
    """
    if (time_min and type(time_min) is not str) or (time_max and type(time_max) is not str):
        return FALLBACK
    dates = table.data[_DATE]
    if table.dtype(_DATE) != "object" or not only_str(dates):
        return FALLBACK
    if time_min and time_max:
        return [d >= time_min and d <= time_max for d in dates]
    if time_min:
        return [d >= time_min for d in dates]
    if time_max:
        return [d <= time_max for d in dates]
    return None


def _selected(values: list[Any], keep: list[bool] | None) -> Any:
    """The values of the rows in range (all of them when ``keep`` is None)."""
    return values if keep is None else compress(values, keep)


def _visits_per_date(dates: list[str], keep: list[bool] | None) -> dict[str, int]:
    """``groupby(date).size()`` of the rows in range, in sorted date order."""
    visits = Counter(_selected(dates, keep))
    return {d: visits[d] for d in sorted(visits)}


def _hits_per_date(dates: list[str], keep: list[bool] | None, hits: list[bool]) -> dict[str, int]:
    """``groupby(date).sum()`` of a 0/1 column: every date in range, 0 when it has no hit."""
    in_range = Counter(_selected(dates, keep))
    hit = hits if keep is None else list(map(operator.and_, keep, hits))
    counted = Counter(compress(dates, hit))
    return {d: counted[d] for d in sorted(in_range)}


def _durations(table: Any, keep: list[bool] | None) -> list[float] | None:
    """The in-range ``session_duration_seconds`` as floats when all are whole numbers, or None.

    Digit strings convert as ``astype(float)`` does; whole numbers keep every per-date sum
    exact, so sum / count equals pandas' compensated mean bit for bit.
    """
    cells = list(_selected(table.data["session_duration_seconds"], keep))
    dtype = table.dtype("session_duration_seconds")
    if dtype == "object":
        digits = (
            only_str(cells)
            and all(map(str.isdigit, cells))
            and all(map(str.isascii, cells))
            and max(map(len, cells), default=0) < 15
        )
        return list(map(float, cells)) if digits else None
    whole = (
        dtype == "float64"
        and set(map(type, cells)) <= {float}
        and all(map(float.is_integer, cells))
        and max(map(abs, cells), default=0.0) < 2.0**40
    )
    return cells if whole else None


def _mean_per_date(dates: list[str], durations: list[float]) -> dict[str, float]:
    """``groupby(date).mean()`` of whole-number durations: exact sums divided by counts."""
    counts = Counter(dates)
    keys = sorted(counts)
    code = {d: k for k, d in enumerate(keys)}
    sums = np.bincount(
        np.fromiter(map(code.__getitem__, dates), dtype=np.intp, count=len(dates)),
        weights=np.asarray(durations, dtype=np.float64),
        minlength=len(keys),
    ).tolist()
    return {d: sums[k] / counts[d] for k, d in enumerate(keys)}


class _Dates:
    """``groupby("date_of_visit")`` of the selected rows, done with factorize + bincount.

    Keys are the sorted distinct dates present (missing dates are dropped, as groupby does).
    """

    def __init__(self, dates: pd.Series) -> None:
        self.dates = dates.to_numpy()
        codes, uniques = pd.factorize(self.dates, sort=True)
        self.present = codes >= 0
        self.codes = codes[self.present]
        self.keys = uniques.tolist()

    def _bincount(self, weights: np.ndarray | None = None) -> np.ndarray:
        if weights is not None:
            weights = weights[self.present]
        return np.bincount(self.codes, weights=weights, minlength=len(self.keys))

    def size(self) -> dict[Any, int]:
        """``groupby(...).size()``: visits per date."""
        return dict(zip(self.keys, self._bincount().tolist(), strict=True))

    def count_true(self, flags: pd.Series) -> dict[Any, int]:
        """``groupby(...).sum()`` of a 0/1 int column: an int per date (0 when none)."""
        sums = self._bincount(flags.to_numpy(dtype=np.float64)).astype(np.int64)
        return dict(zip(self.keys, sums.tolist(), strict=True))

    def mean(self, values: pd.Series) -> dict[Any, float]:
        """``groupby(...).mean()`` of a float column.

        With integer-valued data every partial sum is exact, so sum / count equals pandas'
        compensated mean bit for bit; anything else (fractions, NaN) goes through pandas.
        """
        floats = values.to_numpy(dtype=np.float64)
        if len(floats) and not (
            np.array_equal(floats, np.rint(floats)) and np.abs(floats).sum() < 2.0**52
        ):
            return values.groupby(self.dates, sort=True).mean().to_dict()
        sums = self._bincount(floats)
        counts = self._bincount()
        return dict(zip(self.keys, (sums / counts).tolist(), strict=True))


@_KIT.tool("Returns the analytics data for a given visitor ID.", _GET_VISITOR_INFORMATION_BY_ID)
def get_visitor_information_by_id(tables, visitor_id=None):
    """Every visit row of the visitor as a list of dicts (REFERENCE.md f.13).

    Strings: "Visitor ID not provided." (falsy id), "Visitor not found." (no row equals the id;
    an int id never equals the str ids).
    """
    if not visitor_id:
        return "Visitor ID not provided."
    frame = tables[ANALYTICS]
    positions = np.flatnonzero(_compare(frame["visitor_id"], operator.eq, visitor_id))
    if len(positions) == 0:
        return "Visitor not found."
    # to_dict(orient="records") of those rows, built directly: tolist() gives the same native
    # values (str cells as stored, bool for user_engaged, float after the in-place conversion).
    columns = list(frame.columns)
    cells = [frame[c].to_numpy()[positions].tolist() for c in columns]
    return [dict(zip(columns, row, strict=True)) for row in zip(*cells, strict=True)]


@_KIT.fast_path("get_visitor_information_by_id")
def _get_visitor_information_by_id_fast(tables, visitor_id=None):
    if not visitor_id:
        return "Visitor ID not provided."
    if type(visitor_id) is not str:
        return FALLBACK
    table = tables.table(ANALYTICS)
    rows = table.positions("visitor_id", visitor_id)
    if not rows:
        return "Visitor not found."
    return table.records(rows)


@_KIT.tool(
    "Plots the analytics data for a given time range and value.", _CREATE_PLOT, writes=(PLOTS,)
)
def create_plot(tables, time_min=None, time_max=None, value_to_plot=None, plot_type=None):
    """``"plots/<time_min>_<time_max>_<value>_<type>.png"``, appended to the plots table.

    Strings: "Start date not provided.", "End date not provided.", "Value to plot must be one
    of ...", "Plot type must be one of ..." (exact-case values; REFERENCE.md f.14). The dates
    are not validated, only formatted into the path.
    """
    problem = _plot_problem(time_min, time_max, value_to_plot, plot_type)
    if problem is not None:
        return problem
    file_path = f"plots/{time_min}_{time_max}_{value_to_plot}_{plot_type}.png"
    plots = tables[PLOTS]
    # Enlargement at label len(plots), as the reference appends (the index becomes Int64).
    plots.loc[len(plots)] = [file_path]
    return file_path


@_KIT.fast_path("create_plot")
def _create_plot_fast(tables, time_min=None, time_max=None, value_to_plot=None, plot_type=None):
    problem = _plot_problem(time_min, time_max, value_to_plot, plot_type)
    if problem is not None:
        return problem
    table = tables.table(PLOTS)
    label = len(table)
    # The two shapes whose enlargement result is known: the fresh empty table (RangeIndex(0))
    # becomes Int64 [0]; an Int64 index without the label gains it at the end.
    if table.dtypes != ("object",) or label in table.index:
        return FALLBACK
    if table.range_index is not None and table.range_index != (0, 0, 1):
        return FALLBACK
    file_path = f"plots/{time_min}_{time_max}_{value_to_plot}_{plot_type}.png"
    tables.writable(PLOTS).append_row((file_path,), label=label)
    return file_path


def _visit_counts(tables: Any, time_min: Any, time_max: Any, source: Any) -> dict[Any, int]:
    """``{date: visits}`` for the dates within the string bounds (pandas): every visit, or those
    from a truthy ``source`` (every date in range appears, 0 when no visit matches: exact,
    case-sensitive equality, so ``"Direct"`` or ``5`` give all zeros)."""
    frame = tables[ANALYTICS]
    positions = _in_range(frame, time_min, time_max)
    dates = _column(frame, _DATE, positions)
    if not source:
        return _Dates(dates).size()
    sources = _column(frame, "traffic_source", positions)
    return _Dates(dates).count_true(pd.Series(_compare(sources, operator.eq, source)))


def _visit_counts_fast(tables: Any, time_min: Any, time_max: Any, source: Any) -> Any:
    """:func:`_visit_counts` for str bounds on str dates and a str (or falsy) source in an
    object column; FALLBACK otherwise."""
    if source and type(source) is not str:
        return FALLBACK
    table = tables.table(ANALYTICS)
    keep = _in_range_flags(table, time_min, time_max)
    if keep is FALLBACK or (source and table.dtype("traffic_source") != "object"):
        return FALLBACK
    dates = table.data[_DATE]
    if not source:
        return _visits_per_date(dates, keep)
    hits = [v == source for v in table.data["traffic_source"]]
    return _hits_per_date(dates, keep, hits)


@_KIT.tool("Returns the total number of visits within a specified time range.", _RANGE, required=())
def total_visits_count(tables, time_min=None, time_max=None):
    """``{date: number of visits}`` for the dates within the string bounds (REFERENCE.md f.15)."""
    return _visit_counts(tables, time_min, time_max, None)


@_KIT.fast_path("total_visits_count")
def _total_visits_count_fast(tables, time_min=None, time_max=None):
    return _visit_counts_fast(tables, time_min, time_max, None)


@_KIT.tool(
    "Returns the number of engaged users within a specified time range.", _RANGE, required=()
)
def engaged_users_count(tables, time_min=None, time_max=None):
    """``{date: number of engaged visits}`` (0 for dates without one; REFERENCE.md f.16)."""
    frame = tables[ANALYTICS]
    positions = _in_range(frame, time_min, time_max)
    engaged = _column(frame, "user_engaged", positions).astype(bool).astype(int)
    return _Dates(_column(frame, _DATE, positions)).count_true(engaged)


@_KIT.fast_path("engaged_users_count")
def _engaged_users_count_fast(tables, time_min=None, time_max=None):
    table = tables.table(ANALYTICS)
    keep = _in_range_flags(table, time_min, time_max)
    if keep is FALLBACK or table.dtype("user_engaged") != "bool":
        return FALLBACK
    return _hits_per_date(table.data[_DATE], keep, table.data["user_engaged"])


@_KIT.tool(
    "Returns the number of visits from a specific traffic source within a specified time range.",
    _TRAFFIC_SOURCE_COUNT,
    required=(),
)
def traffic_source_count(tables, time_min=None, time_max=None, traffic_source=None):
    """``{date: visits from the source}``, all visits for a falsy source (REFERENCE.md f.17):
    :func:`_visit_counts`."""
    return _visit_counts(tables, time_min, time_max, traffic_source)


@_KIT.fast_path("traffic_source_count")
def _traffic_source_count_fast(tables, time_min=None, time_max=None, traffic_source=None):
    return _visit_counts_fast(tables, time_min, time_max, traffic_source)


@_KIT.tool(
    "Returns the average session duration within a specified time range.",
    _RANGE,
    writes=(ANALYTICS,),
    required=(),
)
def get_average_session_duration(tables, time_min=None, time_max=None):
    """``{date: mean session seconds}`` as floats, e.g. ``20.0`` (REFERENCE.md f.18, c.7).

    Without a truthy bound the table's ``session_duration_seconds`` becomes float64 in place.
    """
    frame = tables[ANALYTICS]
    positions = _in_range(frame, time_min, time_max)
    if positions is None:
        # The reference converts the column of the table itself when it did not filter.
        frame["session_duration_seconds"] = frame["session_duration_seconds"].astype(float)
        durations = frame["session_duration_seconds"]
    else:
        durations = frame["session_duration_seconds"].iloc[positions].astype(float)
    return _Dates(_column(frame, _DATE, positions)).mean(durations)


@_KIT.fast_path("get_average_session_duration")
def _get_average_session_duration_fast(tables, time_min=None, time_max=None):
    table = tables.table(ANALYTICS)
    keep = _in_range_flags(table, time_min, time_max)
    if keep is FALLBACK:
        return FALLBACK
    durations = _durations(table, keep)
    if durations is None:
        return FALLBACK
    if keep is None and table.dtype("session_duration_seconds") != "float64":
        # No bound: the reference converted the table's own column (module docstring).
        table = tables.writable(ANALYTICS)
        position = table.columns.index("session_duration_seconds")
        table.data["session_duration_seconds"] = durations
        table.dtypes = (*table.dtypes[:position], "float64", *table.dtypes[position + 1 :])
        table.text_only = False
    return _mean_per_date(list(_selected(table.data[_DATE], keep)), durations)
