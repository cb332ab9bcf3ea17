"""Parity of every tool with the reference, in-process: each goldens case on a fresh session.

Source: data/goldens/tool_calls_public.jsonl and tool_calls_fuzz_public.jsonl (the reference's
exact outputs under pandas 2.3.2) and their table hashes (``tables_after``: SHA-256 of
``DataFrame.to_csv(index=True)``). The same cases also run over gRPC in
tests/parity/test_grpc_parity.py and over HTTP in tests/gateway/test_gateway_congruence.py; this
file pins the domain layer alone, so a failure points at a tool. Every case runs with the fast
paths; the pandas implementations run here on a fixed sample of the generated cases
(:data:`PANDAS_FUZZ_CASES`), and are held to the fast paths on every hand-picked case in
tests/domain/test_fast_paths.py.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import FUZZ_GOLDENS, GOLDENS, fuzz_sample, needs, needs_shared, read_jsonl
from workplace_env.parity import outputs_match, table_digest
from workplace_env.sandbox.tables import SessionTables
from workplace_env.sandbox.tools import drop_nulls, encode_output, execute
from workplace_env.sandbox.tools.registry import InvalidToolArgumentsError, parse_arguments

CASES_FILE = GOLDENS / "tool_calls_public.jsonl"
CASES = read_jsonl(CASES_FILE)
FUZZ_CASES = read_jsonl(FUZZ_GOLDENS)
#: The generated cases the pandas implementations also run (CI time).
PANDAS_FUZZ_CASES = fuzz_sample(stride=5, email_stride=2)


def replay_case(case: dict, workbench_tables, fast: bool) -> None:
    """Send the case's calls in order on one fresh session; compare outputs and tables."""
    tables = SessionTables(workbench_tables)
    for i, call in enumerate(case["calls"]):
        if call.get("http_status"):
            with pytest.raises(InvalidToolArgumentsError):
                parse_arguments(call["arguments"])
            continue
        arguments = drop_nulls(parse_arguments(call["arguments"]))
        output = json.loads(encode_output(execute(tables, call["name"], arguments, fast=fast)))
        assert outputs_match(call["output"], output, call.get("unstable_ties", False)), (
            f"call {i} {call['name']} {call['arguments'][:300]}\n"
            f"expected: {json.dumps(call['output'])[:600]}\n"
            f"actual:   {json.dumps(output)[:600]}"
        )
    for key, expected in case["tables_after"].items():
        frame = tables.frame(key)
        assert len(frame) == expected["rows"], key
        assert table_digest(frame) == expected["sha256"], f"table {key} differs after the case"


@needs_shared
@needs(CASES_FILE)
@pytest.mark.parametrize("case", CASES, ids=[c["case_id"] for c in CASES])
def test_tool_calls_match_reference(case, workbench_tables):
    replay_case(case, workbench_tables, fast=True)


@needs_shared
@needs(FUZZ_GOLDENS)
@pytest.mark.parametrize("case", FUZZ_CASES, ids=[c["case_id"] for c in FUZZ_CASES])
def test_generated_tool_calls_match_reference(case, workbench_tables):
    replay_case(case, workbench_tables, fast=True)


@needs_shared
@needs(FUZZ_GOLDENS)
@pytest.mark.parametrize("case", PANDAS_FUZZ_CASES, ids=[c["case_id"] for c in PANDAS_FUZZ_CASES])
def test_generated_tool_calls_match_reference_without_fast_paths(case, workbench_tables):
    replay_case(case, workbench_tables, fast=False)
