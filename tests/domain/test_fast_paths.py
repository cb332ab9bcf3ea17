"""Fast paths agree with the pandas implementations: same outputs, same tables, always.

Every call runs on two sessions that started equal, once with fast paths and once with the pandas
implementation only (``execute(..., fast=False)``); the output JSON texts must be identical and,
after every call, every table the tool may write must be identical (cells with their Python types,
dtypes, index labels and index type), and all tables at the end of a sequence. The calls come
from the goldens (all of them, on the WorkBench sandbox) and from random sequences of generated
arguments (tests/fastpath/), on the WorkBench and the generated sandboxes.
"""

from __future__ import annotations

import json
from random import Random

import pytest

from tests.conftest import GOLDENS, needs, needs_shared, read_jsonl
from tests.fastpath import all_arguments
from workplace_env.sandbox.load import load_sandbox
from workplace_env.sandbox.tables import TABLE_KEYS, SessionTables
from workplace_env.sandbox.tools import TOOLS, drop_nulls, encode_output, execute
from workplace_env.sandbox.tools.registry import InvalidToolArgumentsError, parse_arguments

TOOL_CASES_FILE = GOLDENS / "tool_calls_public.jsonl"
VERIFY_CASES_FILE = GOLDENS / "verify_cases_public.jsonl"
TOOL_CASES = read_jsonl(TOOL_CASES_FILE)
VERIFY_CASES = read_jsonl(VERIFY_CASES_FILE)
GENERATORS = all_arguments()


_NAN = object()


def table_state(tables: SessionTables, key: str) -> tuple:
    """Everything pandas would see of a table: cells with their types, dtypes, index, its type."""
    table = tables.table(key)
    cells = tuple(
        tuple((type(v), _NAN if type(v) is float and v != v else v) for v in table.data[c])
        for c in table.columns
    )
    return table.columns, table.dtypes, tuple(table.index), table.range_index, cells


class Pair:
    """Two sessions over one sandbox: ``fast`` uses fast paths, ``slow`` only pandas."""

    def __init__(self, base) -> None:
        self.fast = SessionTables(base)
        self.slow = SessionTables(base)

    def call(self, name: str, arguments: dict, where: str) -> None:
        got = encode_output(execute(self.fast, name, dict(arguments)))
        want = encode_output(execute(self.slow, name, dict(arguments), fast=False))
        assert got == want, f"{where}: {name}({json.dumps(arguments)[:300]})"
        spec = TOOLS.get(name)
        for key in spec.writes if spec is not None else ():
            assert table_state(self.fast, key) == table_state(self.slow, key), (
                f"{where}: table {key} differs after {name}({json.dumps(arguments)[:300]})"
            )

    def check_all(self, where: str) -> None:
        for key in TABLE_KEYS:
            assert table_state(self.fast, key) == table_state(self.slow, key), f"{where}: {key}"


def _parsed(arguments: str) -> dict | None:
    try:
        return parse_arguments(arguments)
    except InvalidToolArgumentsError:
        return None


@needs_shared
@needs(TOOL_CASES_FILE)
@pytest.mark.parametrize("case", TOOL_CASES, ids=[c["case_id"] for c in TOOL_CASES])
def test_goldens_tool_calls_fast_equals_pandas(case, workbench_tables):
    pair = Pair(workbench_tables)
    for i, call in enumerate(case["calls"]):
        arguments = _parsed(call["arguments"])
        if arguments is not None:
            pair.call(call["name"], drop_nulls(arguments), f"{case['case_id']} call {i}")
    pair.check_all(case["case_id"])


@needs_shared
@needs(VERIFY_CASES_FILE)
def test_goldens_verify_calls_fast_equals_pandas(workbench_tables):
    # Replay keeps JSON nulls: both sequences of every verify case, as the verifier runs them.
    for case in VERIFY_CASES:
        for side in ("function_calls", "ground_truth"):
            calls = case[side] if isinstance(case[side], list) else []
            pair = Pair(workbench_tables)
            for call in calls:
                arguments = (
                    _parsed(call["arguments"]) if isinstance(call["arguments"], str) else None
                )
                if arguments is not None and call["name"] in TOOLS:
                    pair.call(call["name"], arguments, f"{case['case_id']} {side}")
            pair.check_all(f"{case['case_id']} {side}")


def _random_sessions(base, seed: int, sessions: int, calls: int) -> None:
    if not GENERATORS:
        pytest.skip("no argument generators registered in tests/fastpath/")
    rng = Random(seed)
    names = sorted(GENERATORS)
    for s in range(sessions):
        pair = Pair(base)
        for c in range(calls):
            name = rng.choice(names)
            arguments = GENERATORS[name](rng, pair.slow)
            pair.call(name, arguments, f"seed {seed} session {s} call {c}")
        pair.check_all(f"seed {seed} session {s}")


@pytest.mark.parametrize("seed", range(4))
def test_random_calls_fast_equals_pandas_generated(seed):
    _random_sessions(load_sandbox(None), seed, sessions=25, calls=12)


@needs_shared
@pytest.mark.parametrize("seed", range(4))
def test_random_calls_fast_equals_pandas_workbench(seed, workbench_tables):
    _random_sessions(workbench_tables, 100 + seed, sessions=25, calls=12)
