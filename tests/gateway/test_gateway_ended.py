"""A tool call on a cookie session that has ended says how it ended (CONTRACT T4, T5, V2)."""

from __future__ import annotations

import httpx

from tests.gateway.test_gateway import ROW, verify_body
from workplace_env_client import reasons


def test_a_tool_call_after_verify_says_the_verify_released_the_session(http: httpx.Client):
    """V2 releases a cookie session: a later call is 404 SESSION_LOST whose ``detail`` says the
    verify released it, not that the server never held it."""
    assert http.post("/seed_session", json=ROW).status_code == 200
    assert http.post("/verify", json=verify_body([])).status_code == 200
    called = http.post("/email_search_emails", json={"query": "x"})
    assert called.status_code == 404, called.text
    body = called.json()
    assert (body["failure_kind"], body["reason"]) == ("session_lost", reasons.SESSION_LOST.name)
    assert "was verified and released (a legacy session ends at its verify" in body["detail"]
