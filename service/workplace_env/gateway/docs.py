"""OpenAPI fragments of the gateway's routes (their bodies are read raw, so FastAPI cannot
infer them)."""

from __future__ import annotations

from typing import Any


def body_doc(description: str, examples: dict[str, Any]) -> dict[str, Any]:
    """``openapi_extra`` for a route taking a JSON object body, with named examples."""
    return {
        "requestBody": {
            "required": True,
            "description": description,
            "content": {
                "application/json": {
                    "schema": {"type": "object", "additionalProperties": True},
                    "examples": {k: {"value": v} for k, v in examples.items()},
                }
            },
        }
    }


def problem(description: str) -> dict[str, Any]:
    """An error response entry (a JSON object with ``failure_kind``)."""
    return {
        "description": description,
        "content": {"application/json": {"schema": {"type": "object"}}},
    }


#: A dataset row as the examples show it.
ROW_EXAMPLE = {
    "id": "nemo-example-2",
    "category": "workplace_assistant_email",
    "ground_truth": [
        {"name": "email_delete_email", "arguments": '{"email_id": "00000057"}'},
    ],
}
