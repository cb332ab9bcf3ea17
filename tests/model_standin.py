"""A stand-in OpenAI-compatible model server for the model-loop tests (loopback, deterministic).

It serves ``POST /v1/responses`` and ``POST /v1/chat/completions``. Each conversation is
recognised by its first user message; its :class:`Script` says what every request of it gets,
in order: tool calls, a text answer, a cut-off tool call, a verbatim (malformed) answer, or HTTP
errors (429/500, with ``retry-after-ms: 1`` so the client's backoff stays short), or an
answer held until the test releases it. Every request
body is kept in ``requests`` (per prompt) for the tests to inspect.

Run as a program, it stands in for a model a user has not got (docs/examples/model_standin.sh):
``python -m tests.model_standin --tasks FILE [--port 8000]`` answers each task of FILE with its
ground-truth calls, one a turn, then a text answer, however often the task is played (the
turn is the number of calls the request's conversation holds), until interrupted.
"""

from __future__ import annotations

import argparse
import json
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Calls:
    """One turn of function calls: ``(name, arguments text)`` pairs."""

    calls: Sequence[tuple[str, str]]


@dataclass(frozen=True)
class Text:
    """A final text answer."""

    text: str = "Done."


@dataclass(frozen=True)
class CutOff:
    """A function call cut off by the token limit (its arguments truncated)."""

    name: str
    partial_arguments: str


@dataclass(frozen=True)
class Fail:
    """``times`` requests answered with HTTP ``status`` before the script goes on."""

    status: int
    times: int


@dataclass(frozen=True)
class Raw:
    """An answer with the model's part given verbatim, malformed or not: the Responses
    ``output`` items, or the chat ``message`` (strings holding lone surrogates are sent as
    ``\\ud800`` escapes, which the client decodes back)."""

    output: list[Any] = field(default_factory=list)
    message: Any = None


@dataclass(frozen=True)
class Fields:
    """The answer of ``then`` with ``fields`` set at its top level as given: the body is written
    with NaN and Infinity as Python's JSON writer spells them, integers of any size and lone
    surrogates as ``\\ud800`` escapes (what a hostile endpoint may send)."""

    fields: dict[str, Any]
    then: Calls | Text | CutOff | Raw = field(default_factory=Text)


@dataclass(frozen=True)
class Hold:
    """The request is held: ``arrived`` is set when it comes, and it is answered with ``then``
    (or, with ``status`` other than 200, with that HTTP error, which the client retries)
    once the test sets ``release`` (30 s at most, so a failing test cannot hang)."""

    arrived: threading.Event
    release: threading.Event
    then: Calls | Text = field(default_factory=Text)
    status: int = 200


Step = Calls | Text | CutOff | Fail | Raw | Fields | Hold


@dataclass
class Script:
    steps: list[Step]
    position: int = 0
    failures_sent: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)


def _first_user_text(body: dict[str, Any]) -> str:
    items = body.get("input") if "input" in body else body.get("messages")
    if isinstance(items, str):
        return items
    for item in items or []:
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, list):
                return "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return str(content)
    return ""


def _calls_made(body: dict[str, Any]) -> int:
    """The function calls a request's conversation holds: the ``function_call`` items of a
    Responses ``input``, the tool calls of a chat's assistant messages."""
    if "messages" in body:
        messages = body.get("messages") or []
        return sum(
            len(m.get("tool_calls") or [])
            for m in messages
            if isinstance(m, dict) and m.get("role") == "assistant"
        )
    items = body.get("input")
    if not isinstance(items, list):
        return 0
    return sum(1 for i in items if isinstance(i, dict) and i.get("type") == "function_call")


def _responses_answer(step: Step, model: str) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    status, incomplete = "completed", None
    if isinstance(step, Calls):
        for name, arguments in step.calls:
            call_id = f"call_{uuid.uuid4().hex[:12]}"
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_{call_id}",
                    "call_id": call_id,
                    "name": name,
                    "arguments": arguments,
                    "status": "completed",
                }
            )
    elif isinstance(step, CutOff):
        status, incomplete = "incomplete", {"reason": "max_output_tokens"}
        output.append(
            {
                "type": "function_call",
                "id": "fc_cut",
                "call_id": "call_cut",
                "name": step.name,
                "arguments": step.partial_arguments,
                "status": "incomplete",
            }
        )
    elif isinstance(step, Raw):
        output = list(step.output)
    else:
        assert isinstance(step, Text)
        output.append(
            {
                "type": "message",
                "id": f"msg_{uuid.uuid4().hex[:12]}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": step.text, "annotations": []}],
            }
        )
    return {
        "id": f"resp_{uuid.uuid4().hex[:12]}",
        "object": "response",
        "created_at": 1764547140.0,
        "model": model,
        "status": status,
        "incomplete_details": incomplete,
        "error": None,
        "instructions": None,
        "metadata": {},
        "output": output,
        "parallel_tool_calls": True,
        "temperature": None,
        "tool_choice": "auto",
        "tools": [],
        "top_p": None,
        "usage": {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        },
    }


def _chat_answer(step: Step, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None}
    finish = "stop"
    if isinstance(step, Calls):
        finish = "tool_calls"
        message["tool_calls"] = [
            {
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            for name, arguments in step.calls
        ]
    elif isinstance(step, CutOff):
        finish = "length"
        message["tool_calls"] = [
            {
                "id": "call_cut",
                "type": "function",
                "function": {"name": step.name, "arguments": step.partial_arguments},
            }
        ]
    elif isinstance(step, Raw):
        message = step.message
        finish = "tool_calls"
    else:
        assert isinstance(step, Text)
        message["content"] = step.text
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": 1764547140,
        "model": model,
        "choices": [{"index": 0, "finish_reason": finish, "message": message, "logprobs": None}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class StandInModel:
    """The server; ``scripts`` maps a conversation's first user message to its script, played
    in the order requests come, or, ``by_calls_made``, from the step of the number of calls the
    request's conversation holds (a script of one-call :class:`Calls` and a :class:`Text`,
    replayed whenever its conversation starts again). ``port`` 0: a free one."""

    def __init__(
        self, scripts: dict[str, list[Step]], port: int = 0, by_calls_made: bool = False
    ) -> None:
        self.scripts = {prompt: Script(list(steps)) for prompt, steps in scripts.items()}
        self.by_calls_made = by_calls_made
        self.lock = threading.Lock()
        self.unknown: list[dict[str, Any]] = []
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                status, answer = standin.answer(self.path, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("retry-after-ms", "1")
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> StandInModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The status and body for one request (the script's next step)."""
        chat = path.rstrip("/").endswith("/chat/completions")
        if not chat and not path.rstrip("/").endswith("/responses"):
            return 404, {"error": {"message": f"no route {path}"}}
        with self.lock:
            script = self.scripts.get(_first_user_text(body))
            if script is None:
                self.unknown.append(body)
                return 400, {"error": {"message": "no script for this prompt"}}
            script.requests.append(body)
            if self.by_calls_made:
                script.position, script.failures_sent = _calls_made(body), 0
            while True:
                if script.position >= len(script.steps):
                    step: Step = Text("Nothing more to do.")
                    break
                step = script.steps[script.position]
                if isinstance(step, Fail):
                    if script.failures_sent < step.times:
                        script.failures_sent += 1
                        return step.status, {
                            "error": {"message": f"stand-in {step.status}", "type": "server_error"}
                        }
                    script.position += 1
                    script.failures_sent = 0
                    continue
                script.position += 1
                break
        model = str(body.get("model", ""))
        if isinstance(step, Hold):
            step.arrived.set()
            step.release.wait(timeout=30)
            if step.status != 200:
                return step.status, {"error": {"message": "stand-in held", "type": "server_error"}}
        inner = step.then if isinstance(step, Fields | Hold) else step
        answer = _chat_answer(inner, model) if chat else _responses_answer(inner, model)
        return 200, answer | (step.fields if isinstance(step, Fields) else {})


def oracle_scripts(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Step]]:
    """For each task row, keyed by the first user message the model gets for it (the row's
    ``responses_create_params``, else its ``prompt``): its ground-truth calls, one a turn, then a
    text answer (only the text for a ground truth written as a string)."""
    from workplace_env_client.rollouts import create_params_for

    scripts: dict[str, list[Step]] = {}
    for row in rows:
        truth = row.get("ground_truth")
        calls = truth if isinstance(truth, list) else []
        steps: list[Step] = [
            Calls([(c["name"], _arguments_text(c.get("arguments", "{}")))]) for c in calls
        ]
        scripts[_first_user_text(create_params_for(row, []))] = [*steps, Text()]
    return scripts


def _arguments_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def main(argv: Sequence[str] | None = None) -> None:
    """Serve :func:`oracle_scripts` of ``--tasks`` (JSONL) on ``--port`` until interrupted;
    prints ``serving N tasks at BASE_URL`` once it listens."""
    parser = argparse.ArgumentParser(prog="python -m tests.model_standin", description=main.__doc__)
    parser.add_argument("--tasks", required=True, help="JSONL of task rows with ground_truth")
    parser.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 [8000]")
    args = parser.parse_args(argv)
    with open(args.tasks, encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    standin = StandInModel(oracle_scripts(rows), port=args.port, by_calls_made=True)
    print(f"serving {len(standin.scripts)} tasks at {standin.base_url}", flush=True)
    try:
        standin.server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        standin.server.server_close()


if __name__ == "__main__":
    main()
