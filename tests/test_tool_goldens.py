"""Parity of every tool with the reference, in-process: each goldens case on a fresh session.

Source: data/goldens/tool_calls_public.jsonl (the reference's exact outputs under pandas 2.3.2)
and its table hashes (``DataFrame.to_csv(index=True)``, SHA-256). The same cases also run over
gRPC in test_grpc_parity.py; this file pins the domain layer alone, so a failure points at a tool.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.conftest import GOLDENS, needs_shared, read_jsonl
from workplace_env.parity import outputs_match
from workplace_env.sandbox.tables import SessionTables
from workplace_env.sandbox.tools import drop_nulls, encode_output, execute
from workplace_env.sandbox.tools.registry import InvalidToolArgumentsError, parse_arguments

CASES = read_jsonl(GOLDENS / "tool_calls_public.jsonl")


def table_hash(frame) -> str:
    return hashlib.sha256(frame.to_csv(index=True).encode("utf-8")).hexdigest()


@needs_shared
@pytest.mark.parametrize("case", CASES, ids=[c["case_id"] for c in CASES])
def test_tool_calls_match_reference(case, workbench_tables):
    tables = SessionTables(workbench_tables)
    for i, call in enumerate(case["calls"]):
        if call.get("http_status"):
            with pytest.raises(InvalidToolArgumentsError):
                parse_arguments(call["arguments"])
            continue
        arguments = drop_nulls(parse_arguments(call["arguments"]))
        output = json.loads(encode_output(execute(tables, call["name"], arguments)))
        assert outputs_match(call["output"], output, call.get("unstable_ties", False)), (
            f"call {i} {call['name']} {call['arguments']}\n"
            f"expected: {json.dumps(call['output'])[:600]}\n"
            f"actual:   {json.dumps(output)[:600]}"
        )
    for key, expected in case["tables_after"].items():
        frame = tables.frame(key)
        assert len(frame) == expected["rows"], key
        assert table_hash(frame) == expected["sha256"], f"table {key} differs after the case"
