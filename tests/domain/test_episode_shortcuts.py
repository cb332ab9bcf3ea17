"""The per-episode shortcuts answer exactly as the work they skip.

Each shortcut (a remembered task, a remembered verify result, a remembered canonical form, a
one-parse route for tool arguments, encoders and decoders built once, the call digest built by
hand) is checked against the plain computation it replaces, on inputs chosen to reach every
branch of the plain one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workplace.env.v1 import environment_pb2 as pb
from workplace_env import wire
from workplace_env.identity import FunctionCall, Task, task_violations
from workplace_env.sandbox.tools.registry import encode_output
from workplace_env.server.convert import TaskMemo, task
from workplace_env.sessions.types import CallRecord, task_digest
from workplace_env.verify import Verifier, _canonical_arguments
from workplace_env_client.errors import InvalidRequestError

# Texts reaching each refusal and acceptance of the flagging parse (the rule).
TEXTS = [
    '{"a": 1, "a": 2}',
    '{"n": 123456789012345678901234567890, "m": -9223372036854775809}',
    '{"f": [1e-05, 1e16, 0.1, -0.0, 1E5, 2.5e-324]}',
    '{"nan": NaN, "inf": -Infinity, "big": 1e400}',
    '{"s": "\\ud800 lone"}',
    '{"pair": "\\ud83d\\ude00", "t": "\\u2028 é 😀 \\u0000"}',
    '{"giant": ' + "9" * 5000 + "}",
    "[" * 128 + "]" * 128,
    "[" * 129 + "]" * 129,
    "[" * 2000 + "]" * 2000,
    '{"a": }',
    "",
    "\ufeff{}",
    "  [1, 2]  ",
    '"text"',
]


def _answer(parse, text):
    try:
        return ("ok", repr(parse(text)))
    except wire.JsonRefused as exc:
        return ("refused", exc.path, exc.why)


@pytest.mark.parametrize("text", TEXTS)
def test_the_tool_routes_one_parse_answers_as_the_flagging_parse(text):
    def flagging(t):  # an on_float observer always takes the flagging parse
        return wire.loads(t, constants=True, on_float=lambda value, constant: None)

    assert _answer(lambda t: wire.loads(t, constants=True), text) == _answer(flagging, text)


def _wide(inner: str, siblings: int = 80) -> str:
    """``inner`` next to enough empty containers that the text holds over 128 ``[``/``{``."""
    return '{"pad": [' + ", ".join(["{}", "[]"] * siblings) + '], "inner": ' + inner + "}"


def _nested(levels: int, tail: str = "1") -> str:
    """``tail`` inside ``levels`` containers (objects, one array innermost when odd)."""
    opening = '{"k": ' * (levels // 2) + "[" * (levels % 2)
    return opening + tail + "]" * (levels % 2) + "}" * (levels // 2)


# Texts with more than 128 brackets: their depth is counted level by level, not walked.
WIDE_TEXTS = [
    _wide("1"),
    _wide(_nested(126)),  # the body is one level, "inner" adds 126, its tail none: 127
    _wide(_nested(127)),  # 128: the deepest accepted
    _wide(_nested(128)),  # 129
    _wide("[" * 127 + "]" * 127),
    _wide("[" * 128 + "]" * 128),
    "[" * 60 + _wide(_nested(67)) + "]" * 60,
    "[" * 60 + _wide(_nested(68)) + "]" * 60,
    _wide('"\\ud83d\\ude00 pair"'),  # escaped surrogates: walked, as before
    _wide('"\\ud800 lone"'),
    _wide('"\ud800 as a character"'),  # a lone surrogate not escaped: still found
    _wide('{"\ud800": 1}'),
    _wide('{"x": [1.5, -0.0, 1e-07, 12345678901234567890]}'),
]


def _walked(text: str, constants: bool) -> tuple[str, ...]:
    """The plain computation: parse, then always walk the whole value."""
    value = json.loads(text)
    problem = wire.find_uncarriable(value, constants=constants)
    return ("refused", *problem) if problem is not None else ("ok", repr(value))


@pytest.mark.parametrize("constants", [False, True])
@pytest.mark.parametrize("text", WIDE_TEXTS)
def test_counting_levels_answers_as_walking_the_value(text, constants):
    assert text.count("[") + text.count("{") > wire.MAX_JSON_DEPTH
    expected = _walked(text, constants)

    def flagging(t):  # the gateway's parse: an observer takes the flagging parse
        return wire.loads(t, constants=constants, on_float=lambda value, constant: None)

    assert _answer(lambda t: wire.loads(t, constants=constants), text) == expected
    assert _answer(flagging, text) == expected


@settings(max_examples=200, deadline=None)
@given(
    value=st.recursive(
        st.none() | st.integers() | st.text(max_size=5),
        lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids),
        max_leaves=30,
    ),
    levels=st.integers(min_value=110, max_value=130),
)
def test_the_level_count_refuses_exactly_the_values_walking_refuses(value, levels):
    text = _wide(_nested(levels, json.dumps(value)))
    assert _answer(wire.loads, text) == _walked(text, False)


@pytest.mark.parametrize("text", [*TEXTS, b"[1]", b"{"])
def test_the_shared_grammar_decoder_accepts_what_json_loads_accepts(text):
    try:
        json.loads(text, parse_int=len)
        expected = True
    except (ValueError, RecursionError):
        expected = False
    assert wire.is_json_text(text) is expected


@settings(max_examples=300, deadline=None)
@given(name=st.text(max_size=20), arguments=st.text(max_size=60))
def test_the_call_digest_is_the_digest_checkpoints_carry(name, arguments):
    # CallRecord digests travel in snapshots: an older server's must restore on this one.
    old = hashlib.blake2b(json.dumps([name, arguments]).encode(), digest_size=16).digest()
    assert CallRecord.digest(name, arguments) == old


def test_tool_outputs_encode_as_before():
    import numpy as np

    cases = {
        "é \ud800": '"é \ud800"',
        "x": '"x"',
        None: "null",
        (1, 2.5, None, True): "[1,2.5,null,true]",
        "{nan}": '"{nan}"',
    }
    for value, text in cases.items():
        assert encode_output(value) == text
    assert (
        encode_output({"nan": float("nan"), "l": [float("-inf"), 1]}) == '{"nan":null,"l":[null,1]}'
    )
    assert encode_output({"n": np.int64(3), "f": np.float64(1.5)}) == '{"n":3,"f":1.5}'


def _task_message(**fields):
    base = {
        "id": "t1",
        "category": "email",
        "ground_truth": [pb.FunctionCall(name="email_send_email", arguments='{"a": 1}')],
        "prompt": "p",
        "data_digest": "d",
    }
    base.update(fields)
    return pb.WorkplaceTask(**base)


def test_a_remembered_task_is_the_task_the_message_converts_to():
    memo = TaskMemo(max_entries=2)
    first = memo(_task_message())
    assert memo(_task_message()) is first and first == task(_task_message())
    for change in (
        {"id": "t2"},
        {"prompt": "other"},  # not compared, but another message: its own task
        {"ground_truth": []},
        {"data_digest": "e"},
    ):
        other = memo(_task_message(**change))
        assert other == task(_task_message(**change)) and other.prompt == (
            change.get("prompt", "p")
        )
    assert len(memo._tasks) <= 2  # bounded: starts over when full
    big = _task_message(prompt="x" * 20_000)
    assert memo(big) == task(big) and memo(big) is not memo(big)  # too big to keep


def test_a_tasks_remembered_digest_and_checks_are_the_computed_ones():
    calls = (FunctionCall("email_send_email", '{"a": 1}'),)
    remembered, fresh = Task(id="t", ground_truth=calls), Task(id="t", ground_truth=calls)
    assert task_digest(remembered) == task_digest(remembered)  # the second one is remembered
    assert task_digest(remembered) == task_digest(Task(id="t", ground_truth=calls))
    assert remembered == fresh and hash(remembered) == hash(fresh)
    assert task_violations(remembered) == [] and task_violations(remembered) == []
    bad = Task(id="t", ground_truth=(FunctionCall("email_send_email", "{not json"),))
    for _ in range(2):  # an invalid task is refused each time it comes
        assert [v.field for v in task_violations(bad)] == ["task.ground_truth[0].arguments"]


def test_a_tasks_checks_name_its_fields_under_each_path_and_leave_its_value_alone():
    bad = Task(id="t", environment_name="other", ground_truth=(FunctionCall("", "{}"),))
    twin = Task(id="t", environment_name="other", ground_truth=(FunctionCall("", "{}"),))
    fields = ["environment_name", "ground_truth[0].name"]
    assert [v.field for v in task_violations(bad)] == [f"task.{f}" for f in fields]
    assert [v.field for v in task_violations(bad, "snapshots[2].task")] == [
        f"snapshots[2].task.{f}" for f in fields
    ]
    assert task_violations(None, "x.task")[0].field == "x.task"
    assert bad == twin and hash(bad) == hash(twin) and asdict(bad) == asdict(twin)


def test_an_invalid_task_seeded_again_is_refused_again(sdk):
    row = {"id": "bad", "ground_truth": [{"name": "email_send_email", "arguments": "{not json"}]}
    for i in range(2):
        with pytest.raises(InvalidRequestError) as caught:
            sdk.seed(f"shortcut-bad-{i}", ("r-bad", 0), ("t", "bad"), row)
        fields = [v.field for v in caught.value.violations]
        assert fields == ["task.ground_truth[0].arguments"]


def send(i: int, body: str = "b") -> FunctionCall:
    args = {"recipient": "a@b.com", "subject": f"s{i}", "body": body}
    return FunctionCall("email_send_email", json.dumps(args))


def test_a_remembered_verify_result_is_the_scored_one(sandbox):
    memo, plain = Verifier(sandbox), Verifier(sandbox, cache_bytes=0)
    cases = [
        ([send(1)], [send(1)]),
        ([send(1)], [send(2)]),
        ([], [send(2)]),
        ([send(3)], []),
        # other texts of the same writes: remembered under their canonical form
        ([FunctionCall("email_send_email", send(4).arguments.replace(", ", ","))], [send(4)]),
    ]
    for predicted, truth in cases * 3:
        assert memo.score(predicted, truth) == plain.score(predicted, truth)
    assert len(memo._results) == 5 and not plain._results  # the memo off remembers nothing
    long = [send(5, "x" * 5000)]
    assert memo.score(long, long) == plain.score(long, long)
    assert len(memo._results) == 5  # a pair of long writes is scored, not remembered


@pytest.mark.parametrize("text", [*TEXTS, '{"b": 1, "a": [1.0, true]}', '{"x": NaN}'])
def test_a_remembered_canonical_form_is_the_computed_one(text):
    try:
        parsed = json.loads(text)
        expected = json.dumps(parsed, sort_keys=True) if isinstance(parsed, dict) else None
    except (ValueError, RecursionError):
        expected = None
    for _ in range(2):  # computed, then remembered
        assert _canonical_arguments(text) == expected
