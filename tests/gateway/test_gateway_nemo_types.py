"""The HTTP gateway refuses what NeMo Gym's own server refuses: a body whose
Content-Type is not JSON, and a ``/verify`` whose Responses-API output items are mistyped.

Observed black box on NeMo Gym 0.7.0's own ``workplace_assistant`` server (its HTTP routes,
``tests/nemo/servers.py``): every JSON route (legacy and typed seed, a tool, ``/verify``,
``/close_session``, ``/aggregate_metrics``) answers 422 (``loc ["body"]``) to a body whose
Content-Type is not ``application/json`` or ``application/<x>+json``, to one without a
Content-Type and to an empty one, whatever the bytes; the media type is matched in any case and
with any parameters; ``charset`` is never consulted (the bytes' own UTF-8/16/32 encoding is
detected); of two Content-Type headers the first counts. Before this, the gateway read any body
as JSON. Each refused request must also leave no trace: no session, no tool run, no close.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from workplace_env.gateway import GatewaySettings
from workplace_env.gateway.translate import is_json_media_type
from workplace_env_client import InvalidRequestError

pytestmark = pytest.mark.gateway(
    backends=("in_process",), settings=GatewaySettings(secret_key="ct-test-secret")
)


SEND = {"recipient": "someone@example.com", "subject": "Media type", "body": "hi"}
SEARCH = {"query": "Media type", "page_size": 50}
ROW = {
    "id": "ct-1",
    "ground_truth": [{"name": "email_send_email", "arguments": json.dumps(SEND)}],
}

#: Read as JSON by the reference (200 on its tool route).
JSON_TYPES = [
    "application/json",
    "APPLICATION/JSON",
    "application/json; charset=utf-8",
    "application/json;charset=UTF-8",
    "application/json ; charset=utf-8",
    "application/json; charset=latin-1",
    "application/json; charset",
    "application/vnd.api+json",
    "application/ld+json; charset=utf-16",
    "application/+json",
]
#: Refused by the reference (422); ``None``: no Content-Type header at all.
NOT_JSON_TYPES = [
    None,
    "",
    "text/plain",
    "text/plain; charset=utf-8",
    "text/json",
    "application/jsonx",
    "application/json+x",
    "application/*",
    "application/x-www-form-urlencoded",
    "multipart/form-data",
    "garbage",
]


def post(http: httpx.Client, path: str, body: Any, content_type: str | None) -> httpx.Response:
    headers = {} if content_type is None else {"content-type": content_type}
    return http.post(path, content=json.dumps(body).encode(), headers=headers)


def sent_count(http: httpx.Client) -> int:
    out = http.post("/email_search_emails", json=SEARCH).json()["output"]
    return 0 if isinstance(out, str) else out["pagination"]["total_emails"]


def assert_refused(answer: httpx.Response, content_type: str | None) -> None:
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    assert problem["failure_kind"] == "invalid_request"
    ((detail,),) = [problem["detail"]]
    assert detail["loc"] == ["body"]
    assert ("no Content-Type" if content_type is None else repr(content_type)) in detail["msg"]


@pytest.mark.parametrize("content_type", JSON_TYPES + NOT_JSON_TYPES)
def test_the_media_type_rule_is_the_references(content_type):
    assert is_json_media_type(content_type) is (content_type in JSON_TYPES)


@pytest.mark.parametrize("content_type", NOT_JSON_TYPES)
def test_a_seed_that_is_not_json_is_422_and_seeds_nothing(http, content_type):
    answer = post(http, "/seed_session", ROW, content_type)
    assert_refused(answer, content_type)
    assert "set-cookie" not in answer.headers
    sid = f"ct-typed-{uuid.uuid4().hex[:8]}"
    episode = {"rollout_id": "r", "attempt": 0}
    typed = {
        "resources_session_id": sid,
        "episode_id": episode,
        "task_id": {"taskset": "ct", "task_id": "t"},
        "task_data": ROW,
    }
    assert_refused(post(http, "/seed_session", typed, content_type), content_type)
    # Neither bound the id: the same typed seed as JSON is a first seed, not a retry.
    assert post(http, "/seed_session", typed, "application/json").status_code == 200
    close = {"resources_session_id": sid, "episode_id": episode}
    assert_refused(post(http, "/close_session", close, content_type), content_type)
    assert http.post("/close_session", json=close).json() == {"resources_session_id": sid}


@pytest.mark.parametrize("content_type", NOT_JSON_TYPES)
def test_a_tool_call_that_is_not_json_is_422_and_runs_nothing(http, content_type):
    assert http.post("/seed_session", json=ROW).status_code == 200
    assert_refused(post(http, "/email_send_email", SEND, content_type), content_type)
    assert sent_count(http) == 0
    http.cookies.clear()  # 422 before the missing session's 404, as the reference
    assert_refused(post(http, "/email_send_email", SEND, content_type), content_type)


@pytest.mark.parametrize("content_type", NOT_JSON_TYPES)
def test_verify_close_and_metrics_that_are_not_json_are_422(http, content_type):
    assert http.post("/seed_session", json=ROW).status_code == 200
    verify = {**ROW, "responses_create_params": {"input": "x"}, "response": {"output": []}}
    assert_refused(post(http, "/verify", verify, content_type), content_type)
    metrics = {"verify_responses": []}
    assert_refused(post(http, "/aggregate_metrics", metrics, content_type), content_type)
    assert_refused(post(http, "/close_session", {}, content_type), content_type)
    # Nothing was closed: the session still runs tools, and still sends.
    assert http.post("/email_send_email", json=SEND).json() == {
        "output": "Email sent successfully."
    }
    assert sent_count(http) == 1


@pytest.mark.parametrize("content_type", JSON_TYPES)
def test_every_json_media_type_is_read(http, content_type):
    assert post(http, "/seed_session", ROW, content_type).status_code == 200
    answer = post(http, "/email_send_email", SEND, content_type)
    assert answer.json() == {"output": "Email sent successfully."}
    assert sent_count(http) == 1


def test_charset_is_not_consulted_and_the_first_content_type_counts(http):
    assert http.post("/seed_session", json=ROW).status_code == 200
    query = json.dumps({"query": "é"}, ensure_ascii=False)
    for encoding, content_type in [
        ("utf-8", "application/json; charset=latin-1"),  # read as the UTF-8 it is
        ("utf-16", "application/json"),  # detected, as json.loads does
    ]:
        answer = http.post(
            "/email_search_emails",
            content=query.encode(encoding),
            headers={"content-type": content_type},
        )
        assert answer.json() == {"output": "No emails found."}, (encoding, answer.text)
    body = json.dumps(SEND).encode()
    first_text = [("content-type", "text/plain"), ("content-type", "application/json")]
    assert http.post("/email_send_email", content=body, headers=first_text).status_code == 422
    assert sent_count(http) == 0
    first_json = [("content-type", "application/json"), ("content-type", "text/plain")]
    assert http.post("/email_send_email", content=body, headers=first_json).status_code == 200
    assert sent_count(http) == 1


# -- the Responses-API items of /verify -----------------------------------------------------------
# Observed black box on the same server: NeMo's verify body types ``response.output`` with its
# Responses types, so a ``function_call`` whose ``arguments`` is an object (not the JSON text a
# model produces) is 422 naming ``response.output.<i>.function_call.arguments``, and so is every
# other mistyped field of the call; an item without a string ``type``, or of a type it does not
# know, is 422 naming the item. Before this the gateway scored such a call.

CALL = {"type": "function_call", "call_id": "c1", "name": "email_send_email", "arguments": "{}"}
AT = ["body", "response", "output"]


def verify_body(*items: Any) -> dict[str, Any]:
    return {**ROW, "responses_create_params": {"input": "x"}, "response": {"output": list(items)}}


@pytest.mark.parametrize(
    ("item", "loc"),
    [
        ({**CALL, "arguments": json.loads(CALL["arguments"])}, [0, "function_call", "arguments"]),
        ({**CALL, "arguments": {"recipient": "a@b.com"}}, [0, "function_call", "arguments"]),
        ({**CALL, "arguments": 5}, [0, "function_call", "arguments"]),
        ({**CALL, "arguments": None}, [0, "function_call", "arguments"]),
        ({**CALL, "arguments": True}, [0, "function_call", "arguments"]),
        ({**CALL, "arguments": []}, [0, "function_call", "arguments"]),
        ({k: v for k, v in CALL.items() if k != "arguments"}, [0, "function_call", "arguments"]),
        ({**CALL, "name": 5}, [0, "function_call", "name"]),
        ({**CALL, "name": None}, [0, "function_call", "name"]),
        ({k: v for k, v in CALL.items() if k != "name"}, [0, "function_call", "name"]),
        ({**CALL, "call_id": 5}, [0, "function_call", "call_id"]),
        ({k: v for k, v in CALL.items() if k != "call_id"}, [0, "function_call", "call_id"]),
        ({**CALL, "id": 5}, [0, "function_call", "id"]),
        ({**CALL, "namespace": 5}, [0, "function_call", "namespace"]),
        ({**CALL, "status": "bogus"}, [0, "function_call", "status"]),
        ({**CALL, "status": 3}, [0, "function_call", "status"]),
        ({**CALL, "type": "bogus"}, [0]),
        ({**CALL, "type": 5}, [0]),
        ({**CALL, "type": None}, [0]),
        ({k: v for k, v in CALL.items() if k != "type"}, [0]),
        (5, [0]),
        ("function_call", [0]),
    ],
)
def test_a_mistyped_output_item_is_422_naming_it(http, sdk, item, loc):
    assert http.post("/seed_session", json=ROW).status_code == 200
    answer = http.post("/verify", json=verify_body(item))
    assert answer.status_code == 422, answer.text
    assert [d["loc"] for d in answer.json()["detail"]] == [AT + loc]
    # Nothing was scored or released: the session still runs tools (a legacy verify ends it).
    assert http.post("/email_send_email", json=SEND).status_code == 200
    http.cookies.clear()  # and without a session (H5 replay) it is refused the same way
    assert http.post("/verify", json=verify_body(item)).status_code == 422
    # gRPC's Verify takes the same output as JSON text and refuses it the same way (V1).
    sid = f"typed-{uuid.uuid4().hex}"
    sdk.seed(sid, (sid, 0), ("ops", "t"), {"id": "t"})
    with pytest.raises(InvalidRequestError) as err:
        sdk.verify(sid, response_output=json.dumps([item]))
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)
    assert [v.field for v in err.value.violations] == [f"response_output_json{path}"]
    assert sdk.verify(sid, response_output=json.dumps([CALL])).reward == 1.0  # not scored before


def test_every_mistyped_item_is_named_and_the_accepted_forms_score(http):
    answer = http.post("/verify", json=verify_body({**CALL, "arguments": {}}, {**CALL, "name": 1}))
    assert [d["loc"] for d in answer.json()["detail"]] == [
        [*AT, 0, "function_call", "arguments"],
        [*AT, 1, "function_call", "name"],
    ]
    # Accepted as the reference accepts them: nulls for the optional fields, a known status,
    # arguments that are text but not JSON, other item types without a look inside.
    accepted = [
        {**CALL, "id": None, "status": None, "namespace": None},
        {**CALL, "id": "fc_1", "status": "completed", "namespace": "ns"},
        {**CALL, "arguments": "not json"},
        {"type": "message", "role": "assistant", "content": "hi"},
        {"type": "reasoning", "id": "r1", "summary": []},
        {"type": "function_call_output", "call_id": "c1", "output": "x"},
    ]
    for item in accepted:
        answer = http.post("/verify", json=verify_body(item))
        assert answer.status_code == 200, (item, answer.text)
        assert answer.json()["mask_sample"] is False
    right = {**CALL, "arguments": json.dumps(SEND)}  # the ground truth, as a string: scored
    assert http.post("/verify", json=verify_body(right)).json()["reward"] == 1.0


# -- message, reasoning and call-output items --------------------------
# Observed black box on the same server: a ``message`` item is read as one of NeMo's three message
# models (chosen by its role, content and status) and its content parts are typed, so a
# ``function_call`` put inside a message's content is 422, not a message to skip; so are a
# message without its content or role, an output message without its id, a reasoning item
# without its id, a call output without its call_id. The locs below are the reference's.

PARTS = (
    "list[function-before[_validate_input_video_part(), union[ResponseInputTextParam,"
    "ResponseInputImageParam,ResponseInputFileParam,NeMoGymInputVideoPart]]]"
)
INPUT_MEMBERS = [
    ["ResponseInputTextParam", "text"],
    ["ResponseInputTextParam", "type"],
    ["ResponseInputImageParam", "detail"],
    ["ResponseInputImageParam", "type"],
    ["ResponseInputFileParam", "type"],
    ["NeMoGymInputVideoPart", "type"],
]
OUT_TEXT = {"type": "output_text", "text": "hi", "annotations": []}


@pytest.mark.parametrize(
    ("item", "locs"),
    [
        (
            {"type": "message", "role": "assistant", "content": [CALL]},
            [[0, "easy_message", "content", "str"]]
            + [[0, "easy_message", "content", PARTS, 0, *m] for m in INPUT_MEMBERS],
        ),
        (
            {"type": "message", "role": "user", "status": "completed", "content": [CALL]},
            [[0, "input_message", "content", 0, *m] for m in INPUT_MEMBERS],
        ),
        (
            {"type": "message", "id": "m1", "role": "assistant", "content": [OUT_TEXT, CALL]},
            [
                [0, "output_message", "content", 1, "NeMoGymResponseOutputText", "annotations"],
                [0, "output_message", "content", 1, "NeMoGymResponseOutputText", "text"],
                [0, "output_message", "content", 1, "NeMoGymResponseOutputText", "type"],
                [0, "output_message", "content", 1, "NeMoGymResponseOutputRefusal", "refusal"],
                [0, "output_message", "content", 1, "NeMoGymResponseOutputRefusal", "type"],
            ],
        ),
        (
            {"type": "message", "role": "assistant", "content": CALL},
            [[0, "easy_message", "content", "str"], [0, "easy_message", "content", PARTS]],
        ),
        ({"type": "message", "role": "assistant"}, [[0, "easy_message", "content"]]),
        ({"type": "message", "content": "hi"}, [[0, "easy_message", "role"]]),
        ({"type": "message", "role": "bogus", "content": "hi"}, [[0, "easy_message", "role"]]),
        (
            {"type": "message", "role": "assistant", "content": "hi", "phase": "x"},
            [[0, "easy_message", "phase"]],
        ),
        (
            {"type": "message", "role": "assistant", "content": [OUT_TEXT]},
            [[0, "output_message", "id"]],
        ),
        (
            {
                "type": "message",
                "id": "m",
                "role": "assistant",
                "status": "x",
                "content": [OUT_TEXT],
            },
            [[0, "output_message", "status"]],
        ),
        ({"type": "reasoning", "summary": []}, [[0, "reasoning", "id"]]),
        ({"type": "reasoning", "id": "r", "summary": "x"}, [[0, "reasoning", "summary"]]),
        (
            {"type": "reasoning", "id": "r", "summary": [{"text": 1}]},
            [[0, "reasoning", "summary", 0, "text"], [0, "reasoning", "summary", 0, "type"]],
        ),
        (
            {"type": "function_call_output", "output": "x"},
            [[0, "function_call_output_input", "call_id"]],
        ),
        (
            {"type": "function_call_output", "id": "o", "status": "completed", "output": "x"},
            [[0, "function_call_output", "call_id"]],
        ),
    ],
)
def test_a_malformed_message_or_other_item_is_422_as_the_reference(http, sdk, item, locs):
    assert http.post("/seed_session", json=ROW).status_code == 200
    answer = http.post("/verify", json=verify_body(item, {**CALL, "arguments": json.dumps(SEND)}))
    assert answer.status_code == 422, answer.text
    assert [d["loc"] for d in answer.json()["detail"]] == [AT + loc for loc in locs]
    assert http.post("/email_send_email", json=SEND).status_code == 200  # nothing released
    # gRPC refuses the same output, naming the same places under response_output_json
    sid = f"typed-{uuid.uuid4().hex}"
    sdk.seed(sid, (sid, 0), ("ops", "t"), {"id": "t"})
    with pytest.raises(InvalidRequestError) as err:
        sdk.verify(sid, response_output=json.dumps([item]))
    assert len(err.value.violations) == len(locs)
    assert all(v.field.startswith("response_output_json[0].") for v in err.value.violations)


def test_well_formed_messages_and_items_are_taken_as_the_reference_takes_them(http):
    accepted = [
        {"type": "message", "role": "assistant", "content": "hi"},
        {"type": "message", "role": "assistant", "content": []},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_image", "detail": "auto"}]},
        {"type": "message", "role": "assistant", "content": "hi", "status": "bogus", "junk": 1},
        {"type": "message", "id": "m1", "role": "assistant", "content": [OUT_TEXT]},
        {"type": "message", "id": "m1", "content": [{"type": "refusal", "refusal": "no"}]},
        {"type": "reasoning", "id": "r", "summary": [{"type": "summary_text", "text": "x"}]},
        {"type": "function_call_output", "call_id": "c", "output": "x"},
    ]
    right = {**CALL, "arguments": json.dumps(SEND)}
    for item in accepted:
        answer = http.post("/verify", json=verify_body(item, right))
        assert answer.status_code == 200, (item, answer.text)
        assert answer.json()["reward"] == 1.0


@pytest.mark.parametrize(
    ("item", "said"),
    [
        (  # a plain assistant message with a list content: an output message, no id
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            },
            [
                "item 0 (type 'message'): id is missing, as an assistant message with a list",
                '"id": "msg_0"',
                '"content": "<text>" (a string)',
                "content[0].annotations is missing, as an output_text part",
            ],
        ),
        (
            {"type": "reasoning", "id": "r", "summary": [{"text": 1}]},
            ["item 0 (type 'reasoning')", "summary[0].text is not accepted", '"summary_text"'],
        ),
        (
            {"type": "function_call", "name": "x", "arguments": {}, "call_id": "c"},
            ["item 0 (type 'function_call')", "arguments is not accepted", '"<JSON text>"'],
        ),
        (
            {"type": "function_call_output", "output": "x"},
            ["item 0 (type 'function_call_output'): call_id is missing"],
        ),
    ],
)
def test_a_refused_output_item_says_in_plain_words_what_to_send(sdk, item, said):
    """Over gRPC each violation names the item's index and type, the field as it is typed,
    what is wrong and the JSON expected; the field paths stay the reference's."""
    sid = f"plain-{uuid.uuid4().hex}"
    sdk.seed(sid, (sid, 0), ("ops", "t"), {"id": "t"})
    with pytest.raises(InvalidRequestError) as err:
        sdk.verify(sid, response_output=[item])
    descriptions = " | ".join(v.description for v in err.value.violations)
    for words in said:
        assert words in descriptions
    assert "NeMoGym" not in descriptions and "Field required" not in descriptions
