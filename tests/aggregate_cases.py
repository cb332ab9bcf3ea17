"""Bodies for CONTRACT H3 (``POST /aggregate_metrics``), and how two metrics documents compare.

:data:`CASES` are ``verify_responses`` lists of every shape the aggregation must treat as the
reference does: ``response.usage`` present, absent, partial and nested, booleans, integer and
float rewards, fields null or missing in some rows, strings/lists/objects, per-task grouping,
repeats, masked samples, ``ng_perf`` records, and no input at all. tests/nemo/test_nemo_gym.py sends
each to NeMo Gym 0.7.0's reference ``workplace_assistant`` server and to the gateway side by side;
:data:`REFERENCE_ANSWERS` holds the reference's answers from such a run (black-box facts), which
tests/gateway/test_aggregate_metrics.py pins without the NeMo venv, and which the side-by-side
test checks are still what the reference answers. :data:`REFUSED` are inputs the reference fails
on (500) that the gateway refuses with a 422 naming the field.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from tests.helpers import TESTS

REFERENCE_ANSWERS_PATH = TESTS / "aggregate_reference_answers.json"
NAN, INF = float("nan"), float("inf")

Rows = list[dict[str, Any]]


def usage(inputs: int, outputs: int, **extra: Any) -> dict[str, Any]:
    """A Responses ``response`` whose ``usage`` is what an OpenAI-style model reports."""
    counts = {
        "input_tokens": inputs,
        "output_tokens": outputs,
        "total_tokens": inputs + outputs,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
        **extra,
    }
    return {"id": "resp", "object": "response", "output": [], "usage": counts}


def vr(task: Any, repeat: Any, reward: Any, **fields: Any) -> dict[str, Any]:
    """One verify response as a collection run strips it for aggregation."""
    return {"_ng_task_index": task, "_ng_rollout_index": repeat, "reward": reward, **fields}


def _collection_like(seed: int) -> Rows:
    """A shuffled run: 6 tasks x 3 repeats with gaps, usage on every rollout, some booleans,
    scores and masked samples."""
    rnd = random.Random(seed)
    rows = []
    for task in range(6):
        for repeat in range(3):
            if rnd.random() < 0.1:
                continue
            row = vr(task, repeat, rnd.choice([0.0, 1.0, 0.5]))
            row["response"] = usage(rnd.randint(100, 5000), rnd.randint(1, 900))
            if rnd.random() < 0.5:
                row["flag"] = rnd.random() < 0.5
            if rnd.random() < 0.2:
                row["mask_sample"] = True
            if rnd.random() < 0.3:
                row["score"] = round(rnd.random(), 6)
            rows.append(row)
    rnd.shuffle(rows)
    return rows


CASES: dict[str, Rows] = {
    "usage": [
        vr(0, 0, 1.0, mask_sample=False, response=usage(3, 5)),
        vr(0, 1, 0.0, response=usage(4, 6)),
        vr(1, 0, 1.0, response=usage(7, 1)),
        vr(1, 1, 1.0, response=usage(2, 2)),
    ],
    "usage_with_integer_rewards": [
        vr(0, 0, 1, response=usage(3, 5)),
        vr(1, 0, 0, response=usage(4, 6)),
    ],
    "usage_partial": [
        vr(0, 0, 1.0, response=usage(3, 5)),
        vr(0, 1, 0.0, response={"usage": None}),
        vr(1, 0, 1.0),
        vr(1, 1, 0.5, response={"usage": {"input_tokens": 9}}),
    ],
    "usage_overrides_a_field": [
        vr(
            0,
            0,
            1,
            input_tokens=100,
            response={"usage": {"input_tokens": 3, "reward": 7, "_p": 1, "flag": True}},
        )
    ],
    "falsy_response_or_usage": [
        vr(0, 0, 1.0, response=""),
        vr(1, 0, 1.0, response=[]),
        vr(2, 0, 1.0, response={"usage": 0}),
    ],
    "booleans": [
        vr(0, 0, 1.0, flag=True, ok=False),
        vr(0, 1, 0.0, flag=False, ok=False),
        vr(1, 0, 1.0, flag=True),
    ],
    "booleans_and_integers_only": [vr(0, 0, 1, flag=True), vr(1, 0, 0, flag=False)],
    "integer_rewards": [vr(0, 0, 1), vr(0, 1, 0), vr(1, 0, 1)],
    "integer_reward_single": [vr(0, 0, 1)],
    "integer_and_float_rewards": [vr(0, 0, 1), vr(1, 0, 0.5)],
    "big_integers": [vr(0, 0, 2**62), vr(0, 1, -(2**62))],
    "null_and_missing_fields": [
        vr(0, 0, 1.0, x=None, y=2),
        vr(0, 1, 0.0, x=3.5),
        vr(1, 0, 1.0, y=4),
        vr(2, 0, 0.0),
    ],
    "field_in_one_of_two_rows": [vr(0, 0, 1.0, x=1), vr(0, 1, 0.0)],
    "no_column_has_a_spread": [vr(0, 0, 1.0), vr(0, 1, None, x=1)],
    "one_value_per_task": [vr(0, 0, 1.0, x=1.0), vr(0, 1, 0.5, x=2.0), vr(1, 0, 1.0, x=3.0)],
    "null_and_string_rewards": [vr(0, 0, None), vr(1, 0, "x")],
    "strings_lists_objects": [
        vr(0, 0, 1.0, s="a", l=[1, 2], d={"a": 1}, n=None),
        vr(1, 0, 0.0, s="b", l=[], d={}),
    ],
    "string_task_indices": [vr("b", 0, 1), vr("a", 0, 0), vr("a", 1, 1)],
    "float_task_index": [vr(1.5, 0, 1.0), vr(0, 0, 0.0)],
    "no_indices": [{"reward": 1.0}, {"reward": 0.5, "_ng_rollout_index": 2}],
    "repeats_with_columns_missing": [
        vr(0, 0, 1.0),
        vr(0, 1, 0.0, b=2, a=1),
        vr(1, 1, 0.5, a=3),
        vr(1, 2, 0.25, c=1.5),
    ],
    "names_not_summarised_across_repeats": [
        vr(0, 0, 1.0, **{"x/max": 1, "y_ci_lower": 2, "p5": 3, "z_across_repeats/q": 4}),
        vr(0, 1, 0.0, **{"x/max": 2, "y_ci_lower": 3, "p5": 4, "z_across_repeats/q": 5}),
    ],
    "masked": [
        vr(0, 0, 1.0, mask_sample=True, response=usage(1, 1)),
        vr(0, 1, 0.0, response=usage(2, 2)),
        vr(1, 0, 1.0, mask_sample=True),
        vr(2, 0, 1.0, response=usage(3, 3)),
    ],
    "all_masked": [vr(0, 0, 1.0, mask_sample=True), vr(1, 0, 1.0, mask_sample=True)],
    "masked_share_an_index": [
        vr(0, 0, 1.0, mask_sample=True),
        vr(0, 0, 0.0, mask_sample=True),
        vr(1, 0, 1.0),
    ],
    "masked_response_not_an_object": [vr(0, 0, 1, response="x", mask_sample=True), vr(1, 0, 1)],
    "ng_perf": [
        vr(
            0,
            0,
            1,
            ng_perf={
                "prompt_tokens": 3,
                "num_turns": 2,
                "completion_tokens": 5,
                "total_latency_ms": 10,
                "token_observability_coverage": 1,
            },
        ),
        vr(
            1,
            0,
            1,
            mask_sample=True,
            ng_perf={
                "prompt_tokens": True,
                "num_turns": 3,
                "completion_tokens": 4.5,
                "total_latency_ms": 12.5,
            },
        ),
        vr(2, 0, 0, ng_perf={"num_turns": 0, "reasoning_tokens": 7, "cached_prompt_tokens": "x"}),
    ],
    "ng_perf_all_masked": [
        vr(0, 0, 1, mask_sample=True, ng_perf={"num_turns": True}),
        vr(0, 1, None, mask_sample=True, ng_perf={"num_turns": 4, "prompt_tokens": False}),
    ],
    "collection_like": _collection_like(7),
    "empty": [],
    # finite input whose statistics overflow: the reference writes the infinities as null
    "statistics_overflowing_to_null": [vr(0, 0, 1e308), vr(0, 1, 1.5e308)],
    "spreads_overflowing_to_null": [
        vr(0, 0, 1e307),
        vr(0, 1, -1e307),
        vr(1, 0, -1e307),
        vr(1, 1, 1e307),
    ],
    "large_values_that_still_aggregate": [
        vr(0, 0, 1e300, big=2**45),
        vr(0, 1, 2e300, big=2**45),
        vr(1, 0, 1e13, big=-(2**45)),
    ],
    "ng_perf_of_large_values": [
        vr(0, 0, 1.0, ng_perf={"prompt_tokens": 1e308, "num_turns": 1e308}),
        vr(1, 0, 1.0, ng_perf={"num_turns": -1e308, "completion_tokens": 1e300}),
        vr(2, 0, 1.0, ng_perf={"num_turns": 1e-300, "completion_tokens": 1e300}),
    ],
    # an index is any integer (only measured integers must fit int64)
    "indices_beyond_int64": [vr(10**23, 0, 1.0), vr(1, 10**23, 0.0), vr(1, 0, 0.5)],
    # The reference's model takes every value as parsed (``Dict[str, Any]``): a boolean
    # index is the number 0/1 and keeps its spelling; a repeat is labelled int() of its index
    "boolean_task_index": [vr(True, 0, 1.0)],
    "boolean_and_integer_as_one_task": [vr(True, 0, 1.0), vr(1, 1, 0.0), vr(0, 0, 0.5)],
    "integer_then_boolean_as_one_task": [vr(1, 0, 1.0), vr(True, 1, 0.0)],
    "boolean_repeats": [vr(0, True, 1.0), vr(0, False, 0.0), vr(1, True, 0.5)],
    "float_repeats": [vr(0, 1.5, 1.0), vr(0, 1.7, 0.0), vr(1, 0, 0.5)],
    "string_repeats": [vr(0, "3", 1.0), vr(0, "1", 0.0), vr(1, "10", 0.5)],
    # NaN and Infinity parse (Python's JSON); a NaN is a column without a value
    "nan_reward_alone": [vr(0, 0, NAN)],
    "nan_rewards": [vr(0, 0, NAN), vr(0, 1, 1.0), vr(1, 0, 0.5), vr(1, 1, NAN)],
    "nan_in_an_integer_column": [vr(0, 0, 1), vr(0, 1, NAN), vr(1, 0, 0)],
    "nan_only_column": [vr(0, 0, 1, x=NAN), vr(1, 0, 0, x=NAN)],
    "nan_column_order_and_usage": [
        vr(0, 0, 1.0, z=NAN, response={"usage": {"input_tokens": NAN}}),
        vr(0, 1, 0.0, a=1, z=2.0, f=True),
        vr(1, 0, 0.0, f=NAN),
    ],
    "nan_and_infinity_masked": [
        vr(0, 0, INF, x=NAN, mask_sample=True),
        vr(1, 0, 0.0, x=1),
        vr(2, 0, 1.0, mask_sample=NAN),
    ],
    "infinite_task_indices": [vr(INF, 0, 1.0), vr(-INF, 0, 0.0), vr(3, 0, 0.5)],
    "infinite_repeat_alone": [vr(0, INF, 1.0), vr(1, INF, 0.0)],
    "infinity_in_a_field_usage_overrides": [vr(0, 0, 1.0, x=INF, response={"usage": {"x": 1}})],
    "ng_perf_nan_and_infinity": [
        vr(
            0,
            0,
            1.0,
            ng_perf={
                "prompt_tokens": NAN,
                "total_latency_ms": INF,
                "token_observability_coverage": NAN,
            },
        ),
        vr(
            1,
            0,
            1.0,
            ng_perf={
                "prompt_tokens": 3,
                "total_latency_ms": 3,
                "completion_tokens": INF,
                "num_turns": 2,
            },
        ),
        vr(2, 0, 1.0, ng_perf={"total_latency_ms": NAN, "completion_tokens": 1}),
    ],
    "ng_perf_quantiles_skip_nan": [
        vr(i, 0, 1.0, ng_perf={"prompt_tokens": v, "total_latency_ms": v})
        for i, v in enumerate([3, NAN, 1, 7, NAN, 0])
    ],
    # null indices: a null task has no group and counts in no task count; a null repeat is no
    # repeat (it still counts in num_repeats and is spelled "None" in its rollout_id)
    "null_tasks": [vr(None, 0, 1.0), vr(None, 1, 1.0)],
    "null_task_alone": [vr(None, 0, 1.0)],
    "null_tasks_three_repeats": [vr(None, 0, 1.0), vr(None, 1, 0.0), vr(None, 2, 0.5, x=3)],
    "null_task_masked_among_integers": [
        vr(None, 0, 1.0, mask_sample=True),
        vr(0, 0, 1.0),
        vr(1, 0, 0.0),
    ],
    "null_task_scored_integer_masked": [vr(None, 0, 1.0), vr(0, 0, 1.0, mask_sample=True)],
    "null_indices_alone": [vr(None, None, 1.0)],
    "null_repeats": [vr(0, None, 1.0), vr(1, None, 0.0)],
    "null_repeat_alone": [vr(0, None, 1.0)],
    "null_repeat_and_integers_in_other_tasks": [
        vr(0, None, 1.0),
        vr(1, 0, 0.0),
        vr(1, 1, 0.5),
        vr(2, 1, 0.25),
    ],
    "null_repeat_and_strings_in_other_tasks": [
        vr(0, None, 1.0),
        vr(1, "1", 0.0),
        vr(2, "2", 0.5),
    ],
    "null_repeat_and_booleans_in_other_tasks": [
        vr(0, None, 1.0),
        vr(1, True, 0.0),
        vr(2, False, 0.5),
    ],
    "null_repeat_masked_among_integers": [
        vr(0, None, 1.0, mask_sample=True),
        vr(0, 0, 1.0),
        vr(0, 1, 0.0),
    ],
    "absent_task_indices": [
        {"_ng_rollout_index": 0, "reward": 1},
        {"_ng_rollout_index": 1, "reward": 0},
    ],
    "absent_repeat_indices": [
        {"_ng_task_index": 0, "reward": 1},
        {"_ng_task_index": 1, "reward": 0},
    ],
    "numeric_string_tasks": [vr("1", 0, 1.0), vr("2", 0, 0.0), vr("10", 1, 0.5)],
}

_ANY_VALUE: tuple[Any, ...] = (None, True, False, 0, 1, 2, -3, 7, 10**12, 0.5, 1.25, 3.0, 1e6, "s")
_ANY_VALUE += ([1], {"a": 1})
_FIELDS = ("reward", "flag", "x", "score", "input_tokens", "a/max", "p5", "mask_sample")
_USAGE_FIELDS = ("input_tokens", "output_tokens", "total_tokens", "reward", "flag")


def random_bodies(seed: int, count: int) -> list[Rows]:
    """``count`` random ``verify_responses`` lists: up to 4 tasks x 4 repeats, indices sometimes
    absent, any JSON value in any field (usage and ``mask_sample`` included), some ``ng_perf``;
    a list may repeat an index (which the reference fails on)."""
    rnd = random.Random(seed)
    bodies = []
    for _ in range(count):
        rows: Rows = []
        for _ in range(rnd.randint(1, 10)):
            row: dict[str, Any] = {}
            if rnd.random() < 0.9:
                row["_ng_task_index"] = rnd.randint(0, 3)
            if rnd.random() < 0.9:
                row["_ng_rollout_index"] = rnd.randint(0, 3)
            for name in rnd.sample(_FIELDS, rnd.randint(0, len(_FIELDS))):
                row[name] = rnd.choice(_ANY_VALUE)
            if rnd.random() < 0.6:
                counts = {k: rnd.choice(_ANY_VALUE) for k in rnd.sample(_USAGE_FIELDS, 3)}
                counts["input_tokens_details"] = {"cached_tokens": 1}
                row["response"] = rnd.choice([{"usage": counts}, {"usage": None}, {}, None])
            if rnd.random() < 0.2:
                row["ng_perf"] = {"num_turns": rnd.randint(0, 5), "total_latency_ms": rnd.random()}
            rows.append(row)
        bodies.append(rows)
    return bodies


_ANY_TASK: tuple[Any, ...] = (None, None, 0, 0, 1, 1, 2, True, "1", "a", 1.5)
_ANY_REPEAT: tuple[Any, ...] = (None, None, 0, 0, 1, 1, 2, True, False, "1", "2")


def random_index_bodies(seed: int, count: int) -> list[Rows]:
    """``count`` random ``verify_responses`` lists whose indices are ``null``, integers,
    booleans, floats or strings (numeric or not), sometimes absent, some rows masked."""
    rnd = random.Random(seed)
    bodies = []
    for _ in range(count):
        rows: Rows = []
        for _ in range(rnd.randint(1, 6)):
            row = vr(rnd.choice(_ANY_TASK), rnd.choice(_ANY_REPEAT), rnd.choice([0.0, 0.5, 1]))
            row["x"] = rnd.choice([1, 2.5, None, True])
            if rnd.random() < 0.15:
                row["mask_sample"] = True
            for key in ("_ng_task_index", "_ng_rollout_index"):
                if rnd.random() < 0.1:
                    del row[key]
            rows.append(row)
        bodies.append(rows)
    return bodies


#: Inputs the reference cannot aggregate (500 there), each with the 422 ``loc`` we answer.
REFUSED: dict[str, tuple[Rows, list[Any]]] = {
    "repeated_index": (
        [vr(0, 0, 1), vr(0, 0, 0)],
        ["body", "verify_responses", 1],
    ),
    # an ng_perf integer beyond the float range: every statistic of a field is a float
    **{
        f"ng_perf_{field}_beyond_float_range": (
            [vr(0, 0, 1, ng_perf={field: 1}), vr(1, 0, 1, ng_perf={field: 10**400})],
            ["body", "verify_responses", 1, "ng_perf", field],
        )
        for field in ("total_latency_ms", "num_turns", "prompt_tokens", "completion_tokens")
    },
    "scored_repeats_a_masked_index": (
        [vr(0, 0, 1, mask_sample=True), vr(0, 0, 0)],
        ["body", "verify_responses", 1],
    ),
    "numbers_and_strings_as_tasks": (
        [vr("a", 0, 1), vr(1, 0, 0)],
        ["body", "verify_responses", "_ng_task_index"],
    ),
    # null sorts against nothing: a null task among others, a null repeat in a task with others
    "null_task": (
        [vr(None, 0, 1), vr(0, 0, 1)],
        ["body", "verify_responses", "_ng_task_index"],
    ),
    "null_and_string_tasks": (
        [vr(None, 0, 1), vr("a", 0, 1)],
        ["body", "verify_responses", "_ng_task_index"],
    ),
    "null_task_among_integers_of_null_repeats": (
        [vr(None, None, 1.0), vr(0, None, 0.0)],
        ["body", "verify_responses", "_ng_task_index"],
    ),
    "null_repeat_in_a_task_with_others": (
        [vr(0, 1, 0.0), vr(0, None, 1.0)],
        ["body", "verify_responses", 1, "_ng_rollout_index"],
    ),
    "null_repeat_in_a_null_task_with_others": (
        [vr(None, None, 1.0), vr(None, 1, 0.0)],
        ["body", "verify_responses", 0, "_ng_rollout_index"],
    ),
    "null_indices_repeated": (
        [vr(None, None, 1.0), vr(None, None, 0.0)],
        ["body", "verify_responses", 1],
    ),
    # an index the reference cannot hash
    "array_task": ([vr([1], 0, 1.0)], ["body", "verify_responses", 0, "_ng_task_index"]),
    "object_task": ([vr({"a": 1}, 0, 1.0)], ["body", "verify_responses", 0, "_ng_task_index"]),
    "array_repeat": ([vr(0, [1], 1.0)], ["body", "verify_responses", 0, "_ng_rollout_index"]),
    "object_repeat": (
        [vr(0, {"a": 1}, 1.0)],
        ["body", "verify_responses", 0, "_ng_rollout_index"],
    ),
    "numeric_string_and_integer_tasks": (
        [vr("1", 0, 1.0), vr(2, 0, 0.0)],
        ["body", "verify_responses", "_ng_task_index"],
    ),
    "response_not_an_object": (
        [vr(0, 0, 1, response="x")],
        ["body", "verify_responses", 0, "response"],
    ),
    "usage_not_an_object": (
        [vr(0, 0, 1, response={"usage": [1]})],
        ["body", "verify_responses", 0, "response", "usage"],
    ),
    "integer_beyond_int64": (
        [vr(0, 0, 1, big=2**63)],
        ["body", "verify_responses", 0, "big"],
    ),
    # the reference histograms each column in 64 equal bins, per task and overall
    "sum_overflowing_in_a_task": (
        [vr(0, 0, 1e308), vr(0, 1, 1e308)],
        ["body", "verify_responses", 0, "reward"],
    ),
    "range_overflowing_in_a_task": (
        [vr(0, 0, 1.0, x=1e308), vr(0, 1, 1.0, x=-1e308)],
        ["body", "verify_responses", 0, "x"],
    ),
    "lone_huge_value": (
        [vr(0, 0, 1.0), vr(0, 1, 0.0), vr(1, 0, 0.5, big=1e20)],
        ["body", "verify_responses", 2, "big"],
    ),
    "lone_huge_integer": (
        [vr(0, 0, 1.0, n=2**62)],
        ["body", "verify_responses", 0, "n"],
    ),
    "huge_usage_counts": (
        [
            vr(0, 0, 1.0, response={"usage": {"input_tokens": 1e308}}),
            vr(0, 1, 1.0, response={"usage": {"input_tokens": 1e308}}),
        ],
        ["body", "verify_responses", 0, "response", "usage", "input_tokens"],
    ),
    "adjacent_floats_in_a_task": (
        [vr(0, 0, 1.0), vr(0, 1, 1.0000000000000002)],
        ["body", "verify_responses", 0, "reward"],
    ),
    "adjacent_floats_over_all_tasks": (
        [vr(0, 0, 1.0), vr(1, 0, 1.0000000000000002)],
        ["body", "verify_responses", 0, "reward"],
    ),
    "ng_perf_sum_overflowing": (
        [
            vr(0, 0, 1.0, ng_perf={"prompt_tokens": 1e308}),
            vr(1, 0, 1.0, ng_perf={"prompt_tokens": 1e308}),
        ],
        ["body", "verify_responses", 0, "ng_perf", "prompt_tokens"],
    ),
    # Booleans are the numbers 0/1, so they collide and cannot be ordered with strings
    "boolean_repeats_an_integer_index": (
        [vr(True, 0, 1.0), vr(1, 0, 0.0)],
        ["body", "verify_responses", 1],
    ),
    "booleans_and_strings_as_tasks": (
        [vr(True, 0, 1), vr("a", 0, 0)],
        ["body", "verify_responses", "_ng_task_index"],
    ),
    # several repeats are labelled int() of their index
    "infinite_repeat_among_several": (
        [vr(0, 0, 1.0), vr(0, INF, 1.0)],
        ["body", "verify_responses", 1, "_ng_rollout_index"],
    ),
    "string_repeats_int_refuses": (
        [vr(0, "b", 1.0), vr(0, "a", 0.0)],
        ["body", "verify_responses", 1, "_ng_rollout_index"],
    ),
    # every measured column is histogrammed: an infinity has no finite range
    "infinite_reward": (
        [vr(0, 1, 1.0), vr(0, 0, -INF)],
        ["body", "verify_responses", 1, "reward"],
    ),
    "infinite_usage_count": (
        [vr(0, 0, 1.0, x=1, response={"usage": {"x": INF}})],
        ["body", "verify_responses", 0, "response", "usage", "x"],
    ),
    "ng_perf_num_turns_not_finite": (
        [vr(0, 0, 1.0, ng_perf={"num_turns": 2}), vr(1, 0, 1.0, ng_perf={"num_turns": NAN})],
        ["body", "verify_responses", 1, "ng_perf", "num_turns"],
    ),
    "ng_perf_both_infinities": (
        [
            vr(0, 0, 1.0, ng_perf={"total_latency_ms": INF}),
            vr(1, 0, 1.0, ng_perf={"total_latency_ms": -INF}),
        ],
        ["body", "verify_responses", 0, "ng_perf", "total_latency_ms"],
    ),
}

#: Inputs the reference answers but we refuse (422 naming the index). A NaN index: the
#: reference's table drops such a rollout from its task's group (and from the repeats) while
#: counting it elsewhere, and labels the tasks in an order that depends on hashing. Numbers and
#: strings as repeat indices of different tasks: its per-repeat rows come in no defined order.
NOT_AGGREGATED: dict[str, tuple[Rows, list[Any]]] = {
    "nan_task_index": (
        [vr(0, 0, 1.0), vr(NAN, 0, 1.0)],
        ["body", "verify_responses", 1, "_ng_task_index"],
    ),
    "nan_repeat_index": (
        [vr(0, NAN, 1.0)],
        ["body", "verify_responses", 0, "_ng_rollout_index"],
    ),
    # numbers and strings as repeats of different tasks: the reference (which fails on them
    # in one task) answers, with its per-repeat rows in an order pandas does not define
    "numeric_string_and_integer_repeats": (
        [vr(0, "1", 1.0), vr(1, 1, 0.0)],
        ["body", "verify_responses", "_ng_rollout_index"],
    ),
}


def request_body(rows: Rows) -> dict[str, Any]:
    """``post(...)`` keywords sending ``rows`` as an ``AggregateMetricsRequest``, NaN and
    Infinity spelled as Python's JSON spells them (``json=`` would refuse them)."""
    return {
        "content": json.dumps({"verify_responses": rows}).encode(),
        "headers": {"content-type": "application/json"},
    }


def reference_answers() -> dict[str, Any]:
    """The recorded reference answers, by case name."""
    answers: dict[str, Any] = json.loads(REFERENCE_ANSWERS_PATH.read_text())
    return answers


def same_metrics(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Where two metrics documents differ: keys (and their order), lengths, types (an integer
    is not a float) and values (floats to 1e-12 relative: the reference's pandas sums in
    another order, the last bit differs)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        if list(ours) != list(theirs):
            return [f"{path}: keys {list(ours)} != {list(theirs)}"]
        return [d for k in ours for d in same_metrics(ours[k], theirs[k], f"{path}/{k}")]
    if isinstance(ours, list) and isinstance(theirs, list):
        if len(ours) != len(theirs):
            return [f"{path}: {len(ours)} items != {len(theirs)}"]
        return [
            d
            for i, pair in enumerate(zip(ours, theirs, strict=True))
            for d in same_metrics(*pair, f"{path}[{i}]")
        ]
    if isinstance(ours, float) and isinstance(theirs, float):
        return (
            []
            if ours == pytest.approx(theirs, rel=1e-12, abs=1e-15)
            else [f"{path}: {ours} != {theirs}"]
        )
    return (
        [] if ours == theirs and type(ours) is type(theirs) else [f"{path}: {ours!r} != {theirs!r}"]
    )
