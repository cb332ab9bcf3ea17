"""The legacy cookie HTTP path of the reference, over the gRPC service (CONTRACT "The legacy
HTTP path").

Every route is a thin client of the gRPC service through an SDK client (over gRPC, or over the
co-hosted servicer in-process: :mod:`workplace_env.server.in_process`): sessions, tools, scoring
and their errors all live in the service; this module only translates HTTP bodies, cookies and
status codes. Routes:

=========================  =====================================================================
``POST /seed_session``     body: a dataset row -> ``200 {"mcp": <MCP metadata>}`` (``{}`` when
                           MCP is not served), sets the session cookie, and the
                           ``x-workplace-session-token`` header (an MCP token for the session).
                           A legacy row (scalar ``task_id`` or none) seeds a legacy session
                           (SDK ``seed_legacy``): its id is the cookie's, or a new uuid4; a
                           re-seed on the same cookie rebuilds fresh tables, as the reference
                           does. A typed body is a typed ``SeedSession`` (S1-S8): NeMo Gym's
                           ``ResourcesSeedSessionRequest`` (``task_data`` = the row; H1,
                           :mod:`~workplace_env.gateway.nemo_protocol`), or (names
                           ``resources_session_id``, or carries ``episode_id`` and ``task_id``
                           as objects) ``{resources_session_id, episode_id, task_id, task:
                           <row>}`` (without ``task`` the other fields are the row). It answers
                           ``{resources_session_id, resources_tools}`` (NeMo's MCP metadata)
                           and the cookie then names that id.
``POST /<tool_name>``      body: the arguments object -> ``200 {"output": ...}``, the bytes
                           ``{"output":`` + the gRPC output JSON text + ``}`` (byte-exact to
                           the reference, error texts included).
``POST /verify``           body: the row plus a Responses-API ``response`` -> ``{
                           responses_create_params, response, reward, mask_sample, failure_kind,
                           failure_reason}``; predicted calls are ``response.output``'s
                           ``function_call`` items, the ground truth is the body's
                           ``ground_truth`` (a string or an array of string-valued objects, as
                           the reference types it; absent: the seeded task's). Legacy
                           sessions are released (V2), resends inside the retry window score
                           the same (V3), an unknown session is a masked
                           ``session_lost`` sample (V4); a body with no session cookie at all
                           is scored by replay (H5, offline re-verification).
``POST /close_session``    body: ``{resources_session_id, episode_id}`` (with a cookie, both
                           may be left out: the cookie's session, the legacy placeholder
                           episode; a body naming an id names its episode too) ->
                           ``{"outcome": ...}``;
                           exactly ``{resources_session_id, episode_id}`` (NeMo's typed close)
                           -> ``{"resources_session_id": ...}`` (H2), the outcome in the
                           ``x-workplace-close-outcome`` header.
``POST /aggregate_metrics`` NeMo's ``AggregateMetricsRequest`` -> its ``AggregateMetrics`` (H3).
``POST /session_token``    body: ``{}`` or ``{resources_session_id}`` -> an MCP session token.
``GET /reverify_mode``     ``"stateless"`` (H4).
``GET /``, ``GET /health`` ``{"status": "ok"}``.
=========================  =====================================================================

Errors (JSON bodies with ``failure_kind``; 422s in FastAPI's ``detail`` shape, with ``loc``
naming the offending field, and the service's ``reason``): a Content-Type that is not JSON (or
none; as NeMo Gym's server), body not JSON / not an object, or a malformed typed seed (one
without a row: ``task_data``), close (one naming an id without ``episode_id``) or verify (as
NeMo's types, :mod:`workplace_env.responses`; or over the verify bounds of
:class:`~workplace_env.gateway.settings.GatewaySettings`, checked before anything else in the
body) -> 422; an ``x-resources-session-id`` header
naming another session than the body -> 422 ``SESSION_HEADER_MISMATCH`` (CONTRACT X4); a body
over the limit -> 413 ``REQUEST_TOO_LARGE``; a write call that would take its session over
the server's ``max_session_write_bytes`` -> 413 ``SESSION_TOO_LARGE`` (``limit_bytes``,
``size_bytes``; nothing applied); bytes that
are not text -> 400 (as NeMo Gym's server); a tool call
without a live session -> 404 ``failure_kind "session_lost"`` (``reason`` SESSION_LOST,
SESSION_CLOSED or SESSION_EXPIRED); a typed seed on a bound or closed id, a reused
``x-workplace-call-id``, a close for another episode -> 409; capacity -> 429 with
``Retry-After``; a tool output over the server's message limit, or over the SDK client's when
the server's is larger -> 502 ``RESPONSE_TOO_LARGE``;
the service unavailable -> 503, its deadline -> 504, anything else it refuses -> 502.
Below the routes (:mod:`workplace_env.gateway.limits`): headers or a body slower than the
timeouts -> 408 ``REQUEST_TIMEOUT``, a connection beyond the limit -> 503
``TOO_MANY_CONNECTIONS``. A body over :data:`~workplace_env.gateway.translate.INLINE_BODY_BYTES`
is parsed, and handed to the service, on a worker thread; aggregations always run on one.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from importlib import metadata
from typing import Any

import grpc
from fastapi import FastAPI, Request
from fastapi.dependencies.utils import get_typed_return_annotation
from fastapi.responses import Response
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.routing import Route

from workplace_env import wire
from workplace_env.gateway import fastjson
from workplace_env.gateway.cookies import (
    SESSION_ID_KEY,
    CookieCodec,
    SessionCookieMiddleware,
    SessionTokens,
)
from workplace_env.gateway.docs import ROW_EXAMPLE, body_doc, problem
from workplace_env.gateway.mcp_tools import TOKEN_HEADER, McpGateway
from workplace_env.gateway.nemo_echo import create_params_echo
from workplace_env.gateway.nemo_protocol import (
    REVERIFY_MODE,
    aggregate_metrics,
    close_problems,
    is_nemo_close,
    is_nemo_seed,
    mcp_metadata,
    parse_nemo_seed,
    replay_verify,
    seed_response,
)
from workplace_env.gateway.readiness import health_probe
from workplace_env.gateway.settings import GatewaySettings
from workplace_env.gateway.translate import (
    CALL_ID_HEADER,
    LEGACY_EPISODE,
    HeaderName,
    HttpProblem,
    Loc,
    body_text,
    cookie_session,
    draining_problem,
    invalid,
    is_large,
    is_typed_seed,
    json_response,
    object_body,
    parse_episode,
    parse_object,
    parse_typed_seed,
    read_body,
    refuse_header_mismatch,
    seed_legacy,
    seeded_row,
    service_error,
)
from workplace_env.responses import (
    GROUND_TRUTH_LIST,
    GROUND_TRUTH_STR,
    calls_bound_problem,
    ground_truth_problems,
    output_bound_problem,
    response_output_problems,
)
from workplace_env.verify import bare_predicted_names
from workplace_env_client import EnvironmentClient, SessionLostError, WorkplaceEnvError, reasons
from workplace_env_client.messages import CheckedJson

#: Response header of a typed close: its outcome (CLOSED, ALREADY_CLOSED, NOT_SEEDED), which
#: NeMo's close response has no field for.
CLOSE_OUTCOME_HEADER = "x-workplace-close-outcome"
#: ``/verify``'s body names for the service's Verify fields (a replay's seed: the body is the row).
_VERIFY_SENT_AS = {
    "response_output_json": "response.output",
    "ground_truth_json": "ground_truth",
    "task": "",
}


#: A tool call's ``call_id`` arrives as a request header.
_CALL_SENT_AS = {"call_id": HeaderName(CALL_ID_HEADER)}


def _json_text(value: Any) -> str:
    """``value`` as JSON text for the service (which parses it again)."""
    return fastjson.dumps(value, allow_nan=True).decode("utf-8")


class _DirectRoute(APIRoute):
    """A FastAPI route that calls its endpoint itself when FastAPI has nothing to resolve.

    For an endpoint that takes the ``Request`` and plain ``str`` path parameters only and
    returns a ``Response``, FastAPI's request handler does nothing but that call (no body to
    read, no dependency, no validation that can fail, no serialization), yet its dependency
    solving per request cost about a sixth of the gateway's CPU on the hot routes.
    Such an endpoint is called directly; any other gets FastAPI's handler. The route stays
    FastAPI's: its OpenAPI document, middleware and exception handlers are unchanged (only
    FastAPI's OpenTelemetry spans for the dependency and endpoint steps, emitted when a tracer
    is configured, are not made for such routes; the request's own span is).
    """

    def get_route_handler(self) -> Callable[[Request], Any]:
        dependant = self.dependant
        params = dependant.path_params
        simple = (
            dependant.request_param_name is not None
            and not (dependant.query_params or dependant.header_params)
            and not (dependant.cookie_params or dependant.body_params or dependant.dependencies)
            and all(p.field_info.annotation is str and not p.field_info.metadata for p in params)
            and dependant.response_param_name is None
            and dependant.background_tasks_param_name is None
            and dependant.http_connection_param_name is None
            and dependant.security_scopes_param_name is None
            and get_typed_return_annotation(self.endpoint) is Response
            and inspect.iscoroutinefunction(self.endpoint)
        )
        if not simple:
            return super().get_route_handler()
        endpoint, request_name = self.endpoint, dependant.request_param_name

        async def handler(request: Request) -> Response:
            return await endpoint(**{request_name: request}, **request.path_params)  # type: ignore[no-any-return]

        return handler


def _version() -> str:
    try:
        return metadata.version("workplace-env")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0"


def create_app(client: EnvironmentClient, settings: GatewaySettings | None = None) -> FastAPI:
    """The gateway app over ``client``, an SDK client (owned by the caller): over gRPC, or
    in-process on the co-hosted server (:func:`~workplace_env.server.in_process.in_process_client`).

    ``settings`` default to :class:`GatewaySettings` (random per-process secret, the
    reference's cookie, MCP at ``/mcp``). Serve it with uvicorn (``lifespan`` on: MCP runs in
    it); see :func:`workplace_env.gateway.serve.start_gateway` and ``run_gateway``.
    """
    settings = settings or GatewaySettings()
    blocking = client.transport.blocking
    probe = health_probe(client)
    tokens = SessionTokens(settings.secret_key, settings.token_max_age_s)
    mcp = McpGateway(client, tokens, _version()) if settings.mcp_path else None

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if mcp is None:
            yield
            return
        async with mcp.lifespan():
            yield

    app = FastAPI(
        title="workplace-env HTTP gateway",
        version=_version(),
        description=(
            "The reference's legacy cookie HTTP path (NeMo Gym `workplace_assistant`), "
            "byte-compatible, over the gRPC service; plus the 27 tools over MCP at "
            f"`{settings.mcp_path or '(off)'}`. Send JSON bodies; keep the "
            f"`{settings.cookie_name}` cookie between requests."
        ),
        lifespan=lifespan,
    )
    app.router.route_class = _DirectRoute
    app.add_middleware(
        SessionCookieMiddleware,
        codec=CookieCodec(settings.secret_key, settings.cookie_max_age_s),
        cookie_name=settings.cookie_name,
        https_only=settings.https_only,
    )
    app.state.client = client
    app.state.draining = threading.Event()  # X2: set on a stop signal (gateway.serve)
    app.state.tokens = tokens
    app.state.mcp = mcp

    @app.exception_handler(HttpProblem)
    async def _problem_handler(request: Request, exc: HttpProblem) -> Response:
        return exc.response

    async def call(
        fn: Callable[..., Any],
        *args: Any,
        seeding: bool = False,
        sent_as: Mapping[str, str] | None = None,
        off_loop: bool = False,
        **kw: Any,
    ) -> Any:
        """``fn`` of the client: on a worker thread when its transport blocks (gRPC) or
        ``off_loop`` (a large body the service parses again); its refusals as HTTP."""
        try:
            if blocking or off_loop:
                return await run_in_threadpool(fn, *args, **kw)
            return fn(*args, **kw)  # in-process: sub-millisecond, no thread hop
        except WorkplaceEnvError as exc:
            raise service_error(exc, seeding=seeding, sent_as=sent_as) from exc

    @app.get("/", summary="Health", tags=["health"])
    @app.get("/health", summary="Health", tags=["health"])
    async def health() -> dict[str, str]:
        """Always ``{"status": "ok"}`` while the gateway serves."""
        return {"status": "ok"}

    @app.get("/ready", summary="Readiness", tags=["health"])
    async def ready() -> Response:
        """``200 {"status": "ready"}``; ``503 {"status": "draining"}`` from the first instant
        of shutdown (CONTRACT X2), so balancers stop sending new episodes; over a gRPC
        target, 503 ``{"status": "backend_unavailable" | "backend_not_serving"}`` while the
        gRPC server's health service does not answer SERVING."""
        if app.state.draining.is_set():
            return json_response({"status": "draining"}, 503, {"retry-after": "1"})
        why = None if probe is None else await run_in_threadpool(probe)
        if why is not None:
            return json_response({"status": why}, 503, {"retry-after": "1"})
        return json_response({"status": "ready"})

    @app.get("/reverify_mode", summary="Re-verify mode", tags=["legacy"])
    async def reverify_mode() -> str:
        """``"stateless"`` (CONTRACT H4): scoring is a pure replay of the request, so a
        ``/verify`` without a session re-scores a saved rollout."""
        return REVERIFY_MODE

    @app.post(
        "/aggregate_metrics",
        summary="Aggregate verify responses (NeMo Gym)",
        tags=["legacy"],
        openapi_extra=body_doc(
            "NeMo Gym's `AggregateMetricsRequest`.",
            {
                "two rollouts": {
                    "verify_responses": [
                        {"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0},
                        {"_ng_task_index": 1, "_ng_rollout_index": 0, "reward": 0.0},
                    ]
                }
            },
        ),
        responses={422: problem("`verify_responses` is not an array of objects.")},
    )
    async def aggregate(request: Request) -> Response:
        """NeMo Gym's ``AggregateMetrics`` for the verify responses (CONTRACT H3)."""
        # parsed and aggregated on a worker thread: a large body takes seconds
        return await fastjson.off_loop(aggregated, await body_text(request))

    def aggregated(text: str) -> Response:
        """``/aggregate_metrics`` past reading its body (blocking): parse, aggregate, answer;
        the collector paused for a large body (its full collections would walk every row,
        holding the interpreter from the event loop: :func:`workplace_env.wire.paused_if_large`)."""
        with wire.paused_if_large(text):
            # NaN/Infinity parse, as in the reference (its model takes the values as they come)
            body = parse_object(text, constants=True)
            rows = body.get("verify_responses")
            if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
                raise invalid([(("verify_responses",), "required: an array of objects")])
            return json_response(aggregate_metrics(rows))

    @app.post(
        "/seed_session",
        summary="Seed a session (legacy row or typed)",
        tags=["legacy"],
        openapi_extra=body_doc(
            "A dataset row (legacy), or a typed seed.",
            {
                "legacy row": ROW_EXAMPLE,
                "typed": {
                    "resources_session_id": "s1",
                    "episode_id": {"rollout_id": "r1", "attempt": 0},
                    "task_id": {"taskset": "nemo", "task_id": "nemo-example-2"},
                    "task": ROW_EXAMPLE,
                },
            },
        ),
        responses={
            200: {
                "description": 'A legacy row: `{"mcp": {server_name, url_path, transport, '
                "headers}}` (`{}` when MCP is not served); a typed seed: `{resources_session_id, "
                f"resources_tools}}`. `Set-Cookie` names the session, `{TOKEN_HEADER}` is an MCP "
                "token for it.",
            },
            404: problem("Typed seed of an id evicted after its idle TTL (`SESSION_EXPIRED`)."),
            409: problem("Typed seed: the id is bound to another episode/task, or closed."),
            422: problem("Not a JSON object, or a malformed typed seed (`loc` names the field)."),
            429: problem("The service is at capacity (`Retry-After`)."),
            503: problem(
                "The service is unavailable (tables, draining, unreachable); `Retry-After`."
            ),
        },
    )
    async def seed_session(request: Request) -> Response:
        if app.state.draining.is_set():  # X2: no new episodes while shutting down
            raise draining_problem()
        body = await object_body(request)
        if is_nemo_seed(body) or is_typed_seed(body):  # H1; the cookie names the typed id
            parse = parse_nemo_seed if is_nemo_seed(body) else parse_typed_seed
            sid, episode, task_id, row = parse(body)
            row = seeded_row(row)
            refuse_header_mismatch(request, sid)  # X4
            # 422 locs name the row's field as sent: NeMo's task_data, our task, or the body
            sent_as = {
                "task": "task_data" if is_nemo_seed(body) else "task" if "task" in body else ""
            }
            await call(
                client.seed,
                sid,
                episode,
                task_id,
                row,
                seeding=True,
                sent_as=sent_as,
                off_loop=is_large(request),
            )
            request.session[SESSION_ID_KEY] = sid
            token = tokens.mint(sid)
            meta = mcp_metadata(settings.mcp_path, token) if mcp is not None else None
            return json_response(seed_response(sid, meta), headers={TOKEN_HEADER: token})
        else:
            sid = await call(
                seed_legacy,
                client,
                cookie_session(request),
                body,
                seeding=True,
                sent_as={"task": ""},  # the body is the row
                off_loop=is_large(request),
            )
        request.session[SESSION_ID_KEY] = sid
        token = tokens.mint(sid)
        if mcp is None:
            return Response(b"{}", media_type="application/json", headers={TOKEN_HEADER: token})
        # As NeMo Gym's servers with MCP exposure answer a legacy seed: its agents (and its
        # sandbox tools) find the MCP server and the session token under "mcp".
        meta = mcp_metadata(settings.mcp_path, token)
        return json_response({"mcp": meta}, headers={TOKEN_HEADER: token})

    @app.post(
        "/verify",
        summary="Score the episode",
        tags=["legacy"],
        openapi_extra=body_doc(
            "The dataset row plus the model's Responses-API `response`.",
            {
                "verify": {
                    **ROW_EXAMPLE,
                    "responses_create_params": {"input": "Delete email 00000057"},
                    "response": {
                        "output": [
                            {
                                "type": "function_call",
                                "name": "email_delete_email",
                                "arguments": '{"email_id": "00000057"}',
                                "call_id": "call_1",
                            }
                        ]
                    },
                }
            },
        ),
        responses={
            422: problem(
                "Not a JSON object, `response.output` not an array, or an output item NeMo's "
                "Responses types refuse (`loc` names it: a `function_call`'s `arguments` must "
                "be a JSON string); `response.output` over the server's "
                "`max_verify_output_items` entries, or `ground_truth` over its "
                "`max_verify_calls` calls (checked first: `loc` names the list)."
            )
        },
    )
    async def verify(request: Request) -> Response:
        text = await body_text(request)
        sid = cookie_session(request)
        unreadable = sid is None and settings.cookie_name in request.cookies  # V4
        if blocking or is_large(request):  # a large body: seconds to parse and check
            return await fastjson.off_loop(score, text, sid, unreadable)
        return score(text, sid, unreadable)

    def score(text: str, sid: str | None, unreadable: bool) -> Response:
        """``/verify`` past reading its body (blocking): parse, bound, check, score, answer."""
        body = parse_object(text)
        response = body.get("response")
        if not isinstance(response, dict):
            raise invalid([(("response",), "required: the Responses-API response object")])
        output = response.get("output")
        if not isinstance(output, list):
            raise invalid([(("response", "output"), "required: an array of output items")])
        # The body's lists are bounded before anything looks at their entries
        bounds = (
            (
                ("response", "output"),
                output_bound_problem(output, settings.max_verify_output_items),
            ),
            (
                ("ground_truth",),
                calls_bound_problem(body.get("ground_truth"), settings.max_verify_calls),
            ),
        )
        if over := [(loc, why) for loc, why in bounds if why is not None]:
            raise invalid(over)
        # Refused as NeMo's verify body types refuse them, every problem named at once.
        problems: list[tuple[Loc, str]] = [
            (("response", "output", *path), why) for path, why in response_output_problems(output)
        ]
        if "ground_truth" in body and (truth := ground_truth_problems(body["ground_truth"])):
            problems += [(("ground_truth", GROUND_TRUTH_LIST, *p), why) for p, why in truth]
            problems.append((("ground_truth", GROUND_TRUTH_STR), "Input should be a valid string"))
        if problems:
            raise invalid(problems)
        if mcp is not None:  # REFERENCE.md (c)1: with MCP exposure on, scored as bare names
            output = bare_predicted_names(output)
        # Checked above: a co-hosted service does not check them again (CheckedJson).
        kwargs: dict[str, Any] = {"response_output": CheckedJson(_json_text(output))}
        if "ground_truth" in body:
            kwargs["ground_truth_json"] = CheckedJson(_json_text(body["ground_truth"]))
        if unreadable:
            reward, mask, kind, reason = 0.0, True, "session_lost", "unreadable session cookie"
        else:
            try:
                if sid is None:  # H5: offline re-verification, scored by replay of the body
                    result = replay_verify(client, body, kwargs)
                else:
                    result = client.verify(sid, **kwargs)
            except WorkplaceEnvError as exc:
                raise service_error(exc, sent_as=_VERIFY_SENT_AS) from exc
            reward, mask = result.reward, result.mask_sample
            kind, reason = result.failure_kind, result.failure_reason
        params = body.get("responses_create_params")
        return json_response(
            {
                # H5: a re-verification answers as NeMo's verify body re-serialises it
                "responses_create_params": params if sid else create_params_echo(params),
                "response": response,
                "reward": reward,
                "mask_sample": mask,
                "failure_kind": kind or None,
                "failure_reason": reason or None,
            }
        )

    @app.post(
        "/close_session",
        summary="Close a session",
        tags=["legacy"],
        openapi_extra=body_doc(
            "The typed close body; `resources_session_id` defaults to the cookie's session.",
            {"typed": {"resources_session_id": "s1", "episode_id": {"rollout_id": "r1"}}},
        ),
        responses={
            409: problem("The session is bound to another episode."),
            422: problem("Malformed body (`loc` names the field)."),
        },
    )
    async def close_session(request: Request) -> Response:
        body = await object_body(request)
        sid = body.get("resources_session_id", cookie_session(request))
        problems = close_problems(body)
        if not isinstance(sid, str):
            problems.append(
                (("resources_session_id",), "required (a string) when there is no cookie")
            )
        if "episode_id" not in body and ("resources_session_id" in body or sid is None):
            # NeMo's typed close names both; only the cookie's legacy session may omit them
            problems.append((("episode_id",), "Field required"))
        episode = (
            parse_episode(body["episode_id"], problems) if "episode_id" in body else LEGACY_EPISODE
        )
        if problems:
            raise invalid(problems)
        refuse_header_mismatch(request, body.get("resources_session_id"))  # X4
        outcome = await call(client.close_session, sid, episode)
        if is_nemo_close(body):  # H2: NeMo's ResourcesCloseSessionResponse, outcome aside
            return json_response(
                {"resources_session_id": sid}, headers={CLOSE_OUTCOME_HEADER: outcome}
            )
        return json_response({"outcome": outcome})

    @app.post(
        "/session_token",
        summary="Mint an MCP session token",
        tags=["mcp"],
        openapi_extra=body_doc(
            "`{}` (or `{resources_session_id}` naming the same session) for the session of the "
            "request's cookie; the id alone grants nothing.",
            {"cookie": {}, "named": {"resources_session_id": "s1"}},
        ),
        responses={
            403: problem("The id is not the cookie's session."),
            404: problem("No session cookie."),
            422: problem("Malformed body."),
        },
    )
    async def session_token(request: Request) -> Response:
        raw = await read_body(request)
        body = await object_body(request) if raw.strip() else {}
        # Only the cookie's session: knowing a cookie session's id is no credential.
        sid = cookie_session(request)
        named = body.get("resources_session_id", sid)
        if named is not None and (not isinstance(named, str) or not named):
            raise invalid([(("resources_session_id",), "must be a non-empty string")])
        refuse_header_mismatch(request, body.get("resources_session_id"))  # X4
        if sid is None:
            return json_response(
                {
                    "failure_kind": reasons.SESSION_LOST.failure_kind,
                    "reason": reasons.SESSION_LOST.name,
                    "detail": "no session cookie: a token is minted for the cookie's session "
                    "(a typed POST /seed_session, retried as is, sets the cookie)",
                },
                reasons.SESSION_LOST.http_status,
            )
        if named != sid:
            return json_response(
                {
                    "failure_kind": reasons.SESSION_COOKIE_REQUIRED.failure_kind,
                    "reason": reasons.SESSION_COOKIE_REQUIRED.name,
                    "detail": "resources_session_id is not the session of this request's cookie",
                },
                reasons.SESSION_COOKIE_REQUIRED.http_status,
            )
        token = tokens.mint(sid)
        return json_response(
            {
                "resources_session_id": sid,
                "token": token,
                "token_type": "bearer",
                "expires_in": tokens.max_age_s,
            },
            headers={TOKEN_HEADER: token},
        )

    if mcp is not None:  # before the tool route, which would also match POST <mcp_path>
        app.router.routes.append(Route(settings.mcp_path, endpoint=mcp, include_in_schema=False))

    @app.post(
        "/{tool_name}",
        summary="Call a tool",
        tags=["tools"],
        openapi_extra=body_doc(
            "The tool's arguments (null values are dropped). Optional header "
            f"`{CALL_ID_HEADER}`: an idempotency key.",
            {"email_search_emails": {"query": "budget", "page": 1}},
        ),
        responses={
            200: {
                "description": '`{"output": ...}`: the tool\'s return value, or the '
                "reference's error text for an unknown tool or bad arguments.",
            },
            404: problem("No live session (`failure_kind` `session_lost`)."),
            409: problem("The call id was used for another call."),
            413: problem(
                "A write that would take the session over the server's "
                "`max_session_write_bytes` (`session_too_large`, with `limit_bytes` and "
                "`size_bytes`; nothing applied)."
            ),
            422: problem("The body is not a JSON object."),
        },
    )
    async def call_tool(tool_name: str, request: Request) -> Response:
        text = await body_text(request)
        sid = cookie_session(request)
        if sid is None:
            # a bad body is 422 before a missing session is 404 (NaN runs, as on the service)
            await object_body(request, constants=True)
            raise service_error(
                SessionLostError(
                    "no session cookie", grpc.StatusCode.NOT_FOUND, reason=reasons.SESSION_LOST.name
                )
            )
        call_ids = request.headers.getlist(CALL_ID_HEADER)
        if len(set(call_ids)) > 1:  # which one keys the call is a guess: refused, as X4's
            raise invalid(
                [((HeaderName(CALL_ID_HEADER),), "sent more than once with different values")]
            )
        call_id = call_ids[0] if call_ids else ""
        output = await call(
            client.call_tool_raw,
            sid,
            tool_name,
            text,
            call_id,
            sent_as=_CALL_SENT_AS,
            off_loop=is_large(request),
        )
        return Response(
            b'{"output":' + output.encode("utf-8") + b"}", media_type="application/json"
        )

    return app
