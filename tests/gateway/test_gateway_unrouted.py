"""Which requests a gateway path answers 404 (no route) or 405 (a route, another method): a
path that is no route is ``ROUTE_NOT_FOUND`` whatever its method, a route's path answers
another method with ``METHOD_NOT_ALLOWED`` and an ``Allow`` of every method its routes take."""

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
    ("PUT", "/health", 405, NOT_ALLOWED, "GET, HEAD"),
    ("DELETE", "/ready", 405, NOT_ALLOWED, "GET, HEAD"),
    ("PATCH", "/", 405, NOT_ALLOWED, "GET, HEAD"),
    ("POST", "/health", 405, NOT_ALLOWED, "GET, HEAD"),  # a fixed route's path: no tool's name
    ("POST", "/ready", 405, NOT_ALLOWED, "GET, HEAD"),
    ("GET", "/aggregate_metrics", 405, NOT_ALLOWED, "POST"),
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


def test_a_405_names_the_request_and_what_its_path_takes(http: httpx.Client):
    answer = http.put("/health")
    assert answer.json()["detail"] == "PUT /health takes GET, HEAD only"
    assert http.head("/health").status_code == 200  # what Allow names is served


def test_with_a_session_a_path_that_is_no_route_is_still_404(http: httpx.Client):
    """A session changes no routing: ``GET /healthz`` is 404, ``GET`` of a tool 405; ``POST``
    of a name that is no tool is the tool call it always was (the reference's error text)."""
    assert http.post("/seed_session", json=ROW).status_code == 200
    assert http.get("/healthz").status_code == 404
    assert http.get("/email_search_emails").headers["allow"] == "POST"
    called = http.post("/email_search_email", headers=JSON_CT, content=b"{}")
    assert called.status_code == 200, called.text
    assert "output" in called.json()


#: Bodies and headers a path that is no route must not look at: none, plain text, JSON, bytes.
BODIES = [
    ({}, b""),
    ({"content-type": "text/plain"}, b"x"),
    (JSON_CT, b"{}"),
    ({"content-type": "application/octet-stream"}, b"\xff\xfe\x00"),
]


@pytest.mark.parametrize("path", ["/healthz", "/metrics", "/readyz", "/nope_tool", "/%E2%98%83"])
@pytest.mark.parametrize("method", ["POST", "PUT", "GET"])
def test_a_path_that_is_no_route_answers_the_same_whatever_the_body(
    http: httpx.Client, method, path
):
    answers = [
        http.request(method, path, headers=headers, content=body) for headers, body in BODIES
    ]
    assert {a.status_code for a in answers} == {404}, [a.text for a in answers]
    assert {a.json()["reason"] for a in answers} == {NOT_FOUND.name}
    assert len({a.json()["detail"] for a in answers}) == 1


@pytest.mark.parametrize("method", ["GET", "POST", "PUT"])
def test_every_method_gets_the_same_hint(http: httpx.Client, method):
    detail = http.request(method, "/healthz", content=b"x").json()["detail"]
    assert detail == f"{method} /healthz is no route of this gateway; did you mean '/health'?"


@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("path", ["/health/", "/mcp/", "/seed_session/", "/ready//"])
def test_a_trailing_slash_is_404_naming_the_path_without_it(http: httpx.Client, method, path):
    response = http.request(method, path, headers=JSON_CT, content=b"{}")
    assert response.status_code == 404, response.text
    assert "location" not in response.headers
    hint = f"; did you mean {path.rstrip('/')!r}?"
    assert response.json()["detail"] == f"{method} {path} is no route of this gateway{hint}"


@pytest.mark.parametrize("path", ["/", "/health", "/ready"])
def test_head_answers_like_get_without_a_body(http: httpx.Client, path):
    got = http.get(path)
    head = http.head(path)
    assert (head.status_code, head.content) == (got.status_code, b"")
    assert head.headers["content-type"] == got.headers["content-type"]


def test_a_long_path_is_echoed_clipped(http: httpx.Client):
    path = "/" + "x" * 4999
    for method in ("GET", "POST"):
        detail = http.request(method, path, content=b"x").json()["detail"]
        assert detail.startswith(f"{method} /xxx")
        assert detail.endswith("xx is no route of this gateway")
        assert "...(5000 characters)..." in detail
        assert len(detail) < 200


def test_a_long_content_type_is_echoed_cut(http: httpx.Client):
    assert http.post("/seed_session", json=ROW).status_code == 200
    content_type = "text/" + "y" * 3000
    response = http.post("/email_search_emails", headers={"content-type": content_type})
    assert response.status_code == 422
    msg = response.json()["detail"][0]["msg"]
    assert "'text/yyy" in msg
    assert "...(3005 characters)..." in msg
    assert len(msg) < 250


def test_a_404_writes_invisible_format_characters_of_the_path_as_escapes(http: httpx.Client):
    """A bidi override or zero-width character in an echoed path would make the detail read
    otherwise than sent: each is written ``\\u202e``; other characters stay as sent."""
    detail = http.post("/helth%E2%80%AE%E2%80%8B%F0%9F%98%80").json()["detail"]
    assert detail.startswith("POST /helth\\u202e\\u200b\U0001f600 is no route")
