"""``responses_create_params`` as NeMo Gym 0.7.0's verify body re-serialises it (CONTRACT H5).

NeMo's ``BaseVerifyRequest`` validates ``responses_create_params`` into its Responses-API
create-params model and answers its ``model_dump``: all 30 fields in the model's order, defaults
filled (``tool_choice: "auto"``, ``tools: []``, ``parallel_tool_calls: true``, else null),
``temperature`` and ``top_p`` as floats, each input item completed to its item type (a message
gets ``type: "message"`` and ``phase``, a function call ``id``, ``status`` and ``namespace``)
with its keys in that type's order. Observed black box with NeMo's models; tests compare the
bytes with the reference's.

:func:`create_params_echo` does that for the shapes datasets and NeMo's agents write (text or
messages, function calls and outputs, reasoning, output messages; function tools; scalar
settings). Anything else is echoed as sent (None from the item helpers), as before.
"""

from __future__ import annotations

from typing import Any

#: The create-params fields in NeMo's order, with the default its model fills in.
_FIELDS: dict[str, Any] = {
    "background": None,
    "include": None,
    "input": None,
    "instructions": None,
    "max_output_tokens": None,
    "max_tool_calls": None,
    "metadata": None,
    "model": None,
    "parallel_tool_calls": True,
    "previous_response_id": None,
    "prompt": None,
    "reasoning": None,
    "service_tier": None,
    "store": None,
    "context_management": None,
    "conversation": None,
    "moderation": None,
    "prompt_cache_key": None,
    "prompt_cache_retention": None,
    "safety_identifier": None,
    "stream_options": None,
    "temperature": None,
    "text": None,
    "tool_choice": "auto",
    "tools": [],
    "top_logprobs": None,
    "top_p": None,
    "truncation": None,
    "user": None,
    "stream": None,
}
_FLOATS = ("temperature", "top_p")
_INTS = ("max_output_tokens", "max_tool_calls", "top_logprobs")
_STRINGS = ("instructions", "model", "previous_response_id", "prompt_cache_key", "user")
_STRINGS += ("safety_identifier", "service_tier", "truncation", "prompt_cache_retention")
_BOOLS = ("background", "parallel_tool_calls", "store", "stream")
#: Fields whose objects NeMo's model answers unchanged (as observed for their usual shapes).
_AS_SENT = ("reasoning", "text")
_TOOL_CHOICES = ("auto", "none", "required")
_MESSAGE_ROLES = ("user", "system", "developer", "assistant")
_PHASES = (None, "commentary", "final_answer")
_STATUSES = (None, "in_progress", "completed", "incomplete")


def _strings(value: Any, *keys: str) -> bool:
    return isinstance(value, dict) and all(isinstance(value.get(k), str) for k in keys)


def _optional(value: dict[str, Any], key: str, allowed: tuple[Any, ...] | type) -> bool:
    got = value.get(key)
    return got in allowed if isinstance(allowed, tuple) else got is None or isinstance(got, allowed)


def _text_parts(parts: Any, kind: str) -> list[dict[str, Any]] | None:
    """Content parts of one ``kind`` (``input_text``, ``output_text``) in NeMo's key order:
    ``{text, type}``, ``{annotations, text, type, logprobs}``."""
    if not isinstance(parts, list):
        return None
    out = []
    for part in parts:
        if not _strings(part, "text") or part.get("type") != kind:
            return None
        if kind == "input_text":
            if set(part) != {"type", "text"}:
                return None
            out.append({"text": part["text"], "type": kind})
            continue
        if set(part) - {"type", "text", "annotations", "logprobs"} or part.get("logprobs"):
            return None
        if part.get("annotations") != []:
            return None
        out.append({"annotations": [], "text": part["text"], "type": kind, "logprobs": None})
    return out


def _message(item: dict[str, Any]) -> dict[str, Any] | None:
    """An input message without ``id``/``status``: ``{content, role, type, phase}``."""
    if set(item) - {"role", "content", "type", "phase"} or item.get("type", "message") != "message":
        return None
    role, content = item.get("role"), item.get("content")
    if role not in _MESSAGE_ROLES or item.get("phase") not in _PHASES:
        return None
    if not isinstance(content, str):
        if role == "assistant":
            return None
        content = _text_parts(content, "input_text")
        if content is None:
            return None
    return {"content": content, "role": role, "type": "message", "phase": item.get("phase")}


def _output_message(item: dict[str, Any]) -> dict[str, Any] | None:
    """An assistant output message (with ``id`` and ``status``)."""
    if set(item) - {"id", "content", "role", "status", "type", "phase"}:
        return None
    if not _strings(item, "id") or item.get("role") != "assistant":
        return None
    if item.get("status") not in _STATUSES[1:] or item.get("phase") not in _PHASES:
        return None
    content = _text_parts(item.get("content"), "output_text")
    if content is None:
        return None
    return {
        "id": item["id"],
        "content": content,
        "role": "assistant",
        "status": item["status"],
        "type": "message",
        "phase": item.get("phase"),
    }


def _function_call(item: dict[str, Any]) -> dict[str, Any] | None:
    keys = {"type", "arguments", "call_id", "name", "id", "status", "namespace"}
    if set(item) - keys or not _strings(item, "arguments", "call_id", "name"):
        return None
    if not (_optional(item, "id", str) and _optional(item, "namespace", str)):
        return None
    if item.get("status") not in _STATUSES:
        return None
    return {
        "arguments": item["arguments"],
        "call_id": item["call_id"],
        "name": item["name"],
        "type": "function_call",
        "id": item.get("id"),
        "status": item.get("status"),
        "namespace": item.get("namespace"),
    }


def _function_call_output(item: dict[str, Any]) -> dict[str, Any] | None:
    if set(item) - {"type", "call_id", "output", "id", "status"}:
        return None
    if not _strings(item, "call_id", "output") or not _optional(item, "id", str):
        return None
    if item.get("status") not in _STATUSES:
        return None
    return {
        "call_id": item["call_id"],
        "output": item["output"],
        "type": "function_call_output",
        "id": item.get("id"),
        "status": item.get("status"),
    }


def _reasoning(item: dict[str, Any]) -> dict[str, Any] | None:
    if set(item) - {"type", "id", "summary", "encrypted_content", "content"}:
        return None
    summary = item.get("summary")
    if not _strings(item, "id") or not isinstance(summary, list):
        return None
    if item.get("content") is not None or not _optional(item, "encrypted_content", str):
        return None
    parts = []
    for part in summary:
        if set(part) != {"type", "text"} or part.get("type") != "summary_text":
            return None
        if not isinstance(part["text"], str):
            return None
        parts.append({"text": part["text"], "type": "summary_text"})
    return {
        "id": item["id"],
        "summary": parts,
        "type": "reasoning",
        "encrypted_content": item.get("encrypted_content"),
        "content": None,
    }


def _input_item(item: Any) -> dict[str, Any] | None:
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if kind == "function_call":
        return _function_call(item)
    if kind == "function_call_output":
        return _function_call_output(item)
    if kind == "reasoning":
        return _reasoning(item)
    if "id" in item or "status" in item:
        return _output_message(item) if kind == "message" else None
    return _message(item)


def _tool(tool: Any) -> dict[str, Any] | None:
    """A function tool: ``{name, parameters, strict, type[, description]}``."""
    if not isinstance(tool, dict) or tool.get("type") != "function":
        return None
    keys = set(tool)
    if keys - {"type", "name", "parameters", "strict", "description"}:
        return None
    if not {"strict", "parameters"} <= keys:  # required (null allowed) by NeMo's model
        return None
    if not _strings(tool, "name") or not _optional(tool, "strict", bool):
        return None
    if not (_optional(tool, "parameters", dict) and _optional(tool, "description", str)):
        return None
    out = {
        "name": tool["name"],
        "parameters": tool.get("parameters"),
        "strict": tool["strict"],
        "type": "function",
    }
    if "description" in tool:
        out["description"] = tool["description"]
    return out


def _scalar_ok(name: str, value: Any) -> bool:
    if value is None:
        return _FIELDS[name] is None  # NeMo's model refuses null where it has another default
    if name in _FLOATS or name in _INTS:
        numeric = isinstance(value, int | float) and not isinstance(value, bool)
        return numeric and (name in _FLOATS or isinstance(value, int))
    if name in _STRINGS:
        return isinstance(value, str)
    if name in _BOOLS:
        return isinstance(value, bool)
    if name == "metadata":
        return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    if name == "tool_choice":
        return value in _TOOL_CHOICES
    return name in _AS_SENT and isinstance(value, dict)


def _items(values: Any, one: Any) -> list[Any] | None:
    if not isinstance(values, list):
        return None
    out = [one(v) for v in values]
    return None if any(o is None for o in out) else out


def create_params_echo(params: Any) -> Any:
    """``params`` as NeMo's verify body re-serialises it, else ``params`` itself (a shape
    outside the module docstring's, or one NeMo's model refuses)."""
    if not isinstance(params, dict) or set(params) - set(_FIELDS):
        return params
    text = params.get("input")
    inputs = text if isinstance(text, str) else _items(text, _input_item)
    tools = _items(params.get("tools", []), _tool)
    if inputs is None or tools is None:
        return params
    out = dict(_FIELDS)
    for name, value in params.items():
        if name in ("input", "tools"):
            continue
        if not _scalar_ok(name, value):
            return params
        out[name] = float(value) if name in _FLOATS and value is not None else value
    out["input"], out["tools"] = inputs, tools
    return out
