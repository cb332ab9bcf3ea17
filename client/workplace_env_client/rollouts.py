"""Model-in-the-loop rollouts: an OpenAI-compatible model plays one episode through the SDK.

For one task row: the row's ``responses_create_params`` (built from its ``system`` and ``prompt``
and the 27 tool schemas when the row has none, the way NeMo Gym sends them) go to the model;
every function call it makes becomes a ``CallTool`` whose output goes back to it, until it
answers without calling a tool or ``max_turns`` model calls were made; then ``Verify`` scores the
accumulated Responses-API ``output`` (function calls, their outputs, the final message) and the
session is closed. The result has NeMo Gym's rollout shape (the row, ``responses_create_params``,
``response``, ``reward``, ``mask_sample``, ``failure_kind``, ``failure_reason``) plus our
diagnostics.

The model client is whatever OpenAI-compatible client object the caller built (duck-typed:
``client.responses.create(**kw)`` for ``api="responses"``, ``client.chat.completions.create(**kw)``
for ``api="chat"``; sync for :func:`run_rollout`, awaitable for :func:`arun_rollout`), so the SDK
itself needs no ``openai`` package; :func:`openai_client` builds one when ``openai`` is installed
(the ``model`` extra). Timeouts and retries with backoff on 429 and 5xx are the client's own
(``openai``: ``timeout``, ``max_retries``, honouring ``retry-after``).

The loop follows NeMo Gym's simple agent (``responses_api_agents/simple_agent``, nemo-gym 0.7.0),
the spec of the protocol, in what the model sees and how the episode goes on:

* a function call whose ``arguments`` Python's JSON parser refuses is not run; the model gets
  :func:`unparsable_arguments`' text as its output (``{"error": "Invalid tool call arguments:
  JSONDecodeError(...)"}``), the turn's other calls run, and the episode goes on to Verify;
* a call the environment refuses (arguments that are JSON but not an object, a lone surrogate,
  nesting past 128 levels: CONTRACT T3, or the SDK's own ArgumentError) gets our HTTP tool
  route's 422 body as its output (:func:`refused_output`), as NeMo's agent passes on any body;
* an unknown tool or bad keyword arguments get the reference's dispatch text
  ``"Error executing tool '<name>': ..."`` inside ``{"output": ...}`` (CONTRACT T2);
* an answer cut off by the token limit (``incomplete_details``, chat ``finish_reason length``)
  ends the episode without running its calls, and Verify scores the output as it stands.

Each of those calls counts in ``invalid_tool_calls``. What the model does never masks an
episode Verify can score.

Failures never raise: the episode is masked (``mask_sample`` true, reward 0) with a failure kind
from NeMo Gym's vocabulary and a reason naming what went wrong:

=============================  =========================================================
``provider_unavailable``       the model call failed after the client's retries (HTTP 5xx,
                               timeout, connection refused, a body that is not a response)
``provider_quota_exhausted``   HTTP 429 after the client's retries
``agent_run_error``            the model's answer cannot be run or scored, where NeMo Gym's
                               agent fails too: an output item with no ``type``, a function
                               call whose ``name``, ``arguments`` or ``call_id`` is missing or
                               not a string, arguments nested deeper than Python's JSON parser
                               goes, an answer a strict JSON line cannot carry (a lone
                               surrogate, NaN, an infinity, an integer beyond a float's range),
                               or an output Verify refuses. A failure of the model: a run
                               counts it in the model's pass rate
``session_lost`` ...           the environment lost the session (masked by Verify, V4)
=============================  =========================================================

and ``workplace_env:model_config_error`` when the endpoint refused the request as malformed or
unauthorised (every HTTP 4xx but 408, 409 and 429: its URL, API, model name, key or sampling
parameters) or the client would not build it: not retried, and no unavailable provider.
Endpoint reasons name the request's URL, the HTTP status and the retries made. Masks other
than ``agent_run_error`` are failures of the infrastructure, not scores of the model. Nothing
the model returns raises out of :func:`run_rollout` or :func:`arun_rollout`; the session is
closed in every case.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import uuid
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from workplace_env_client import checks, reasons
from workplace_env_client.client import EnvironmentClient
from workplace_env_client.errors import (
    ArgumentError,
    InvalidRequestError,
    WorkplaceEnvError,
)
from workplace_env_client.messages import (
    TableDiff,
    VerifyResult,
    episode_message,
    task_id_message,
)
from workplace_env_client.rows import RolloutDiagnostics, RolloutLine

#: The two OpenAI-compatible APIs the loop speaks.
ModelApi = Literal["responses", "chat"]
MODEL_APIS: tuple[str, ...] = ("responses", "chat")
_UNSAFE_ID_CHARS = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True)
class ModelPolicy:
    """How the model is asked: ``model`` name, ``api``, at most ``max_turns`` model calls per
    episode, and extra request fields (``temperature``, ``max_output_tokens`` ...) sent on
    every call (Responses-API names; ``max_output_tokens`` becomes ``max_tokens`` for chat).
    Raises ValueError for another ``api``, ArgumentError (a ValueError) naming ``max_turns``
    when it is not an int in 1..2147483647."""

    model: str
    api: ModelApi = "responses"
    max_turns: int = 10
    request_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.api not in MODEL_APIS:
            raise ValueError(f"api must be 'responses' or 'chat', not {self.api!r}")
        checks.count(self.max_turns, "max_turns", 1, checks.INT32_MAX)


@dataclass
class Rollout:
    """One finished episode: what NeMo Gym's rollout line holds, plus our diagnostics.

    ``turns`` counts model calls, ``tool_calls`` the function calls the model made and
    ``invalid_tool_calls`` those the environment refused and those that never ran (arguments
    that are not JSON, calls of an answer cut off by the token limit).
    ``tables`` is Verify's per-table comparison (empty when the episode failed before Verify).
    """

    row: Mapping[str, Any]
    responses_create_params: dict[str, Any]
    response: dict[str, Any]
    reward: float
    mask_sample: bool
    failure_kind: str | None
    failure_reason: str | None
    turns: int
    tool_calls: int
    invalid_tool_calls: int
    tables: tuple[TableDiff, ...]
    seconds: float

    def to_json(self, task_index: int = 0, rollout_index: int = 0) -> dict[str, Any]:
        """The rollout as a NeMo Gym rollouts-JSONL object: the row's fields, then the
        :class:`~workplace_env_client.rows.RolloutLine` fields (``responses_create_params``,
        ``response``, ``reward``, ``mask_sample``, ``failure_kind``, ``failure_reason``,
        ``_ng_task_index``, ``_ng_rollout_index``, ``workplace_env``: turns, tool-call counts,
        per-table results, seconds)."""
        diagnostics: RolloutDiagnostics = {
            "turns": self.turns,
            "tool_calls": self.tool_calls,
            "invalid_tool_calls": self.invalid_tool_calls,
            "tables": [
                {
                    "table": t.table,
                    "equal": t.equal,
                    "predicted_rows": t.predicted_rows,
                    "expected_rows": t.expected_rows,
                }
                for t in self.tables
            ],
            "seconds": round(self.seconds, 4),
        }
        fields: RolloutLine = {
            "responses_create_params": self.responses_create_params,
            "response": self.response,
            "reward": self.reward,
            "mask_sample": self.mask_sample,
            "failure_kind": self.failure_kind,
            "failure_reason": self.failure_reason,
            "_ng_task_index": task_index,
            "_ng_rollout_index": rollout_index,
            "workplace_env": diagnostics,
        }
        return {**self.row, **fields}


def create_params_for(row: Mapping[str, Any], tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The request a task row sends: its own ``responses_create_params`` when it has them,
    else ``{"input": [system message, user message], "tools": tools}`` from its ``system`` and
    ``prompt`` (``tools``: the 27 schemas as ListTools gives them, NeMo Gym's ``tools``)."""
    own = row.get("responses_create_params")
    if isinstance(own, Mapping):
        copied: dict[str, Any] = json.loads(json.dumps(own))  # the loop never alters the row
        return copied
    messages: list[dict[str, Any]] = []
    if row.get("system"):
        messages.append({"role": "system", "content": str(row["system"])})
    messages.append({"role": "user", "content": str(row.get("prompt") or "")})
    return {"input": messages, "tools": [dict(t) for t in tools]}


def row_name(row: Mapping[str, Any]) -> str:
    """The row's ``id`` as text (:func:`~workplace_env_client.checks.row_id`: a string, or an
    integer in decimal, ``0`` -> ``"0"``); ``"task"`` when it has none (absent, null or empty).
    Raises ArgumentError naming ``task.id`` for an id of another JSON type."""
    return checks.row_id(row, "task.id") or "task"


def episode_for(row: Mapping[str, Any], rollout_index: int = 0) -> tuple[str, int]:
    """A rollout id for the row's ``id`` (:func:`row_name`; characters a rollout id refuses
    become ``-``)."""
    case = _UNSAFE_ID_CHARS.sub("-", row_name(row))[:200]
    return (f"r{case}-{rollout_index}", 0)


def openai_client(
    base_url: str,
    *,
    api_key: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    timeout_s: float = 120.0,
    max_retries: int = 4,
    asynchronous: bool = False,
    stop: Callable[[], bool] | None = None,
) -> Any:
    """An ``openai.OpenAI`` (or ``AsyncOpenAI``) for ``base_url``: ``timeout_s`` per request,
    ``max_retries`` retries with exponential backoff on 408/409/429/5xx and connection errors.
    The key is ``api_key``, else ``$api_key_env``, else ``"EMPTY"`` (local servers need none).
    Once ``stop()`` is true, no request is sent any more, a retry included: the call raises
    :class:`ModelCallsStopped` (a request already sent runs to its answer or its timeout).
    Raises ArgumentError naming ``timeout_s`` (not a finite number of seconds in ``(0, 1e9]``)
    or ``max_retries`` (not an int in 0..100); ImportError naming the extra when ``openai`` is
    not installed."""
    checks.seconds(timeout_s, "timeout_s")
    checks.count(max_retries, "max_retries", 0, 100)
    try:
        import openai
    except ImportError as exc:  # the SDK's own dependencies stay grpcio and protobuf
        raise ImportError(
            "the model loop's client needs the openai package: "
            "pip install 'workplace-env[model]' (or pip install openai)"
        ) from exc
    key = api_key or os.environ.get(api_key_env) or "EMPTY"
    cls = openai.AsyncOpenAI if asynchronous else openai.OpenAI
    extra: dict[str, Any] = {}
    if stop is not None:
        extra["http_client"] = _stoppable_http_client(openai, stop, asynchronous)
    return cls(base_url=base_url, api_key=key, timeout=timeout_s, max_retries=max_retries, **extra)


class ModelCallsStopped(BaseException):
    """Raised instead of sending a model request once the ``stop`` of :func:`openai_client` is
    true. A BaseException, as KeyboardInterrupt: the client's retry loop, which retries every
    Exception, and the rollout loop, which masks them, let it through; the episode's session
    is closed on the way out and the episode has no result."""


def _stoppable_http_client(openai: Any, stop: Callable[[], bool], asynchronous: bool) -> Any:
    """The openai package's default HTTP client with a request hook raising
    :class:`ModelCallsStopped` once ``stop()`` is true."""

    def refuse() -> None:
        if stop():
            raise ModelCallsStopped("stopped: no model request is sent any more")

    if asynchronous:

        async def refuse_async(_request: Any) -> None:
            refuse()

        return openai.DefaultAsyncHttpxClient(event_hooks={"request": [refuse_async]})
    return openai.DefaultHttpxClient(event_hooks={"request": [lambda _request: refuse()]})


# -- the dialogue: one state machine for both APIs and both drivers -----------------------------


class EpisodeFailure(Exception):
    """The episode cannot go on: ``kind`` (NeMo Gym failure kind) and ``reason``."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(f"{kind}: {reason}")
        self.kind = kind
        self.reason = reason


def _plain(value: Any) -> Any:
    """A response object (pydantic model, dict or plain object) as JSON-ready data."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # a model built from a malformed body holds values of other types
        return dump(mode="json", exclude_none=True, warnings=False)
    if hasattr(value, "__dict__") and not isinstance(value, str | int | float | bool):
        return {k: _plain(v) for k, v in vars(value).items() if not k.startswith("_")}
    return value


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, Mapping) and "text" in p
        )
    return "" if content is None else str(content)


def _item_problem(item: Any, index: int) -> str | None:
    """Why output item ``index`` of a model answer cannot be run or scored, or None.

    Every field the loop reads from the item is checked here, so later reads cannot fail."""
    if not isinstance(item, Mapping):
        return f"output item {index} is {checks.type_name(item)}, not an object"
    kind = item.get("type")
    if kind is None or kind == "":
        return f"output item {index} has no type"
    if not isinstance(kind, str):
        return f"output item {index}: type is {checks.type_name(kind)}, not a string"
    if kind == "function_call":
        for key in ("name", "arguments", "call_id"):
            value = item.get(key)
            if value is None:
                return f"function call (output item {index}) has no {key}"
            if not isinstance(value, str):
                return (
                    f"function call (output item {index}): {key} is "
                    f"{checks.type_name(value)}, not a string"
                )
    problem = checks.json_problem(item, f"output[{index}]")
    if problem is not None:
        return f"{problem[0]}: {problem[1]}"
    return None


#: What the reason of a model request that got no HTTP answer says after its URL.
NO_ANSWER = "no answer"
# Statuses OpenAI's client retries (besides connection errors and timeouts).
_RETRIED_STATUSES = frozenset({408, 409, 429})
#: HTTP statuses of a model request the endpoint refuses as malformed or unauthorised (every
#: 4xx OpenAI's client does not retry: 400, 401, 403, 404, 405, 413, 415, 422, ...; its URL,
#: API, model name, key or sampling parameters): no retry helps, and the provider is not
#: unavailable.
CONFIG_STATUSES = frozenset(range(400, 500)) - _RETRIED_STATUSES
#: The failure kind of an episode whose model request the endpoint refused for its
#: configuration (:data:`CONFIG_STATUSES`): not finished, and not the model's score.
MODEL_CONFIG_ERROR = "workplace_env:model_config_error"
#: The failure kind of an episode the environment could not play (a refused seed, a call or
#: Verify that failed on the server's side).
ENVIRONMENT_ERROR = reasons.ROLLOUT_ENVIRONMENT_ERROR


@dataclass(frozen=True)
class MaskKind:
    """What masked an episode, for people: ``by`` (who: the model, the endpoint, the
    environment) and ``meaning`` (what it means for the run); ``model_own``: a failure of the
    model, counted in its pass rate and never played again."""

    by: str
    meaning: str
    model_own: bool = False


#: Every ``failure_kind`` a rollout can carry, with what it means (the run summaries say it).
MASK_KINDS: dict[str, MaskKind] = {
    "agent_run_error": MaskKind(
        "the model itself", "failures of the model, counted in its pass rate", model_own=True
    ),
    "provider_unavailable": MaskKind(
        "the endpoint",
        "the model call failed after the client's retries (HTTP 5xx, timeout, connection "
        "refused, a body that is not a response); no score of the model",
    ),
    "provider_quota_exhausted": MaskKind(
        "the endpoint", "HTTP 429 after the client's retries; no score of the model"
    ),
    MODEL_CONFIG_ERROR: MaskKind(
        "the endpoint's configuration",
        "it refused the request as malformed or unauthorised (HTTP 4xx but 408, 409, 429: "
        "its URL, API, model name, key or sampling parameters), not retried; no score of the "
        "model",
    ),
    reasons.ROLLOUT_SESSION_LOST: MaskKind(
        "the environment", "the server lost the session; no score of the model"
    ),
    reasons.ROLLOUT_SESSION_EXPIRED: MaskKind(
        "the environment",
        "the server evicted the session after its idle TTL; no score of the model",
    ),
    ENVIRONMENT_ERROR: MaskKind(
        "the environment",
        "the server refused the seed or failed a call or Verify; no score of the model",
    ),
}


def mask_kind(failure_kind: str) -> MaskKind:
    """The :data:`MASK_KINDS` entry of ``failure_kind``; one of another vocabulary (a file
    written by another tool) is said to be unknown, never described as another kind."""
    return MASK_KINDS.get(
        failure_kind,
        MaskKind("an unknown cause", "a failure kind this version does not know; no score"),
    )


def _endpoint_url(exc: BaseException, model_client: Any, api: str) -> str:
    """The URL of the failed model request (the client's base URL and the API's path when the
    error does not carry its request)."""
    request = getattr(exc, "request", None)
    url = getattr(request, "url", None)
    if url:
        return str(url)
    base = str(getattr(model_client, "base_url", "") or "<the client's base URL>")
    return base.rstrip("/") + ("/responses" if api == "responses" else "/chat/completions")


def _endpoint_failure(exc: BaseException, url: str, max_retries: Any, turn: int) -> EpisodeFailure:
    """The episode's failure for a model request that raised ``exc`` at ``url``: an answer the
    client could not represent (``agent_run_error``), a configuration refusal
    (:data:`CONFIG_STATUSES`: :data:`MODEL_CONFIG_ERROR`), 429 (``provider_quota_exhausted``),
    another status or no connection (``provider_unavailable``); the reason names the URL, the
    status and how many retries were made (``max_retries`` of a client that retries 408, 409,
    429, 5xx and connection errors, as OpenAI's does; None: unknown)."""
    if isinstance(exc, OverflowError | RecursionError | UnicodeError) or (
        isinstance(exc, ValueError) and not isinstance(exc, json.JSONDecodeError)
    ):
        return EpisodeFailure(
            "agent_run_error",
            f"turn {turn}: malformed model output: the answer cannot be represented "
            f"({type(exc).__name__}: {str(exc)[:200]})",
        )
    if isinstance(exc, TypeError):  # the client would not build the request: nothing sent
        return EpisodeFailure(
            MODEL_CONFIG_ERROR,
            f"model endpoint {url}: the model client refused the request before sending it, "
            f"after 0 retries (a configuration error of its parameters): {str(exc)[:300]}",
        )
    status = getattr(exc, "status_code", None)
    message = str(getattr(exc, "message", None) or exc)[:300]
    retryable = not isinstance(status, int) or status in _RETRIED_STATUSES or status >= 500
    if isinstance(max_retries, int) and not isinstance(max_retries, bool):
        retries = f"after {max_retries if retryable else 0} retries"
    else:
        retries = "after the client's retries"
    if status in CONFIG_STATUSES:
        return EpisodeFailure(
            MODEL_CONFIG_ERROR,
            f"model endpoint {url}: HTTP {status} {retries}: a configuration error (the "
            f"endpoint's URL, API, model name, key or sampling parameters), not an unavailable "
            f"provider: {message}",
        )
    if status == 429:
        return EpisodeFailure(
            "provider_quota_exhausted", f"model endpoint {url}: HTTP 429 {retries}: {message}"
        )
    if isinstance(status, int):
        return EpisodeFailure(
            "provider_unavailable", f"model endpoint {url}: HTTP {status} {retries}: {message}"
        )
    return EpisodeFailure(
        "provider_unavailable",
        f"model endpoint {url}: {NO_ANSWER} {retries} ({type(exc).__name__}: {message})",
    )


def endpoint_unanswered(line: Mapping[str, Any]) -> bool:
    """Whether a rollout line (or :meth:`Rollout.to_json`) was masked because its model endpoint
    gave no HTTP answer at all (``provider_unavailable``, :data:`NO_ANSWER`: a refused
    connection, an unknown host, a timeout): the endpoint's address may be wrong."""
    reason = line.get("failure_reason")
    return (
        line.get("failure_kind") == "provider_unavailable"
        and isinstance(reason, str)
        and reason.startswith("model endpoint ")
        and f": {NO_ANSWER} after " in reason
    )


def _request_failure(
    exc: BaseException, model_client: Any, policy: ModelPolicy, dialogue: _Dialogue
) -> EpisodeFailure:
    url = _endpoint_url(exc, model_client, policy.api)
    return _endpoint_failure(
        exc, url, getattr(model_client, "max_retries", None), dialogue.turns + 1
    )


_DISPATCH_ERROR = "\"Error executing tool '"


def _tool_output_body(output_json: str) -> str:
    # What a NeMo Gym agent passes back: the tool route's body, ``{"output":`` + output + ``}``.
    return '{"output":' + output_json + "}"


class _Dialogue:
    """The conversation of one episode, independent of how the model is awaited."""

    def __init__(self, params: dict[str, Any], policy: ModelPolicy) -> None:
        self.params = params
        self.policy = policy
        raw_input = params.get("input")
        if isinstance(raw_input, str):
            raw_input = [{"role": "user", "content": raw_input}]
        self.input: list[dict[str, Any]] = [dict(m) for m in raw_input or []]
        self.output: list[dict[str, Any]] = []  # the response's accumulated output items
        self.messages: list[dict[str, Any]] = [  # the chat transcript (api="chat")
            {"role": m.get("role", "user"), "content": _text_of(m.get("content"))}
            for m in self.input
            if m.get("type", "message") == "message"
        ]
        self.turns = 0
        self.tool_calls = 0
        self.invalid_tool_calls = 0
        self.done = False
        self.last: dict[str, Any] = {}
        self.incomplete: dict[str, Any] | None = None

    # -- requests ---------------------------------------------------------------------------

    def request(self) -> dict[str, Any]:
        """The keyword arguments of the next model call."""
        options = dict(self.policy.request_options)
        extra = {
            k: v
            for k, v in self.params.items()
            if k not in ("input", "tools", "model", "stream", "max_output_tokens")
        }
        if self.policy.api == "responses":
            kwargs = {**extra, **options, "model": self.policy.model}
            kwargs["input"] = self.input + self.output
            if self.params.get("tools"):
                kwargs["tools"] = self.params["tools"]
            if "max_output_tokens" in self.params:
                kwargs.setdefault("max_output_tokens", self.params["max_output_tokens"])
            if "seed" in kwargs:  # no parameter of OpenAI's Responses client: sent in the body
                kwargs["extra_body"] = {**kwargs.get("extra_body", {}), "seed": kwargs.pop("seed")}
            return kwargs
        chat: dict[str, Any] = {"model": self.policy.model, "messages": list(self.messages)}
        for key in ("temperature", "top_p", "seed", "parallel_tool_calls", "tool_choice"):
            if key in extra:
                chat[key] = extra[key]
        tokens = options.pop("max_output_tokens", self.params.get("max_output_tokens"))
        if tokens is not None:
            chat["max_tokens"] = tokens
        chat.update(options)
        if self.params.get("tools"):
            chat["tools"] = [
                {
                    "type": "function",
                    "function": {
                        k: t[k] for k in ("name", "description", "parameters", "strict") if k in t
                    },
                }
                for t in self.params["tools"]
                if t.get("type", "function") == "function"
            ]
        return chat

    # -- answers ----------------------------------------------------------------------------

    def receive(self, answer: Any) -> list[dict[str, Any]]:
        """Take one model answer; return the function calls to run (none: the episode ends).

        Raises EpisodeFailure for an answer that cannot be run or scored (a malformed item,
        arguments nested deeper than Python's JSON parser goes: NeMo Gym's agent fails there)."""
        self.turns += 1
        data = _plain(answer)
        if not isinstance(data, Mapping):
            raise EpisodeFailure("provider_unavailable", "model endpoint: answer is not an object")
        # Kept out of the response: the rollout line must be JSON a strict reader takes.
        unwritable = checks.json_problem(data, "answer", strict=True)
        if unwritable is not None:
            raise EpisodeFailure(
                "agent_run_error",
                f"turn {self.turns}: malformed model output: {unwritable[0]}: {unwritable[1]}",
            )
        if self.policy.api == "responses":
            items, cut = self._from_responses(data)
        else:
            items, cut = self._from_chat(data)
        for index, item in enumerate(items):
            problem = _item_problem(item, index)
            if problem is not None:
                # Kept out of the response: the rollout line must stay writable and valid.
                raise EpisodeFailure(
                    "agent_run_error", f"turn {self.turns}: malformed model output: {problem}"
                )
        calls = [i for i in items if i["type"] == "function_call"]
        for call in calls if not cut else ():
            try:
                json.loads(call["arguments"])
            except RecursionError as exc:
                raise EpisodeFailure(
                    "agent_run_error",
                    f"turn {self.turns}: malformed model output: tool call {call['name']!r} has "
                    f"arguments nested deeper than a JSON parser goes: {call['arguments'][:80]!r}",
                ) from exc
            except ValueError:  # not JSON: answered to the model (unparsable_arguments)
                pass
        self.output.extend(items)
        self.tool_calls += len(calls)
        if cut:
            # NeMo Gym's simple agent stops at an answer with incomplete_details and runs none
            # of its calls; Verify scores the output as it stands.
            self.invalid_tool_calls += len(calls)
            self.done = True
            self.incomplete = {"reason": cut}
            return []
        if not calls or self.turns >= self.policy.max_turns:
            self.done = True
            if calls:
                self.incomplete = {"reason": "max_turns"}
        return calls

    def _from_responses(self, data: Mapping[str, Any]) -> tuple[list[Any], str]:
        self.last = dict(data)
        output = data.get("output")
        if not isinstance(output, list):
            raise EpisodeFailure("provider_unavailable", "model endpoint: response has no output")
        items = [dict(i) if isinstance(i, Mapping) else i for i in output]
        cut = ""
        details = data.get("incomplete_details")
        if data.get("status") == "incomplete" or details:
            reason = details.get("reason") if isinstance(details, Mapping) else None
            cut = str(reason or "incomplete")
        return items, cut

    def _from_chat(self, data: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str]:
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise EpisodeFailure(
                "provider_unavailable", "model endpoint: completion has no choices"
            )
        self.last = {"id": data.get("id"), "created": data.get("created")}
        choice = choices[0]
        message = choice.get("message") or {}
        if not isinstance(message, Mapping):
            raise EpisodeFailure(
                "agent_run_error",
                f"turn {self.turns}: malformed model output: message is "
                f"{checks.type_name(message)}, not an object",
            )
        cut = "max_output_tokens" if choice.get("finish_reason") == "length" else ""
        items: list[Any] = []
        text = message.get("content")
        if text:
            items.append(
                {
                    "id": f"msg_{uuid.uuid4().hex}",
                    "type": "message",
                    "role": "assistant",
                    "status": "incomplete" if cut else "completed",
                    "content": [{"type": "output_text", "text": str(text), "annotations": []}],
                }
            )
        tool_calls = message.get("tool_calls") or []
        if not isinstance(tool_calls, list):
            raise EpisodeFailure(
                "agent_run_error",
                f"turn {self.turns}: malformed model output: tool_calls is "
                f"{checks.type_name(tool_calls)}, not a list",
            )
        for t in tool_calls:
            if not isinstance(t, Mapping):
                items.append(t)
                continue
            function = t.get("function")
            if not isinstance(function, Mapping):
                function = {}
            call_id = t.get("id")
            call_id = (
                call_id if isinstance(call_id, str) and call_id else f"call_{uuid.uuid4().hex}"
            )
            # name and arguments as the model sent them: receive() refuses what is not a string
            items.append(
                {
                    "id": f"fc_{call_id}",
                    "type": "function_call",
                    "call_id": call_id,
                    "name": function.get("name"),
                    "arguments": function.get("arguments"),
                    "status": "incomplete" if cut else "completed",
                }
            )
        assistant: dict[str, Any] = {"role": "assistant", "content": text or None}
        if tool_calls:
            assistant["tool_calls"] = [
                {
                    "id": i["call_id"],
                    "type": "function",
                    "function": {"name": i["name"], "arguments": i["arguments"]},
                }
                for i in items
                if isinstance(i, Mapping) and i["type"] == "function_call"
            ]
        self.messages.append(assistant)
        return items, cut

    def answer(self, call: Mapping[str, Any], output: str) -> None:
        """Record a call's output for the model (both transcripts)."""
        call_id = str(call.get("call_id", ""))
        self.output.append({"type": "function_call_output", "call_id": call_id, "output": output})
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": output})

    def response(self) -> dict[str, Any]:
        """The episode's response: a Responses-API object whose ``output`` is every turn's
        items in order (as NeMo Gym's simple agent builds it)."""
        base = self.last if self.policy.api == "responses" else {}
        response = {
            k: v
            for k, v in base.items()
            if k not in ("output", "usage", "output_text", "incomplete_details", "status")
        }
        response.setdefault("id", f"resp_{self.last.get('id') or uuid.uuid4().hex}")
        response.setdefault("object", "response")
        created = self.last.get("created")
        response.setdefault(
            "created_at",
            float(created) if isinstance(created, int | float) and created else time.time(),
        )
        response.setdefault("model", self.policy.model)
        response.setdefault(
            "parallel_tool_calls", bool(self.params.get("parallel_tool_calls", True))
        )
        response.setdefault("tool_choice", self.params.get("tool_choice", "auto"))
        response.setdefault("tools", self.params.get("tools", []))
        response["output"] = self.output
        response["status"] = "incomplete" if self.incomplete else "completed"
        response["incomplete_details"] = self.incomplete
        return response


def unparsable_arguments(arguments: str) -> str | None:
    """The tool output NeMo Gym's simple agent gives the model for a call whose ``arguments``
    Python's JSON parser refuses, instead of running it: ``{"error": "Invalid tool call
    arguments: JSONDecodeError('<msg>: line L column C (char N)')"}`` (``json.dumps`` of the
    ``repr`` of the error, ASCII-escaped); None when the arguments parse (any JSON value: what is
    not an object is the server's to refuse, CONTRACT T3)."""
    try:
        json.loads(arguments)
    except json.JSONDecodeError as exc:
        return json.dumps({"error": f"Invalid tool call arguments: {exc!r}"})
    return None


def refused_output(exc: InvalidRequestError) -> str:
    """The tool output for a call the environment refuses (CONTRACT T3: ``INVALID_ARGUMENT``,
    reason ``INVALID_TOOL_ARGUMENTS``, or the SDK's own ArgumentError before sending): the body
    our HTTP tool route answers with it (422, FastAPI's ``detail`` shape), which is what NeMo
    Gym's agent, passing any status's body on, gives the model:
    ``{"detail":[{"type":"value_error","loc":["body"],"msg":<message>}],
    "failure_kind":"invalid_request","reason":<reason>}``."""
    body = {
        "detail": [{"type": "value_error", "loc": ["body"], "msg": exc.message}],
        "failure_kind": reasons.INVALID_REQUEST.failure_kind,
        "reason": exc.reason if exc.reason in reasons.REASONS else reasons.INVALID_REQUEST.name,
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _session_failure(exc: WorkplaceEnvError) -> EpisodeFailure:
    """The failure of an episode whose call or Verify ``exc`` refused: its ``rollout_kind`` in
    the error registry (:func:`.reasons.lookup`), the error itself its reason."""
    kind = reasons.lookup(exc.code, exc.reason).rollout_kind
    if kind == ENVIRONMENT_ERROR:
        return EpisodeFailure(kind, f"{type(exc).__name__}: {exc}")
    return EpisodeFailure(kind, str(exc))


def _verify_failure(exc: InvalidRequestError) -> EpisodeFailure:
    """Verify refused the request: the model's fault when the refusal names its output."""
    if any(v.field.startswith("response_output") for v in exc.violations):
        return EpisodeFailure("agent_run_error", f"Verify refused the model's output: {exc}")
    return EpisodeFailure(ENVIRONMENT_ERROR, f"Verify refused: {exc}")


def _finish(
    row: Mapping[str, Any],
    params: dict[str, Any],
    dialogue: _Dialogue,
    verified: VerifyResult | None,
    failure: EpisodeFailure | None,
    started: float,
) -> Rollout:
    if failure is not None or verified is None:
        kind = failure.kind if failure else ENVIRONMENT_ERROR
        reason = failure.reason if failure else "no verify result"
        verified = VerifyResult(0.0, True, kind, reason, verified.tables if verified else ())
    return Rollout(
        row=row,
        responses_create_params=params,
        response=dialogue.response(),
        reward=verified.reward,
        mask_sample=verified.mask_sample,
        failure_kind=verified.failure_kind or None,
        failure_reason=verified.failure_reason or None,
        turns=dialogue.turns,
        tool_calls=dialogue.tool_calls,
        invalid_tool_calls=dialogue.invalid_tool_calls,
        tables=verified.tables,
        seconds=time.perf_counter() - started if started else 0.0,
    )


def failed_rollout(
    row: Mapping[str, Any],
    params: dict[str, Any],
    policy: ModelPolicy,
    kind: str,
    reason: str,
) -> Rollout:
    """A masked rollout for an episode that could not be played at all (e.g. its seed was
    refused): an empty response, reward 0, ``failure_kind`` ``kind``."""
    return _finish(row, params, _Dialogue(params, policy), None, EpisodeFailure(kind, reason), 0.0)


# -- drivers ----------------------------------------------------------------------------------


def check_rollout_inputs(
    row: Any, policy: Any, episode: tuple[str, int] | None, task_id: tuple[str, str] | None
) -> None:
    """Raise ArgumentError (nothing sent) unless ``row`` is a mapping, ``policy`` a
    :class:`ModelPolicy`, and ``episode`` and ``task_id`` (when given) well-formed pairs; every
    value of ``row`` must be JSON (:func:`~workplace_env_client.checks.json_row`)."""
    checks.json_row(row, "task", "a mapping (a dataset row)")
    if not isinstance(policy, ModelPolicy):
        raise ArgumentError("policy", f"must be a ModelPolicy, not {checks.type_name(policy)}")
    if episode is not None:
        episode_message(episode)
    if task_id is not None:
        task_id_message(task_id)


def _episode_steps(
    dialogue: _Dialogue, model_client: Any, policy: ModelPolicy
) -> Generator[tuple[str, Any], Any, VerifyResult]:
    """An episode's loop without its I/O.

    Yields ``("model", request kwargs)``, ``("tool", (name, arguments))`` and ``("verify",
    output items)``; is sent each step's result or thrown its exception; returns Verify's result.
    Raises EpisodeFailure for an episode that is masked.
    """
    while not dialogue.done:
        try:
            answer = yield "model", dialogue.request()
        except Exception as exc:  # the client's retries are spent: a masked episode
            raise _request_failure(exc, model_client, policy, dialogue) from exc
        for call in dialogue.receive(answer):
            output = unparsable_arguments(call["arguments"])
            if output is not None:  # not run, as NeMo Gym's agent does
                dialogue.invalid_tool_calls += 1
                dialogue.answer(call, output)
                continue
            try:
                text = yield "tool", (call["name"], call["arguments"])
                output = _tool_output_body(text)
                if text.startswith(_DISPATCH_ERROR):
                    dialogue.invalid_tool_calls += 1
            except InvalidRequestError as exc:
                dialogue.invalid_tool_calls += 1
                output = refused_output(exc)
            except WorkplaceEnvError as exc:
                raise _session_failure(exc) from exc
            dialogue.answer(call, output)
    try:
        verified: VerifyResult = yield "verify", dialogue.output
    except InvalidRequestError as exc:
        raise _verify_failure(exc) from exc
    return verified


@dataclass(frozen=True)
class _Raised:
    """The outcome of a step that raised ``error``."""

    error: Exception


class _ModelEpisode:
    """One model episode of ``row`` for :func:`run_rollout` and :func:`arun_rollout`, which do
    its I/O (sync or async): the steps of :func:`_episode_steps` and the rollout they make."""

    def __init__(
        self,
        model_client: Any,
        row: Mapping[str, Any],
        policy: ModelPolicy,
        episode: tuple[str, int] | None,
        task_id: tuple[str, str] | None,
    ) -> None:
        check_rollout_inputs(row, policy, episode, task_id)
        self.started = time.perf_counter()
        self.model_client, self.row, self.policy = model_client, row, policy
        # A JSON-string ground truth is not calls: the task is seeded without it and Verify
        # scores it as the reference does ("change nothing").
        truth = row.get("ground_truth")
        self.truth_json = json.dumps(truth, ensure_ascii=False) if isinstance(truth, str) else None
        self.seeded = row if self.truth_json is None else {**row, "ground_truth": []}
        self.episode, self.task_id = episode, task_id
        self.verified: VerifyResult | None = None
        self.failure: EpisodeFailure | None = None

    def begin(self, tools: Sequence[Mapping[str, Any]]) -> None:
        """Build the request parameters with ``tools``; the session's ids are then final."""
        self.params = create_params_for(self.row, tools)
        self.dialogue = _Dialogue(self.params, self.policy)
        client = self.model_client
        self.create = (
            client.responses.create
            if self.policy.api == "responses"
            else client.chat.completions.create
        )
        self.episode = self.episode or episode_for(self.row)
        self.task_id = self.task_id or ("model", row_name(self.row))
        self._steps = _episode_steps(self.dialogue, client, self.policy)

    def io(self, env: Any, session_id: str) -> dict[str, Callable[[Any], Any]]:
        """Each step's kind -> the call that makes it (awaitable with async clients)."""
        return {
            "model": lambda request: self.create(**request),
            "tool": lambda call: env.call_tool_raw(session_id, *call),
            "verify": lambda output: env.verify(
                session_id, response_output=output, ground_truth_json=self.truth_json
            ),
        }

    def next(self, outcome: Any) -> tuple[str, Any] | None:
        """The step after one whose result (or :class:`_Raised`) is ``outcome`` (None at the
        start); None once the episode has its Verify result or its failure."""
        try:
            if isinstance(outcome, _Raised):
                return self._steps.throw(outcome.error)
            return self._steps.send(outcome)
        except StopIteration as stop:
            self.verified = stop.value
        except EpisodeFailure as exc:
            self.failure = exc
        return None

    def rollout(self) -> Rollout:
        """The rollout of the finished (or failed) episode."""
        return _finish(
            self.row, self.params, self.dialogue, self.verified, self.failure, self.started
        )


def run_rollout(
    env: EnvironmentClient,
    model_client: Any,
    row: Mapping[str, Any],
    policy: ModelPolicy,
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    episode: tuple[str, int] | None = None,
    task_id: tuple[str, str] | None = None,
) -> Rollout:
    """Play one episode of ``row`` with the model behind ``model_client`` (sync client).

    ``tools`` defaults to ``env.list_tools()`` (pass them to save the call per episode);
    ``episode`` to :func:`episode_for` the row. Never raises for the model's or endpoint's
    faults (see the module docstring) but lets :class:`ModelCallsStopped` through (session
    closed); raises the SDK's errors when the seed itself fails,
    ArgumentError (nothing sent) for a ``row`` that is not a mapping, a ``policy`` that is not a
    ModelPolicy, or a malformed ``episode`` or ``task_id``.
    """
    ep = _ModelEpisode(model_client, row, policy, episode, task_id)
    ep.begin(tools if tools is not None else env.list_tools())
    with env.session(ep.seeded, episode=ep.episode, task_id=ep.task_id) as session:
        io = ep.io(env, session.id)
        outcome: Any = None
        while (step := ep.next(outcome)) is not None:
            try:
                outcome = io[step[0]](step[1])
            except Exception as exc:
                outcome = _Raised(exc)
    return ep.rollout()


async def arun_rollout(
    env: Any,
    model_client: Any,
    row: Mapping[str, Any],
    policy: ModelPolicy,
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    episode: tuple[str, int] | None = None,
    task_id: tuple[str, str] | None = None,
) -> Rollout:
    """:func:`run_rollout` over an :class:`~workplace_env_client.AsyncEnvironmentClient` and an
    async model client (``openai.AsyncOpenAI`` or alike)."""
    ep = _ModelEpisode(model_client, row, policy, episode, task_id)
    ep.begin(tools if tools is not None else await env.list_tools())
    async with env.session(ep.seeded, episode=ep.episode, task_id=ep.task_id) as session:
        io = ep.io(env, session.id)
        outcome: Any = None
        while (step := ep.next(outcome)) is not None:
            try:
                outcome = await io[step[0]](step[1])
            except Exception as exc:
                outcome = _Raised(exc)
    return ep.rollout()


async def arun_rollouts(
    env: Any,
    model_client: Any,
    rows: Iterable[Mapping[str, Any]],
    policy: ModelPolicy,
    *,
    concurrency: int = 8,
    on_done: Callable[[int, Rollout], None] | None = None,
) -> list[Rollout]:
    """Play every row once with at most ``concurrency`` episodes in flight; the rollouts in
    the rows' order. ``on_done(index, rollout)`` is called as each finishes. Raises
    ArgumentError naming ``concurrency`` unless it is an int in 1..2147483647."""
    checks.count(concurrency, "concurrency", 1, checks.INT32_MAX)
    items = list(rows)
    tools = await env.list_tools()
    gate = asyncio.Semaphore(concurrency)

    async def one(index: int, row: Mapping[str, Any]) -> Rollout:
        async with gate:
            rollout = await arun_rollout(env, model_client, row, policy, tools=tools)
        if on_done is not None:
            on_done(index, rollout)
        return rollout

    return list(await asyncio.gather(*(one(i, r) for i, r in enumerate(items))))
