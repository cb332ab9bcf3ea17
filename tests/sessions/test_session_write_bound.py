"""The per-session write bound (``max_session_write_bytes``): the UTF-8 bytes of the
arguments text of a session's applied write-tool calls. A write that would take the session
over the bound is refused RESOURCE_EXHAUSTED ``SESSION_TOO_LARGE`` (limit_bytes, size_bytes)
before it runs, records nothing, and leaves the session serving reads, verify and close; over
gRPC, the SDK (SessionTooLargeError), HTTP (413 on both gateway backends, legacy and typed
seeds) and MCP; across checkpoint and restore; and as a setting. What the store counts (reads,
replays, a legacy re-seed, a zero bound, a restore over the bound) and the exact refusal are
tested on the store, in ``tests/sessions/test_session_bounds.py``."""

from __future__ import annotations

import json
import uuid
from typing import Any

import grpc
import httpx
import pytest
from mcp.shared.exceptions import McpError
from typer.testing import CliRunner

from tests.gateway.test_gateway_mcp import mcp_run
from tests.helpers import (
    BOUND_FIRST,
    BOUND_LIMIT,
    BOUND_REST,
    BOUND_SEARCH,
    GATEWAY_BACKENDS,
    error_info,
    http_total_emails,
    send_args,
    total_emails,
)
from workplace.env.v1 import admin_pb2 as admin_pb
from workplace.env.v1 import environment_pb2 as pb
from workplace_env.cli import app as cli_app
from workplace_env.config import ConfigError, Settings, load_settings
from workplace_env.gateway import TOKEN_HEADER, GatewaySettings
from workplace_env.sandbox.tools.registry import write_size
from workplace_env.sessions import SessionConfig
from workplace_env_client import (
    CapacityError,
    EnvironmentClient,
    SessionLiveError,
    SessionTooLargeError,
    snapshot_from_json,
    snapshot_to_json,
)
from workplace_env_client.admin import join_snapshots, split_snapshot
from workplace_env_client.reasons import JSONRPC_SERVICE_ERROR

EP = ("rollout-wb", 0)
TID = ("unit", "wb")
TASK = {"id": "wb", "ground_truth": []}
ROW = {"id": "wb-row", "ground_truth": []}
SETTINGS = GatewaySettings(secret_key="wb-test")

pytestmark = [
    pytest.mark.server(config=SessionConfig(max_session_write_bytes=BOUND_LIMIT)),
    pytest.mark.gateway(backends=GATEWAY_BACKENDS, settings=SETTINGS),
]


def fresh_sid() -> str:
    return f"wb-{uuid.uuid4().hex}"


def raw_send(sdk: EnvironmentClient, sid: str, arguments: str, call_id: str = "") -> Any:
    """CallTool email_send_email through the raw stub (no SDK retry, ``replayed`` visible)."""
    request = pb.CallToolRequest(
        resources_session_id=sid, tool_name="email_send_email", arguments=arguments, call_id=call_id
    )
    return sdk.stub.CallTool(request, timeout=20)


def sent(sdk: EnvironmentClient, sid: str) -> int:
    return total_emails(sdk.call_tool(sid, "email_search_emails", BOUND_SEARCH))


# -- what counts --------------------------------------------------------------------------------


def test_write_size_counts_the_utf8_bytes_of_write_calls_only():
    assert write_size("email_send_email", BOUND_FIRST) == len(BOUND_FIRST)
    assert write_size("email_send_email", '{"body": "é"}') == len('{"body": "é"}') + 1
    assert write_size("email_send_email", '{"body": "\ud800"}') == len('{"body": "x"}') + 2
    assert write_size("email_search_emails", BOUND_FIRST) == 0  # a read
    assert write_size("no_such_tool", BOUND_FIRST) == 0  # runs nothing: the reference's error text


# -- gRPC and the SDK ---------------------------------------------------------------------------


def test_grpc_one_byte_over_is_refused_with_the_sizes_and_applies_nothing(sdk):
    sid = fresh_sid()
    sdk.seed(sid, EP, TID, TASK)
    raw_send(sdk, sid, BOUND_FIRST)
    over = send_args(BOUND_REST + 1, "second")
    for _ in range(2):  # a retry with the same call_id gets the same refusal: nothing recorded
        with pytest.raises(grpc.RpcError) as err:
            raw_send(sdk, sid, over, call_id="c-over")
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        info = error_info(err.value)
        assert info.reason == "SESSION_TOO_LARGE"
        assert info.metadata["limit_bytes"] == str(BOUND_LIMIT)
        assert info.metadata["size_bytes"] == str(BOUND_LIMIT + 1)
        assert info.metadata["call_bytes"] == str(len(over))
        assert info.metadata["resources_session_id"] == sid
    assert sent(sdk, sid) == 1
    # the call_id was not taken by the refusal: a call that fits runs under it
    at_limit = send_args(BOUND_REST, "second")
    assert not raw_send(sdk, sid, at_limit, call_id="c-over").replayed
    assert sent(sdk, sid) == 2
    # full: the smallest write is refused, reads, verify and close still work
    with pytest.raises(grpc.RpcError) as err:
        raw_send(sdk, sid, "{}")
    assert error_info(err.value).metadata["size_bytes"] == str(BOUND_LIMIT + 2)
    assert sent(sdk, sid) == 2
    assert (
        sdk.call_tool(sid, "company_directory_find_email_address", {"name": "x" * BOUND_LIMIT})
        == []
    )
    assert sdk.verify(sid, []).reward == 1.0
    assert sdk.close_session(sid, EP) == "CLOSED"


def test_sdk_raises_session_too_large_error_a_capacity_error_without_retry_delay(sdk):
    sid = fresh_sid()
    sdk.seed(sid, EP, TID, TASK)
    sdk.call_tool_raw(sid, "email_send_email", BOUND_FIRST)
    with pytest.raises(SessionTooLargeError) as err:
        sdk.call_tool_raw(sid, "email_send_email", send_args(BOUND_REST + 1, "second"))
    assert isinstance(err.value, CapacityError)
    assert (err.value.reason, err.value.session_id) == ("SESSION_TOO_LARGE", sid)
    assert (err.value.limit_bytes, err.value.size_bytes) == (BOUND_LIMIT, BOUND_LIMIT + 1)
    assert err.value.retry_after_s is None  # not a capacity wait: the same call never fits
    sdk.call_tool_raw(sid, "email_send_email", send_args(BOUND_REST, "second"))
    assert sent(sdk, sid) == 2


# -- checkpoint and restore ---------------------------------------------------------------------


def test_restore_carries_the_count(make_server):
    source = make_server(
        SessionConfig(max_session_write_bytes=BOUND_LIMIT), Settings(admin_open=True)
    )
    source.client.seed("kept", EP, TID, TASK)
    source.client.call_tool_raw("kept", "email_send_email", BOUND_FIRST)
    (snapshot,) = source.admin.export_sessions().snapshots
    assert snapshot.write_bytes == len(BOUND_FIRST)
    # through a checkpoint file's JSON and a stream split with the header encoded
    document = snapshot_to_json(snapshot)
    assert document["write_bytes"] == str(len(BOUND_FIRST))
    restored = snapshot_from_json(json.loads(json.dumps(document)))
    pieces = split_snapshot(restored, chunk_bytes=64)
    assert pieces[0].header_encoding and not pieces[0].write_bytes
    (joined,) = join_snapshots(pieces)
    assert joined.write_bytes == len(BOUND_FIRST)
    target = make_server(
        SessionConfig(max_session_write_bytes=BOUND_LIMIT), Settings(admin_open=True)
    )
    assert target.admin.restore_sessions([joined]) == 1
    target.client.seed("kept", EP, TID, TASK)  # claims it
    with pytest.raises(SessionTooLargeError) as err:
        target.client.call_tool_raw("kept", "email_send_email", send_args(BOUND_REST + 1, "second"))
    assert err.value.size_bytes == BOUND_LIMIT + 1
    target.client.call_tool_raw("kept", "email_send_email", send_args(BOUND_REST, "second"))
    assert sent(target.client, "kept") == 2
    (again,) = target.admin.export_sessions().snapshots
    assert again.write_bytes == BOUND_LIMIT


def test_a_checkpoint_file_of_a_session_that_wrote_nothing_has_no_write_bytes():
    """Files stay readable by versions before the field, as long as it is 0."""
    document = snapshot_to_json(admin_pb.SessionSnapshot(resources_session_id="s"))
    assert "write_bytes" not in document


# -- HTTP and MCP -------------------------------------------------------------------------------


def http_send(http: httpx.Client, arguments: str, call_id: str = "") -> httpx.Response:
    headers = {"content-type": "application/json"}
    if call_id:
        headers["x-workplace-call-id"] = call_id
    return http.post("/email_send_email", content=arguments, headers=headers)


@pytest.mark.parametrize("seed_kind", ["legacy", "typed"])
def test_http_over_the_bound_is_413_session_too_large(gateway, http, seed_kind):
    if seed_kind == "legacy":
        assert http.post("/seed_session", json=ROW).status_code == 200
    else:
        body = {
            "resources_session_id": fresh_sid(),
            "episode_id": {"rollout_id": "r-wb", "attempt": 0},
            "task_id": {"taskset": "ts", "task_id": "wb"},
            "task_data": ROW,
        }
        assert http.post("/seed_session", json=body).status_code == 200
    assert http_send(http, BOUND_FIRST).status_code == 200
    for _ in range(2):
        answer = http_send(http, send_args(BOUND_REST + 1, "second"), call_id="h-over")
        assert answer.status_code == 413, answer.text
        body = answer.json()
        assert (body["reason"], body["failure_kind"]) == ("SESSION_TOO_LARGE", "session_too_large")
        assert (body["limit_bytes"], body["size_bytes"]) == (BOUND_LIMIT, BOUND_LIMIT + 1)
        assert "retry-after" not in answer.headers
    assert http_total_emails(http, BOUND_SEARCH) == 1
    assert http_send(http, send_args(BOUND_REST, "second"), call_id="h-over").status_code == 200
    assert http_total_emails(http, BOUND_SEARCH) == 2
    assert http_send(http, "{}").status_code == 413
    verified = http.post("/verify", json={"ground_truth": [], "response": {"output": []}})
    assert verified.status_code == 200


def test_mcp_over_the_bound_is_a_service_error_naming_the_sizes(gateway, http):

    seeded = http.post("/seed_session", json=ROW)
    token = seeded.headers[TOKEN_HEADER]
    assert http_send(http, BOUND_FIRST).status_code == 200
    over = json.loads(send_args(BOUND_REST + 1, "second"))
    with pytest.raises(McpError) as err:
        mcp_run(gateway, {TOKEN_HEADER: token}, lambda s: s.call_tool("email_send_email", over))
    assert err.value.error.code == JSONRPC_SERVICE_ERROR
    assert err.value.error.data == {
        "reason": "SESSION_TOO_LARGE",
        "limit_bytes": BOUND_LIMIT,
        "size_bytes": BOUND_LIMIT + 1,
    }
    assert http_total_emails(http, BOUND_SEARCH) == 1


# -- the setting --------------------------------------------------------------------------------


def test_setting_from_flag_env_and_file(tmp_path):
    assert Settings().session_config().max_session_write_bytes == 64 * 2**20
    settings, sources = load_settings({"max_session_write_bytes": "1000"}, environ={})
    assert (
        settings.session_config().max_session_write_bytes,
        sources["max_session_write_bytes"],
    ) == (1000, "flag")
    env = {"WORKPLACE_ENV_MAX_SESSION_WRITE_BYTES": "0"}
    assert load_settings(environ=env)[0].max_session_write_bytes == 0
    path = tmp_path / "c.toml"
    path.write_text("[server]\nmax_session_write_bytes = 4096\n")
    assert load_settings(config_file=path, environ={})[0].max_session_write_bytes == 4096


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-1", "must be >= 0, got -1"),
        ("2147483648", "must be <= 2147483647, got 2147483648"),
        ("1e3", "'1e3' is not an integer"),
    ],
)
def test_setting_out_of_range_is_refused(value, message):
    with pytest.raises(ConfigError, match="max_session_write_bytes") as err:
        load_settings({"max_session_write_bytes": value}, environ={})
    assert message in str(err.value)


def test_serve_print_config_shows_the_setting():
    runner = CliRunner()
    result = runner.invoke(
        cli_app, ["serve", "--max-session-write-bytes", "12345", "--print-config"], env={}
    )
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "max_session_write_bytes" in line)
    assert "12345" in row and "flag" in row


def test_a_restore_retried_with_another_count_is_another_snapshot(make_server):
    """K3's idempotent retry holds for the same snapshot only: one with another write count
    would install another budget, so it is refused as live (SESSION_LIVE)."""
    source = make_server(
        SessionConfig(max_session_write_bytes=BOUND_LIMIT), Settings(admin_open=True)
    )
    source.client.seed("twice", EP, TID, TASK)
    source.client.call_tool_raw("twice", "email_send_email", BOUND_FIRST)
    (snapshot,) = source.admin.export_sessions().snapshots
    target = make_server(
        SessionConfig(max_session_write_bytes=BOUND_LIMIT), Settings(admin_open=True)
    )
    assert target.admin.restore_sessions([snapshot]) == 1
    assert target.admin.restore_sessions([snapshot]) == 1  # a retry: the same snapshot
    other = admin_pb.SessionSnapshot()
    other.CopyFrom(snapshot)
    other.write_bytes = 0
    with pytest.raises(SessionLiveError):
        target.admin.restore_sessions([other])
