"""Which requests a gateway path answers 404 (no route) or 405 (a route, another method): a
path that is no route is ``ROUTE_NOT_FOUND`` whatever its method, a route's path answers
another method with ``METHOD_NOT_ALLOWED`` and that route's own ``Allow``."""

from __future__ import annotations

import httpx
import pytest

from tests.gateway.test_gateway import JSON_CT, ROW
from workplace_env_client import reasons

NOT_FOUND = reasons.ROUTE_NOT_FOUND
NOT_ALLOWED = reasons.METHOD_NOT_ALLOWED

#: (method, path, status, reason, Allow) of a request without a session cookie: a fixed POST
#: route, a fixed GET route, a tool, names that are neither, a two-segment path.
PATH_TABLE = [
    ("GET", "/seed_session", 405, NOT_ALLOWED, "POST"),
    ("PUT", "/seed_session", 405, NOT_ALLOWED, "POST"),
    ("DELETE", "/verify", 405, NOT_ALLOWED, "POST"),
    ("PUT", "/health", 405, NOT_ALLOWED, "GET"),
    ("DELETE", "/ready", 405, NOT_ALLOWED, "GET"),
    ("POST", "/health", 404, NOT_FOUND, None),  # taken as a tool's name: none such
    ("GET", "/email_search_emails", 405, NOT_ALLOWED, "POST"),
    ("PUT", "/email_search_emails", 405, NOT_ALLOWED, "POST"),
    ("DELETE", "/calendar_create_event", 405, NOT_ALLOWED, "POST"),
    ("POST", "/email_search_emails", 404, reasons.SESSION_LOST, None),
    ("GET", "/healthz", 404, NOT_FOUND, None),
    ("GET", "/readyz", 404, NOT_FOUND, None),
    ("GET", "/metrics", 404, NOT_FOUND, None),
    ("GET", "/nonexistent", 404, NOT_FOUND, None),
    ("PUT", "/nonexistent", 404, NOT_FOUND, None),
    ("DELETE", "/nonexistent", 404, NOT_FOUND, None),
    ("POST", "/nonexistent", 404, NOT_FOUND, None),
    ("GET", "/seed_session/x", 404, NOT_FOUND, None),
    ("PUT", "/a/b", 404, NOT_FOUND, None),
    ("DELETE", "/a/b", 404, NOT_FOUND, None),
    ("POST", "/a/b", 404, NOT_FOUND, None),
]


@pytest.mark.parametrize(("method", "path", "status", "row", "allow"), PATH_TABLE)
def test_a_path_that_is_no_route_is_404_and_a_routes_other_method_405(
    http: httpx.Client, method, path, status, row, allow
):
    response = http.request(method, path, headers=JSON_CT, content=b"{}")
    assert response.status_code == status, response.text
    assert response.json()["reason"] == row.name
    assert response.headers.get("allow") == allow


@pytest.mark.parametrize(
    ("method", "path", "closest"),
    [
        ("GET", "/healthz", "/health"),
        ("PUT", "/readyz", "/ready"),
        ("GET", "/verfy", "/verify"),
        ("DELETE", "/a/b/c", None),
    ],
)
def test_a_404_names_the_request_and_the_closest_route(http: httpx.Client, method, path, closest):
    detail = http.request(method, path).json()["detail"]
    hint = "" if closest is None else f"; did you mean {closest!r}?"
    assert detail == f"{method} {path} is no route of this gateway{hint}"


def test_with_a_session_a_path_that_is_no_route_is_still_404(http: httpx.Client):
    """A session changes no routing: ``GET /healthz`` is 404, ``GET`` of a tool 405; ``POST``
    of a name that is no tool is the tool call it always was (the reference's error text)."""
    assert http.post("/seed_session", json=ROW).status_code == 200
    assert http.get("/healthz").status_code == 404
    assert http.get("/email_search_emails").headers["allow"] == "POST"
    called = http.post("/email_search_email", headers=JSON_CT, content=b"{}")
    assert called.status_code == 200, called.text
    assert "output" in called.json()
