"""CONTRACT H3 without the NeMo venv: :func:`aggregate_metrics` answers every body of
tests/aggregate_cases.py as NeMo Gym 0.7.0's reference ``workplace_assistant`` server answered it
(keys, key order, integer vs float, values to 1e-12), and refuses with a 422 naming the field
what the reference fails on. tests/nemo/test_nemo_gym.py checks the same bodies against the live
reference."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.aggregate_cases import (
    CASES,
    NOT_AGGREGATED,
    REFUSED,
    reference_answers,
    same_metrics,
    usage,
    vr,
)
from workplace_env.gateway.aggregate import (
    _t_quantile_975,
    _t_quantile_exact,
    _t_table,
    aggregate_metrics,
)
from workplace_env.gateway.translate import HttpProblem, json_response

ANSWERS = reference_answers()


def test_every_case_has_a_recorded_reference_answer():
    assert list(ANSWERS) == list(CASES)


def on_the_wire(answer: dict) -> dict:
    """The answer as the gateway sends it (an overflowed statistic is ``null``)."""
    return json.loads(bytes(json_response(answer).body))


@pytest.mark.parametrize("name", list(CASES))
def test_equals_the_recorded_reference_answer(name):
    assert same_metrics(on_the_wire(aggregate_metrics(CASES[name])), ANSWERS[name]) == []


def test_statistics_that_overflow_are_null_on_the_wire_as_in_the_reference():
    """The mean of 1e308 and 1.5e308 is infinite; the reference answers 200 with ``null``
    there (before, our encoder refused the infinity: a 500)."""
    out = on_the_wire(aggregate_metrics(CASES["statistics_overflowing_to_null"]))
    agent = out["agent_metrics"]
    assert agent["mean/reward"] is None and agent["std/reward"] is None
    assert (agent["min/reward"], agent["max/reward"]) == (1e308, 1.5e308)
    assert out["key_metrics"] == {"mean/reward": None}


def test_every_json_answer_writes_non_finite_floats_as_null():
    """Any JSON answer of the gateway, not only aggregates: nested, in lists, both encoders."""
    nan, inf = float("nan"), float("inf")
    body = {"a": [1.5, inf, {"b": -inf}], "c": nan, "d": "Infinity", "e": 10**30}
    assert json.loads(bytes(json_response(body).body)) == {
        "a": [1.5, None, {"b": None}],
        "c": None,
        "d": "Infinity",
        "e": 10**30,
    }


@pytest.mark.parametrize("name", [*REFUSED, *NOT_AGGREGATED])
def test_what_the_reference_fails_on_is_a_422_naming_the_field(name):
    rows, loc = {**REFUSED, **NOT_AGGREGATED}[name]
    with pytest.raises(HttpProblem) as refused:
        aggregate_metrics(rows)
    assert refused.value.response.status_code == 422
    [problem] = json.loads(bytes(refused.value.response.body))["detail"]
    assert problem["loc"] == loc


def test_usage_counts_are_aggregated_and_headline():
    """Every real model's response carries ``usage``: its counts are columns (nested details
    are not), after the top-level fields, and their means are key metrics."""
    out = aggregate_metrics(
        [vr(0, 0, 1.0, response=usage(3, 5)), vr(1, 0, 0.0, response=usage(4, 6))]
    )
    assert out["key_metrics"] == {
        "mean/reward": 0.5,
        "mean/input_tokens": 3.5,
        "mean/output_tokens": 5.5,
        "mean/total_tokens": 9.0,
    }
    assert out["group_level_metrics"][0]["rollout_infos"][0] == {
        "rollout_id": "0:0",
        "_ng_task_index": 0,
        "_ng_rollout_index": 0,
        "reward": 1.0,
        "input_tokens": 3,
        "output_tokens": 5,
        "total_tokens": 8,
    }


def test_booleans_are_columns_of_0_and_1():
    out = aggregate_metrics([vr(0, 0, 1.0, flag=True), vr(1, 0, 0.0, flag=False)])
    assert out["agent_metrics"]["mean/flag"] == 0.5
    assert out["group_level_metrics"][0]["rollout_infos"][0]["flag"] == 1


def test_integer_extremes_stay_integers_while_every_column_is_integer():
    only_ints = aggregate_metrics([vr(0, 0, 1), vr(1, 0, 0)])["agent_metrics"]
    assert (only_ints["max/reward"], only_ints["min/reward"]) == (1, 0)
    assert type(only_ints["max/reward"]) is int and type(only_ints["mean/reward"]) is float
    with_a_float = aggregate_metrics([vr(0, 0, 1, x=0.5), vr(1, 0, 0, x=1.5)])["agent_metrics"]
    assert type(with_a_float["max/reward"]) is float


def test_a_field_missing_in_some_rows():
    """Missing and null are alike; a column with one value among several rows has no ``std``,
    while a task where no column has a spread reports 0.0 for its complete columns."""
    out = aggregate_metrics([vr(0, 0, 1.0, x=None), vr(0, 1, 0.0, x=2.5), vr(1, 0, 1.0)])
    first, second = out["group_level_metrics"]
    assert "mean/x" in first and "std/x" not in first and "std/reward" in first
    assert "mean/x" not in second and second["std/reward"] == 0.0
    assert list(out["agent_metrics"])[:4] == ["mean/reward", "mean/x", "max/reward", "max/x"]


def test_a_boolean_index_is_a_number_spelled_as_sent():
    """``_ng_task_index: true`` was a 422; the reference groups it with 1 and labels the
    task as its first scored response spells it, and labels repeats int() of their index."""
    out = aggregate_metrics([vr(True, 0, 1.0), vr(1, 1, 0.0), vr(0, True, 0.5)])
    assert [g["_ng_task_index"] for g in out["group_level_metrics"]] == [0, True]
    assert [g["num_rollouts"] for g in out["group_level_metrics"]] == [1, 2]
    assert out["group_level_metrics"][1]["rollout_infos"][0]["rollout_id"] == "True:0"
    assert [r["_ng_rollout_index"] for r in out["repeat_level_metrics"]] == [0, 1]
    assert type(out["repeat_level_metrics"][1]["_ng_rollout_index"]) is int


def test_nan_is_a_column_without_a_value():
    """A NaN reward was a 422; the reference keeps the column (a float one: extremes of
    the integer rewards become floats) and reports the raw NaN as null."""
    nan = float("nan")
    out = on_the_wire(aggregate_metrics([vr(0, 0, 1), vr(0, 1, nan), vr(1, 0, 0)]))
    first = out["group_level_metrics"][0]
    assert first["mean/reward"] == 1.0 and "std/reward" not in first
    assert [i["reward"] for i in first["rollout_infos"]] == [1, None]
    assert type(out["agent_metrics"]["max/reward"]) is float
    assert on_the_wire(aggregate_metrics([vr(0, 0, nan)]))["agent_metrics"] == {"num_repeats": 1}


@pytest.mark.parametrize("df", [*range(1, 33), 100, 679, 1000, 2047, 2048, 3001, 4095, 4096])
def test_t_quantiles_are_the_t_distributions(df):
    """The reference's t quantiles (its table) are the exact ones to a few ulps, line k for k
    degrees of freedom (neighbours differ by far more); past the table, the exact one."""
    assert _t_quantile_975(df) == pytest.approx(_t_quantile_exact(df), rel=64 * 2.0**-52)
    assert _t_quantile_975(df + 1) < _t_quantile_975(df)
    beyond = len(_t_table()) + df
    assert _t_quantile_975(beyond) == _t_quantile_exact(beyond)


_NUMBERS = st.one_of(
    st.integers(),
    st.integers(2**1023, 2**1100),  # beyond the float range
    st.integers(-(2**1100), -(2**1023)),
    st.floats(),
    st.booleans(),
    st.none(),
    st.sampled_from([10**400, -(10**400), 1e308, -1e308, 2**63, 2**64]),
)
_PERF_FIELDS = [
    "prompt_tokens",
    "cached_prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "num_turns",
    "total_latency_ms",
    "token_observability_coverage",
]
_ROWS = st.fixed_dictionaries(
    {},
    optional={
        "_ng_task_index": st.one_of(st.integers(0, 3), _NUMBERS),
        "_ng_rollout_index": st.one_of(st.integers(0, 3), _NUMBERS),
        "reward": _NUMBERS,
        "x": _NUMBERS,
        "mask_sample": st.booleans(),
        "ng_perf": st.dictionaries(st.sampled_from(_PERF_FIELDS), _NUMBERS, max_size=7),
        "response": st.fixed_dictionaries(
            {"usage": st.dictionaries(st.sampled_from(["input_tokens", "output_tokens"]), _NUMBERS)}
        ),
    },
)


@given(rows=st.lists(_ROWS, max_size=6))
@settings(max_examples=300, deadline=None, derandomize=True, database=None)
def test_any_numbers_in_any_field_aggregate_or_are_a_422(rows):
    """Every number a body can carry (integers beyond the float range, infinities, NaN,
    booleans) in every field: an answer on the wire, or a 422 naming the field; never another
    exception (a 500)."""
    try:
        json_response(aggregate_metrics(rows))
    except HttpProblem as refused:
        assert refused.response.status_code == 422
        [first, *_] = json.loads(bytes(refused.response.body))["detail"]
        assert first["loc"][:2] == ["body", "verify_responses"]
