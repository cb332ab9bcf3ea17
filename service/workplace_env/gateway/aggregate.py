"""CONTRACT H3: NeMo Gym 0.7.0's ``AggregateMetrics`` for an ``AggregateMetricsRequest``.

The rule below was established black box against the reference ``workplace_assistant``
resources server, guided by NeMo's protocol models and its aggregation module
(``nemo_gym.reward_profile``); tests/nemo/test_nemo_gym.py runs every body shape side by side, and
tests/gateway/test_aggregate_metrics.py pins the reference's answers.

What is measured (per scored verify response, i.e. ``mask_sample`` falsy):

* every top-level field whose name does not start with ``_`` and whose value is a number or a
  boolean (a boolean counts as 0/1), ``mask_sample`` excepted, plus every number or boolean in
  ``response.usage`` (``input_tokens``, ``output_tokens``, ``total_tokens``, ...; nested objects
  such as ``input_tokens_details`` are not); a usage count overrides a same-named top-level field;
* a field is a *column*; columns are ordered by first appearance over the responses sorted by
  ``(_ng_task_index, _ng_rollout_index)``; a column is *integer* when every scored response carries
  it as an integer or boolean, otherwise *float* (a response without it counts as missing).

Output (key order is part of the answer):

* ``group_level_metrics``: per task (sorted), the statistics ``mean``, ``max``, ``min``,
  ``median``, ``std`` (sample, ddof 1) of each column, stat-major; a statistic with no value is
  left out; ``max``/``min`` stay integers only while *every* column is integer; ``std`` of a
  single value is missing, except that when no column of the task has a ``std`` every column
  present in all its rows gets 0.0. Then ``sample``, the rollout counts, and ``rollout_infos``.
* ``agent_metrics``: the same statistics over all scored responses, then (two or more repeats)
  the ``*_across_repeats/mean/<column>`` summaries of the per-repeat means, then ``coverage/*``
  (when anything was masked), then ``num_repeats``; ``key_metrics``: its ``mean/*`` plus coverage.
* ``repeat_level_metrics`` (two or more repeats): per ``_ng_rollout_index``, columns sorted by
  name, ``mean median std sem min max p25 p75`` and the 95% t interval (two or more values).
* ``perf_summary``: the rollouts' ``ng_perf`` records summarised (None when there are none).

Input the reference cannot aggregate (it answers 500) is a 422 naming the field here: a
repeated ``(_ng_task_index, _ng_rollout_index)``, an index that is an object or an array, task
indices that mix numbers and strings or ``null`` and anything else, a ``null`` repeat index in
a task with other repeats, a ``response``/``usage`` that is not an object, a measured integer
outside int64 (an index may be any integer, as in the reference), a column whose values (per
task, or over all scored responses) cannot be cut into the reference's 64 equal-width histogram
bins (numpy's rule: values so large, or so close together, that the bin edges collapse, e.g. a
lone value beyond 2**46 or two adjacent floats), and ``ng_perf`` numbers whose sum overflows.

Values are taken as parsed, as the reference's ``Dict[str, Any]`` takes them (no coercion):
a boolean index is the number 0/1 spelled as sent, a repeat is labelled ``int()`` of its
index, ``NaN``/``Infinity`` parse and a ``NaN`` is a column without a value. The reference
also fails (422 here) on an infinite measured value, a non-finite ``ng_perf.num_turns``, an
``ng_perf`` sum of both infinities, and (among several repeats) a repeat index ``int()``
refuses; a ``NaN`` index is refused on purpose (the reference drops that rollout from its
task's group and orders the task labels by hash), and so are numbers and strings as repeat
indices (the reference fails on them in one task, and orders its per-repeat rows arbitrarily
across tasks). A ``null`` index is kept as it is (its ``rollout_id`` spells it ``None``): a
``null`` task forms no group in ``group_level_metrics`` and counts in no ``sample_count`` or
``missing_count``; a ``null`` repeat is no repeat in ``repeat_level_metrics`` (it still counts
in ``num_repeats``); both are measured in ``agent_metrics``.

Statistics that overflow on finite input (the mean of 1e308 and 1.5e308, a spread of +-1e307)
are infinite; the reference writes them ``null`` (as pydantic writes a non-finite float), and
so does :func:`workplace_env.gateway.translate.json_response`.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal, localcontext
from importlib import resources
from typing import Any

import numpy as np

from workplace_env.gateway.translate import Loc, invalid

TASK_INDEX = "_ng_task_index"
ROLLOUT_INDEX = "_ng_rollout_index"
MASK_SAMPLE = "mask_sample"
#: The only agent of a resources server's aggregation (NeMo's synthetic ``agent_ref``).
AGENT_NAME = "agent"
_INT64 = (-(2**63), 2**63 - 1)
#: The reference histograms every column (W&B's default bin count) and fails when it cannot.
_HISTOGRAM_BINS = 64

Number = int | float
Row = dict[str, Number]


# --- numbers -----------------------------------------------------------------------------------


def _mean(values: Sequence[Number]) -> float:
    return float(np.mean(np.asarray(values, dtype=float)))


def _median(values: Sequence[Number]) -> float:
    return float(np.median(np.asarray(values, dtype=float)))


def _sample_std(values: Sequence[Number]) -> float:
    """ddof-1 standard deviation; 0.0 for a single value (the per-repeat convention)."""
    if len(values) < 2:
        return 0.0
    return float(np.std(np.asarray(values, dtype=float), ddof=1))


def _quantile(values: Sequence[Number], q: float) -> float:
    """Linear-interpolation quantile (numpy's and pandas' default)."""
    return float(np.percentile(np.asarray(values, dtype=float), q * 100.0))


#: The reference's t quantiles, by degrees of freedom (1..len): see the file's header.
_T_TABLE = "t_quantiles_975.txt"
#: Decimal digits of the exact quantile beyond the table (correctly rounded to a double).
_T_DIGITS = 60


@functools.cache
def _t_table() -> tuple[float, ...]:
    text = resources.files(__package__).joinpath(_T_TABLE).read_text(encoding="ascii")
    return tuple(float(line) for line in text.splitlines() if not line.startswith("#"))


def _atan(x: Decimal) -> Decimal:
    """arctan of ``x`` to the context's precision (halving the angle, then Taylor's series)."""
    doublings = 0
    while abs(x) > Decimal("0.1"):
        x = x / (1 + (1 + x * x).sqrt())
        doublings += 1
    total, power, k, x2 = Decimal(0), x, 1, x * x
    eps = Decimal(10) ** -(_T_DIGITS + 2)
    while abs(term := power / k) >= eps:
        total += term if k % 4 == 1 else -term
        power *= x2
        k += 2
    return total * 2**doublings


def _t_central(t: Decimal, df: int, pi: Decimal) -> Decimal:
    """P(|T| < t) for Student's t with integer ``df`` (the finite series of Abramowitz and
    Stegun 26.7.3 and 26.7.4), to the context's precision."""
    c2 = Decimal(df) / (df + t * t)  # cos^2 of the angle atan(t / sqrt(df))
    sine = t / (df + t * t).sqrt()
    term = total = Decimal(1)
    if df % 2 == 0:
        for k in range(1, df // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        return sine * total
    for k in range(1, (df - 1) // 2):
        term *= c2 * (2 * k) / (2 * k + 1)
        total += term
    tail = sine * c2.sqrt() * total if df > 1 else Decimal(0)
    return 2 * (_atan(t / Decimal(df).sqrt()) + tail) / pi


@functools.cache
def _t_quantile_975(df: int) -> float:
    """Student's t 0.975 quantile for ``df`` >= 1 degrees of freedom: the reference's value
    (its table) up to the table's end, beyond it :func:`_t_quantile_exact`."""
    table = _t_table()
    return table[df - 1] if df <= len(table) else _t_quantile_exact(df)


def _t_quantile_exact(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom rounded to a double
    (the secant method on :func:`_t_central` in ``_T_DIGITS`` digits; O(df) per step)."""
    with localcontext() as ctx:
        ctx.prec = _T_DIGITS
        pi = 16 * _atan(Decimal(1) / 5) - 4 * _atan(Decimal(1) / 239)  # Machin
        target = 2 * Decimal.from_float(0.975) - 1  # the double, as the reference passes it
        a = Decimal("1.96") + Decimal("2.5") / df
        b = a * Decimal("1.001")
        fa, fb = _t_central(a, df, pi) - target, _t_central(b, df, pi) - target
        while fb != fa and abs(b - a) > Decimal(10) ** (10 - _T_DIGITS) * b:
            a, b, fa = b, b - fb * (b - a) / (fb - fa), fb
            fb = _t_central(b, df, pi) - target
        return float(b)


def _ci95(mean: float, se: float, n: int) -> tuple[float, float] | None:
    """The 95% t interval of a mean of ``n`` values; None under two values; a point when the
    standard error is 0."""
    if n < 2:
        return None
    if se == 0.0:
        return mean, mean
    half = _t_quantile_975(n - 1) * se
    return mean - half, mean + half


def _binnable(values: Sequence[Number], integer: bool) -> bool:
    """Whether numpy can cut ``values`` into 64 equal-width bins of positive width (a lone
    value spans +-0.5); ``integer``: the column is int64, else float64, as the reference holds
    it."""
    lo, hi = min(values), max(values)
    if max(-lo, hi) < 2**40 and (lo == hi or hi - lo >= 1 / 16):
        return True  # bins of >= 2**-10 where floats are spaced <= 2**-12: never collapse
    try:
        np.histogram(np.asarray(values, dtype=np.int64 if integer else float), _HISTOGRAM_BINS)
    except ValueError:  # "Too many bins for data range", or a range beyond the floats
        return False
    return True


# --- reading the verify responses --------------------------------------------------------------


def _index(row: dict[str, Any], key: str, where: Loc) -> Any:
    """``row[key]`` (0 when absent) as sent: a number (a boolean is the number 0/1, an
    infinity is a number), a string, or ``null`` (None), as the reference groups and sorts it.
    An object or array is refused (the reference cannot hash it); so is ``NaN``: the
    reference's table drops such a rollout from its task's group, and labels the tasks in an
    order that depends on hashing."""
    value = row.get(key, 0)
    if value is not None and not isinstance(value, int | float | str):
        raise invalid([((*where, key), "must be a number, a string or null")])
    if isinstance(value, float) and math.isnan(value):
        raise invalid([((*where, key), "must not be NaN")])
    return value


def _sortable(values: Iterable[Any], key: str) -> list[Any]:
    """``values`` sorted; numbers and strings do not mix, nor ``null`` with anything else
    (the reference cannot order them)."""
    values = list(values)
    if None in values and len(values) > 1:
        raise invalid([(("verify_responses", key), "mixes null and non-null values")])
    if len({isinstance(v, str) for v in values}) > 1:
        raise invalid([(("verify_responses", key), "mixes numbers and strings")])
    return sorted(values)


def _number(value: Any, where: Loc) -> Number | None:
    """A measurable value: a boolean as 0/1, an int64 integer, a float (NaN and the
    infinities included, as JSON bodies may carry them); else None."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise invalid([(where, "integer out of the 64-bit range")])
        return value
    if isinstance(value, float):
        return value
    return None


def _fits_float(value: int) -> bool:
    """Whether ``float(value)`` stands for the integer (else it raises OverflowError)."""
    try:
        float(value)
    except OverflowError:
        return False
    return True


def _is_nan(value: Number) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _usage(row: dict[str, Any], where: Loc) -> dict[str, Any]:
    """``row.response.usage`` as an object ({} when absent or empty)."""
    response = row.get("response") or {}
    if not isinstance(response, dict):
        raise invalid([((*where, "response"), "must be an object")])
    usage = response.get("usage") or {}
    if not isinstance(usage, dict):
        raise invalid([((*where, "response", "usage"), "must be an object")])
    return usage


def _measured(row: dict[str, Any], where: Loc) -> Row:
    """The measured fields of one scored response, in the reference's order. A NaN is kept:
    it makes a column (a float one) without a value. Raises 422 for an infinity (the
    reference cannot histogram it)."""
    fields = {k: v for k, v in row.items() if k != MASK_SAMPLE}
    usage = _usage(row, where)
    fields.update(usage)  # a usage count wins, keeping a same-named field's place
    out: Row = {}
    for key, value in fields.items():
        if key.startswith("_"):
            continue
        place = (*where, "response", "usage", key) if key in usage else (*where, key)
        number = _number(value, place)
        if number is None:
            continue
        if isinstance(number, float) and math.isinf(number):
            raise invalid([(place, "must be finite: the reference cannot histogram an infinity")])
        out[key] = number
    return out


def _rollout_info(task: Any, repeat: Any, row: dict[str, Any], where: Loc) -> dict[str, Any]:
    """One ``rollout_infos`` entry: ids, the raw ``reward``, then usage and top-level numbers
    (booleans as 0/1; NaN and infinities as they are, written ``null``); a top-level number
    overrides a usage count in place."""
    info: dict[str, Any] = {
        "rollout_id": f"{task}:{repeat}",
        TASK_INDEX: task,
        ROLLOUT_INDEX: repeat,
    }
    if "reward" in row:
        info["reward"] = row["reward"]
    for key, value in _usage(row, where).items():
        number = _number(value, (*where, "response", "usage", key))
        if number is not None:
            info[key] = number
    for key, value in row.items():
        if key.startswith("_") or key in ("reward", "response", MASK_SAMPLE):
            continue
        number = _number(value, (*where, key))
        if number is not None:
            info[key] = number
    return info


class _Rollout:
    """One scored verify response: its indices, measured fields and ``rollout_infos`` entry."""

    __slots__ = ("info", "position", "repeat", "row", "task", "values")

    def __init__(self, position: int, row: dict[str, Any]) -> None:
        self.position, self.row = position, row
        where: Loc = ("verify_responses", position)
        self.task = _index(row, TASK_INDEX, where)
        self.repeat = _index(row, ROLLOUT_INDEX, where)
        self.values = _measured(row, where)
        self.info = _rollout_info(self.task, self.repeat, row, where)

    def place(self, column: str) -> Loc:
        """Where this response carries ``column`` (its usage count wins, as in measuring)."""
        where: Loc = ("verify_responses", self.position)
        usage = _usage(self.row, where)
        return (*where, "response", "usage", column) if column in usage else (*where, column)


# --- statistics --------------------------------------------------------------------------------


class _Columns(list[str]):
    """The columns in first-appearance order; ``integer``: those present as an integer in every
    rollout (int64 in the reference's table); ``all_int``: every one is, which keeps
    ``max``/``min`` integers."""

    integer: frozenset[str]
    all_int: bool


def _columns(rollouts: Sequence[_Rollout]) -> _Columns:
    names: dict[str, None] = {}
    for r in rollouts:
        names.update(dict.fromkeys(r.values))
    columns = _Columns(names)
    columns.integer = frozenset(
        c for c in columns if all(isinstance(r.values.get(c), int) for r in rollouts)
    )
    columns.all_int = len(columns.integer) == len(columns)
    return columns


def _values(rollouts: Iterable[_Rollout], column: str) -> list[Number]:
    """The values of ``column`` over ``rollouts`` (NaN and absence alike are no value)."""
    return [r.values[column] for r in rollouts if not _is_nan(r.values.get(column, math.nan))]


def _describe(rollouts: Sequence[_Rollout], columns: _Columns) -> dict[str, Any]:
    """``mean/max/min/median/std`` of each column over ``rollouts``, stat-major. Raises 422
    naming a column the reference cannot histogram (:func:`_binnable`)."""
    present = {c: _values(rollouts, c) for c in columns}
    for c, values in present.items():
        if values and not _binnable(values, c in columns.integer):
            first = next(r for r in rollouts if not _is_nan(r.values.get(c, math.nan)))
            task = f" of {TASK_INDEX} {first.task}" if len({r.task for r in rollouts}) == 1 else ""
            raise invalid(
                [
                    (
                        first.place(c),
                        f"cannot be aggregated: its values{task} are too large or too close "
                        f"together for {_HISTOGRAM_BINS} equal histogram bins (the reference "
                        "fails on them)",
                    )
                ]
            )
    extreme: Callable[[Number], Number] = int if columns.all_int else float
    stds = {
        c: float(np.std(np.asarray(v, dtype=float), ddof=1))
        for c, v in present.items()
        if len(v) > 1
    }
    if not stds:  # no column has a spread: the complete ones report 0.0
        stds = {c: 0.0 for c, v in present.items() if v and len(v) == len(rollouts)}
    out: dict[str, Any] = {}
    for stat, compute in (
        ("mean", _mean),
        ("max", lambda v: extreme(max(v))),
        ("min", lambda v: extreme(min(v))),
        ("median", _median),
    ):
        for c in columns:
            if present[c]:
                out[f"{stat}/{c}"] = compute(present[c])
    for c in columns:
        if c in stds:
            out[f"std/{c}"] = stds[c]
    return out


def _group_level(rollouts: list[_Rollout], columns: _Columns) -> list[dict[str, Any]]:
    """Per-task statistics. A task is labelled with its index as the first scored response
    (in the request's order) spells it: ``true`` and ``1`` are one task, labelled by whichever
    comes first, as in the reference."""
    label: dict[Any, Any] = {}
    for r in sorted(rollouts, key=lambda r: r.position):
        label.setdefault(r.task, r.task)
    by_task: dict[Any, list[_Rollout]] = {}
    for r in rollouts:
        by_task.setdefault(r.task, []).append(r)
    groups = []
    for task in _sortable(by_task, TASK_INDEX):
        if task is None:  # the reference's table groups no null task (pandas drops it)
            continue
        members = by_task[task]
        groups.append(
            {
                TASK_INDEX: label[task],
                **_describe(members, columns),
                "sample": {"agent_ref": {"name": AGENT_NAME}},
                "num_rollouts": len(members),
                "expected_num_rollouts": len(members),
                "missing_num_rollouts": 0,
                "reward_profile_completion_pct": 100.0,
                "rollout_infos": [r.info for r in members],
            }
        )
    return groups


def _repeat_label(rollout: _Rollout) -> int:
    """A repeat's label in ``repeat_level_metrics``: Python's ``int()`` of its index (``true``
    is 1, ``1.5`` is 1, ``"3"`` is 3), as the reference labels it. Raises 422 for an index
    ``int()`` refuses (an infinity, a string not an integer), on which the reference fails."""
    try:
        return int(rollout.repeat)
    except (ValueError, OverflowError):
        raise invalid(
            [
                (
                    ("verify_responses", rollout.position, ROLLOUT_INDEX),
                    "must be an integer, or a number or string int() accepts, when there are "
                    "several repeats (the reference fails on it)",
                )
            ]
        ) from None


def _repeat_level(rollouts: list[_Rollout], columns: list[str]) -> list[dict[str, Any]]:
    """Per-repeat summaries; nothing when there is a single repeat. As in the reference's
    table, a ``null`` repeat index is no repeat, and a ``null`` task counts in no task count."""
    repeats = _sortable({r.repeat for r in rollouts} - {None}, ROLLOUT_INDEX)
    if len(repeats) < 2:
        return []
    task_count = len({r.task for r in rollouts} - {None})
    rows = []
    for repeat in repeats:
        members = [r for r in rollouts if r.repeat == repeat]
        present_tasks = len({r.task for r in members} - {None})
        entry: dict[str, Any] = {
            ROLLOUT_INDEX: _repeat_label(members[0]),
            "sample_count": present_tasks,
            "missing_count": task_count - present_tasks,
        }
        for c in sorted(columns):
            values = _values(members, c)
            if not values:
                continue
            mean = _mean(values)
            std = _sample_std(values)
            sem = std / math.sqrt(len(values))
            entry.update(
                {
                    f"mean/{c}": mean,
                    f"median/{c}": _median(values),
                    f"std/{c}": std,
                    f"sem/{c}": sem,
                    f"min/{c}": float(min(values)),
                    f"max/{c}": float(max(values)),
                    f"p25/{c}": _quantile(values, 0.25),
                    f"p75/{c}": _quantile(values, 0.75),
                }
            )
            interval = _ci95(mean, sem, len(values))
            if interval is not None:
                entry[f"ci_low_95/{c}"], entry[f"ci_high_95/{c}"] = interval
        rows.append(entry)
    return rows


#: Endings of metric names NeMo does not summarise across repeats (bounds, quantiles, spreads).
_NOT_ACROSS_REPEATS = (
    "/max",
    "/min",
    "/median",
    "/p5",
    "/p25",
    "/p75",
    "/p95",
    "/ci_low_95",
    "/ci_high_95",
    "/ci_lower",
    "/ci_upper",
    "_ci_lower",
    "_ci_upper",
    "_ci95_lower",
    "_ci95_upper",
    "/_ng_attempt_index",
    "/std_dev_across_runs",
    "/std_err_across_runs",
    "/avg_sample_std_dev",
)


def _across_repeats(repeat_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``<stat>_across_repeats/mean/<column>``: each repeat's mean taken as one observation."""
    names: dict[str, None] = {}
    for entry in repeat_rows:
        names.update(
            (k, None)
            for k in entry
            if k.startswith("mean/")
            and not k.endswith(_NOT_ACROSS_REPEATS)
            and "_across_repeats/" not in k
        )
    out: dict[str, Any] = {}
    for name in names:
        values = [entry[name] for entry in repeat_rows if name in entry]
        mean = _mean(values)
        std = _sample_std(values)
        se = std / math.sqrt(len(values))
        out[f"mean_across_repeats/{name}"] = mean
        out[f"median_across_repeats/{name}"] = _median(values)
        out[f"std_across_repeats/{name}"] = std
        out[f"min_across_repeats/{name}"] = float(min(values))
        out[f"max_across_repeats/{name}"] = float(max(values))
        out[f"se_across_repeats/{name}"] = se
        interval = _ci95(mean, se, len(values))
        if interval is not None:
            out[f"ci_low_95_across_repeats/{name}"] = interval[0]
            out[f"ci_high_95_across_repeats/{name}"] = interval[1]
    return out


# --- ng_perf -----------------------------------------------------------------------------------

_PERF_TOKEN_FIELDS = (
    "prompt_tokens",
    "cached_prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
)


class PerfRefused(ValueError):
    """``ng_perf`` values the reference's summary fails on: ``field``, why, and the record at
    fault (None: the first record carrying the field as a number)."""

    def __init__(self, field: str, why: str, record: int | None = None) -> None:
        super().__init__(field, why)
        self.field, self.why, self.record = field, why, record


def perf_summary(records: list[dict[str, Any]], total: int) -> dict[str, Any] | None:
    """NeMo's ``perf_summary`` of the rollouts' ``ng_perf`` records (``total`` rollouts in all,
    masked ones included); None without records. A field's statistics appear only when some
    record carries it as a number (booleans count, NaN and infinities too, as in the
    reference: a mean or total they make non-finite is written ``null``; quantiles skip NaN).
    Raises :class:`PerfRefused` naming the field the reference fails on: a sum that overflows
    or adds both infinities, an integer beyond the float range, or a ``num_turns`` that is not
    finite (its spread)."""
    if total <= 0 or not records:
        return None

    def fmean(field: str, vals: list[Any]) -> float:
        try:
            return statistics.fmean(vals)
        except OverflowError:
            raise PerfRefused(field, "its values' sum overflows") from None
        except ValueError:  # -inf + inf
            raise PerfRefused(field, "its values add both infinities") from None

    def values(key: str) -> list[Any]:
        found = [r[key] for r in records if isinstance(r.get(key), int | float)]
        for i, r in enumerate(records):  # every statistic of them is a float
            if isinstance(r.get(key), int) and not _fits_float(r[key]):
                raise PerfRefused(key, "an integer beyond the float range", i)
        return found

    def quantile(vals: list[Any], percent: int) -> float:
        return float(np.nanpercentile(np.asarray(vals, dtype=float), percent))

    summary: dict[str, Any] = {
        "overall_observability_coverage": len(records) / total,
        "token_observability_coverage": sum(
            1
            for r in records
            if isinstance(r.get("token_observability_coverage"), int | float)
            and r["token_observability_coverage"] > 0
        )
        / total,
    }
    for field in _PERF_TOKEN_FIELDS:
        vals = values(field)
        if vals:
            summary[f"mean_{field}"] = fmean(field, vals)
            summary[f"median_{field}"] = statistics.median(vals)
            summary[f"total_{field}"] = sum(vals)
    turns = values("num_turns")
    for i, r in enumerate(records):
        if isinstance(r.get("num_turns"), float) and not math.isfinite(r["num_turns"]):
            raise PerfRefused("num_turns", "must be finite (the spread of it fails)", i)
    if turns:
        summary["mean_num_turns"] = fmean("num_turns", turns)
        summary["median_num_turns"] = statistics.median(turns)
        summary["std_num_turns"] = statistics.pstdev(turns)
        summary["min_num_turns"] = min(turns)
        summary["p90_num_turns"] = quantile(turns, 90)
        summary["max_num_turns"] = max(turns)
    per_turn = [
        r["completion_tokens"] / r["num_turns"]
        for r in records
        if isinstance(r.get("completion_tokens"), int | float)
        and isinstance(r.get("num_turns"), int | float)
        and r["num_turns"] > 0
    ]
    if per_turn:
        summary["mean_tokens_per_turn"] = fmean("completion_tokens", per_turn)
        summary["median_tokens_per_turn"] = statistics.median(per_turn)
    latency = values("total_latency_ms")
    if latency:
        for percent in (50, 90, 99):
            summary[f"total_latency_p{percent}_ms"] = quantile(latency, percent)
        summary["total_latency_mean_ms"] = fmean("total_latency_ms", latency)
    return summary


# --- the answer --------------------------------------------------------------------------------


def _coverage(verify_responses: list[dict[str, Any]], scored: list[int]) -> dict[str, Any]:
    """``coverage/*`` when some response is masked, else {}."""
    masked = len(verify_responses) - len(scored)
    if not masked:
        return {}
    all_tasks = {r.get(TASK_INDEX, 0) for r in verify_responses}
    measured_tasks = {verify_responses[i].get(TASK_INDEX, 0) for i in scored}
    return {
        "coverage/measured_rollouts": len(scored),
        "coverage/masked_rollouts": masked,
        "coverage/measured_tasks": len(measured_tasks),
        "coverage/fully_masked_tasks": len(all_tasks - measured_tasks),
    }


def _scored_rollouts(verify_responses: list[dict[str, Any]], scored: list[int]) -> list[_Rollout]:
    """The scored responses, sorted by (task, repeat); each pair must be unique, and not one a
    masked response also names."""
    measured = set(scored)
    where = {
        (
            _index(r, TASK_INDEX, ("verify_responses", i)),
            _index(r, ROLLOUT_INDEX, ("verify_responses", i)),
        ): i
        for i, r in enumerate(verify_responses)
        if i not in measured
    }
    rollouts: list[_Rollout] = []
    for i in scored:
        rollout = _Rollout(i, verify_responses[i])
        key = (rollout.task, rollout.repeat)
        if key in where:
            raise invalid(
                [
                    (
                        ("verify_responses", i),
                        f"repeats ({TASK_INDEX}, {ROLLOUT_INDEX}) of item {where[key]}",
                    )
                ]
            )
        where[key] = i
        rollouts.append(rollout)
    _sortable({r.task for r in rollouts}, TASK_INDEX)
    _sortable({r.repeat for r in rollouts} - {None}, ROLLOUT_INDEX)
    repeats: dict[Any, list[_Rollout]] = {}
    for r in rollouts:
        repeats.setdefault(r.task, []).append(r)
    for members in repeats.values():  # a null repeat is ordered against its task's others
        if len(members) > 1 and any(r.repeat is None for r in members):
            first = next(r for r in members if r.repeat is None)
            raise invalid(
                [
                    (
                        ("verify_responses", first.position, ROLLOUT_INDEX),
                        "is null while its task has other repeats (the reference cannot "
                        "order them)",
                    )
                ]
            )
    return sorted(rollouts, key=lambda r: (r.task, r.repeat))


def aggregate_metrics(verify_responses: list[dict[str, Any]]) -> dict[str, Any]:
    """H3: NeMo Gym's ``AggregateMetrics`` (as a JSON object, its field order) for an
    ``AggregateMetricsRequest``'s ``verify_responses`` (see the module docstring for the rule).
    A statistic that overflows is an infinity (NaN for inf - inf), which the gateway writes
    ``null``. Raises 422 (:func:`workplace_env.gateway.translate.invalid`) for input the
    reference cannot aggregate."""
    with np.errstate(all="ignore"):  # overflow is an answer here (null), not a warning
        return _aggregate(verify_responses)


def _aggregate(verify_responses: list[dict[str, Any]]) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "group_level_metrics": [],
        "agent_metrics": {},
        "key_metrics": {},
        "perf_summary": None,
        "repeat_level_metrics": [],
    }
    if not verify_responses:
        return answer
    perf = [
        (i, r["ng_perf"])
        for i, r in enumerate(verify_responses)
        if isinstance(r.get("ng_perf"), dict)
    ]
    try:
        answer["perf_summary"] = perf_summary([p for _, p in perf], len(verify_responses))
    except PerfRefused as exc:
        first = (
            perf[exc.record][0]
            if exc.record is not None
            else next(i for i, p in perf if isinstance(p.get(exc.field), int | float))
        )
        raise invalid(
            [
                (
                    ("verify_responses", first, "ng_perf", exc.field),
                    f"{exc.why} (the reference fails on them)",
                )
            ]
        ) from None
    scored = [i for i, r in enumerate(verify_responses) if not r.get(MASK_SAMPLE)]
    for i, r in enumerate(verify_responses):  # every index is hashable and orderable
        _index(r, TASK_INDEX, ("verify_responses", i))
        _index(r, ROLLOUT_INDEX, ("verify_responses", i))
    coverage = _coverage(verify_responses, scored)
    if not scored:
        answer["agent_metrics"] = dict(coverage)
        answer["key_metrics"] = dict(coverage)
        return answer
    rollouts = _scored_rollouts(verify_responses, scored)
    columns = _columns(rollouts)
    groups = _group_level(rollouts, columns)
    repeat_rows = _repeat_level(rollouts, columns)
    agent = _describe(rollouts, columns)
    agent.update(_across_repeats(repeat_rows))
    agent.update(coverage)
    agent["num_repeats"] = len({r.get(ROLLOUT_INDEX, 0) for r in verify_responses})
    key_metrics = {k: v for k, v in agent.items() if k.startswith("mean/")}
    key_metrics.update(coverage)
    answer.update(
        group_level_metrics=groups,
        agent_metrics=agent,
        key_metrics=key_metrics,
        repeat_level_metrics=repeat_rows,
    )
    return answer
