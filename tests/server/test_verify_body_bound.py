"""The bound on what a verify body may hold (``max_verify_output_items``): a body's
Responses-API output over the bound, or a ground truth over ``max_verify_calls``, is refused
right after its parse, before any entry is checked, converted or replayed, on HTTP (422 naming
the field) and gRPC (INVALID_ARGUMENT naming it); at the bound it is scored as ever; 0 removes
the bound; and while a large body is handled, /health and other sessions keep answering."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.helpers import GATEWAY_BACKENDS, HANG_S, gateway_on, wait
from workplace.env.v1 import environment_pb2 as pb
from workplace_env.config import ConfigError, Settings, load_settings
from workplace_env.gateway import GatewaySettings
from workplace_env.gateway.translate import INLINE_BODY_BYTES
from workplace_env.testing.faults import Faults
from workplace_env_client import InvalidRequestError

pytestmark = [pytest.mark.gateway(backends=GATEWAY_BACKENDS)]

BOUND = Settings.max_verify_output_items
CALLS = Settings.max_verify_calls
DELETE = {"name": "email_delete_email", "arguments": '{"email_id": "00000057"}'}
TRUTH = [DELETE]
CALL = {"type": "function_call", "call_id": "c1", **DELETE}
#: Malformed as NeMo's types refuse it: were it looked at, the answer would name it.
BAD_CALL = {"type": "function_call", "call_id": "c0", "name": "x", "arguments": {"not": "text"}}


def message(i: int) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_{i}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}],
    }


def huge_output() -> list[dict[str, Any]]:
    """A 300,000-item output (messages, function calls and their outputs, ~45 MB with the
    row), its first item one the check would refuse."""
    items: list[dict[str, Any]] = [BAD_CALL]
    for i in range(1, 300_000):
        kind = i % 3
        if kind == 0:
            items.append(message(i))
        elif kind == 1:
            items.append({**CALL, "call_id": f"call_{i}", "id": f"fc_{i}", "status": "completed"})
        else:
            items.append(
                {"type": "function_call_output", "call_id": f"call_{i - 1}", "output": '"ok"'}
            )
    return items


def verify_body(output: list[Any], truth: Any = TRUTH) -> dict[str, Any]:
    return {
        "id": "t1",
        "ground_truth": truth,
        "responses_create_params": {},
        "response": {"output": output},
    }


def at_bound(bound: int = BOUND) -> list[dict[str, Any]]:
    """``bound`` entries exactly: the call, then messages of one content part each (two
    entries per message; a last string-content message when the count is even)."""
    output: list[dict[str, Any]] = [CALL]
    while len(output) + sum(1 for o in output if isinstance(o.get("content"), list)) < bound - 1:
        output.append(message(len(output)))
    if len(output) + sum(1 for o in output if isinstance(o.get("content"), list)) < bound:
        output.append({"type": "message", "role": "assistant", "content": "done"})
    return output


def assert_refused_naming(answer: httpx.Response, loc: list[Any], *words: str) -> None:
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert [d["loc"] for d in detail] == [loc]  # the bound alone: no entry was looked at
    for word in words:
        assert word in detail[0]["msg"]


# -- HTTP ----------------------------------------------------------------------------------------


def test_a_huge_body_is_refused_on_its_length(http):
    """A 300,000-item body: 422 naming ``response.output``, the bound and the count,
    and nothing of its first item (no item was checked)."""
    answer = http.post("/verify", json=verify_body(huge_output()))
    assert_refused_naming(
        answer,
        ["body", "response", "output"],
        f"at most {BOUND} output entries",
        "max_verify_output_items",
        "got 300000",
    )


@pytest.mark.parametrize(
    "output",
    [
        pytest.param([BAD_CALL] + [CALL] * BOUND, id="items"),
        pytest.param(
            [BAD_CALL, {**message(0), "content": [{"type": "output_text"}] * (BOUND - 1)}],
            id="content-parts",
        ),
        pytest.param(
            [BAD_CALL, {"type": "reasoning", "id": "r", "summary": [{"x": 1}] * (BOUND - 1)}],
            id="summary-parts",
        ),
    ],
)
def test_one_entry_over_the_bound_is_refused_before_any_is_checked(http, output):
    answer = http.post("/verify", json=verify_body(output))
    assert_refused_naming(answer, ["body", "response", "output"], f"got {BOUND + 1}")


def test_a_ground_truth_over_the_call_bound_is_refused_before_its_entries(http):
    truth = [{"name": 1}] + [DELETE] * CALLS  # its first entry malformed
    answer = http.post("/verify", json=verify_body([CALL], truth))
    assert_refused_naming(
        answer, ["body", "ground_truth"], f"at most {CALLS} calls", f"got {CALLS + 1}"
    )


def test_a_body_at_the_bound_is_scored_as_a_small_one(http):
    big = http.post("/verify", json=verify_body(at_bound()))
    small = http.post("/verify", json=verify_body([CALL]))
    assert big.status_code == small.status_code == 200, big.text
    assert big.json()["reward"] == small.json()["reward"] == 1.0
    assert big.json()["response"]["output"] == at_bound()  # echoed whole


def test_zero_removes_the_bound(server, sdk, gateway_backend, make_server):
    served = make_server(None, Settings(max_verify_output_items=0))
    gateway = gateway_on(
        gateway_backend, served.running, served.client, GatewaySettings(max_verify_output_items=0)
    )
    try:
        with httpx.Client(base_url=gateway.url, timeout=HANG_S) as client:
            output = [CALL] + [{"type": "message", "role": "assistant", "content": "ok"}] * BOUND
            answer = client.post("/verify", json=verify_body(output))
        assert answer.status_code == 200, answer.text
        assert answer.json()["reward"] == 1.0
    finally:
        gateway.stop()


# -- gRPC ----------------------------------------------------------------------------------------


def violations(error: InvalidRequestError) -> list[tuple[str, str]]:
    return [(v.field, v.description) for v in error.violations]


def test_grpc_refuses_an_output_over_the_bound_naming_it(sdk):
    sid = f"over-bound-{uuid.uuid4()}"
    sdk.seed(sid, ("r", 0), ("t", "1"), {"id": "1", "ground_truth": TRUTH})
    try:
        with pytest.raises(InvalidRequestError) as err:
            sdk.verify(sid, response_output=json.dumps([BAD_CALL] + [CALL] * BOUND))
        [(field, why)] = violations(err.value)
        assert field == "response_output_json"
        assert f"at most {BOUND} output entries" in why and f"got {BOUND + 1}" in why
        with pytest.raises(InvalidRequestError) as err:
            sdk.verify(sid, [], ground_truth_json=json.dumps([{"name": 1}] + TRUTH * CALLS))
        assert violations(err.value) == [
            (
                "ground_truth",
                f"at most {CALLS} calls per verify (max_verify_calls), got {CALLS + 1}",
            )
        ]
        assert sdk.verify(sid, response_output=json.dumps(at_bound())).reward == 1.0
    finally:
        sdk.close_session(sid, ("r", 0))


def test_grpc_refuses_a_typed_call_list_over_the_bound_before_converting_it(server):
    """Both typed lists are measured on the message, before their calls become values."""
    from workplace_env.server.servicer import EnvironmentServicer

    class Aborted(Exception):
        pass

    class Context:
        def abort_with_status(self, status: Any) -> None:
            raise Aborted(status.details)

    servicer = EnvironmentServicer(server.store, Settings(max_verify_calls=2))
    three = pb.FunctionCallList(calls=[pb.FunctionCall(name="x", arguments="{")] * 3)
    for request in (
        pb.VerifyRequest(resources_session_id="s", function_calls=three),
        pb.VerifyRequest(
            resources_session_id="s", function_calls=pb.FunctionCallList(), ground_truth=three
        ),
    ):
        with pytest.raises(Aborted, match="at most 2 calls per verify"):
            servicer.Verify(request, Context())


# -- the setting ---------------------------------------------------------------------------------


def test_the_setting_comes_from_flag_env_and_file(tmp_path):
    assert Settings().max_verify_output_items == 10_000
    assert (
        load_settings({"max_verify_output_items": "50"}, environ={})[0].max_verify_output_items
        == 50
    )
    env = {"WORKPLACE_ENV_MAX_VERIFY_OUTPUT_ITEMS": "0"}
    assert load_settings(environ=env)[0].max_verify_output_items == 0
    path = tmp_path / "c.toml"
    path.write_text("[server]\nmax_verify_output_items = 123\n")
    assert load_settings(config_file=path, environ={})[0].max_verify_output_items == 123
    with pytest.raises(ConfigError, match="max_verify_output_items"):
        load_settings({"max_verify_output_items": "-1"}, environ={})
    settings = GatewaySettings.of(Settings(max_verify_output_items=7, max_verify_calls=3))
    assert (settings.max_verify_output_items, settings.max_verify_calls) == (7, 3)


# -- the server keeps serving --------------------------------------------------------------------


@pytest.fixture
def held_verifies(server) -> Iterator[tuple[threading.Event, threading.Event]]:
    """``(entered, release)``: every verify of a session named ``held-*`` waits in the store
    until ``release`` is set, after setting ``entered``."""
    entered, release = threading.Event(), threading.Event()

    def hold(session_id: str) -> None:
        if session_id.startswith("held-"):
            entered.set()
            wait(release)

    faults = Faults.of(server.store)
    faults.on("verify", hold)
    yield entered, release
    release.set()
    faults.on("verify", None)


def others_answer(gateway_url: str, sdk) -> None:
    """/health, another HTTP session's tool call and a gRPC session's call all answer."""
    with httpx.Client(base_url=gateway_url, timeout=HANG_S) as other:
        assert other.get("/health").json() == {"status": "ok"}
        assert other.post("/seed_session", json={"id": "other"}).status_code == 200
        answer = other.post("/company_directory_find_email_address", json={"name": "a"})
        assert answer.status_code == 200
    sid = f"other-{uuid.uuid4()}"
    sdk.seed(sid, ("r", 0), ("t", "1"), {"id": "1"})
    assert sdk.call_tool_raw(sid, "company_directory_find_email_address", '{"name": "a"}')
    sdk.close_session(sid, ("r", 0))


def test_others_answer_while_a_large_allowed_body_is_scored(gateway, sdk, held_verifies):
    entered, release = held_verifies
    body = verify_body(at_bound())
    assert len(json.dumps(body)) > INLINE_BODY_BYTES  # large: off the event loop
    sid = f"held-{uuid.uuid4()}"
    sdk.seed(sid, ("r", 0), ("t", "1"), {"id": "1", "ground_truth": TRUTH})
    answers: list[httpx.Response] = []
    with httpx.Client(base_url=gateway.url, timeout=HANG_S) as client:
        client.post(
            "/seed_session",
            json={
                "resources_session_id": sid,
                "episode_id": {"rollout_id": "r"},
                "task_id": {"taskset": "t", "task_id": "1"},
                "task": {"id": "1", "ground_truth": TRUTH},
            },
        )
        scoring = threading.Thread(target=lambda: answers.append(client.post("/verify", json=body)))
        scoring.start()
        wait(entered)  # the verify is inside the store now
        others_answer(gateway.url, sdk)
        release.set()
        scoring.join(HANG_S)
    assert answers[0].status_code == 200, answers[0].text
    assert answers[0].json()["reward"] == 1.0
    sdk.close_session(sid, ("r", 0))


def test_others_answer_while_an_over_the_bound_body_arrives(gateway, sdk):
    """A refused body sent slowly (chunked): the others answer while it is being received, then
    it is refused on its length."""
    text = json.dumps(verify_body([BAD_CALL] + [CALL] * BOUND)).encode()
    half = threading.Event()
    go_on = threading.Event()

    def chunks() -> Iterator[bytes]:
        yield text[: len(text) // 2]
        half.set()
        wait(go_on)
        yield text[len(text) // 2 :]

    answers: list[httpx.Response] = []
    with httpx.Client(base_url=gateway.url, timeout=HANG_S) as client:
        sending = threading.Thread(
            target=lambda: answers.append(
                client.post(
                    "/verify", content=chunks(), headers={"content-type": "application/json"}
                )
            )
        )
        sending.start()
        wait(half)
        others_answer(gateway.url, sdk)
        go_on.set()
        sending.join(HANG_S)
    assert_refused_naming(answers[0], ["body", "response", "output"], f"got {BOUND + 1}")
