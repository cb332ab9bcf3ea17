"""The Responses-API ``output`` array a prediction arrives in, as NeMo Gym's types accept it.

A verify may send the model's raw Responses ``output`` instead of a call list (CONTRACT V1;
NeMo's typed ``/verify`` body). Owns which items are well-formed (:func:`response_output_problems`,
the rule NeMo Gym 0.7.0's ``workplace_assistant`` server applies before scoring, observed black
box) and which of them are the prediction (:func:`function_calls_from_response_output`, REFERENCE.md
c.1). Both transports use it: gRPC names a problem ``response_output_json[i].function_call.name``,
HTTP as the reference's 422 ``loc`` ``["body", "response", "output", i, "function_call", "name"]``.
"""

from __future__ import annotations

from typing import Any

from workplace_env import wire

#: A problem's place within the ``output`` array: item index, then the item kind and field.
Path = tuple[int | str, ...]


class ResponseOutputError(ValueError):
    """The ``output`` array holds items NeMo's Responses types refuse; ``problems`` lists each
    as ``(path, why)`` (see :func:`response_output_problems`)."""

    def __init__(self, problems: list[tuple[Path, str]]) -> None:
        super().__init__("; ".join(f"{field_path('', p)}: {why}" for p, why in problems))
        self.problems = problems


#: The ``type`` values of the Responses-API output items NeMo Gym 0.7.0's verify body accepts
#: (its ``NeMoGymResponse.output`` union; an item of another type is refused there).
RESPONSE_ITEM_TYPES = frozenset(
    {
        "message",
        "function_call",
        "function_call_output",
        "reasoning",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "file_search_call",
        "web_search_call",
        "computer_call",
        "computer_call_output",
        "image_generation_call",
        "code_interpreter_call",
        "local_shell_call",
        "local_shell_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "compaction",
        "shell_call",
        "shell_call_output",
        "tool_search_call",
        "tool_search_output",
        "additional_tools",
    }
)
#: NeMo's ``NeMoGymResponseFunctionToolCall``: required string fields, optional ones (string or
#: null), and the values ``status`` may take.
_CALL_REQUIRED = ("arguments", "call_id", "name")
_CALL_OPTIONAL = ("id", "namespace")
_CALL_STATUSES = ("in_progress", "completed", "incomplete")


def response_output_problems(output: list[Any]) -> list[tuple[Path, str]]:
    """What NeMo Gym's typed verify body refuses in ``response.output`` (observed black box on
    its ``workplace_assistant`` server, nemo-gym 0.7.0; its Responses types carry the model's
    ``arguments`` as a JSON *string*): an item that is not an object with a known string
    ``type``, and a ``function_call`` whose ``arguments``, ``call_id`` or ``name`` is missing or
    not a string, whose ``id`` or ``namespace`` is neither a string nor null, or whose
    ``status`` is not one of its three values. Items of other types are not looked into.

    Each problem's path within ``output`` is the reference's loc below ``response.output``:
    ``(i,)`` for the item, ``(i, "function_call", field)`` for a field of a call.
    """
    problems: list[tuple[Path, str]] = []
    for i, item in enumerate(output):
        at: Path = (i,)
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            problems.append((at, "must be an object with a string `type`"))
            continue
        kind = item["type"]
        if kind not in RESPONSE_ITEM_TYPES:
            problems.append((at, f"unknown output item type {kind!r}"))
            continue
        if kind != "function_call":
            continue
        for name in _CALL_REQUIRED:
            if name not in item:
                problems.append(((*at, kind, name), "Field required"))
            elif not isinstance(item[name], str):
                got = wire.json_type(item[name])
                problems.append(((*at, kind, name), f"must be a string (JSON text), got {got}"))
        for name in _CALL_OPTIONAL:
            if item.get(name) is not None and not isinstance(item[name], str):
                got = wire.json_type(item[name])
                problems.append(((*at, kind, name), f"must be a string or null, got {got}"))
        status = item.get("status")
        if status is not None and status not in _CALL_STATUSES:
            problems.append(((*at, kind, "status"), f"must be one of {', '.join(_CALL_STATUSES)}"))
    return problems


def function_calls_from_response_output(output: Any) -> list[dict[str, Any]]:
    """The top-level ``function_call`` items of a Responses-API ``output`` array, in order.

    Items of other types (messages, reasoning, ``function_call_output``) are ignored
    (REFERENCE.md c.1). Raises ValueError when ``output`` is not a list, and its subclass
    :class:`ResponseOutputError` when an item is malformed (:func:`response_output_problems`).
    """
    if not isinstance(output, list):
        raise ValueError("response output must be a JSON array")
    if problems := response_output_problems(output):
        raise ResponseOutputError(problems)
    return [item for item in output if item["type"] == "function_call"]


def field_path(name: str, path: Path) -> str:
    """A problem's path as a request field name: ``("response_output_json", (0, "function_call",
    "name"))`` -> ``response_output_json[0].function_call.name``."""
    out = name
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else part
    return out
