"""Tool-call names in the MCP namespace score as the bare tool (REFERENCE.md (c)1).

MCP-native agents record a call of our tool ``email_send_email`` as
``mcp__workplace_assistant__email_send_email`` (``workplace_assistant``: the ``server_name`` of
the seed's ``resources_tools``; NeMo Gym 0.7.0's ``normalize_tool_name`` gives the format).
As the reference with MCP exposure on (black box: 1.0 for that prefix, 0.0 for another server's
or a doubled one, ground truth as sent, echo unchanged), an HTTP gateway that serves MCP scores
the prediction's names without that one prefix on every ``/verify`` path (legacy, typed, the
stateless replay); the echoed ``response`` keeps the emitted names.
gRPC Verify and the runner score names as sent, as the reference without MCP exposure (the
verify goldens' case ``unknown_namespaced_tool``), and so does a gateway with MCP off.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from workplace_env.gateway import start_gateway
from workplace_env.identity import FunctionCall
from workplace_env.verify import bare_predicted_names, mcp_bare_name

ARGS = json.dumps({"recipient": "a@b.com", "subject": "s", "body": "b"})
TRUTH = [{"name": "email_send_email", "arguments": ARGS}]
ROW = {"id": "mcp-names", "ground_truth": TRUTH}
OURS = "mcp__workplace_assistant__email_send_email"

#: (predicted name, reward): ours stripped once; anything else is an unknown tool.
CASES = [
    ("email_send_email", 1.0),
    (OURS, 1.0),
    ("mcp__other__email_send_email", 0.0),
    ("mcp__workplace_assistant__mcp__workplace_assistant__email_send_email", 0.0),
    ("MCP__workplace_assistant__email_send_email", 0.0),
    ("mcp__workplace_assistant_email_send_email", 0.0),
]


def output(name: str) -> list[dict[str, Any]]:
    return [
        {"type": "function_call", "call_id": "c1", "name": name, "arguments": ARGS},
        {"type": "function_call_output", "call_id": "c1", "output": "{}"},
    ]


def test_only_our_server_prefix_comes_off_once():
    assert mcp_bare_name(OURS) == "email_send_email"
    assert mcp_bare_name("mcp__other__x") == "mcp__other__x"
    assert mcp_bare_name("mcp__workplace_assistant__") == ""
    calls = [FunctionCall(OURS, ARGS), {"name": OURS, "arguments": ARGS, "call_id": "c"}, 7]
    bare = bare_predicted_names(calls)
    assert bare == [
        FunctionCall("email_send_email", ARGS),
        {"name": "email_send_email", "arguments": ARGS, "call_id": "c"},
        7,
    ]
    assert calls[1]["name"] == OURS  # a copy: the caller's request is unchanged


def test_the_prefix_is_the_named_servers():
    """Under another server name, that server's prefix comes off and ours stays."""
    calls = [FunctionCall("mcp__other__x", ARGS), {"name": "mcp__other__x"}, {"name": OURS}]
    assert bare_predicted_names(calls, "other") == [
        FunctionCall("x", ARGS),
        {"name": "x"},
        {"name": OURS},
    ]


@pytest.mark.parametrize(("name", "reward"), CASES)
def test_grpc_verify_both_prediction_forms(sdk, name, reward):
    for form in ("response_output", "function_calls"):
        sid = f"mcp-{uuid.uuid4().hex}"
        sdk.seed(sid, ("r1", 0), ("ts", "mcp-names"), ROW)
        if form == "response_output":
            result = sdk.verify(sid, response_output=json.dumps(output(name)))
        else:
            result = sdk.verify(sid, [(name, ARGS)])
        # gRPC scores as the reference without MCP exposure (the verify goldens): as sent
        assert (form, result.reward) == (form, 1.0 if name == "email_send_email" else 0.0)
        assert not result.mask_sample


def test_ground_truth_names_are_not_stripped(sdk):
    sid = f"mcp-{uuid.uuid4().hex}"
    sdk.seed(sid, ("r1", 0), ("ts", "mcp-names"), ROW)
    truth = json.dumps([{"name": OURS, "arguments": ARGS}])  # an unknown tool: changes nothing
    assert sdk.verify(sid, [], ground_truth_json=truth).reward == 1.0


def _verify_body(name: str) -> dict[str, Any]:
    return {**ROW, "responses_create_params": {"input": []}, "response": {"output": output(name)}}


@pytest.mark.parametrize(("name", "reward"), CASES)
@pytest.mark.parametrize("path", ["legacy", "typed", "replay"])
def test_http_verify_every_path_and_echo(gateway, path, name, reward):
    with httpx.Client(base_url=gateway.url, timeout=30) as http:
        if path == "legacy":
            assert http.post("/seed_session", json=ROW).status_code == 200
        elif path == "typed":
            seed = {
                "resources_session_id": f"mcp-{uuid.uuid4().hex}",
                "episode_id": {"rollout_id": "r1", "attempt": 0},
                "task_id": {"taskset": "ts", "task_id": "mcp-names"},
                "task_data": {**ROW, "responses_create_params": {"input": []}},
            }
            answer = http.post("/seed_session", json=seed)
            assert answer.status_code == 200, answer.text
            assert answer.json()["resources_tools"]["server_name"] == "workplace_assistant"
        answer = http.post("/verify", json=_verify_body(name))
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert (body["reward"], body["mask_sample"]) == (reward, False)
        assert body["response"]["output"] == output(name)  # the emitted names, echoed


def test_runner_scores_namespaced_recorded_calls(sdk):
    from workplace_env.run.scripted import run_episode

    line = {
        "id": "mcp-run",
        "ground_truth": TRUTH,
        "function_calls": [{"name": OURS, "arguments": ARGS}],
    }
    assert run_episode(sdk, line, 1, "recorded").reward == 0.0  # gRPC: MCP exposure off


def test_http_verify_with_mcp_off_scores_names_as_sent(sdk):
    from workplace_env.gateway import GatewaySettings

    gw = start_gateway(client=sdk, settings=GatewaySettings(mcp_path=""))
    try:
        with httpx.Client(base_url=gw.url, timeout=30) as http:
            for name, reward in ((OURS, 0.0), ("email_send_email", 1.0)):
                answer = http.post("/verify", json=_verify_body(name))
                assert answer.status_code == 200, answer.text
                assert answer.json()["reward"] == reward
    finally:
        gw.stop()
