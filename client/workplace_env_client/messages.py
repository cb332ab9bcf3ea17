"""Requests and answers of the environment service, shared by the sync and asyncio clients.

Each ``*_request`` function builds the message an SDK method sends; each ``*_answer`` function
turns the response into the SDK's return value. The two clients differ only in how they wait.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import operator
import typing
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, Union

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message

from workplace.env.v1 import environment_pb2 as pb
from workplace_env_client import checks, reasons
from workplace_env_client.errors import ArgumentError


@dataclass(frozen=True)
class RecordedCall:
    """One successful tool call of a session handle: ``name``, ``arguments`` (the JSON text
    sent), its ``call_id``, and a 64-bit digest of its output (to check a replay)."""

    name: str
    arguments: str
    call_id: str
    output_digest: bytes


#: A call as the SDK accepts it: a ``(name, arguments)`` pair, a ``{"name", "arguments"}`` map
#: (arguments as JSON text or as a JSON-ready mapping), or a :class:`RecordedCall`.
CallLike = Union[  # noqa: UP007
    tuple[str, Union[str, Mapping[str, Any]]], Mapping[str, Any], RecordedCall  # noqa: UP007
]
#: An episode as ``(rollout_id, attempt)`` or the message.
EpisodeLike = Union[tuple[str, int], pb.EpisodeId]  # noqa: UP007
#: A task as a dataset row (tasks JSONL) or the message.
TaskLike = Union[Mapping[str, Any], pb.WorkplaceTask]  # noqa: UP007


_Answer = TypeVar("_Answer")
#: Completed answer class -> ``"name: type"`` of the fields it took from its message undeclared.
_UNDECLARED: dict[type, tuple[str, ...]] = {}


def enum_texts(enum: EnumDescriptor) -> dict[int, str]:
    """An enum's values as answers spell them, by number: ``""`` for the zero value
    (``*_UNSPECIFIED``), else the name without the enum's prefix, lower-cased
    (``FAILURE_KIND_SESSION_LOST``: ``"session_lost"``)."""
    prefix = enum.values_by_number[0].name.removesuffix("UNSPECIFIED")
    return {v.number: v.name.removeprefix(prefix).lower() if v.number else "" for v in enum.values}


def is_repeated(field: FieldDescriptor) -> bool:
    """Whether ``field`` is a repeated field (protobuf 5 has only ``label``, 7 only this)."""
    repeated = getattr(field, "is_repeated", None)
    if repeated is None:
        return bool(getattr(field, "label") == FieldDescriptor.LABEL_REPEATED)  # noqa: B009
    return bool(repeated)


#: The Python type of a scalar field, by its C++ type (bytes: see :func:`_field_type`).
_SCALAR_TYPES = {
    FieldDescriptor.CPPTYPE_INT32: int,
    FieldDescriptor.CPPTYPE_INT64: int,
    FieldDescriptor.CPPTYPE_UINT32: int,
    FieldDescriptor.CPPTYPE_UINT64: int,
    FieldDescriptor.CPPTYPE_DOUBLE: float,
    FieldDescriptor.CPPTYPE_FLOAT: float,
    FieldDescriptor.CPPTYPE_BOOL: bool,
    FieldDescriptor.CPPTYPE_ENUM: str,  # its text (enum_texts)
    FieldDescriptor.CPPTYPE_STRING: str,
}


def _field_type(field: FieldDescriptor) -> tuple[Any, Any, str]:
    """The Python type, zero value and type text of an answer field for ``field``: numbers,
    bools, text and bytes as they are, an enum as its text, a message as the message (named
    by its message type in the text); repeated: a tuple of those."""
    if field.message_type is not None:
        kind: Any = Message
        zero: Any = None
        text = field.message_type.name
    else:
        kind = bytes if field.type == FieldDescriptor.TYPE_BYTES else _SCALAR_TYPES[field.cpp_type]
        zero, text = kind(), kind.__name__
    if is_repeated(field):
        return tuple[kind, ...], (), f"tuple[{text}, ...]"
    return kind, zero, text


def with_message_fields(message: Descriptor) -> Callable[[type[_Answer]], type[_Answer]]:
    """Class decorator (over ``@dataclass(frozen=True)``): the answer class of ``message``,
    with every field of the message it does not declare added after its own, typed by
    :func:`_field_type` and defaulting to the zero value, so a field added to the proto
    reaches the SDK's answer untouched. :func:`undeclared_fields` names those fields."""

    def complete(cls: type[_Answer]) -> type[_Answer]:
        declared = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        extra = [f for f in message.fields if f.name not in declared]
        if not extra:
            return cls
        fields = [(f.name, *_field_type(f)) for f in extra]
        completed = dataclasses.make_dataclass(
            cls.__name__,
            [(name, kind, dataclasses.field(default=zero)) for name, kind, zero, _ in fields],
            bases=(cls,),
            frozen=True,
            namespace={"__doc__": cls.__doc__, "__module__": cls.__module__},
        )
        completed.__qualname__ = cls.__qualname__
        _UNDECLARED[completed] = tuple(f"{name}: {text}" for name, _, _, text in fields)
        return completed

    return complete


def undeclared_fields(cls: type) -> tuple[str, ...]:
    """``"name: type"`` of each field the answer class ``cls`` takes from its message without
    declaring it (:func:`with_message_fields`); empty when it declares them all."""
    return _UNDECLARED.get(cls, ())


def message_reader(cls: type[_Answer], message: Descriptor) -> Callable[[Message], _Answer]:
    """The converter of a ``message`` into ``cls`` (an answer dataclass whose fields are named
    like the message's), planned once: scalars as they are, an enum as its text
    (:func:`enum_texts`; a number this SDK does not know as its digits), a message field by the
    reader of its field's answer class (the message when the class does not type it). Raises
    TypeError when ``cls`` has a field the message lacks."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    steps: list[tuple[int, Callable[[Any], Any]]] = []
    for index, name in enumerate(names):
        field = message.fields_by_name.get(name)
        if field is None:
            raise TypeError(f"{cls.__name__}.{name} is not a field of {message.full_name}")
        one: Callable[[Any], Any] | None = None
        if field.enum_type is not None:
            one = _EnumTexts(enum_texts(field.enum_type)).__getitem__
        elif field.message_type is not None:
            item = hints[name]
            item = typing.get_args(item)[0] if is_repeated(field) else item
            if dataclasses.is_dataclass(item):
                one = message_reader(item, field.message_type)  # type: ignore[arg-type]
        if is_repeated(field):
            steps.append((index, tuple if one is None else each_item(one)))
        elif one is not None:
            steps.append((index, one))
    get: Callable[[Message], Any] = operator.attrgetter(*names)
    if len(names) == 1:  # attrgetter of one name answers the value, not a tuple
        only = get
        get = lambda response: (only(response),)  # noqa: E731

    def read(response: Message) -> _Answer:
        values = get(response)
        if not steps:
            return cls(*values)
        values = list(values)
        for index, step in steps:
            values[index] = step(values[index])
        return cls(*values)

    return read


class _EnumTexts(dict[int, str]):
    """:func:`enum_texts` answering the digits of a number it does not hold."""

    def __missing__(self, number: int) -> str:
        return str(number)


def each_item(one: Callable[[Any], Any]) -> Callable[[Iterable[Any]], tuple[Any, ...]]:
    """``one`` applied to every item of a repeated field, as a tuple (for a message's field,
    or an answer's)."""
    return lambda items: tuple(map(one, items))


@with_message_fields(pb.TableComparison.DESCRIPTOR)
@dataclass(frozen=True)
class TableDiff:
    """One compared table of a verify: equal or not, and both row counts."""

    table: str
    equal: bool
    predicted_rows: int
    expected_rows: int


@with_message_fields(pb.VerifyResponse.DESCRIPTOR)
@dataclass(frozen=True)
class VerifyResult:
    """A verify's answer: ``reward`` (0.0 or 1.0), ``mask_sample``, why, and per-table results.

    ``failure_kind`` is ``""`` or ``"session_lost"`` (the reference's spelling). Its fields are
    those of the ``VerifyResponse`` message, by name: a field the proto adds is added here too
    (typed by its proto type, defaulting to its zero value) until it is declared.
    """

    reward: float
    mask_sample: bool
    failure_kind: str
    failure_reason: str
    tables: tuple[TableDiff, ...]


def arguments_text(
    arguments: str | Mapping[str, Any] | None,
    field: str = "arguments",
    reason: str = checks.TOOL_ARGUMENTS_REASON,
) -> str:
    """Arguments as the JSON text the wire carries (``{}`` for None). Raises ArgumentError
    naming ``field`` (or the path inside it, ``arguments.query``) for another type, or a value
    that cannot be sent (:mod:`workplace_env_client.checks`)."""
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        return checks.json_text(arguments, field, reason)
    if not isinstance(arguments, Mapping):
        raise ArgumentError(
            field,
            f"must be a mapping or its JSON text, not {checks.type_name(arguments)}",
            reason,
        )
    plain = arguments if isinstance(arguments, dict) else dict(arguments)
    checks.json_value(plain, field, reason)
    return json.dumps(plain, ensure_ascii=False)


_CALL_SHAPE = 'a (name, arguments) pair, a {"name", "arguments"} mapping or a RecordedCall'


def to_function_call(call: CallLike, field: str = "call") -> pb.FunctionCall:
    """A :data:`CallLike` as a ``FunctionCall`` message; ArgumentError naming ``field`` (e.g.
    ``function_calls.calls[0]``) or its ``.name`` / ``.arguments`` when it has another shape."""
    name: Any
    arguments: Any
    if isinstance(call, RecordedCall):
        name, arguments = call.name, call.arguments
    elif isinstance(call, Mapping):
        if "name" not in call:
            raise ArgumentError(f"{field}.name", "required")
        name, arguments = call["name"], call.get("arguments")
    else:
        name, arguments = checks.pair(call, field, _CALL_SHAPE)
    return pb.FunctionCall(
        name=checks.text(name, f"{field}.name"),
        arguments=arguments_text(arguments, f"{field}.arguments", reasons.INVALID_REQUEST.name),
    )


def output_digest(output: str) -> bytes:
    """The 64-bit digest a :class:`RecordedCall` keeps of a tool's output JSON text."""
    return hashlib.blake2b(output.encode(), digest_size=8).digest()


def call_list(calls: Iterable[CallLike], field: str) -> list[CallLike]:
    """``calls`` (an iterable of calls, not a string or mapping) as a list; else ArgumentError
    naming ``field``."""
    if isinstance(calls, str | bytes | Mapping) or not isinstance(calls, Iterable):
        raise ArgumentError(field, f"must be a list of calls, not {checks.type_name(calls)}")
    return list(calls)


def prediction(
    function_calls: Iterable[CallLike] | None,
    recorded: Sequence[RecordedCall],
    verify_kwargs: Mapping[str, Any],
) -> list[CallLike] | None:
    """The calls a session handle's verify sends: ``function_calls`` as a list; when it is
    None, the handle's ``recorded`` calls, unless ``verify_kwargs`` carries a
    ``response_output`` (then None: that is the prediction). ArgumentError as
    :func:`call_list`."""
    if function_calls is not None:
        return call_list(function_calls, "function_calls.calls")
    if verify_kwargs.get("response_output") is not None:
        return None
    return list(recorded)


def call_messages(calls: Iterable[CallLike], field: str) -> list[pb.FunctionCall]:
    """Every call of ``calls`` as a message, ``field[i]`` naming a malformed one."""
    return [to_function_call(c, f"{field}[{i}]") for i, c in enumerate(call_list(calls, field))]


#: Why a dataset row's ground truth written as a string is refused (the SDK, ``run``, the
#: rollouts): the reference scores such a string as "change nothing", never as its calls.
GROUND_TRUTH_STRING = (
    "must be a list of {name, arguments} calls, not a string: a JSON string is not decoded "
    "(the reference scores it as 'change nothing'); write the calls as a JSON array"
)


def _row_text(row: Mapping[str, Any], key: str) -> str:
    # The row's informational fields are written as text whatever their JSON type.
    return checks.text(str(row.get(key) or ""), f"task.{key}")


def task_from_row(row: Mapping[str, Any]) -> pb.WorkplaceTask:
    """A dataset row (tasks JSONL: ``id, category, environment_name, ground_truth, ...``) as a task.

    Missing fields are left empty. ``data_digest`` is :func:`row_digest` of the whole row, so a
    retried seed must send the same row. Raises ArgumentError for a row that is not a mapping
    (``task``), a ground truth that is not a list of calls (``task.ground_truth``, a JSON
    string included: :data:`GROUND_TRUTH_STRING`; ``task.ground_truth[0].name``, ...), a field
    UTF-8 cannot carry, or any value of the row that is not JSON (:func:`checks.json_row`: a
    set, bytes, a non-str key of another type, ... named by its path, ``task.x``), as its
    digest would not be the same in every process.
    """
    checks.json_row(row, "task", "a mapping (a dataset row) or a WorkplaceTask")
    truth = row.get("ground_truth")
    if truth is None:
        truth = []
    elif isinstance(truth, str):
        raise ArgumentError("task.ground_truth", GROUND_TRUTH_STRING)
    return pb.WorkplaceTask(
        id=checks.row_id(row, "task.id"),
        category=_row_text(row, "category"),
        environment_name=_row_text(row, "environment_name"),
        ground_truth=call_messages(truth, "task.ground_truth"),
        prompt=_row_text(row, "prompt"),
        system=_row_text(row, "system"),
        data_digest=row_digest(row),
    )


def row_digest(row: Mapping[str, Any]) -> str:
    """BLAKE2b (16 bytes, hex) of ``row``'s canonical JSON (sorted keys). ``row`` must have
    passed :func:`checks.json_row`: every value JSON, so the text, and the digest, are the same
    in every process (a set's order, or its ``str``, changes with ``PYTHONHASHSEED``)."""
    try:
        text = json.dumps(row, sort_keys=True, ensure_ascii=False)
    except TypeError:  # keys of mixed types cannot be sorted: their order as given
        text = json.dumps(row, ensure_ascii=False)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def task_message(task: TaskLike) -> pb.WorkplaceTask:
    """A :data:`TaskLike` as the message (ArgumentError as :func:`task_from_row`)."""
    return task if isinstance(task, pb.WorkplaceTask) else task_from_row(task)


_EPISODE_SHAPE = "a (rollout_id, attempt) pair or an EpisodeId"


def episode_message(episode: EpisodeLike, field: str = "episode_id") -> pb.EpisodeId:
    """An :data:`EpisodeLike` as the message; ArgumentError naming ``episode_id`` (or its
    ``.rollout_id`` / ``.attempt``) for another shape or a ``rollout_id`` longer than
    :data:`~workplace_env_client.id_bounds.MAX_ID_CHARS`."""
    if isinstance(episode, pb.EpisodeId):
        return episode
    rollout_id, attempt = checks.pair(episode, field, _EPISODE_SHAPE)
    return pb.EpisodeId(
        rollout_id=checks.bounded_id(rollout_id, f"{field}.rollout_id"),
        attempt=checks.int32(attempt, f"{field}.attempt"),
    )


def task_id_message(task_id: tuple[str, str]) -> pb.TaskId:
    """A ``(taskset, task_id)`` pair as the message; ArgumentError naming ``task_id`` (or its
    ``.taskset`` / ``.task_id``) for another shape."""
    taskset, tid = checks.pair(task_id, "task_id", "a (taskset, task_id) pair")
    return pb.TaskId(
        taskset=checks.text(taskset, "task_id.taskset"),
        task_id=checks.text(tid, "task_id.task_id"),
    )


def session_id_text(session_id: str) -> str:
    """``session_id`` if it is a string UTF-8 can carry; else ArgumentError naming
    ``resources_session_id`` (the id's format is the server's rule, CONTRACT S5)."""
    return checks.text(session_id, "resources_session_id")


def session_identity(
    task: TaskLike,
    episode: tuple[str, int] | None,
    task_id: tuple[str, str] | None,
    session_id: str | None,
) -> tuple[str, tuple[str, int], pb.WorkplaceTask, tuple[str, str]]:
    """The ``session(...)`` context managers' identity, defaults filled in: ``(session id,
    episode, task message, task id)``; a fresh random session id, episode ``(<uuid>, 0)``, task
    id ``("default", <task id>)``. Raises ArgumentError (nothing sent) for a malformed
    argument, naming its field."""
    if session_id is None or session_id == "":
        sid = f"s-{uuid.uuid4().hex}"
    else:
        sid = session_id_text(session_id)
    ep = (f"r-{uuid.uuid4().hex}", 0) if episode is None else episode
    episode_message(ep)
    task_msg = task_message(task)
    tid = task_id or ("default", task_msg.id or "task")
    task_id_message(tid)
    return sid, ep, task_msg, tid


def new_call_id() -> str:
    """A fresh idempotency key for a tool call (AIP-155 request id)."""
    return f"c-{uuid.uuid4().hex}"


def seed_request(
    session_id: str, episode: EpisodeLike, task_id: tuple[str, str], task: TaskLike
) -> pb.SeedSessionRequest:
    """A typed seed (CONTRACT S1). Raises ArgumentError (nothing sent) for a malformed
    argument, naming its field."""
    return pb.SeedSessionRequest(
        resources_session_id=session_id_text(session_id),
        episode_id=episode_message(episode),
        task_id=task_id_message(task_id),
        task=task_message(task),
    )


def legacy_seed_request(session_id: str, task: TaskLike) -> pb.SeedSessionRequest:
    """A legacy (cookie) seed: no episode or task id."""
    return pb.SeedSessionRequest(
        resources_session_id=session_id_text(session_id), task=task_message(task), legacy=True
    )


def call_tool_request(
    session_id: str,
    name: str,
    arguments: str | Mapping[str, Any] | None,
    call_id: str,
    *,
    keyed: bool = True,
) -> pb.CallToolRequest:
    """A tool call; an empty ``call_id`` gets a fresh one when ``keyed`` (a transport that may
    resend it: a retry then replays, T6). Raises ArgumentError naming ``tool_name``,
    ``call_id`` or ``arguments`` (``arguments.query``; reason ``INVALID_TOOL_ARGUMENTS``, as the
    server's for arguments it refuses)."""
    call_id = checks.text(call_id, "call_id")
    return pb.CallToolRequest(
        resources_session_id=session_id_text(session_id),
        tool_name=checks.text(name, "tool_name"),
        arguments=arguments_text(arguments),
        call_id=call_id or (new_call_id() if keyed else ""),
    )


class CheckedJson(str):
    """JSON text of a verify input (a Responses ``output`` array, a ground truth) that a check
    in this process has already passed, as the server would check it (the co-hosted gateway
    checks a ``/verify`` body at its edge to name problems as the reference's 422 does). It is
    a ``str``: a transport to another process sends it as text, which that server checks; an
    in-process transport tells the servicer not to check it again (:func:`all_checked`). Make
    one only from a value whose check found nothing."""

    __slots__ = ()


def all_checked(*texts: object) -> bool:
    """Whether every JSON text given (None: not given) is :class:`CheckedJson`, and one is."""
    given = [text for text in texts if text is not None]
    return bool(given) and all(isinstance(text, CheckedJson) for text in given)


def verify_request(
    session_id: str,
    calls: Iterable[CallLike] | None,
    response_output: Sequence[Any] | str | None,
    ground_truth: Iterable[CallLike] | None,
    ground_truth_json: str | None,
) -> pb.VerifyRequest:
    """A verify of a call list or of a raw Responses-API ``output`` array. Raises
    ArgumentError naming ``function_calls.calls[i]``, ``response_output_json`` (or a path in
    it), ``ground_truth.calls[i]`` or ``ground_truth_json`` for a malformed argument."""
    request = pb.VerifyRequest(resources_session_id=session_id_text(session_id))
    if response_output is not None:
        if isinstance(response_output, str):
            request.response_output_json = checks.json_text(response_output, "response_output_json")
        else:
            items = json_list(response_output, "response_output_json")
            checks.json_value(items, "response_output_json")
            request.response_output_json = json.dumps(items, ensure_ascii=False)
    else:
        request.function_calls.SetInParent()
        request.function_calls.calls.extend(
            call_messages([] if calls is None else calls, "function_calls.calls")
        )
    if ground_truth_json is not None:
        request.ground_truth_json = checks.json_text(
            checks.text(ground_truth_json, "ground_truth_json"), "ground_truth_json"
        )
    elif ground_truth is not None:
        request.ground_truth.SetInParent()
        request.ground_truth.calls.extend(call_messages(ground_truth, "ground_truth.calls"))
    return request


def json_list(items: Any, field: str) -> list[Any]:
    """``items`` (a sequence, not a string or mapping) as a list; else ArgumentError."""
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
        raise ArgumentError(
            field, f"must be a list (or its JSON text), not {checks.type_name(items)}"
        )
    return list(items)


_read_verify = message_reader(VerifyResult, pb.VerifyResponse.DESCRIPTOR)


def verify_answer(response: pb.VerifyResponse) -> VerifyResult:
    """The :class:`VerifyResult` of a verify response (field by field, by name)."""
    return _read_verify(response)


def close_request(session_id: str, episode: EpisodeLike) -> pb.CloseSessionRequest:
    """A close of ``session_id`` for ``episode`` (ArgumentError as :func:`seed_request`)."""
    return pb.CloseSessionRequest(
        resources_session_id=session_id_text(session_id), episode_id=episode_message(episode)
    )


def close_answer(response: pb.CloseSessionResponse) -> str:
    """``"CLOSED"``, ``"ALREADY_CLOSED"`` or ``"NOT_SEEDED"``."""
    return pb.CloseOutcome.Name(response.outcome).removeprefix("CLOSE_OUTCOME_")


def tools_answer(response: pb.ListToolsResponse) -> list[dict[str, Any]]:
    """The tool schemas as JSON objects, in the reference's order."""
    return [json.loads(t.schema_json) for t in response.tools]


@dataclass(frozen=True)
class ServerSandbox:
    """The sandbox a server plays every episode on: ``digest`` (``"sha256:<hex>"`` of its base
    tables) and ``origin`` (a data directory, or ``"generated:seed=<seed>,scale=<scale>"``);
    both ``""`` when the server does not say (a server older than ListTools' sandbox fields)."""

    digest: str
    origin: str


def sandbox_answer(response: pb.ListToolsResponse) -> ServerSandbox:
    """The server's sandbox as its ListTools answer names it."""
    return ServerSandbox(response.sandbox_digest, response.sandbox_origin)
