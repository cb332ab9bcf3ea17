"""The JSON inputs of a verify, as NeMo Gym's verify body types accept them.

A verify may send the model's raw Responses-API ``output`` instead of a call list (CONTRACT V1;
NeMo's typed ``/verify`` body), and the ground truth as JSON. This module owns which of those
are well-formed, the rules NeMo Gym 0.7.0's ``workplace_assistant`` server applies before
scoring (observed black box; the names in its 422 ``loc``s are the ones of NeMo's protocol
models): :func:`response_output_problems` for the ``output`` items (``function_call`` and
``message`` items looked into), :func:`ground_truth_problems` for the ground truth; and which
items are the prediction (:func:`function_calls_from_response_output`, REFERENCE.md c.1).
Both transports use them: gRPC names a problem ``response_output_json[i].function_call.name``
or ``ground_truth_json[i].arguments``, HTTP as the reference's 422 ``loc``
(``["body", "response", "output", i, "function_call", "name"]``,
``["body", "ground_truth", "list[dict[str,str]]", i, "arguments"]``).
"""

from __future__ import annotations

from collections.abc import Sized
from typing import Any

from workplace_env_client.json_types import json_type

#: A problem's place within the ``output`` array: item index, then the item kind and field.
Path = tuple[int | str, ...]


class ResponseOutputError(ValueError):
    """The ``output`` array holds items NeMo's Responses types refuse; ``problems`` lists each
    as ``(path, why)`` (see :func:`response_output_problems`), ``explained`` the same with each
    ``why`` in plain words (:func:`explain_problem`)."""

    def __init__(self, problems: list[tuple[Path, str]], output: list[Any]) -> None:
        self.problems = problems
        self.explained = [(path, explain_problem(output, path, why)) for path, why in problems]
        super().__init__("; ".join(f"{field_path('', p)}: {why}" for p, why in self.explained))


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


#: Message roles of NeMo's input messages (an ``assistant`` message is an output one).
_INPUT_ROLES = ("user", "system", "developer")
_EASY_ROLES = ("user", "assistant", "system", "developer")
_ITEM_STATUSES = ("in_progress", "completed", "incomplete")
_OUTPUT_PART_TYPES = ("output_text", "refusal")
_PHASES = ("commentary", "final_answer")
#: The loc name of the list branch of an easy message's ``content`` (``str`` or this list).
INPUT_PARTS_LIST = (
    "list[function-before[_validate_input_video_part(), union[ResponseInputTextParam,"
    "ResponseInputImageParam,ResponseInputFileParam,NeMoGymInputVideoPart]]]"
)
#: The members of a content part's union, in the order the reference reports them: loc name,
#: its ``type`` value, and its other required fields with their allowed values (None: a string).
_Member = tuple[str, str, tuple[tuple[str, tuple[str, ...] | None], ...]]
_INPUT_PARTS: tuple[_Member, ...] = (
    ("ResponseInputTextParam", "input_text", (("text", None),)),
    ("ResponseInputImageParam", "input_image", (("detail", ("low", "high", "auto", "original")),)),
    ("ResponseInputFileParam", "input_file", ()),
    ("NeMoGymInputVideoPart", "input_video", ()),
)
_OUTPUT_PARTS: tuple[_Member, ...] = (
    ("NeMoGymResponseOutputText", "output_text", (("annotations", ()), ("text", None))),
    ("NeMoGymResponseOutputRefusal", "refusal", (("refusal", None),)),
)
_STRING = "Input should be a valid string"
_LIST = "Input should be a valid list"
_MISSING = "Field required"


def _one_of(values: tuple[str, ...]) -> str:
    quoted = [repr(v) for v in values]
    return (
        f"Input should be {', '.join(quoted[:-1])} or {quoted[-1]}"
        if len(quoted) > 1
        else (f"Input should be {quoted[0]}")
    )


def _part_problems(part: Any, members: tuple[_Member, ...], at: Path) -> list[tuple[Path, str]]:
    """Problems of one content part against its union: none when a member takes it, else
    every member's (as the reference lists a union's errors)."""
    every: list[tuple[Path, str]] = []
    for name, kind, required in members:
        mine: list[tuple[Path, str]] = []
        if not isinstance(part, dict):
            mine.append(((*at, name), "Input should be a valid dictionary"))
        else:
            for field, allowed in required:
                if field not in part:
                    mine.append(((*at, name, field), _MISSING))
                elif allowed == ():  # a list (annotations)
                    if not isinstance(part[field], list):
                        mine.append(((*at, name, field), _LIST))
                elif allowed is None:
                    if not isinstance(part[field], str):
                        mine.append(((*at, name, field), _STRING))
                elif part[field] not in allowed:
                    mine.append(((*at, name, field), _one_of(allowed)))
            if part.get("type") != kind:
                mine.append(((*at, name, "type"), _one_of((kind,))))
        if not mine:
            return []
        every.extend(mine)
    return every


def _parts_problems(
    content: list[Any], members: tuple[_Member, ...], at: Path
) -> list[tuple[Path, str]]:
    problems: list[tuple[Path, str]] = []
    for j, part in enumerate(content):
        problems.extend(_part_problems(part, members, (*at, j)))
    return problems


def _message_kind(item: dict[str, Any]) -> str:
    """Which of NeMo's message models a ``message`` item is read as (its discriminator, from
    the role, the content and the status): ``easy_message``, ``input_message`` or
    ``output_message``."""
    content = item.get("content")
    if item.get("role") in _INPUT_ROLES:
        if isinstance(content, list) and item.get("status") in _ITEM_STATUSES:
            return "input_message"
        return "easy_message"
    if isinstance(content, list):
        if content:
            first = content[0]
            if isinstance(first, dict) and first.get("type") in _OUTPUT_PART_TYPES:
                return "output_message"
        elif isinstance(item.get("id"), str):
            return "output_message"
    return "easy_message"


def _message_problems(item: dict[str, Any], at: Path) -> list[tuple[Path, str]]:
    """What NeMo's message models refuse in a ``message`` item: a missing or mistyped
    ``content`` (a content part of another kind, e.g. a ``function_call`` put inside a
    message, is refused, not scored), a missing or unknown ``role``, an output message
    without its ``id``."""
    kind = _message_kind(item)
    at = (*at, kind)
    problems: list[tuple[Path, str]] = []
    content = item.get("content")
    if kind == "output_message":
        if not isinstance(item.get("id"), str):
            problems.append(((*at, "id"), _MISSING if "id" not in item else _STRING))
        assert isinstance(content, list)  # by _message_kind
        problems.extend(_parts_problems(content, _OUTPUT_PARTS, (*at, "content")))
        if item.get("role", "assistant") != "assistant":
            problems.append(((*at, "role"), _one_of(("assistant",))))
        problems.extend(_literal(item, "status", _ITEM_STATUSES, at))
        problems.extend(_literal(item, "phase", _PHASES, at, nullable=True))
        return problems
    if kind == "input_message":
        assert isinstance(content, list)
        problems.extend(_parts_problems(content, _INPUT_PARTS, (*at, "content")))
        problems.extend(_literal(item, "status", _ITEM_STATUSES, at))
        return problems
    if "content" not in item:
        problems.append(((*at, "content"), _MISSING))
    elif isinstance(content, list):
        parts = _parts_problems(content, _INPUT_PARTS, (*at, "content", INPUT_PARTS_LIST))
        if parts:
            problems.append(((*at, "content", "str"), _STRING))
            problems.extend(parts)
    elif not isinstance(content, str):
        problems.append(((*at, "content", "str"), _STRING))
        problems.append(((*at, "content", INPUT_PARTS_LIST), _LIST))
    if "role" not in item:
        problems.append(((*at, "role"), _MISSING))
    elif item["role"] not in _EASY_ROLES:
        problems.append(((*at, "role"), _one_of(_EASY_ROLES)))
    problems.extend(_literal(item, "phase", _PHASES, at, nullable=True))
    return problems


def _literal(
    item: dict[str, Any], name: str, allowed: tuple[str, ...], at: Path, *, nullable: bool = False
) -> list[tuple[Path, str]]:
    """A problem when optional field ``name`` is present with a value outside ``allowed``."""
    if name not in item or item[name] in allowed or (nullable and item[name] is None):
        return []
    return [((*at, name), _one_of(allowed))]


def _reasoning_problems(item: dict[str, Any], at: Path) -> list[tuple[Path, str]]:
    """NeMo's reasoning item: a string ``id`` and a ``summary`` list of ``summary_text``
    parts (``{text, type}``)."""
    at = (*at, "reasoning")
    problems: list[tuple[Path, str]] = []
    if not isinstance(item.get("id"), str):
        problems.append(((*at, "id"), _MISSING if "id" not in item else _STRING))
    summary = item.get("summary")
    if "summary" not in item:
        problems.append(((*at, "summary"), _MISSING))
    elif not isinstance(summary, list):
        problems.append(((*at, "summary"), _LIST))
    else:
        for j, part in enumerate(summary):
            if not isinstance(part, dict):
                problems.append(((*at, "summary", j), "Input should be a valid dictionary"))
                continue
            if not isinstance(part.get("text"), str):
                problems.append(
                    ((*at, "summary", j, "text"), _MISSING if "text" not in part else _STRING)
                )
            if "type" not in part:
                problems.append(((*at, "summary", j, "type"), _MISSING))
            elif part["type"] != "summary_text":
                problems.append(((*at, "summary", j, "type"), _one_of(("summary_text",))))
    return problems


def _call_output_problems(item: dict[str, Any], at: Path) -> list[tuple[Path, str]]:
    """NeMo's function call output (the full output item when it has a string ``id`` and a
    known ``status``, else the request-input form): a string ``call_id``."""
    full = isinstance(item.get("id"), str) and item.get("status") in _ITEM_STATUSES
    at = (*at, "function_call_output" if full else "function_call_output_input")
    if not isinstance(item.get("call_id"), str):
        return [((*at, "call_id"), _MISSING if "call_id" not in item else _STRING)]
    return []


#: The item kinds looked into besides ``function_call``, with their rule.
_ITEM_RULES = {
    "message": _message_problems,
    "reasoning": _reasoning_problems,
    "function_call_output": _call_output_problems,
}


def response_output_problems(output: list[Any]) -> list[tuple[Path, str]]:
    """What NeMo Gym's typed verify body refuses in ``response.output`` (observed black box on
    its ``workplace_assistant`` server, nemo-gym 0.7.0; its Responses types carry the model's
    ``arguments`` as a JSON *string*): an item that is not an object with a known string
    ``type``, and a ``function_call`` whose ``arguments``, ``call_id`` or ``name`` is missing or
    not a string, whose ``id`` or ``namespace`` is neither a string nor null, or whose
    ``status`` is not one of its three values; a ``message`` that NeMo's message models
    refuse (:func:`_message_problems`), a ``reasoning`` item without its ``id`` or ``summary``
    list, a ``function_call_output`` without its ``call_id``. Items of other types are not
    looked into, and the fields looked at are those listed (other optional fields are not).

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
        if kind in _ITEM_RULES:
            problems.extend(_ITEM_RULES[kind](item, at))
            continue
        if kind != "function_call":
            continue
        for name in _CALL_REQUIRED:
            if name not in item:
                problems.append(((*at, kind, name), "Field required"))
            elif not isinstance(item[name], str):
                got = json_type(item[name])
                problems.append(((*at, kind, name), f"must be a string (JSON text), got {got}"))
        for name in _CALL_OPTIONAL:
            if item.get(name) is not None and not isinstance(item[name], str):
                got = json_type(item[name])
                problems.append(((*at, kind, name), f"must be a string or null, got {got}"))
        status = item.get("status")
        if status is not None and status not in _CALL_STATUSES:
            problems.append(((*at, kind, "status"), f"must be one of {', '.join(_CALL_STATUSES)}"))
    return problems


def output_entries(output: list[Any]) -> int:
    """How many entries :func:`response_output_problems` would look at in ``output``: its
    items, plus each part of a ``message`` item's ``content`` list and of a ``reasoning``
    item's ``summary`` list (those parts are checked one by one, as items are). Other nested
    values are not counted: they are not looked at, only carried. O(items)."""
    count = len(output)
    for item in output:
        if type(item) is dict:
            kind = item.get("type")
            parts = (
                item.get("content")
                if kind == "message"
                else item.get("summary")
                if kind == "reasoning"
                else None
            )
            if type(parts) is list:
                count += len(parts)
    return count


def output_bound_problem(output: list[Any], bound: int) -> str | None:
    """Why ``output`` (a Responses-API output array) is over ``bound`` entries
    (:func:`output_entries`; the ``max_verify_output_items`` setting, 0: no bound), or None.

    Checked before anything else looks at the items, so the work an untrusted verify body can
    cause past its parse is bounded (the reference has no such bound, and real
    rollouts have about ten items). Costs O(min(items, bound)): a longer array is refused on its
    length alone."""
    if not bound:
        return None
    count = len(output) if len(output) > bound else output_entries(output)
    if count <= bound:
        return None
    return (
        f"at most {bound} output entries per verify (max_verify_output_items: items, each part "
        f"of a message's content or of a reasoning summary counted as one), got {count}"
    )


def calls_bound_problem(calls: Any, bound: int) -> str | None:
    """Why a list of calls (a ground truth, or predicted calls; a list or a repeated message
    field) is longer than ``bound`` (the ``max_verify_calls`` setting, 0: no bound), or None;
    a string or an object passes (a JSON string ground truth changes nothing)."""
    if (
        bound
        and isinstance(calls, Sized)
        and not isinstance(calls, str | dict)
        and len(calls) > bound
    ):
        return f"at most {bound} calls per verify (max_verify_calls), got {len(calls)}"
    return None


#: The loc names of the two branches of the reference's ground truth type (a list of
#: string-valued objects, or a string).
GROUND_TRUTH_LIST = "list[dict[str,str]]"
GROUND_TRUTH_STR = "str"


def ground_truth_problems(truth: Any) -> list[tuple[Path, str]]:
    """What NeMo Gym 0.7.0's ``workplace_assistant`` verify body refuses in ``ground_truth``
    (observed black box): anything but a JSON string or an array of objects whose values are
    all strings (``{"name": ..., "arguments": <JSON text>}``; missing keys pass there, and
    score as the reference scores them). A JSON string is taken (it means "change nothing",
    REFERENCE.md); an object, a number, a boolean or null is refused.

    Each problem's path is below the list branch: ``()`` (not a list), ``(i,)`` (item not an
    object), ``(i, key)`` (a value that is not a string). The reference reports the string
    branch too; HTTP adds it (:data:`GROUND_TRUTH_STR`), gRPC names the list's field.
    """
    if isinstance(truth, str):
        return []
    if not isinstance(truth, list):
        return [((), _LIST)]
    problems: list[tuple[Path, str]] = []
    for i, call in enumerate(truth):
        if not isinstance(call, dict):
            problems.append(((i,), "Input should be a valid dictionary"))
            continue
        for key, value in call.items():
            if not isinstance(value, str):
                problems.append(((i, key), _STRING))
    return problems


def function_calls_from_response_output(
    output: Any, *, checked: bool = False
) -> list[dict[str, Any]]:
    """The top-level ``function_call`` items of a Responses-API ``output`` array, in order.

    Items of other types (messages, reasoning, ``function_call_output``) are ignored
    (REFERENCE.md c.1). Raises ValueError when ``output`` is not a list, and its subclass
    :class:`ResponseOutputError` when an item is malformed (:func:`response_output_problems`),
    unless ``checked``: the caller has already found no problem in it (see
    :class:`~workplace_env_client.messages.CheckedJson`), and its items are not looked at again.
    """
    if not isinstance(output, list):
        raise ValueError("response output must be a JSON array")
    if not checked and (problems := response_output_problems(output)):
        raise ResponseOutputError(problems, output)
    return [item for item in output if item["type"] == "function_call"]


def field_path(name: str, path: Path) -> str:
    """A problem's path as a request field name: ``("response_output_json", (0, "function_call",
    "name"))`` -> ``response_output_json[0].function_call.name``."""
    out = name
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else part
    return out


#: How each of NeMo's models an item (or a content part) is read as is written, in plain words:
#: what it is, and the JSON to send (short: a violation's description is clipped at 256 bytes).
_PLAIN_MODELS: dict[str, tuple[str, str]] = {
    "function_call": (
        "a function call",
        '{"type": "function_call", "name": "<tool>", "arguments": "<JSON text>", '
        '"call_id": "<id>"}',
    ),
    "output_message": (
        "an assistant message with a list content",
        '"id": "msg_0" beside that list, or "content": "<text>" (a string) without one',
    ),
    "input_message": (
        "an input message",
        '{"type": "message", "role": "user", "content": [{"type": "input_text", '
        '"text": "<text>"}]}',
    ),
    "easy_message": (
        "a message",
        '{"type": "message", "role": "user", "assistant", "system" or "developer", "content": '
        '"<text>"}',
    ),
    "reasoning": (
        "a reasoning item",
        '{"type": "reasoning", "id": "rs_0", "summary": [{"type": "summary_text", '
        '"text": "<text>"}]}',
    ),
    "function_call_output": (
        "a function call's output",
        '{"type": "function_call_output", "call_id": "<id>", "output": "<text>"}',
    ),
    "NeMoGymResponseOutputText": (
        "an output_text part",
        '{"type": "output_text", "text": "<text>", "annotations": []}',
    ),
    "NeMoGymResponseOutputRefusal": ("a refusal part", '{"type": "refusal", "refusal": "<text>"}'),
    "ResponseInputTextParam": ("an input_text part", '{"type": "input_text", "text": "<text>"}'),
    "ResponseInputImageParam": (
        "an input_image part",
        '{"type": "input_image", "detail": "low", "high", "auto" or "original"}',
    ),
    "ResponseInputFileParam": ("an input_file part", '{"type": "input_file", ...}'),
    "NeMoGymInputVideoPart": ("an input_video part", '{"type": "input_video", ...}'),
}
_PLAIN_MODELS["function_call_output_input"] = _PLAIN_MODELS["function_call_output"]
#: Path segments that name a branch of a union, not a field the user types.
_BRANCHES = frozenset({INPUT_PARTS_LIST, "str"})


def explain_problem(output: list[Any], path: Path, why: str) -> str:
    """``why`` (a problem of :func:`response_output_problems` at ``path`` in ``output``) in
    plain words: the item's index and ``type``, the field as the user types it, what is wrong
    and the JSON expected there. An item-level ``why`` (``path`` of one index) is plain already
    and returned as it is."""
    if len(path) < 2:
        return why
    index = path[0]
    item = output[index] if isinstance(index, int) and index < len(output) else {}
    kind = item.get("type") if isinstance(item, dict) else None
    field = ""
    model = str(path[1])
    for part in path[2:]:
        if isinstance(part, int):
            field += f"[{part}]"
        elif part in _PLAIN_MODELS:
            model = part
        elif part not in _BRANCHES:
            field += f".{part}" if field else part
    what, shape = _PLAIN_MODELS.get(model, (model, ""))
    wrong = "is missing" if why == _MISSING else f"is not accepted ({why})"
    expected = f"; expected {shape}" if shape else ""
    return f"item {index} (type {kind!r}): {field or 'the item'} {wrong}, as {what}{expected}"
