"""Differential test against the reference server: generated call sequences, both sides.

Sequences from :mod:`tests.differential` (every tool, every parameter, type confusions, state
edges) run on NeMo Gym 0.7.0's own ``workplace_assistant`` server, driven only through its HTTP
routes, and on ours (fast paths and pandas implementations); every output must be equal. A
bounded number of sequences runs here; ``python -m tests.differential --sequences N`` runs more.
The NeMo Gym venv comes from tests/nemo (``WORKPLACE_ENV_NEMO_VENV`` names an existing one).
"""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import WORKBENCH, needs_shared
from tests.differential import compare, sequences

#: Sequences per test run (about 200 calls); WORKPLACE_ENV_DIFF_SEQUENCES overrides it.
SEQUENCES = int(os.environ.get("WORKPLACE_ENV_DIFF_SEQUENCES", "30"))


@pytest.fixture(scope="module")
def reference_url(tmp_path_factory):
    """NeMo Gym's own workplace_assistant resources server on loopback (a black box)."""
    from tests.nemo.servers import NemoStack, reference_resources
    from tests.nemo.venv import nemo_python

    python = nemo_python()
    with NemoStack(python, [reference_resources()], tmp_path_factory.mktemp("nemo")) as stack:
        yield stack.url("workplace_assistant")


@needs_shared
@pytest.mark.parametrize("seed", [14])
def test_generated_sequences_match_the_reference(seed, reference_url, workbench_tables):
    all_calls = list(sequences(SEQUENCES, seed, WORKBENCH))
    made, differences = compare(reference_url, workbench_tables, all_calls)
    assert made >= 3 * SEQUENCES
    assert differences == [], "\n".join(map(str, differences[:20]))


@needs_shared
def test_the_generator_draws_each_parity_class():
    """The sequences the test runs hold each class: bounds and dates read as NaT, Unicode 15
    digits, and long write/read sequences with deletes, re-creates and whole-table listings."""
    all_calls = list(sequences(SEQUENCES, 14, WORKBENCH))
    bodies = [json.loads(c.body) for calls in all_calls for c in calls if c.body.startswith("{")]
    values = [v for body in bodies for v in body.values()]
    assert any(v != v for v in values if isinstance(v, float))  # JSON NaN
    assert {"nan", "NaT"} & {v for v in values if isinstance(v, str)}
    unicode_15 = [
        v
        for v in values
        if isinstance(v, str)
        and any(0x11F50 <= ord(c) <= 0x11F59 or 0x1E4F0 <= ord(c) <= 0x1E4F9 for c in v)
    ]
    assert unicode_15
    long = [calls for calls in all_calls if len(calls) >= 20]
    assert long
    names = [c.name for calls in long for c in calls]
    assert any("delete" in n for n in names) and any("create" in n or "add" in n for n in names)


def test_verify_bodies_are_refused_where_and_as_the_reference_refuses_them(
    reference_url, make_server
):
    """Black box on both sides: each verify body below (complete, as
    NeMo's types require, but for the part under test) gets the same status from our gateway
    as from the reference, and the same 422 ``loc``s."""
    import httpx

    from tests.gateway.test_gateway_nemo_types import CALL, OUT_TEXT, SEND
    from tests.helpers import gateway_on

    right = {**CALL, "arguments": json.dumps(SEND)}
    truth = [{"name": "email_send_email", "arguments": json.dumps(SEND)}]

    def body(items: list, ground_truth: object = truth) -> dict:
        response = {
            "id": "resp_1",
            "created_at": 0,
            "model": "m",
            "object": "response",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": items,
        }
        return {
            "id": 1,
            "category": "c",
            "environment_name": "workplace_assistant",
            "responses_create_params": {"input": "x"},
            "response": response,
            "ground_truth": ground_truth,
        }

    message = {"type": "message"}
    bodies = [
        body([right]),
        *(
            body([right], t)
            for t in (
                {"a": 1},
                None,
                3,
                "[]",
                [],
                ["x"],
                [{"name": "email_send_email", "arguments": {}}],
                [{"name": 1}, {"arguments": "{}", "x": 2}],
                [{}],
            )
        ),
        body([{**message, "role": "assistant", "content": [CALL]}, right]),
        body([{**message, "role": "user", "status": "completed", "content": [CALL]}]),
        body([{**message, "id": "m", "role": "assistant", "content": [OUT_TEXT, CALL]}]),
        body([{**message, "role": "assistant", "content": 5}]),
        body([{**message, "content": "hi"}, right]),
        body([{**message, "role": "assistant", "content": [OUT_TEXT]}, right]),
        body([{**message, "id": "m", "role": "assistant", "content": [OUT_TEXT]}, right]),
        body([{**message, "role": "user", "content": [{"type": "input_text", "text": "x"}]}]),
        body([{"type": "reasoning", "summary": []}, right]),
        body([{"type": "reasoning", "id": "r", "summary": [{"text": 1}]}]),
        body([{"type": "function_call_output", "output": "x"}, right]),
        body([{**CALL, "arguments": {}}]),
    ]
    gateway = gateway_on("in_process", make_server().running)
    try:
        with (
            httpx.Client(base_url=reference_url, timeout=60) as ref,
            httpx.Client(base_url=gateway.url, timeout=60) as ours,
        ):
            for sent in bodies:
                answers = [client.post("/verify", json=sent) for client in (ref, ours)]
                statuses = [a.status_code for a in answers]
                assert statuses[0] == statuses[1], (sent, [a.text[:300] for a in answers])
                if statuses[0] == 422:
                    locs = [[d["loc"] for d in a.json()["detail"]] for a in answers]
                    assert locs[0] == locs[1], sent
    finally:
        gateway.stop()
