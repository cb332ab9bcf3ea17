"""Input no wire can carry, an oversized session in a checkpoint, and a resent verify.

Every entry answers input Python parses but UTF-8, protobuf or a strict JSON encoder cannot
carry (lone surrogates, integers over 4,300 digits, NaN, deep nesting, undecodable messages)
with the reference's model-visible answer where it has one (a verify skips the call) and
otherwise a request error naming the field, never UNKNOWN/INTERNAL/5xx; and the session it
was sent on, like every other, keeps working and checkpointing.
"""

from __future__ import annotations

import json
from base64 import b64encode

import grpc
import httpx
import itsdangerous
import pytest

from tests.helpers import error_info
from workplace_env.config import Settings
from workplace_env.gateway import GatewaySettings
from workplace_env.server.app import RunningServer
from workplace_env.sessions import SessionConfig
from workplace_env_client import AdminClient, InvalidRequestError
from workplace_env_client import admin as admin_sdk

#: The body's media type, for the posts whose body is what is tested (not its type).
JSON_CT = {"content-type": "application/json"}

SECRET = "hostile-test-secret"
EP, TID = ("r-hostile", 0), ("hostile", "t")
DELETE = ("email_delete_email", '{"email_id": "00000057"}')
GIANT = "9" * 5000
SURROGATE_SEND = '{"recipient": "a@b.com", "subject": "\\ud800", "body": "x"}'
SEARCH = '{"query": "Data Governance"}'


pytestmark = [
    pytest.mark.server(
        config=SessionConfig(retry_window_s=3600.0), settings=Settings(admin_open=True)
    ),
    pytest.mark.gateway(settings=GatewaySettings(secret_key=SECRET)),
]


def _reason(error: grpc.RpcError) -> str:
    return error_info(error).reason


def _exported_ids(server: RunningServer) -> tuple[set[str], dict[str, str]]:
    with AdminClient(f"127.0.0.1:{server.port}", timeout_s=30) as admin:
        snapshots, _, failures = admin.export_sessions()
    return {s.resources_session_id for s in snapshots}, failures


def test_lone_surrogates_are_refused_naming_the_field_and_poison_nothing(server, sdk, http):
    """Not UNKNOWN over gRPC nor 500 over HTTP, and neither the session nor any checkpoint
    is harmed."""
    sdk.seed("sur-1", EP, TID, {"id": "t"})
    with pytest.raises(InvalidRequestError) as err:
        sdk.call_tool_raw("sur-1", "email_send_email", SURROGATE_SEND)
    assert err.value.reason == "INVALID_TOOL_ARGUMENTS"
    assert "arguments.subject" in err.value.message and "surrogate" in err.value.message
    # The session was not written to: it still reads, and every session still exports.
    lookup = ("company_directory_find_email_address", '{"name": "zzzz"}')
    assert sdk.call_tool_raw("sur-1", *lookup) == "[]"
    # A verify call named by a lone surrogate is an unknown tool: skipped, as the reference does.
    call = {"type": "function_call", "call_id": "c", "name": "\\ud800", "arguments": "{}"}
    output = json.dumps([call])
    raw = output.replace("\\\\ud800", "\\ud800")
    assert sdk.verify("sur-1", response_output=raw).reward == 1.0
    # Over HTTP: 422 naming the field, for a seed row, a tool body and a verify body.
    bad_row = '{"id": "t", "prompt": "\\ud800"}'
    seeded = http.post("/seed_session", content=bad_row, headers=JSON_CT)
    assert seeded.status_code == 422
    assert seeded.json()["detail"][0]["loc"] == ["body", "prompt"]
    assert http.post("/seed_session", json={"id": "t"}).status_code == 200
    tool = http.post("/email_send_email", content=SURROGATE_SEND, headers=JSON_CT)
    assert tool.status_code == 422 and tool.json()["failure_kind"] == "invalid_request"
    verify = http.post(
        "/verify", content='{"response": {"output": [], "id": "\\udfff"}}', headers=JSON_CT
    )
    assert verify.status_code == 422
    assert verify.json()["detail"][0]["loc"] == ["body", "response", "id"]
    assert http.post("/email_search_emails", json={"query": "x"}).status_code == 200
    exported, failures = _exported_ids(server)
    assert "sur-1" in exported and failures == {}


def test_giant_integers_are_skipped_in_scoring_and_refused_in_live_calls(sdk, http):
    """Not UNKNOWN on CallTool, SeedSession (ground truth) or Verify (both paths)."""
    giant_call = ("email_delete_email", '{"email_id": ' + GIANT + "}")
    row = {"id": "t", "ground_truth": [{"name": giant_call[0], "arguments": giant_call[1]}]}
    sdk.seed("giant-1", EP, TID, row)  # accepted: the reference skips the call when scoring
    assert sdk.verify("giant-1", []).reward == 1.0  # the ground truth's call is skipped
    assert sdk.verify("giant-1", [giant_call]).reward == 1.0
    assert sdk.verify("giant-1", [giant_call, DELETE]).reward == 0.0  # the other call counts
    items = [
        {"type": "function_call", "call_id": "c", "name": giant_call[0], "arguments": giant_call[1]}
    ]
    assert sdk.verify("giant-1", response_output=json.dumps(items)).reward == 1.0
    with pytest.raises(InvalidRequestError) as err:
        sdk.call_tool_raw("giant-1", *giant_call)
    assert err.value.reason == "INVALID_TOOL_ARGUMENTS"
    assert "arguments.email_id" in err.value.message and "4300 digits" in err.value.message
    with pytest.raises(InvalidRequestError) as err:  # a JSON text field of the request itself
        sdk.verify("giant-1", [], ground_truth_json=f"[{GIANT}]")
    assert [v.field for v in err.value.violations] == ["ground_truth_json"]
    assert http.post("/seed_session", json={"id": "t"}).status_code == 200
    tool = http.post("/email_delete_email", content='{"email_id": ' + GIANT + "}", headers=JSON_CT)
    assert tool.status_code == 422
    body = '{"response": {"output": []}, "n": ' + GIANT + "}"
    assert http.post("/verify", content=body, headers=JSON_CT).status_code == 422


def test_nan_and_deep_nesting_answer_as_the_reference_or_name_the_field(sdk, http):
    sdk.seed("nan-1", EP, TID, {"id": "t"})
    # NaN arguments run, as in the reference's tool route.
    out = sdk.call_tool(
        "nan-1",
        "calendar_create_event",
        '{"event_name": "x", "participant_email": "a@b.com", '
        '"event_start": "2023-11-30 10:00:00", "duration": NaN}',
    )
    # The tool's own answer: one of its duration texts (REFERENCE.md, calendar_create_event);
    # no golden records which one the reference gives a NaN, so either is accepted.
    assert out in (
        "Invalid duration format. Expected a number of minutes.",
        "Duration must be a positive number of minutes.",
    ), out
    with pytest.raises(InvalidRequestError) as err:
        sdk.call_tool_raw("nan-1", "email_search_emails", '{"query": ' * 200 + "1" + "}" * 200)
    assert "nested deeper" in err.value.message
    assert http.post("/seed_session", json={"id": "t"}).status_code == 200
    verify = http.post("/verify", content='{"response": {"output": [], "x": NaN}}', headers=JSON_CT)
    assert verify.status_code == 422
    assert verify.json()["detail"][0]["loc"] == ["body", "response", "x"]
    assert (
        http.post(
            "/verify", content='{"response": {"output": [1e999]}}', headers=JSON_CT
        ).status_code
        == 422
    )


@pytest.mark.parametrize(
    "data",
    [b"\xff\xff\xff", b"\x0a\x03\xff\xfe\xfd", b"\x0a\x80", b"\x12\x05\x0a\x03ab"],
    ids=["garbage", "non-utf8-id", "truncated", "truncated-nested"],
)
@pytest.mark.parametrize("method", ["SeedSession", "CallTool", "Verify", "CloseSession"])
def test_undecodable_messages_are_invalid_argument(server, method, data):
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        raw = channel.unary_unary(
            f"/workplace.env.v1.EnvironmentService/{method}",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        try:
            raw(data, timeout=30)
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, exc.details()
            assert _reason(exc) in ("MALFORMED_REQUEST", "INVALID_REQUEST")
            assert ": :" not in exc.details(), exc.details()  # no empty field name


def test_a_forged_cookie_naming_no_valid_id_reads_as_no_session(gateway):
    """With a known signing key anyone can forge a cookie; its content is still input."""
    signer = itsdangerous.TimestampSigner(SECRET)
    for session in ({"session_id": "\ud800"}, {"session_id": "a b"}, {"session_id": 7}):
        payload = json.dumps(session).encode()  # ASCII escapes: the surrogate survives
        cookie = signer.sign(b64encode(payload)).decode()
        with httpx.Client(base_url=gateway.url, timeout=30) as client:
            client.cookies.set("WorkbenchResourcesServer___workplace_assistant", cookie)
            answer = client.post("/email_search_emails", json={"query": "x"})
            assert answer.status_code == 404 and answer.json()["failure_kind"] == "session_lost"
    deep = b"[" * 5000 + b"]" * 5000
    with httpx.Client(base_url=gateway.url, timeout=30) as client:
        client.cookies.set(
            "WorkbenchResourcesServer___workplace_assistant",
            signer.sign(b64encode(deep)).decode(),
        )
        assert client.post("/email_search_emails", json={}).status_code == 404


def test_a_session_over_the_message_limit_is_saved_and_restored_with_the_others(
    monkeypatch, make_server
):
    """One session over the message limit does not stop `checkpoint save`: all 11 are saved.

    The limit is scaled down (256 KiB messages, 64 KiB pieces) so the test stays small; the
    mechanism is the one of the 64 MiB default.
    """
    monkeypatch.setattr(admin_sdk, "CHUNK_BYTES", 64 * 1024)
    limit = Settings(admin_open=True, max_message_bytes=256 * 1024)
    a, b = make_server(settings=limit), make_server(settings=limit)
    sdk, admin_a, admin_b, env_b = a.client, a.admin, b.admin, b.client
    for i in range(11):
        sdk.seed(f"big-{i}", (f"r{i}", 0), TID, {"id": "t"})
    body = "x" * (200 * 1024)
    for _ in range(4):  # about 800 KB of state: three times the message limit
        send = {"recipient": "a@b.com", "subject": "big", "body": body}
        sdk.call_tool("big-0", "email_send_email", send)
    snapshots, missing, failures = admin_a.export_sessions()
    assert (len(snapshots), missing, failures) == (11, [], {})
    big = next(s for s in snapshots if s.resources_session_id == "big-0")
    assert len(big.state_json) > 3 * 256 * 1024
    assert admin_b.restore_sessions(snapshots) == 11
    env_b.seed("big-0", ("r0", 0), TID, {"id": "t"})  # claims the restored tables
    lookup = '{"email_id": "500", "field": "subject"}'
    info = env_b.call_tool("big-0", "email_get_email_information_by_id", lookup)
    assert info == {"subject": "big"}
    (again,), _, _ = admin_b.export_sessions(["big-0"])
    assert again.state_json == big.state_json


def test_a_legacy_verify_resent_with_another_response_is_scored_afresh(sdk):
    """A resend with a different response is scored afresh, not given the first reward (V3's
    retry is a resend of the same response)."""
    row = {"id": "t", "ground_truth": [{"name": DELETE[0], "arguments": DELETE[1]}]}
    sdk.seed_legacy("best-of-n", row)
    assert sdk.verify("best-of-n", [DELETE]).reward == 1.0  # releases the legacy session
    assert sdk.verify("best-of-n", []).reward == 0.0  # another response: scored, not replayed
    assert sdk.verify("best-of-n", [DELETE]).reward == 1.0
    wrong = ("email_delete_email", '{"email_id": "00000058"}')
    assert sdk.verify("best-of-n", [wrong]).reward == 0.0
    # An override of the ground truth is part of the request too.
    assert sdk.verify("best-of-n", [wrong], ground_truth=[wrong]).reward == 1.0


#: Bodies whose every value Python's parser meets, one of them hidden from the parsed value by
#: a later duplicate key: an integer over 4,300 digits (Python's parser fails on it wherever it
#: is), a lone surrogate and NaN; each is refused as if the duplicate were not there.
SHADOWED = {
    "giant": ('{"id": "t", "n": ' + GIANT + ', "n": 1}', "more than 4300 digits", ["n"]),
    "nested": ('{"id": "t", "x": [{"n": ' + GIANT + ', "n": 1}]}', "4300", ["x", 0, "n"]),
    "surrogate": ('{"id": "t", "s": "\\ud800", "s": "ok"}', "lone surrogate", ["s"]),
}
#: The service's name of each field of :data:`SHADOWED` in a tool's arguments.
ARGUMENT_PATHS = {"giant": "arguments.n", "nested": "arguments.x[0].n", "surrogate": "arguments.s"}


@pytest.mark.parametrize("text,why,loc", SHADOWED.values(), ids=SHADOWED.keys())
@pytest.mark.parametrize(
    "route",
    ["/seed_session", "/verify", "/close_session", "/aggregate_metrics", "/email_send_email"],
)
def test_a_duplicate_key_never_hides_a_refused_value_from_the_gateway(http, route, text, why, loc):
    assert http.post("/seed_session", json={"id": "t"}).status_code == 200
    answer = http.post(route, content=text, headers=JSON_CT)
    assert answer.status_code == 422, answer.text
    (problem,) = answer.json()["detail"]
    assert why in problem["msg"]
    if route == "/email_send_email":  # refused by the service, which names the argument
        (name,) = [k for k, v in SHADOWED.items() if v[0] == text]
        assert problem["msg"].startswith(ARGUMENT_PATHS[name] + ":"), problem
    else:
        assert problem["loc"] == ["body", *loc]


@pytest.mark.parametrize("text,why,loc", SHADOWED.values(), ids=SHADOWED.keys())
def test_a_duplicate_key_never_hides_a_refused_value_from_mcp(http, text, why, loc):
    """MCP's own parser (Python's) fails on a hidden giant integer with HTTP 500: the
    gateway's check sees it first and answers the JSON-RPC parse error."""
    message = text.replace('"id": "t"', '"jsonrpc": "2.0", "id": 1, "method": "tools/list"')
    answer = http.post(
        "/mcp",
        content=message,
        headers={**JSON_CT, "accept": "application/json, text/event-stream"},
    )
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == -32700 and why in error["message"]
    assert "(under a key given more than once" in error["message"]


@pytest.mark.parametrize(
    "key", ["\\ud800", "\\udfff", "a\\udbff"], ids=["high", "low", "after_text"]
)
def test_an_error_echoing_a_lone_surrogate_is_a_refusal_naming_it(sdk, key):
    """A ground truth key holding a lone surrogate is echoed in the violation's field path:
    written as its escape (no trailer can carry the code unit), never UNKNOWN."""
    sid = f"echo-{key[-4:]}"
    sdk.seed(sid, EP, TID, {"id": "t"})
    with pytest.raises(InvalidRequestError) as err:
        sdk.verify(sid, [], ground_truth_json=f'[{{"{key}": null}}]')
    [violation] = err.value.violations
    assert violation.field == f"ground_truth_json[0].{key}"  # the escape, as sent
    sdk.close_session(sid, EP)
