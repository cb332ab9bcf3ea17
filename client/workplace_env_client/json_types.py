"""The JSON type name of a parsed value, for messages naming what was sent instead; imports
nothing, so the server's domain can use it without a transport (as the SDK's checks do)."""

from __future__ import annotations

from typing import Any


def json_type(value: Any) -> str:
    """The JSON type name of a parsed value (``object``, ``array``, ``string``, ``number``,
    ``boolean``, ``null``), for error messages naming what was sent instead."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    names = {dict: "object", list: "array", str: "string", type(None): "null"}
    return names.get(type(value), type(value).__name__)
