"""The gateway's episode routes: ``POST /seed_session``, ``POST /verify``,
``POST /close_session`` (legacy cookie sessions and NeMo Gym's typed protocol)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from workplace_env.gateway import fastjson
from workplace_env.gateway.cookies import SESSION_ID_KEY
from workplace_env.gateway.docs import ROW_EXAMPLE, body_doc, problem
from workplace_env.gateway.mcp_tools import TOKEN_HEADER
from workplace_env.gateway.nemo_echo import create_params_echo
from workplace_env.gateway.nemo_protocol import (
    close_problems,
    is_nemo_close,
    is_nemo_seed,
    mcp_metadata,
    parse_nemo_seed,
    replay_verify,
    seed_response,
)
from workplace_env.gateway.routes.direct import DirectRoute
from workplace_env.gateway.state import GatewayState, GatewayStateDep
from workplace_env.gateway.translate import (
    LEGACY_EPISODE,
    Loc,
    body_text,
    cookie_session,
    draining_problem,
    invalid,
    is_large,
    is_typed_seed,
    json_response,
    no_session_detail,
    object_body,
    parse_episode,
    parse_object,
    parse_typed_seed,
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
from workplace_env_client import WorkplaceEnvError
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

router = APIRouter(route_class=DirectRoute)


def _json_text(value: Any) -> str:
    """``value`` as JSON text for the service (which parses it again)."""
    return fastjson.dumps(value, allow_nan=True).decode("utf-8")


@router.post(
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
        503: problem("The service is unavailable (tables, draining, unreachable); `Retry-After`."),
    },
)
async def seed_session(request: Request, state: GatewayStateDep) -> Response:
    if state.draining.is_set():  # X2: no new episodes while shutting down
        raise draining_problem()
    body = await object_body(request)
    if is_nemo_seed(body) or is_typed_seed(body):  # H1; the cookie names the typed id
        parse = parse_nemo_seed if is_nemo_seed(body) else parse_typed_seed
        sid, episode, task_id, row = parse(body)
        row = seeded_row(row)
        refuse_header_mismatch(request, sid)  # X4
        # 422 locs name the row's field as sent: NeMo's task_data, our task, or the body
        sent_as = {"task": "task_data" if is_nemo_seed(body) else "task" if "task" in body else ""}
        await state.service_call(
            state.client.seed,
            sid,
            episode,
            task_id,
            row,
            seeding=True,
            sent_as=sent_as,
            off_loop=is_large(request),
        )
        request.session[SESSION_ID_KEY] = sid
        token = state.tokens.mint(sid)
        meta = mcp_metadata(state.settings.mcp_path, token) if state.mcp is not None else None
        return json_response(seed_response(sid, meta), headers={TOKEN_HEADER: token})
    else:
        sid = await state.service_call(
            seed_legacy,
            state.client,
            cookie_session(request),
            body,
            seeding=True,
            sent_as={"task": ""},  # the body is the row
            off_loop=is_large(request),
        )
    request.session[SESSION_ID_KEY] = sid
    token = state.tokens.mint(sid)
    if state.mcp is None:
        return Response(b"{}", media_type="application/json", headers={TOKEN_HEADER: token})
    # As NeMo Gym's servers with MCP exposure answer a legacy seed: its agents (and its
    # sandbox tools) find the MCP server and the session token under "mcp".
    meta = mcp_metadata(state.settings.mcp_path, token)
    return json_response({"mcp": meta}, headers={TOKEN_HEADER: token})


@router.post(
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
async def verify(request: Request, state: GatewayStateDep) -> Response:
    text = await body_text(request)
    sid = cookie_session(request)
    # V4: a cookie sent but not read is a lost session, told why (None: none sent, or read)
    unreadable = (
        no_session_detail(request)
        if sid is None and state.settings.cookie_name in request.cookies
        else None
    )
    if state.blocking or is_large(request):  # a large body: seconds to parse and check
        return await fastjson.off_loop(score, state, text, sid, unreadable)
    return score(state, text, sid, unreadable)


def score(state: GatewayState, text: str, sid: str | None, unreadable: str | None) -> Response:
    """``/verify`` past reading its body (blocking): parse, bound, check, score, answer.
    ``unreadable``: why a cookie that was sent names no session (a masked ``session_lost``)."""
    body = parse_object(text)
    response = body.get("response")
    if not isinstance(response, dict):
        raise invalid([(("response",), "required: the Responses-API response object")])
    output = response.get("output")
    if not isinstance(output, list):
        raise invalid([(("response", "output"), "required: an array of output items")])
    # The body's lists are bounded before anything looks at their entries
    settings = state.settings
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
    if state.mcp is not None:  # REFERENCE.md (c)1: with MCP exposure on, scored as bare names
        output = bare_predicted_names(output)
    # Checked above: a co-hosted service does not check them again (CheckedJson).
    kwargs: dict[str, Any] = {"response_output": CheckedJson(_json_text(output))}
    if "ground_truth" in body:
        kwargs["ground_truth_json"] = CheckedJson(_json_text(body["ground_truth"]))
    if unreadable is not None:
        reward, mask, kind, reason = 0.0, True, "session_lost", unreadable
    else:
        try:
            if sid is None:  # H5: offline re-verification, scored by replay of the body
                result = replay_verify(state.client, body, kwargs)
            else:
                result = state.client.verify(sid, **kwargs)
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


@router.post(
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
async def close_session(request: Request, state: GatewayStateDep) -> Response:
    body = await object_body(request)
    sid = body.get("resources_session_id", cookie_session(request))
    problems = close_problems(body)
    if not isinstance(sid, str):
        problems.append((("resources_session_id",), "required (a string) when there is no cookie"))
    if "episode_id" not in body and ("resources_session_id" in body or sid is None):
        # NeMo's typed close names both; only the cookie's legacy session may omit them
        problems.append((("episode_id",), "Field required"))
    episode = (
        parse_episode(body["episode_id"], problems) if "episode_id" in body else LEGACY_EPISODE
    )
    if problems:
        raise invalid(problems)
    refuse_header_mismatch(request, body.get("resources_session_id"))  # X4
    outcome = await state.service_call(state.client.close_session, sid, episode)
    if is_nemo_close(body):  # H2: NeMo's ResourcesCloseSessionResponse, outcome aside
        return json_response({"resources_session_id": sid}, headers={CLOSE_OUTCOME_HEADER: outcome})
    return json_response({"outcome": outcome})
