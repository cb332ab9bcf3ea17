"""HTTP <-> SDK translation of the gateway: request bodies, typed and legacy seeds, and SDK errors
as HTTP answers. No routes here (see :mod:`workplace_env.gateway.routes`).
"""

from __future__ import annotations

import email.message
import json
import math
import re
import uuid
from collections.abc import Mapping
from typing import Annotated, Any, cast

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from pydantic import Field, TypeAdapter, ValidationError
from starlette.requests import ClientDisconnect
from starlette.routing import BaseRoute, Match

from workplace_env import session_header, wire
from workplace_env.config import origin
from workplace_env.errors import clip_inline, closest
from workplace_env.gateway import fastjson
from workplace_env.gateway.cookies import (
    COOKIE_ABSENT,
    COOKIE_EXPIRED,
    COOKIE_STATE_KEY,
    COOKIE_UNREADABLE,
    SESSION_ID_KEY,
)
from workplace_env.identity import SESSION_ID_RE
from workplace_env.sandbox.tools import TOOLS
from workplace_env_client import (
    ArgumentError,
    EnvironmentClient,
    InvalidRequestError,
    SessionClosedError,
    SessionConflictError,
    WorkplaceEnvError,
    reasons,
)
from workplace_env_client.checks import row_id
from workplace_env_client.client import MAX_MESSAGE_BYTES
from workplace_env_client.errors import too_large_sizes
from workplace_env_client.json_types import json_type

#: Optional request header: the CallTool idempotency key (CONTRACT T6/T7).
CALL_ID_HEADER = "x-workplace-call-id"
#: The episode a close names when the body gives none; the service ignores the episode of a
#: legacy session (it has none of its own), and a typed one answers EPISODE_MISMATCH.
LEGACY_EPISODE = ("legacy", 0)
_INT32_MAX = 2**31 - 1
#: NeMo's ``EpisodeId.attempt``: an int >= 0, coerced by pydantic's lax mode.
_ATTEMPT: TypeAdapter[int] = TypeAdapter(Annotated[int, Field(ge=0)])
#: NeMo's ``EpisodeId`` refuses a rollout id ending ``-a<N>``, with this message.
_RESERVED_ATTEMPT_SUFFIX = re.compile(r"-a[1-9][0-9]*\Z")
_RESERVED_ATTEMPT_SUFFIX_MSG = (
    "Value error, rollout_id must not end with the reserved attempt suffix '-a<N>'"
)
_TYPED_KEYS = ("resources_session_id", "episode_id", "task_id", "task")
#: The largest body read: the SDK's message limit (a larger one could not reach the service).
MAX_BODY_BYTES = MAX_MESSAGE_BYTES
#: A body longer than this (bytes, or characters once decoded) is parsed, and handed to the
#: service, on a worker thread, so the event loop keeps answering ``/health`` and the other
#: sessions meanwhile (:func:`is_large`). Real bodies (rows, tool arguments, verify bodies of
#: 17-35 KB) stay on the loop, with no thread hop.
INLINE_BODY_BYTES = 256 * 1024

Loc = tuple[str | int, ...]


class HttpProblem(Exception):
    """A request the gateway answers with an error body before or after asking the service."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def json_response(
    content: Any, status_code: int = 200, headers: dict[str, str] | None = None
) -> Response:
    """A JSON body rendered as the reference's stack renders it (compact, UTF-8; the bytes of
    Starlette's ``JSONResponse``, see :mod:`workplace_env.gateway.fastjson`). A non-finite
    float (bodies cannot carry one in, but a statistic of finite numbers can overflow) is
    written ``null``, as pydantic writes it in the reference's answers."""
    try:
        body = fastjson.dumps(content)
    except ValueError:  # "Out of range float values are not JSON compliant"
        body = fastjson.dumps(_nulls_for_non_finite(content))
    return Response(
        body,
        status_code=status_code,
        headers=headers,
        media_type=JSONResponse.media_type,
    )


def _nulls_for_non_finite(value: Any) -> Any:
    """``value`` with every NaN and infinity (in nested dicts and lists) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _nulls_for_non_finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_nulls_for_non_finite(v) for v in value]
    return value


class HeaderName(str):
    """A request header a problem names: its loc is FastAPI's ``["header", <name>]``."""


def _loc(loc: Loc) -> list[str | int]:
    if loc and isinstance(loc[0], HeaderName):
        return ["header", str(loc[0])]
    return ["body", *loc]


def invalid(
    problems: list[tuple[Loc, str]], reason: str = reasons.INVALID_REQUEST.name
) -> HttpProblem:
    """A 422 in FastAPI's shape: ``{"detail": [{type, loc, msg}], "failure_kind", "reason"}``.

    Each loc is under ``body``, or ``["header", name]`` when it starts with a
    :class:`HeaderName`; ``reason`` is the service's ``ErrorInfo`` reason for the refusal
    (INVALID_REQUEST, or e.g. SESSION_HEADER_MISMATCH for CONTRACT X4).
    """
    return HttpProblem(
        json_response(
            {
                "detail": [
                    {"type": "value_error", "loc": _loc(loc), "msg": msg} for loc, msg in problems
                ],
                "failure_kind": reasons.INVALID_REQUEST.failure_kind,
                "reason": reason,
            },
            reasons.INVALID_REQUEST.http_status,
        )
    )


#: NeMo Gym's (FastAPI's) ``detail`` for a body whose bytes are not text.
UNPARSABLE_BODY = "There was an error parsing the body"

_INDEXED = re.compile(r"^(.*)\[(\d+)\]$")


def _field_loc(field: str, sent_as: Mapping[str, str] | None = None) -> Loc:
    """``task.ground_truth[0].arguments`` -> ``("task", "ground_truth", 0, "arguments")``.

    ``sent_as`` renames the service's first field to the one the request sent (``task`` ->
    ``task_data`` for NeMo's seed; ``""``: the body itself was that field; dotted: a nested
    field), so every loc names the field as sent.
    """
    loc: list[str | int] = []
    parts = field.split(".")
    if sent_as and parts:
        head = _INDEXED.match(parts[0])
        name = head.group(1) if head else parts[0]
        if name in sent_as:
            renamed = sent_as[name]
            if isinstance(renamed, HeaderName):  # sent as a request header
                return (renamed,)
            rest = parts[0][len(name) :]
            # a dotted name sent nested (``response.output``) becomes one loc part per level
            parts = [*(renamed + rest).split("."), *parts[1:]]
    for part in parts:
        match = _INDEXED.match(part)
        if match:
            if match.group(1):
                loc.append(match.group(1))
            loc.append(int(match.group(2)))
        elif part:
            loc.append(part)
    return tuple(loc)


def service_error(
    exc: WorkplaceEnvError, seeding: bool = False, sent_as: Mapping[str, str] | None = None
) -> HttpProblem:
    """The HTTP answer to an SDK error: the status and ``failure_kind`` of its row in the error
    registry (:func:`workplace_env_client.reasons.lookup`), a body with ``failure_kind``,
    ``reason`` and ``detail`` (a 422 in FastAPI's shape, :func:`invalid`), a Retry-After on
    429 and 503.

    ``seeding``: a closed id is a 409 conflict for a seed, a lost session (404) otherwise.
    ``sent_as``: the request's names for the service's fields (see :func:`_field_loc`).
    """
    row = reasons.lookup(exc.code, exc.reason)
    status, kind = row.http_on("SeedSession" if seeding else "")
    if status == 422:
        reason = exc.reason if exc.reason in reasons.REASONS else reasons.INVALID_REQUEST.name
        if exc.violations:
            problems = [(_field_loc(v.field, sent_as), v.description) for v in exc.violations]
            return invalid(problems, reason)
        return invalid([((), exc.message)], reason)
    reason = row.name or exc.reason
    body: dict[str, Any] = {"failure_kind": kind, "reason": reason, "detail": exc.message}
    body.update(too_large_sizes(exc))  # SESSION_TOO_LARGE: the bound and the size
    return HttpProblem(json_response(body, status, _retry_after(status, exc)))


def _retry_after(status: int, exc: WorkplaceEnvError) -> dict[str, str]:
    """The Retry-After header of a 429 (the refusal's ``RetryInfo``, whole seconds, at least
    1) or a 503 (1 s); none otherwise."""
    if status == 429:
        return {"retry-after": str(max(1, math.ceil(exc.retry_after_s or 1.0)))}
    if status == 503:
        return {"retry-after": "1"}
    return {}


def row_problem(
    row: reasons.Reason, detail: str, headers: Mapping[str, str] | None = None
) -> HttpProblem:
    """The gateway's own refusal of registry ``row``: its status, and a body
    ``{failure_kind, reason, detail}``, with ``headers``."""
    body = {"failure_kind": row.failure_kind, "reason": row.name, "detail": detail}
    return HttpProblem(json_response(body, row.http_status, dict(headers or {})))


def too_large_problem(detail: str | None = None) -> HttpProblem:
    """413 ``REQUEST_TOO_LARGE`` (no Retry-After: the same body cannot pass later): a body over
    :data:`MAX_BODY_BYTES` (the default ``detail`` names it), however it is sent, or a request
    over the service's message limit."""
    if detail is None:
        detail = f"the body is over the gateway's limit of {MAX_BODY_BYTES} bytes"
    return row_problem(reasons.REQUEST_TOO_LARGE, detail)


def unrouted_problem(request: Request) -> HttpProblem:
    """404 ROUTE_NOT_FOUND for a path no route serves, whatever the method, body or headers:
    ``detail`` ``GET /healthz is no route of this gateway; did you mean '/health'?`` (the path
    clipped by :func:`~workplace_env.errors.clip_inline`; the hint: the path without its
    trailing ``/`` when that is a route, else the closest fixed route or tool path, if one is
    close)."""
    path = request.scope.get("path", "")
    served = [
        route.path
        for route in request.app.routes
        if isinstance(route, BaseRoute) and "{" not in getattr(route, "path", "{")
    ]
    served += [f"/{name}" for name in TOOLS]
    stripped = path.rstrip("/")
    close = stripped if stripped != path and stripped in served else closest(path, served)
    hint = f"; did you mean {close!r}?" if close else ""
    detail = f"{request.method} {clip_inline(path)} is no route of this gateway{hint}"
    return row_problem(reasons.ROUTE_NOT_FOUND, detail)


#: The order methods are listed in an ``Allow`` header.
_METHOD_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _allowed_methods(request: Request) -> list[str]:
    """The methods the routes of the request's path take when its own is not one of them
    (routes of one path for different methods, as ``GET`` and its ``HEAD``, all counted);
    ``[]`` when no route has that path."""
    allowed: set[str] = set()
    for route in request.app.routes:
        methods = getattr(route, "methods", None)
        if not (methods and isinstance(route, BaseRoute)):
            continue
        if route.matches(request.scope)[0] is Match.PARTIAL:
            allowed |= methods
    order = {method: i for i, method in enumerate(_METHOD_ORDER)}
    return sorted(allowed, key=lambda method: (order.get(method, len(order)), method))


def wrong_route_problem(request: Request) -> HttpProblem:
    """405 METHOD_NOT_ALLOWED when a route serves the request's path for other methods:
    ``detail`` ``PUT /health takes GET, HEAD only``, ``Allow: GET, HEAD``; else 404
    ROUTE_NOT_FOUND (:func:`unrouted_problem`)."""
    allowed = _allowed_methods(request)
    if not allowed:
        return unrouted_problem(request)
    listed = ", ".join(allowed)
    path = clip_inline(request.scope.get("path", ""))
    detail = f"{request.method} {path} takes {listed} only"
    return row_problem(reasons.METHOD_NOT_ALLOWED, detail, {"allow": listed})


def draining_problem() -> HttpProblem:
    """503 + Retry-After for a new seed while the gateway drains (CONTRACT X2)."""
    detail = "the server is shutting down; seed elsewhere or retry later"
    return row_problem(reasons.DRAINING, detail, {"retry-after": "1"})


def is_json_media_type(content_type: str | None) -> bool:
    """Whether a Content-Type header value names JSON: ``application/json`` or
    ``application/<anything>+json``, in any case, whatever its parameters. A missing, empty or
    unparsable value is not JSON. ``charset`` is not consulted: the bytes' own encoding is
    detected as ``json.loads`` does (what NeMo Gym's FastAPI servers do, observed black box)."""
    if not content_type:
        return False
    header = email.message.Message()
    header["content-type"] = content_type
    if header.get_content_maintype() != "application":
        return False
    subtype = header.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


def require_json_media_type(request: Request) -> None:
    """Raise 422 (``loc`` ``["body"]``) unless the request's (first) Content-Type is JSON.

    NeMo Gym's own resources server, observed black box (nemo-gym 0.7.0), answers 422 to a
    body of any other media type, and to one without a Content-Type, on every JSON route
    (seed, tools, verify, close, aggregate_metrics): it does not read such a body as JSON.
    """
    content_type = request.headers.get("content-type")
    if not is_json_media_type(content_type):
        got = (
            "no Content-Type"
            if content_type is None
            else f"Content-Type {clip_inline(content_type)!r}"
        )
        raise invalid(
            [((), f"body must be sent as application/json (or application/*+json), got {got}")]
        )


async def read_body(request: Request) -> bytes:
    """The request's body bytes, read once (later calls answer the same bytes).

    Raises 413 REQUEST_TOO_LARGE (:func:`too_large_problem`) for a body over
    :data:`MAX_BODY_BYTES` (no gRPC message could carry it): before reading when its
    Content-Length says so, else as soon as the bytes read (a chunked body) pass the limit;
    408 (which nobody reads) when the client went away before the body was all there.
    """
    cached = getattr(request.state, "body_bytes", None)
    if cached is not None:
        return cast(bytes, cached)
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_BODY_BYTES:  # refused before it is read
        raise too_large_problem()
    parts: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise too_large_problem()
            parts.append(chunk)
    except ClientDisconnect:  # gone, or timed out (gateway.limits): nobody reads an answer
        raise row_problem(reasons.REQUEST_TIMEOUT, "the client went away mid-body") from None
    raw = request.state.body_bytes = b"".join(parts)
    return raw


async def body_text(request: Request) -> str:
    """The request body as text, in the encoding ``json.loads`` detects (UTF-8/16/32, BOM).

    Raises 413 for a body over :data:`MAX_BODY_BYTES` (:func:`read_body`), 422 when the
    Content-Type is not JSON (:func:`require_json_media_type`), and 400
    ``{"detail": "There was an error parsing the body"}`` (reason BODY_UNPARSABLE) when the
    bytes are not text in that encoding (NeMo Gym's FastAPI server, observed black box: a
    decode error is not a JSON error there, so not a 422).
    """
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_BODY_BYTES:  # refused before anything else
        raise too_large_problem()
    require_json_media_type(request)
    raw = await read_body(request)
    try:
        return raw.decode(json.detect_encoding(raw))
    except UnicodeDecodeError as exc:
        raise row_problem(reasons.BODY_UNPARSABLE, UNPARSABLE_BODY) from exc


async def object_body(request: Request, *, constants: bool = False) -> dict[str, Any]:
    """The body as a JSON object we can carry (:mod:`workplace_env.wire`: no lone surrogates,
    giant integers, NaN/Infinity unless ``constants``, or deep nesting), parsed on a worker
    thread when it :func:`is_large`. Raises what :func:`body_text` raises, and 422 naming the
    offending field when it is not such JSON, or not an object (:func:`parse_object`)."""
    text = await body_text(request)
    if is_large(request):
        return await fastjson.off_loop(parse_object, text, constants=constants)
    return parse_object(text, constants=constants)


def is_large(request: Request) -> bool:
    """Whether the request's body (read by :func:`read_body`) is over
    :data:`INLINE_BODY_BYTES`: its parsing and service call belong on a worker thread."""
    return len(getattr(request.state, "body_bytes", b"")) > INLINE_BODY_BYTES


def parse_object(text: str, *, constants: bool = False) -> dict[str, Any]:
    """A body's text (:func:`body_text`) as a JSON object we can carry (see
    :func:`object_body`); raises 422 naming the offending field. Blocking: a body of 64 MiB
    takes about a second on a busy core."""
    try:
        value = fastjson.loads(text, constants=constants)
    except wire.JsonRefused as exc:
        if not exc.path:
            raise invalid([((), f"body is {exc.why}")]) from exc
        raise invalid([(_field_loc(exc.path), exc.why)]) from exc
    if not isinstance(value, dict):
        raise invalid([((), f"body must be a JSON object, got {json_type(value)}")])
    return value


def refuse_header_mismatch(request: Request, session_id: Any) -> None:
    """CONTRACT X4 over HTTP (the rule: :mod:`workplace_env.session_header`): raise 422
    (``reason`` SESSION_HEADER_MISMATCH, ``loc`` ``["body", "resources_session_id"]``, as gRPC's
    INVALID_ARGUMENT maps here) when a value of the ``x-resources-session-id`` header (a header
    sent twice: each) is not the id the body names; nothing is asked of the service then. A
    request without the header, or a body naming no id, passes."""
    if not isinstance(session_id, str):
        return
    try:
        session_header.check_ids_against_header(
            request.headers.getlist(session_header.SESSION_HEADER), (session_id,)
        )
    except session_header.SessionHeaderMismatch as mismatch:
        raise invalid(
            [(_field_loc(v.field), v.description) for v in mismatch.violations], mismatch.reason
        ) from None


def cookie_session(request: Request) -> str | None:
    """The session id the request's cookie names, if any: a cookie naming something that is
    not a session id (possible with a known signing key) reads as no session."""
    sid = request.session.get(SESSION_ID_KEY)
    return sid if isinstance(sid, str) and SESSION_ID_RE.fullmatch(sid) else None


#: Why a request has no session, by how its cookie read (``COOKIE_STATE_KEY``), and what to do.
_NO_SESSION_DETAILS = {
    COOKIE_ABSENT: "no session cookie: seed a session first with POST /seed_session "
    "(its answer sets the cookie)",
    COOKIE_EXPIRED: "the session cookie has expired (older than its Max-Age): seed again with "
    "POST /seed_session",
    COOKIE_UNREADABLE: "the session cookie was not issued by this gateway (tampered, or signed "
    "with another secret, as after a restart without "
    f"{origin('cookie_secret', 'flag')}): seed again with POST /seed_session, and give the "
    f"gateway {origin('cookie_secret', 'flag')} (or ${origin('cookie_secret', 'env')}) to keep "
    "its cookies valid across restarts",
}
#: A signed cookie whose session names no session id (possible only with the signing key).
_NO_SESSION_ID_DETAIL = "the session cookie names no session: seed again with POST /seed_session"


def no_session_detail(request: Request) -> str:
    """Why :func:`cookie_session` found no session in ``request``, and what to do: no cookie,
    an expired one, one this gateway cannot read, or one naming no session id."""
    state = request.scope.get(COOKIE_STATE_KEY, COOKIE_ABSENT)
    return _NO_SESSION_DETAILS.get(state, _NO_SESSION_ID_DETAIL)


def is_typed_seed(body: dict[str, Any]) -> bool:
    """CONTRACT: a typed seed names ``resources_session_id`` or has ``episode_id`` and
    ``task_id`` as JSON objects; anything else (a scalar ``task_id``, none) is a legacy row."""
    return "resources_session_id" in body or (
        isinstance(body.get("episode_id"), dict) and isinstance(body.get("task_id"), dict)
    )


def _ground_truth_problems(row: dict[str, Any], path: Loc) -> list[tuple[Loc, str]]:
    """Shape checks the SDK needs before it can build a task (the service checks the rest)."""
    truth = row.get("ground_truth")
    if not isinstance(truth, list):
        return []  # absent, or a JSON string: kept out of the task (verify takes it from the body)
    problems: list[tuple[Loc, str]] = []
    for i, call in enumerate(truth):
        if not isinstance(call, dict):
            problems.append(((*path, "ground_truth", i), "must be an object {name, arguments}"))
        elif not isinstance(call.get("name"), str):
            problems.append(((*path, "ground_truth", i, "name"), "must be a string"))
    return problems


def parse_episode(value: Any, problems: list[tuple[Loc, str]]) -> tuple[str, int] | None:
    """``(rollout_id, attempt)`` of an ``episode_id`` object, validated and coerced as NeMo Gym's
    ``EpisodeId`` model (``nemo_gym.episode_types``) takes it; None with the problems appended
    (pydantic's messages, ``loc`` the field).

    * ``attempt``: 0 when absent; an integer >= 0 under pydantic's lax rules (``"1"``, ``1.0``
      and ``true`` are 1; ``1.5``, ``"x"``, ``null`` refused), and at most 2**31 - 1 (the
      service's ``int32``: a larger one, which NeMo's model takes, cannot be carried).
    * ``rollout_id``: a string not ending in NeMo's reserved attempt suffix ``-a<N>`` (N >= 1;
      NeMo derives ``<rollout_id>-a<attempt>`` capture keys). Its pattern is the service's check
      (CONTRACT Identities), which as the contract says does not reserve the suffix: gRPC
      takes such an id (identities there are the pair, so no key can collide).
    """
    if not isinstance(value, dict):
        problems.append((("episode_id",), "required: an object {rollout_id, attempt}"))
        return None
    rollout_id = value.get("rollout_id", "")
    ok = True
    if not isinstance(rollout_id, str):
        problems.append((("episode_id", "rollout_id"), "Input should be a valid string"))
        ok = False
    elif _RESERVED_ATTEMPT_SUFFIX.search(rollout_id):
        problems.append((("episode_id", "rollout_id"), _RESERVED_ATTEMPT_SUFFIX_MSG))
        ok = False
    try:
        attempt = _ATTEMPT.validate_python(value.get("attempt", 0))
    except ValidationError as exc:
        problems.append((("episode_id", "attempt"), exc.errors()[0]["msg"]))
        return None
    if attempt > _INT32_MAX:
        problems.append((("episode_id", "attempt"), f"must be at most {_INT32_MAX}"))
        return None
    return (rollout_id, attempt) if ok else None


def parse_typed_seed(
    body: dict[str, Any],
) -> tuple[str, tuple[str, int], tuple[str, str], dict[str, Any]]:
    """``(session_id, (rollout_id, attempt), (taskset, task_id), row)`` of a typed seed body.

    Raises 422 naming every offending field whose type is wrong, and ``task_data`` (NeMo's
    name, required there) when the body carries no row at all: neither ``task`` nor keys of its
    own. The service validates the values (S5) and its violations come back as 422s too.
    """
    problems: list[tuple[Loc, str]] = []
    sid = body.get("resources_session_id")
    if not isinstance(sid, str):
        problems.append((("resources_session_id",), "required: a string"))
    episode = parse_episode(body.get("episode_id"), problems)
    task_id = body.get("task_id")
    taskset = tid = ""
    if not isinstance(task_id, dict):
        problems.append((("task_id",), "required: an object {taskset, task_id}"))
    else:
        taskset, tid = task_id.get("taskset", ""), task_id.get("task_id", "")
        for key, value in (("taskset", taskset), ("task_id", tid)):
            if not isinstance(value, str):
                problems.append((("task_id", key), "must be a string"))
    if "task" in body:
        row, path = body["task"], ("task",)
    else:
        row, path = {k: v for k, v in body.items() if k not in _TYPED_KEYS}, ()
    if row == {} and not path:  # no row at all: NeMo's seed requires its task_data
        problems.append((("task_data",), "Field required"))
    elif not isinstance(row, dict):
        problems.append((path, "must be an object (a dataset row)"))
    else:
        problems.extend(_ground_truth_problems(row, path))
    if problems:
        raise invalid(problems)
    assert isinstance(sid, str) and episode is not None and isinstance(row, dict)
    return sid, episode, (taskset, tid), row


def seeded_row(row: dict[str, Any]) -> dict[str, Any]:
    """The row an HTTP seed hands the SDK: a ground truth written as a string left out. The
    reference's seed takes it, and its ``/verify`` scores the string of its own body ("change
    nothing", REFERENCE.md c.2); the SDK refuses such a row (``task.ground_truth``)."""
    if isinstance(row.get("ground_truth"), str):
        return {k: v for k, v in row.items() if k != "ground_truth"}
    return row


def _legacy_task(row: dict[str, Any]) -> dict[str, Any]:
    """The task a legacy row seeds: the reference accepts any row, so parts the service would
    reject (another environment, malformed ground-truth calls) are left out rather than
    refused (an ``id`` neither a string nor an integer too); verify scores the ground truth of
    its own body anyway."""
    task = {k: row[k] for k in ("id", "category", "prompt", "system") if k in row}
    try:
        row_id(row, "task.id")
    except ArgumentError:
        del task["id"]
    if row.get("environment_name") in (None, "", "workplace_assistant"):
        task["environment_name"] = row.get("environment_name") or ""
    if isinstance(row.get("ground_truth"), list) and not _ground_truth_problems(row, ()):
        task["ground_truth"] = row["ground_truth"]
    return task


def seed_legacy(client: EnvironmentClient, cookie_sid: str | None, row: dict[str, Any]) -> str:
    """Seed a legacy session for ``row``; return its id (blocking; SDK ``seed_legacy``).

    Reuses the cookie's id (a re-seed rebuilds fresh tables, as the reference does); when that
    id cannot be a legacy session any more (closed, or a typed session), starts a new one.
    """
    task = _legacy_task(row)
    sid = cookie_sid or str(uuid.uuid4())
    try:
        try:
            client.seed_legacy(sid, task)
        except InvalidRequestError as exc:
            # a ground truth over the verify bound is refused, not dropped: verify would
            # otherwise score the episode against another truth than its row's
            if not task.get("ground_truth") or any(
                v.field == "task.ground_truth" for v in exc.violations
            ):
                raise
            client.seed_legacy(sid, {k: v for k, v in task.items() if k != "ground_truth"})
    except (SessionClosedError, SessionConflictError):
        if cookie_sid is None:
            raise
        return seed_legacy(client, None, row)
    return sid
