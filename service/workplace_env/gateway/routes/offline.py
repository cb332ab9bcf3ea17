"""The gateway's routes that need no session: ``GET /reverify_mode`` (CONTRACT H4) and
``POST /aggregate_metrics`` (H3)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from workplace_env import wire
from workplace_env.gateway import fastjson
from workplace_env.gateway.docs import body_doc, problem
from workplace_env.gateway.nemo_protocol import REVERIFY_MODE, aggregate_metrics
from workplace_env.gateway.routes.direct import DirectRoute
from workplace_env.gateway.translate import body_text, invalid, json_response, parse_object

router = APIRouter(route_class=DirectRoute)


@router.get("/reverify_mode", summary="Re-verify mode", tags=["legacy"])
async def reverify_mode() -> str:
    """``"stateless"`` (CONTRACT H4): scoring is a pure replay of the request, so a
    ``/verify`` without a session re-scores a saved rollout."""
    return REVERIFY_MODE


@router.post(
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
