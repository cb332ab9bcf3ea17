"""The model loop with the real ``openai`` client against a stand-in model server.

The stand-in (tests/model_standin.py) plays back scripts on loopback: ground-truth calls, wrong
calls, malformed arguments, cut-off calls, 429s and 500s, over the Responses API and Chat
Completions; the environment is a real in-process gRPC server on the embedded sandbox. Covered:
the SDK's sync and async loops and ``workplace-env run --policy model`` (rollouts file,
materialized inputs, summary, plot, resume).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path
from subprocess import PIPE
from typing import Any

import pytest

from tests.dying_server import dying_server
from tests.helpers import REPO, local
from tests.model_standin import Calls, CutOff, Fail, Fields, Hold, Raw, StandInModel, Text
from tests.nemo.venv import nemo_python
from workplace_env.interrupts import rerun_command
from workplace_env.locks import WriterBusy
from workplace_env.run.command import run_model_policy
from workplace_env.run.options import ModelRunOptions
from workplace_env.run.plan import PlanMismatch, check_plan, input_digest
from workplace_env.run.report import (
    CategorySummary,
    masked_counts,
    plot_labels,
    side_effect_tables,
    summarise,
)
from workplace_env.run.rollout_files import (
    lock_path,
    materialized_inputs_path,
    only_run_into,
    output_files,
    read_rollouts,
)
from workplace_env.sandbox.tables import CRM, EMAILS
from workplace_env.taskgen import generate_tasks
from workplace_env.terminal import CommandError
from workplace_env_client import (
    AsyncEnvironmentClient,
    ModelCallsStopped,
    ModelPolicy,
    arun_rollout,
    arun_rollouts,
    openai_client,
    run_rollout,
)
from workplace_env_client.rollouts import MASK_KINDS, MODEL_CONFIG_ERROR

openai = pytest.importorskip("openai")  # in the test extras; a clear skip elsewhere

APIS = ("responses", "chat")
SPURIOUS_EMAIL = json.dumps({"recipient": "someone@example.com", "subject": "Hi", "body": "Hello"})


@pytest.fixture(scope="module")
def server(server, sandbox):
    """The module's server (conftest), with the generated tasks the tests pick from."""
    server.tasks = generate_tasks(sandbox, 60, 3)
    return server


def _task(server, want) -> dict[str, Any]:
    return next(t for t in server.tasks if want(t))


def _crm_multi(server) -> dict[str, Any]:
    """A CRM task whose answer is several update calls."""
    return _task(
        server,
        lambda t: (
            len(t["ground_truth"]) >= 2
            and all(
                c["name"] == "customer_relationship_manager_update_customer"
                for c in t["ground_truth"]
            )
        ),
    )


def _crm_single(server) -> dict[str, Any]:
    return _task(
        server,
        lambda t: (
            [c["name"] for c in t["ground_truth"]]
            == ["customer_relationship_manager_update_customer"]
        ),
    )


def _no_change(server) -> dict[str, Any]:
    return _task(server, lambda t: t["ground_truth"] == [])


def _truth(task) -> list[tuple[str, str]]:
    return [(c["name"], c["arguments"]) for c in task["ground_truth"]]


def _playback(task, api: str) -> list:
    """The ground truth as a model would make it: all calls in one turn (Responses), one
    call per turn (chat), then a final message."""
    calls = _truth(task)
    turns = [Calls(calls)] if api == "responses" else [Calls([c]) for c in calls]
    return [*turns, Text("All done.")]


def _client(standin: StandInModel, max_retries: int = 2, asynchronous: bool = False):
    return openai_client(
        standin.base_url,
        api_key="test-key",
        timeout_s=10,
        max_retries=max_retries,
        asynchronous=asynchronous,
    )


def _policy(api: str, max_turns: int = 10) -> ModelPolicy:
    return ModelPolicy(model="stand-in", api=api, max_turns=max_turns)  # type: ignore[arg-type]


@pytest.mark.parametrize("api", APIS)
def test_ground_truth_playback_scores_one_and_sends_outputs_back(server, sdk, api):
    task = _crm_multi(server)
    with StandInModel({task["prompt"]: _playback(task, api)}) as standin:
        rollout = run_rollout(sdk, _client(standin), task, _policy(api))
        requests = standin.scripts[task["prompt"]].requests
    n = len(task["ground_truth"])
    assert (rollout.reward, rollout.mask_sample, rollout.failure_kind) == (1.0, False, None)
    assert rollout.tool_calls == n and rollout.invalid_tool_calls == 0
    assert rollout.turns == (2 if api == "responses" else n + 1)
    # The request carries the row's system and user messages and the 27 tool schemas.
    first = requests[0]
    if api == "responses":
        assert [m["role"] for m in first["input"]] == ["system", "user"]
        assert len(first["tools"]) == 27 and first["tools"][0]["type"] == "function"
    else:
        assert [m["role"] for m in first["messages"]] == ["system", "user"]
        assert len(first["tools"]) == 27 and "parameters" in first["tools"][0]["function"]
    # Every call's output went back to the model as the tool route's body.
    last = requests[-1]
    outputs = (
        [i for i in last["input"] if i.get("type") == "function_call_output"]
        if api == "responses"
        else [m for m in last["messages"] if m["role"] == "tool"]
    )
    assert len(outputs) == n
    sent_back = [json.loads(o.get("output") or o.get("content"))["output"] for o in outputs]
    with sdk.session(task) as twin:  # the same calls on a fresh session: the outputs to expect
        assert sent_back == [
            twin.call_tool(c["name"], c["arguments"]) for c in task["ground_truth"]
        ]
    # The response: calls, their outputs, then the final message (NeMo Gym's output order).
    kinds = [i["type"] for i in rollout.response["output"]]
    assert kinds.count("function_call") == n and kinds.count("function_call_output") == n
    assert kinds[-1] == "message" and rollout.response["status"] == "completed"
    assert {t.table for t in rollout.tables} >= {CRM, EMAILS}
    assert all(t.equal for t in rollout.tables)


@pytest.mark.parametrize("api", APIS)
def test_a_wrong_write_scores_zero_and_counts_as_a_side_effect(server, sdk, api):
    task = _crm_single(server)
    script = [Calls([("email_send_email", SPURIOUS_EMAIL)]), Text()]
    with StandInModel({task["prompt"]: script}) as standin:
        rollout = run_rollout(sdk, _client(standin), task, _policy(api))
    assert (rollout.reward, rollout.mask_sample) == (0.0, False)
    line = rollout.to_json(3, 1)
    assert side_effect_tables(line) == [EMAILS]  # emails changed; CRM was asked and not done
    assert line["_ng_task_index"] == 3 and line["_ng_rollout_index"] == 1
    assert line["id"] == task["id"] and line["ground_truth"] == task["ground_truth"]


def _nemo_invalid_arguments(arguments: str) -> str:
    """NeMo Gym's simple agent's output for arguments json.loads refuses (its rule, verbatim
    in effect: ``json.dumps({"error": f"Invalid tool call arguments: {e!r}"})``)."""
    try:
        json.loads(arguments)
    except json.JSONDecodeError as e:
        return json.dumps({"error": f"Invalid tool call arguments: {e!r}"})
    raise AssertionError(f"{arguments!r} parses")


def _outputs(rollout) -> dict[str, str]:
    """The rollout's function-call outputs by the name of the call they answer."""
    names = {
        i["call_id"]: i["name"] for i in rollout.response["output"] if i["type"] == "function_call"
    }
    return {
        f"{names[i['call_id']]}#{n}": i["output"]
        for n, i in enumerate(rollout.response["output"])
        if i["type"] == "function_call_output"
    }  # fmt: skip


# Arguments a model may send that are not JSON, each in one call beside valid ones.
UNPARSABLE = ["not json{", "{" * 200 + "}" * 200, "", '{"name": "a"} trailing', "{'name': 'a'}"]


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("bad", UNPARSABLE)
@pytest.mark.parametrize("api", APIS)
def test_arguments_that_are_not_json_get_nemos_error_the_other_calls_run_and_verify_scores(
    server, sdk, api, bad, driver
):
    """As NeMo Gym's simple agent: the bad call is not run, the model gets the agent's error
    text as its output, the turn's other calls run, and the episode is scored (it was masked
    ``agent_run_error`` with none of the calls run)."""
    task = _crm_multi(server)
    calls = [("email_search_emails", bad), *_truth(task)]
    script = [Calls(calls), Text()]

    async def play(standin):
        async with AsyncEnvironmentClient(local(server.port)) as aenv:
            model = _client(standin, asynchronous=True)
            return await arun_rollout(aenv, model, task, _policy(api))

    with StandInModel({task["prompt"]: script}) as standin:
        if driver == "sync":
            rollout = run_rollout(sdk, _client(standin), task, _policy(api))
        else:
            rollout = asyncio.run(play(standin))
        requests = standin.scripts[task["prompt"]].requests
    assert (rollout.reward, rollout.mask_sample, rollout.failure_kind) == (1.0, False, None)
    assert (rollout.tool_calls, rollout.invalid_tool_calls) == (len(calls), 1)
    outputs = [
        i["output"] for i in rollout.response["output"] if i["type"] == "function_call_output"
    ]
    assert outputs[0] == _nemo_invalid_arguments(bad)
    assert outputs[0].startswith('{"error": "Invalid tool call arguments: JSONDecodeError(')
    # the valid calls ran: their outputs are the tool route's bodies, not errors
    assert all(json.loads(o)["output"] == "Customer updated successfully." for o in outputs[1:])
    # ... and the model saw the error text as the bad call's output, then answered
    assert len(requests) == 2
    sent = requests[1]["input"] if api == "responses" else requests[1]["messages"]
    first = next(
        i for i in sent if i.get("type") == "function_call_output" or i.get("role") == "tool"
    )
    assert (first.get("output") or first.get("content")) == _nemo_invalid_arguments(bad)


def test_the_loop_answers_and_scores_as_nemo_gyms_simple_agent(server, sdk, gateway, tmp_path):
    """Differential: NeMo Gym's own simple_agent (unmodified, black box, against our
    gateway) and our loop play the same model answers: arguments that are not JSON, arguments
    that are not an object (T3), an unknown tool (T2), then the ground truth. Every call's
    output the model sees, and the reward, are the same."""
    import httpx

    from tests.nemo.servers import NemoStack, external_resources, simple_agent, stand_in_model

    task = _crm_multi(server)
    calls = [
        ("email_search_emails", "not json{"),
        ("company_directory_find_email_address", "[1, 2]"),
        ("no_such_tool", "{}"),
        *_truth(task),
    ]
    recordings = tmp_path / "recordings.json"
    recordings.write_text(json.dumps({"f1": [{"name": n, "arguments": a} for n, a in calls]}))
    row = {
        **task,
        "responses_create_params": {
            "input": [
                {"role": "system", "content": task["system"]},
                {"role": "user", "content": task["prompt"]},
            ],
            "tools": sdk.list_tools(),
            "parallel_tool_calls": False,
            "metadata": {"ng_stand_in": "f1"},
        },
    }
    servers = [external_resources(gateway.url), stand_in_model(recordings), simple_agent()]
    with NemoStack(nemo_python(), servers, tmp_path / "nemo") as stack:
        answer = httpx.post(f"{stack.url('simple_agent')}/run", json=row, timeout=120)
    assert answer.status_code == 200, answer.text[-2000:]
    theirs = answer.json()
    script = [*(Calls([c]) for c in calls), Text()]
    with StandInModel({task["prompt"]: script}) as standin:
        ours = run_rollout(sdk, _client(standin), row, _policy("responses"))

    def seen(output: list[dict[str, Any]]) -> list[str]:
        return [i["output"] for i in output if i["type"] == "function_call_output"]

    assert seen(ours.response["output"]) == seen(theirs["response"]["output"])
    assert len(seen(ours.response["output"])) == len(calls)
    assert (ours.reward, ours.mask_sample) == (theirs["reward"], False) == (1.0, False)


@pytest.mark.parametrize("api", APIS)
def test_a_cut_off_answer_ends_the_episode_unrun_and_verify_scores_it(server, sdk, api):
    """NeMo Gym's simple agent stops at an answer with ``incomplete_details`` and runs none of
    its calls; the verifier scores the output (it replays the calls): here the ground truth
    call, cut off but complete, scores 1.0 (it was masked ``agent_run_error``)."""
    task = _crm_single(server)
    ((name, arguments),) = _truth(task)
    with StandInModel({task["prompt"]: [CutOff(name, arguments)]}) as standin:
        rollout = run_rollout(sdk, _client(standin), task, _policy(api))
        requests = standin.scripts[task["prompt"]].requests
    assert (rollout.reward, rollout.mask_sample, rollout.failure_kind) == (1.0, False, None)
    assert len(requests) == 1 and (rollout.tool_calls, rollout.invalid_tool_calls) == (1, 1)
    kinds = [i["type"] for i in rollout.response["output"]]
    assert kinds == ["function_call"]  # not run: no output
    assert rollout.response["status"] == "incomplete"
    assert rollout.response["incomplete_details"] == {"reason": "max_output_tokens"}
    # a truncated call is scored the same way: it does not replay, so the task is not done
    partial = arguments[: len(arguments) // 2]
    with StandInModel({task["prompt"]: [CutOff(name, partial)]}) as standin:
        cut = run_rollout(sdk, _client(standin), task, _policy(api))
    assert (cut.reward, cut.mask_sample, cut.failure_kind) == (0.0, False, None)


@pytest.mark.parametrize("api", APIS)
def test_429_and_500_are_retried_with_backoff_then_the_episode_goes_on(server, sdk, api):
    task = _crm_multi(server)
    script = [Fail(429, 2), *_playback(task, api)]
    script.insert(2, Fail(500, 1))
    with StandInModel({task["prompt"]: script}) as standin:
        rollout = run_rollout(sdk, _client(standin, max_retries=3), task, _policy(api))
        requests = standin.scripts[task["prompt"]].requests
    assert (rollout.reward, rollout.mask_sample) == (1.0, False)
    assert len(requests) == rollout.turns + 3  # 2 x 429 and 1 x 500 were sent again


#: A request the endpoint refuses as malformed or unauthorised: every 4xx not retried.
REFUSED_STATUSES = (400, 401, 403, 404, 405, 413, 415, 422)
ENDPOINT_ERRORS = [  # (status, failure kind, retried by the client)
    (500, "provider_unavailable", True),
    (503, "provider_unavailable", True),
    (429, "provider_quota_exhausted", True),
    (408, "provider_unavailable", True),
    *((status, MODEL_CONFIG_ERROR, False) for status in REFUSED_STATUSES),
]


@pytest.mark.parametrize("max_retries", [0, 2])
@pytest.mark.parametrize(("status", "kind", "retried"), ENDPOINT_ERRORS)
@pytest.mark.parametrize("api", APIS)
def test_endpoint_errors_mask_the_episode_naming_url_status_kind_and_retries(
    server, sdk, api, status, kind, retried, max_retries
):
    """An unavailable provider (5xx, 429) is retried; a configuration error (401, 403, 404,
    422) is not, and is no provider_unavailable; each reason names the URL, the status and the
    retries made."""
    task = _crm_single(server)
    with StandInModel({task["prompt"]: [Fail(status, 99)]}) as standin:
        model = _client(standin, max_retries=max_retries)
        rollout = run_rollout(sdk, model, task, _policy(api))
        requests = standin.scripts[task["prompt"]].requests
        path = "/responses" if api == "responses" else "/chat/completions"
        url = standin.base_url + path
    made = max_retries if retried else 0
    assert (rollout.reward, rollout.mask_sample, rollout.failure_kind) == (0.0, True, kind)
    assert url in rollout.failure_reason and f"HTTP {status}" in rollout.failure_reason
    assert f"after {made} retries" in rollout.failure_reason
    assert len(requests) == made + 1 and rollout.tables == ()


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_stopped_client_sends_no_retry_and_the_rollout_closes_its_session(
    server, sdk, asynchronous
):
    """``openai_client(stop=...)``: the first request fails (500); ``stop()`` is true by then,
    so the retry --max-retries allows is not sent: ModelCallsStopped leaves the rollout (no
    masked result) and the session is closed."""
    task = _no_change(server)
    with StandInModel({task["prompt"]: [Fail(500, 1), Text("Nothing to change.")]}) as standin:
        requests = standin.scripts[task["prompt"]].requests
        client = openai_client(
            standin.base_url,
            api_key="k",
            max_retries=3,
            asynchronous=asynchronous,
            stop=lambda: len(requests) > 0,
        )

        async def play_async() -> None:
            async with AsyncEnvironmentClient(local(server.port)) as aenv:
                await arun_rollout(aenv, client, task, _policy("responses"))

        with pytest.raises(ModelCallsStopped):
            if asynchronous:
                asyncio.run(play_async())
            else:
                run_rollout(sdk, client, task, _policy("responses"))
    assert len(requests) == 1
    assert server.store.live_count() == 0


def test_an_unreachable_endpoint_masks_the_episode_naming_its_url(server, sdk):
    task = _crm_single(server)
    with StandInModel({}) as standin:
        url = standin.base_url
    client = openai_client(url, api_key="k", timeout_s=2, max_retries=0)
    rollout = run_rollout(sdk, client, task, _policy("responses"))
    assert rollout.mask_sample and rollout.failure_kind == "provider_unavailable"
    assert "APIConnectionError" in rollout.failure_reason
    assert f"{url}/responses" in rollout.failure_reason
    assert "after 0 retries" in rollout.failure_reason


@pytest.mark.parametrize("api", APIS)
def test_refused_calls_go_back_to_the_model_and_count_invalid(server, sdk, api):
    task = _no_change(server)
    script = [
        Calls([("no_such_tool", "{}"), ("company_directory_find_email_address", "[1]")]),
        Text("Nothing to change."),
    ]
    with StandInModel({task["prompt"]: script}) as standin:
        rollout = run_rollout(sdk, _client(standin), task, _policy(api))
    assert (rollout.reward, rollout.mask_sample) == (1.0, False)  # nothing changed: right
    assert (rollout.tool_calls, rollout.invalid_tool_calls) == (2, 2)
    outputs = [
        json.loads(i["output"])
        for i in rollout.response["output"]
        if i["type"] == "function_call_output"
    ]
    # The reference's text for an unknown tool, in the tool route's body; then the refusal
    # (CONTRACT T3) as our HTTP tool route's 422 body, which NeMo's agent passes on.
    assert outputs[0] == {"output": "Error executing tool 'no_such_tool': 'no_such_tool'"}
    assert outputs[1] == {
        "detail": [
            {
                "type": "value_error",
                "loc": ["body"],
                "msg": "arguments must be a JSON object, got list",
            }
        ],
        "failure_kind": "invalid_request",
        "reason": "INVALID_TOOL_ARGUMENTS",
    }


@pytest.mark.parametrize("api", APIS)
def test_max_turns_bounds_the_episode(server, sdk, api):
    task = _no_change(server)
    lookup = ("company_directory_find_email_address", '{"name": "a"}')
    with StandInModel({task["prompt"]: [Calls([lookup])] * 10}) as standin:
        rollout = run_rollout(sdk, _client(standin), task, _policy(api, max_turns=3))
        requests = standin.scripts[task["prompt"]].requests
    assert rollout.turns == 3 and len(requests) == 3 and rollout.tool_calls == 3
    assert rollout.response["status"] == "incomplete"
    assert rollout.response["incomplete_details"] == {"reason": "max_turns"}
    assert not rollout.mask_sample and rollout.reward == 1.0  # read-only calls change nothing


@pytest.mark.parametrize("api", APIS)
def test_async_loop_matches_the_sync_loop(server, sdk, api):
    tasks = [_crm_multi(server), _crm_single(server), _no_change(server)]
    scripts = {
        tasks[0]["prompt"]: _playback(tasks[0], api),
        tasks[1]["prompt"]: [Calls([("email_send_email", SPURIOUS_EMAIL)]), Text()],
        tasks[2]["prompt"]: [Fail(500, 99)],
    }

    async def collect(standin):
        async with AsyncEnvironmentClient(local(server.port)) as aenv:
            model = _client(standin, max_retries=1, asynchronous=True)
            return await arun_rollouts(aenv, model, tasks, _policy(api), concurrency=3)

    with StandInModel(scripts) as standin:
        rollouts = asyncio.run(collect(standin))
    assert [(r.reward, r.mask_sample, r.failure_kind) for r in rollouts] == [
        (1.0, False, None),
        (0.0, False, None),
        (0.0, True, "provider_unavailable"),
    ]
    assert [r.row["id"] for r in rollouts] == [t["id"] for t in tasks]


# -- malformed model output: never raised, always the documented outcome ----------------------

LOOKUP = "company_directory_find_email_address"
_MISSING = object()


def _fc(**fields: Any) -> dict[str, Any]:
    """A Responses function-call item for LOOKUP, with ``fields`` replaced (or dropped)."""
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": LOOKUP,
        "arguments": '{"name": "a"}',
        "status": "completed",
    }
    item.update(fields)
    return {k: v for k, v in item.items() if v is not _MISSING}


def _chat_call(**fields: Any) -> dict[str, Any]:
    """A chat message with one tool call to LOOKUP, its ``function`` fields replaced."""
    function = {"name": LOOKUP, "arguments": '{"name": "a"}', **fields}
    function = {k: v for k, v in function.items() if v is not _MISSING}
    call = {"id": "call_1", "type": "function", "function": function}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def _chat_tool_calls(tool_calls: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": tool_calls}


def _final_text(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


HUGE = 10**400  # an integer beyond a float's range
DEEP = '{"name": ' + "[" * 200 + "]" * 200 + "}"  # parses; deeper than the 128 levels sent
DEEPEST = '{"name": ' + "[" * 50_000 + "]" * 50_000 + "}"  # json.loads: RecursionError
ESCAPED_SURROGATE = '{"name": "\\ud800"}'  # ASCII text whose value is a lone surrogate

# (case, api, the model's verbatim answer, "masked" with a reason part | "refused" | "done")
MALFORMED = [
    ("no name", "responses", Raw([_fc(name=_MISSING)]), "masked", "has no name"),
    ("no name", "chat", Raw(message=_chat_call(name=_MISSING)), "masked", "has no name"),
    ("no arguments", "responses", Raw([_fc(arguments=_MISSING)]), "masked", "no arguments"),
    ("no arguments", "chat", Raw(message=_chat_call(arguments=_MISSING)), "masked", "no arg"),
    ("name not str", "responses", Raw([_fc(name=7)]), "masked", "name is int, not"),
    ("name not str", "chat", Raw(message=_chat_call(name=["x"])), "masked", "name is list, not"),
    ("args not str", "responses", Raw([_fc(arguments={"name": "a"})]), "masked", "ts is dict"),
    ("args not str", "chat", Raw(message=_chat_call(arguments=3)), "masked", "arguments is int"),
    ("no call_id", "responses", Raw([_fc(call_id=_MISSING)]), "masked", "has no call_id"),
    ("no type", "responses", Raw([_fc(type=_MISSING)]), "masked", "has no type"),
    ("type not str", "responses", Raw([_fc(type=1)]), "masked", "type is int, not a string"),
    ("item not object", "responses", Raw(["call it"]), "masked", "is str, not an object"),
    ("call not object", "chat", Raw(message=_chat_tool_calls(["x"])), "masked", "is str, not an"),
    ("calls not list", "chat", Raw(message=_chat_tool_calls({"id": "c"})), "masked", "not a list"),
    ("message not object", "chat", Raw(message="hi"), "masked", "message is str, not an"),
    ("no message", "chat", Raw(message=None), "done", None),
    ("surrogate args", "responses", Raw([_fc(arguments='{"name": "\ud800"}')]), "masked", "U+D800"),
    ("surrogate args", "chat", Raw(message=_chat_call(arguments="\ud800")), "masked", "U+D800"),
    ("surrogate text", "responses", Raw([_final_text("ok \ud800")]), "masked", "U+D800"),
    ("surrogate text", "chat", Raw(message={"role": "assistant", "content": "\udfff"}), "masked",
     "U+DFFF"),
    ("unknown item type", "responses", Raw([{"type": "zzz"}]), "masked",
     "Verify refused the model's output: INVALID_ARGUMENT INVALID_REQUEST: invalid request: "
     "response_output_json[0]: unknown output item type 'zzz'"),
    ("text not str", "responses", Raw([_final_text(5)]), "masked", "response_output_json[0]"),
    ("escaped surrogate", "responses", Raw([_fc(arguments=ESCAPED_SURROGATE)]), "refused", None),
    ("escaped surrogate", "chat", Raw(message=_chat_call(arguments=ESCAPED_SURROGATE)),
     "refused", None),
    ("deep args", "responses", Raw([_fc(arguments=DEEP)]), "refused", None),
    ("deep args", "chat", Raw(message=_chat_call(arguments=DEEP)), "refused", None),
    ("deeper than Python parses", "responses", Raw([_fc(arguments=DEEPEST)]), "masked",
     "nested deeper than a JSON parser goes"),  # NeMo's agent fails there (RecursionError)
    ("not JSON", "responses", Raw([_fc(arguments="not json{")]), "unparsable", None),
    ("not JSON", "chat", Raw(message=_chat_call(arguments="not json{")), "unparsable", None),
    # What the answer holds that a strict JSON line cannot: the model's failure, never kept.
    ("integer beyond float", "responses", Fields({"created_at": HUGE}), "masked",
     "cannot be represented"),
    ("integer beyond float", "chat", Fields({"created": HUGE}), "masked", "beyond the range"),
    ("integer beyond float", "responses", Fields({"usage": {"input_tokens": HUGE}}), "masked",
     "beyond the range"),
    ("integer beyond float", "chat", Fields({"usage": {"prompt_tokens": HUGE}}), "masked",
     "beyond the range"),
    ("NaN", "responses", Fields({"temperature": math.nan}), "masked", "nan is not JSON"),
    ("Infinity", "responses", Fields({"top_p": math.inf}), "masked", "inf is not JSON"),
    ("surrogate model", "responses", Fields({"model": "\ud800"}), "masked", "U+D800"),
    ("surrogate model", "chat", Fields({"model": "\ud800"}), "masked", "U+D800"),
    ("surrogate id", "chat", Fields({"id": "x\udfff"}), "masked", "U+DFFF"),
]  # fmt: skip


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize(
    ("api", "step", "outcome", "reason"),
    [pytest.param(*case[1:], id=f"{case[1]}-{case[0]}") for case in MALFORMED],
)
def test_malformed_model_output_never_raises_out_of_a_rollout(
    server, sdk, driver, api, step, outcome, reason
):
    task = _no_change(server)
    script = [step, Text("Nothing to change.")]

    async def play(standin):
        async with AsyncEnvironmentClient(local(server.port)) as aenv:
            model = _client(standin, asynchronous=True)
            return await arun_rollout(aenv, model, task, _policy(api))

    with StandInModel({task["prompt"]: script}) as standin:
        if driver == "sync":
            rollout = run_rollout(sdk, _client(standin), task, _policy(api))
        else:
            rollout = asyncio.run(play(standin))
        requests = standin.scripts[task["prompt"]].requests
    assert server.store.live_count() == 0  # the session was closed in every case
    line = strict_json(rollout.to_json())  # the rollout line stays strict JSON
    if outcome == "masked":  # the episode cannot be scored: masked at that turn
        assert (rollout.reward, rollout.mask_sample, rollout.failure_kind) == (
            0.0,
            True,
            "agent_run_error",
        )
        assert rollout.failure_reason.startswith(
            ("turn 1: malformed model output: ", "Verify refused the model's output: ")
        )
        assert reason in rollout.failure_reason
        assert len(requests) == 1 and rollout.tables == ()
        assert "\\ud800" not in line and "\\udfff" not in line  # never kept in the response
    elif outcome == "refused":  # answered with the refusal; the episode goes on and is scored
        assert (rollout.reward, rollout.mask_sample, rollout.failure_kind) == (1.0, False, None)
        assert (rollout.tool_calls, rollout.invalid_tool_calls) == (1, 1)
        answered = [
            json.loads(i["output"])
            for i in rollout.response["output"]
            if i["type"] == "function_call_output"
        ]
        assert len(answered) == 1 and answered[0]["reason"] == "INVALID_TOOL_ARGUMENTS"
        assert answered[0]["failure_kind"] == "invalid_request"
        assert len(requests) == 2
    elif outcome == "unparsable":  # NeMo's agent's error text; the episode goes on, scored
        assert (rollout.reward, rollout.mask_sample, rollout.failure_kind) == (1.0, False, None)
        assert (rollout.tool_calls, rollout.invalid_tool_calls) == (1, 1)
        assert _outputs(rollout) == {f"{LOOKUP}#1": _nemo_invalid_arguments("not json{")}
        assert len(requests) == 2
    else:  # no usable message: a turn without calls ends the episode, scored
        assert (rollout.reward, rollout.mask_sample, rollout.turns) == (1.0, False, 1)


# -- the CLI ----------------------------------------------------------------------------------


def strict_json(value: Any) -> str:
    """``value`` as JSON a strict reader takes (no NaN or infinities, UTF-8 text); raises
    otherwise."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    text.encode("utf-8")
    return text


def strict_lines(path: Path) -> list[dict[str, Any]]:
    """The lines of ``path`` read by a strict JSON reader (UTF-8; NaN, Infinity refused)."""

    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    text = path.read_bytes().decode("utf-8")
    return [json.loads(line, parse_constant=refuse) for line in text.splitlines()]


def _run_cli(args: list[str], columns: int = 200) -> Any:
    from typer.testing import CliRunner

    from workplace_env.cli import app

    return CliRunner().invoke(app, args, env={"STANDIN_KEY": "k", "COLUMNS": str(columns)})


@pytest.mark.parametrize("api", APIS)
def test_cli_writes_rollouts_summary_and_plot_then_resumes(server, tmp_path, api):
    tasks = [_crm_multi(server), _crm_single(server), _no_change(server)]
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    out = tmp_path / "run" / "rollouts.jsonl"
    out.parent.mkdir()  # an output's directory is the user's to make
    scripts = {
        tasks[0]["prompt"]: _playback(tasks[0], api),
        tasks[1]["prompt"]: [Calls([("email_send_email", SPURIOUS_EMAIL)]), Text()],
        tasks[2]["prompt"]: [Fail(500, 3), Text("Nothing to change.")],  # down for run 1
    }
    args = [
        "run", str(tasks_file), "--policy", "model", "--api", api, "--model", "stand-in",
        "--api-key-env", "STANDIN_KEY", "--max-retries", "2", "--concurrency", "2",
        "--target", local(server.port), "--out", str(out), "--max-output-tokens", "64",
        "--temperature", "0.5",
    ]  # fmt: skip
    with StandInModel(scripts) as standin:
        first = _run_cli([*args, "--base-url", standin.base_url])
        # The endpoint's failure left an episode unfinished (no score of the model): exit 1
        assert first.exit_code == 1, first.output
        assert "1 not finished" in " ".join(first.output.split())
        lines = read_rollouts(out)
        by_id = {line["id"]: line for line in lines}
        assert [by_id[t["id"]]["reward"] for t in tasks] == [1.0, 0.0, 0.0]
        assert by_id[tasks[2]["id"]]["failure_kind"] == "provider_unavailable"
        assert _played(first.output) == (3, 0) and "masked" in first.output
        # Rerun: the two finished episodes are kept, the masked one is played again.
        second = _run_cli([*args, "--base-url", standin.base_url])
        assert second.exit_code == 0, second.output
        assert _played(second.output) == (1, 2)
        requests = standin.scripts[tasks[0]["prompt"]].requests
        assert len(requests) == len(_playback(tasks[0], api))
        tokens = "max_output_tokens" if api == "responses" else "max_tokens"
        assert all(r[tokens] == 64 and r["temperature"] == 0.5 for r in requests)
    lines = read_rollouts(out)
    assert len(out.read_text().splitlines()) == 3
    by_id = {line["id"]: line for line in lines}
    assert by_id[tasks[2]["id"]]["reward"] == 1.0 and not by_id[tasks[2]["id"]]["mask_sample"]
    # NeMo Gym's companion file: every pair's row with the request and its indexes.
    inputs = [
        json.loads(x) for x in (tmp_path / "run" / "rollouts_materialized_inputs.jsonl").open()
    ]
    assert [(i["_ng_task_index"], i["_ng_rollout_index"]) for i in inputs] == [
        (0, 0),
        (1, 0),
        (2, 0),
    ]
    assert all(len(i["responses_create_params"]["tools"]) == 27 for i in inputs)
    summary = json.loads((tmp_path / "run" / "rollouts_summary.json").read_text())
    assert summary["sandbox"]["origin"] == "generated:seed=0,scale=1.0"
    overall = summary["categories"][-1]
    assert overall["category"] == "all" and overall["episodes"] == 3
    assert overall["pass_rate"] == pytest.approx(2 / 3)
    assert overall["side_effect_rate"] == pytest.approx(1 / 3)
    png = tmp_path / "run" / "rollouts_pass_rate.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "pass rate" in second.output and "side effects" in second.output


def test_cli_names_missing_model_options(tmp_path):
    tasks_file = tmp_path / "t.jsonl"
    tasks_file.write_text(json.dumps({"id": "t", "prompt": "p", "ground_truth": []}) + "\n")
    result = _run_cli(["run", str(tasks_file), "--policy", "model", "--model", "m"])
    assert result.exit_code == 2 and "--base-url" in result.output
    result = _run_cli(["run", str(tasks_file), "--policy", "model", "--base-url", "http://x/v1"])
    assert result.exit_code == 2 and "--model" in result.output


def test_summary_by_category():
    def line(category, reward, masked=False, calls=2, invalid=0, tables=(), kind=None):
        return {
            "category": f"workplace_assistant_{category}",
            "ground_truth": [{"name": "email_send_email", "arguments": "{}"}],
            "reward": reward,
            "mask_sample": masked,
            "failure_kind": kind,
            "workplace_env": {
                "turns": 2,
                "tool_calls": calls,
                "invalid_tool_calls": invalid,
                "tables": [{"table": t, "equal": False} for t in tables],
            },
        }

    rows = summarise(
        [
            line("email", 1.0),
            line("email", 0.0, tables=(EMAILS, CRM)),  # CRM was not asked: a side effect
            line("crm", 0.0, masked=True, calls=1, invalid=1, kind="provider_unavailable"),
            line("crm", 1.0),
            line("crm", 0.0, masked=True, calls=1, kind="agent_run_error"),
            line("crm", 0.0, masked=True, calls=0, kind="session_lost"),
        ]
    )
    assert [r.category for r in rows] == ["crm", "email", "all"]
    crm, email, overall = rows
    # the model's own failure counts as a failure; the endpoint's and environment's are left out
    assert (crm.episodes, crm.masked, crm.model_failures, crm.passed) == (4, 2, 1, 1)
    assert (crm.pass_rate, crm.tool_call_validity) == (0.5, 0.75)
    assert (email.pass_rate, email.side_effect_rate) == (0.5, 0.5)
    assert (overall.masked, overall.model_failures, overall.passed) == (2, 1, 2)
    assert overall.pass_rate == pytest.approx(2 / 4)
    assert overall.side_effect_rate == pytest.approx(1 / 3)  # over the 3 scored episodes
    assert overall.tool_call_validity == pytest.approx(7 / 8)


@pytest.mark.parametrize("api", APIS)
def test_rollout_lines_validate_as_nemo_gym_verify_responses(server, sdk, api, tmp_path):
    import subprocess

    task = _crm_multi(server)
    with StandInModel({task["prompt"]: _playback(task, api)}) as standin:
        line = run_rollout(sdk, _client(standin), task, _policy(api)).to_json()
    path = tmp_path / "line.json"
    path.write_text(json.dumps(line))
    code = (
        "import json,sys\n"
        "from nemo_gym.base_resources_server import BaseVerifyResponse\n"
        "v = BaseVerifyResponse.model_validate(json.load(open(sys.argv[1])))\n"
        "print(v.reward, len(v.response.output))\n"
    )
    done = subprocess.run(
        [str(nemo_python()), "-c", code, str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "1.0"


def _played(output: str) -> tuple[int, int]:
    """The summary's episodes played now and kept from an earlier run."""
    said = " ".join(output.split())
    found = re.search(r"played now (\d+) .*?kept from an earlier run (\d+)", said)
    assert found, output
    return int(found[1]), int(found[2])


def _run_model(tasks_file: Path, standin: StandInModel, server, out: Path, *more: str) -> Any:
    """``workplace-env run TASKS --policy model`` against the stand-in and ``server``."""
    return _run_cli(
        [
            "run",
            str(tasks_file),
            "--policy",
            "model",
            "--model",
            "stand-in",
            "--base-url",
            standin.base_url,
            "--target",
            local(server.port),
            "--out",
            str(out),
            *more,
        ]
    )


def test_nemo_gym_reverification_accepts_the_rollouts(server, tmp_path):
    """NeMo Gym's own re-verification (e2e/nemo_reverify.py) pairs the rollouts file with its
    materialized inputs, posts each to our gateway's /verify, and gets every reward back."""
    import subprocess
    import urllib.request

    from workplace_env.gateway import start_gateway

    gateway = start_gateway(local(server.port), "127.0.0.1:0")
    try:
        with urllib.request.urlopen(f"{gateway.url}/reverify_mode", timeout=10) as answer:
            if json.loads(answer.read()) != "stateless":
                pytest.skip("the gateway does not offer stateless re-verification")
        tasks = [_crm_multi(server), _crm_single(server), _no_change(server)]
        tasks_file = tmp_path / "tasks.jsonl"
        tasks_file.write_text("".join(json.dumps(t) + "\n" for t in tasks))
        out = tmp_path / "rollouts.jsonl"
        scripts = {
            tasks[0]["prompt"]: _playback(tasks[0], "responses"),
            tasks[1]["prompt"]: [Calls([("email_send_email", SPURIOUS_EMAIL)]), Text()],
            tasks[2]["prompt"]: [Text("Nothing to change.")],
        }
        with StandInModel(scripts) as standin:
            result = _run_model(tasks_file, standin, server, out)
        assert result.exit_code == 0, result.output
        python = nemo_python()
        script = REPO / "e2e" / "nemo_reverify.py"
        done = subprocess.run(
            [str(python), str(script), "--gateway", gateway.url, "--rollouts", str(out)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert "3 agree, 0 differ" in done.stdout
    finally:
        gateway.stop(timeout_s=2)


def test_cli_refuses_a_row_the_seed_would_refuse_before_any_episode(server, tmp_path):
    """The model policy checks its rows as the scripted ones do: a row the service's seed
    check refuses (S5) stops the run before anything is played (exit 2, line and field)."""
    good = _no_change(server)
    refused = {**_crm_single(server), "environment_name": "some_other_env"}
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(json.dumps(good) + "\n" + json.dumps(refused) + "\n")
    out = tmp_path / "rollouts.jsonl"
    with StandInModel({good["prompt"]: [Text("Nothing to change.")]}) as standin:
        result = _run_model(tasks_file, standin, server, out)
        assert standin.scripts[good["prompt"]].requests == []
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert "1 of the 2 lines is no episode; nothing was played: line 2:" in said
    assert "environment_name" in said
    assert not out.exists() or read_rollouts(out) == []


def test_cli_scores_a_string_ground_truth_as_change_nothing(server, tmp_path):
    """A JSON-string ground truth is an episode under the model policy too: seeded without
    it, verified with the string (``ground_truth_json``), as the reference scores it."""
    task = {**_no_change(server), "ground_truth": "email_delete_email"}
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(json.dumps(task) + "\n")
    out = tmp_path / "rollouts.jsonl"
    with StandInModel({task["prompt"]: [Text("Nothing to change.")]}) as standin:
        result = _run_model(tasks_file, standin, server, out)
    assert result.exit_code == 0, result.output
    (line,) = read_rollouts(out)
    assert (line["reward"], line["mask_sample"]) == (1.0, False)
    assert line["ground_truth"] == "email_delete_email"  # the row as sent


def test_cli_exit_status_counts_the_models_own_failures_only_with_fail_on_masked(server, tmp_path):
    """16 of 28 episodes masked agent_run_error exited 0 and the README did not say how
    masked episodes count. A model failure (its output cannot be run or scored) is part of the
    model's score, not a failure of the run: exit 0, reported as such; --fail-on-masked makes
    it exit 1. It counts as a failure in the pass rate the run prints and writes (5 of them
    were said to count while 0.970 = 32/33 left them out)."""
    nameless = Raw([_fc(name=_MISSING)])  # NeMo's agent fails on it too
    task, good = _crm_single(server), _no_change(server)
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(json.dumps(task) + "\n" + json.dumps(good) + "\n")
    script = {
        task["prompt"]: [nameless, Text()],
        good["prompt"]: [Text("Nothing to change.")],
    }
    for more, status in (((), 0), (("--fail-on-masked",), 1)):
        out = tmp_path / f"rollouts{status}.jsonl"
        with StandInModel(script) as standin:
            result = _run_model(tasks_file, standin, server, out, *more)
        assert result.exit_code == status, result.output
        said = " ".join(result.output.split())
        assert (
            "1 failed by the model itself (agent_run_error): failures of the model, counted in "
            "its pass rate (1/2 = 0.500)"
        ) in said
        # the episode's line names the table's kind: a model failure, not masked (0)
        assert f"model failure {task['id']}#0: agent_run_error: " in said
        assert f"masked {task['id']}" not in said
        assert "not finished" not in said
        by_id = {line["id"]: line for line in read_rollouts(out)}
        assert by_id[task["id"]]["failure_kind"] == "agent_run_error"
        assert by_id[good["id"]]["reward"] == 1.0
        overall = json.loads(out.with_name(f"{out.stem}_summary.json").read_text())["categories"][
            -1
        ]
        assert (overall["episodes"], overall["masked"], overall["model_failures"]) == (2, 0, 1)
        assert (overall["passed"], overall["pass_rate"]) == (1, 0.5)


def test_cli_pass_rate_leaves_out_infrastructure_masks_and_counts_model_failures(server, tmp_path):
    """One pass, one model failure, one episode the endpoint masked: 1/2, not 1/1 or 1/3."""
    tasks = [_no_change(server), _crm_single(server), _crm_multi(server)]
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    out = tmp_path / "rollouts.jsonl"
    scripts = {
        tasks[0]["prompt"]: [Text("Nothing to change.")],
        tasks[1]["prompt"]: [Raw([_fc(type=_MISSING)])],
        tasks[2]["prompt"]: [Fail(500, 99)],
    }
    with StandInModel(scripts) as standin:
        result = _run_model(tasks_file, standin, server, out, "--max-retries", "0")
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())
    assert "counted in its pass rate (1/2 = 0.500)" in said
    assert "1 not finished" in said and "left out of the pass rate" in said
    overall = json.loads((tmp_path / "rollouts_summary.json").read_text())["categories"][-1]
    assert (overall["episodes"], overall["masked"], overall["model_failures"]) == (3, 1, 1)
    assert (overall["passed"], overall["pass_rate"]) == (1, 0.5)


def test_cli_keeps_rows_as_sent_types_included(server, tmp_path):
    """An integer ``id`` came out as ``"0"``. Every field of the row goes through as sent,
    into both the rollouts and the materialized inputs; rows with ids 0 and "0", or none, stay
    apart."""
    base = _no_change(server)
    extra = {"score": 2.5, "flag": False, "none": None, "nested": {"k": [1, "2", {"d": 3.0}]}}
    rows = [
        {**base, "id": 0, **extra},
        {**base, "id": "0"},
        {k: v for k, v in base.items() if k != "id"},
        {**base, "id": 7, "category": None},
    ]
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "rollouts.jsonl"
    with StandInModel({base["prompt"]: [Text("Nothing to change.")]}) as standin:
        result = _run_model(tasks_file, standin, server, out, "--concurrency", "2")
        assert result.exit_code == 0, result.output
        again = _run_model(tasks_file, standin, server, out)  # resume matches typed ids
    assert again.exit_code == 0 and _played(again.output) == (0, 4), again.output
    written = sorted(
        (json.loads(x) for x in out.read_text().splitlines()), key=lambda r: r["_ng_task_index"]
    )
    inputs = [json.loads(x) for x in (tmp_path / "rollouts_materialized_inputs.jsonl").open()]
    for row, line, materialized in zip(rows, written, inputs, strict=True):
        assert {k: line[k] for k in row} == row
        assert {k: materialized[k] for k in row} == row
        assert type(line.get("id")) is type(row.get("id"))
        assert "id" in line or "id" not in row  # none added
        assert line["reward"] == 1.0


def _nochange_rows(server, n: int, tag: str = "") -> list[dict[str, Any]]:
    """``n`` rows that need no change, each with its own id and prompt (its own script)."""
    base = _no_change(server)
    return [
        {**base, "id": f"row{tag}{i}", "prompt": f"{base['prompt']} ({tag}{i})"} for i in range(n)
    ]


def _write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _assert_one_plan(out: Path) -> None:
    """The rollouts, the materialized inputs and the summary describe the same episodes: one
    rollout line per input, at its indices, with the digest of that input."""
    inputs = [json.loads(x) for x in materialized_inputs_path(out).open()]
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == len(inputs)
    by_key = {(i["_ng_task_index"], i["_ng_rollout_index"]): i for i in inputs}
    assert len(by_key) == len(inputs)
    for line in lines:
        item = by_key.pop((line["_ng_task_index"], line["_ng_rollout_index"]))
        assert line["id"] == item["id"] and line["ground_truth"] == item["ground_truth"]
        assert line["workplace_env"]["input_sha256"] == input_digest(item)
    assert not by_key
    summary = json.loads(out.with_name(f"{out.stem}_summary.json").read_text())
    assert summary["categories"][-1]["episodes"] == len(inputs)


def _edited(server, tmp_path):
    """Row 0's ground truth emptied (its playback now scores 0), rows 1 and 2
    swapped."""
    rows = [_crm_single(server), *_nochange_rows(server, 2)]
    edited = [{**rows[0], "ground_truth": []}, rows[2], rows[1]]
    return rows, edited, (), ()


def _other_file(server, tmp_path):
    """Another task file into the same --out."""
    return _nochange_rows(server, 3), _nochange_rows(server, 3, "other"), (), ()


def _fewer_repeats(server, tmp_path):
    """--repeats 3, then --repeats 1 (9 rollout lines against 3 inputs)."""
    rows = _nochange_rows(server, 3)
    return rows, rows, ("--repeats", "3"), ("--repeats", "1")


@pytest.mark.parametrize("case", [_edited, _other_file, _fewer_repeats])
def test_cli_refuses_an_out_of_another_plan_and_overwrite_replays_it(server, tmp_path, case):
    """A rerun into the same --out after the input changed (which would keep stale rollouts:
    row 0 scored against its old ground truth; 5 rollout lines against 3 inputs; 9 against 3
    after --repeats 3 then 1) is refused before anything is played or written (exit 2, naming
    the file, how many lines differ, the way out); --overwrite plays the new plan from scratch
    and leaves no stale line."""
    first_rows, second_rows, first_more, second_more = case(server, tmp_path)
    tasks_file = tmp_path / "tasks.jsonl"
    out = tmp_path / "run" / "rollouts.jsonl"
    out.parent.mkdir()  # an output's directory is the user's to make
    scripts = {r["prompt"]: [Text("Nothing to change.")] for r in [*first_rows, *second_rows]}
    crm = _crm_single(server)
    scripts[crm["prompt"]] = _playback(crm, "responses")
    with StandInModel(scripts) as standin:
        _write_rows(tasks_file, first_rows)
        first = _run_model(tasks_file, standin, server, out, *first_more)
        assert first.exit_code == 0, first.output
        _assert_one_plan(out)
        before = {p: p.read_bytes() for p in out.parent.iterdir()}
        sent = sum(len(s.requests) for s in standin.scripts.values())
        _write_rows(tasks_file, second_rows)
        refused = _run_model(tasks_file, standin, server, out, *second_more)
        said = " ".join(refused.output.split())
        assert refused.exit_code == 2, refused.output
        assert str(out) in said and "another plan" in said and "differ" in said
        assert "new --out" in said and "--overwrite" in said
        assert "stand-in episodes" in first.output and "stand-in episodes" not in said  # no bar
        assert not lock_path(out).exists()  # released and removed on the refusal too
        assert sum(len(s.requests) for s in standin.scripts.values()) == sent  # nothing played
        assert {p: p.read_bytes() for p in out.parent.iterdir()} == before  # nothing written
        again = _run_model(tasks_file, standin, server, out, *second_more, "--overwrite")
        assert again.exit_code == 0, again.output
        total = len(second_rows) * (3 if second_more == ("--repeats", "3") else 1)
        assert _played(again.output) == (total, 0)
    _assert_one_plan(out)
    lines = read_rollouts(out)
    assert {line["id"] for line in lines} == {r["id"] for r in second_rows}
    if case is _edited:  # row 0 played again, as edited (not its old line scored 1.0 on the old)
        by_index = {line["_ng_task_index"]: line for line in lines}
        assert by_index[0]["ground_truth"] == [] and by_index[0]["id"] == crm["id"]
        assert [by_index[i]["id"] for i in (1, 2)] == [second_rows[1]["id"], second_rows[2]["id"]]


def test_cli_resumes_an_identical_plan_after_an_interrupted_run(server, tmp_path):
    """The same plan resumes cheaply: after a run left one episode masked by the endpoint and
    was cut off (one finished line lost, the last append cut mid-line), the rerun plays only
    those two and the files describe the plan's three episodes once each."""
    rows = _nochange_rows(server, 3)
    tasks_file = tmp_path / "tasks.jsonl"
    _write_rows(tasks_file, rows)
    out = tmp_path / "rollouts.jsonl"
    scripts = {r["prompt"]: [Text("Nothing to change.")] for r in rows}
    scripts[rows[2]["prompt"]] = [Fail(500, 1), Text("Nothing to change.")]
    with StandInModel(scripts) as standin:
        first = _run_model(tasks_file, standin, server, out, "--max-retries", "0")
        assert first.exit_code == 1, first.output  # row 2 masked by the endpoint
        kept = [x for x in out.read_text().splitlines() if json.loads(x)["id"] != rows[1]["id"]]
        out.write_text("\n".join(kept) + "\n" + '{"id": "row1", "_ng_task')  # cut off
        again = _run_model(tasks_file, standin, server, out, "--max-retries", "0")
        assert again.exit_code == 0, again.output
        assert _played(again.output) == (2, 1)
        assert len(standin.scripts[rows[0]["prompt"]].requests) == 1  # not played again
    _assert_one_plan(out)
    assert all(line["reward"] == 1.0 for line in read_rollouts(out))


_SUMMARY_JSON = json.dumps({"episodes": 3, "mismatches": [], "sandbox": None}, indent=2) + "\n"
_A_ROLLOUT = json.dumps({"id": "x", "_ng_task_index": 0, "_ng_rollout_index": 0}) + "\n"


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (_SUMMARY_JSON, "non-blank line 1 is not JSON"),
        ("my notes\n", "non-blank line 1 is not JSON"),
        ("my notes", "holds no rollout line"),
        (_A_ROLLOUT + "my notes\n" + _A_ROLLOUT, "non-blank line 2 is not JSON"),
        ('{"id": "task", "prompt": "p"}\n', "line 1 is no integer _ng_task_index"),
        ("[1, 2]\n", "line 1 is not a JSON object"),
    ],
    ids=["summary_json", "notes", "notes_unterminated", "middle_line", "task_row", "list"],
)
def test_cli_refuses_an_out_that_is_no_rollouts_file_and_keeps_it(server, tmp_path, content, said):
    """An --out holding anything but rollout lines (a --json-out summary, notes, a task file, a
    damaged line before the last) is refused (exit 2) naming the file and --overwrite, and is
    left byte for byte; only a last line cut short by a crash is read past."""
    rows = _nochange_rows(server, 1)
    tasks_file = tmp_path / "tasks.jsonl"
    _write_rows(tasks_file, rows)
    out = tmp_path / "s.json"
    out.write_text(content)
    with StandInModel({rows[0]["prompt"]: [Text("Nothing to change.")]}) as standin:
        refused = _run_model(tasks_file, standin, server, out)
        said_all = " ".join(refused.output.split())
        assert refused.exit_code == 2, refused.output
        assert f"{out} is not a rollouts file" in said_all and said in said_all, said_all
        assert "--overwrite" in said_all
        assert out.read_text() == content
        assert not materialized_inputs_path(out).exists()
        assert all(not s.requests for s in standin.scripts.values())
        replaced = _run_model(tasks_file, standin, server, out, "--overwrite")
        assert replaced.exit_code == 0, replaced.output
    _assert_one_plan(out)


def test_cli_refuses_an_out_another_run_holds_naming_the_file_and_its_pid(server, tmp_path):
    """Two runs into one --out appended the same episodes twice. While another run holds the
    --out (its lock file), a run into it is refused at once (exit 2) naming the file and the
    holder's pid, and plays and writes nothing; once the holder ends, the run goes on."""
    rows = _nochange_rows(server, 2)
    tasks_file = tmp_path / "tasks.jsonl"
    _write_rows(tasks_file, rows)
    out = tmp_path / "run" / "rollouts.jsonl"
    out.parent.mkdir()  # an output's directory is the user's to make
    scripts = {r["prompt"]: [Text("Nothing to change.")] for r in rows}
    with StandInModel(scripts) as standin:
        with only_run_into(out):
            refused = _run_model(tasks_file, standin, server, out)
            said = " ".join(refused.output.split())
            assert refused.exit_code == 2, refused.output
            assert f"another run is writing {out} (pid {os.getpid()})" in said
            assert "--out" in said
            assert [p.name for p in out.parent.iterdir()] == [lock_path(out).name]
            assert all(not s.requests for s in standin.scripts.values())
        assert not lock_path(out).exists()  # the holder's lock file ends with its hold
        again = _run_model(tasks_file, standin, server, out)
        assert again.exit_code == 0, again.output
        assert _played(again.output) == (2, 0)
    _assert_one_plan(out)
    assert not lock_path(out).exists()


def test_a_run_holds_its_out_until_it_ends(server, tmp_path):
    """A second run started while the first waits on the model is refused with exit 2 and
    changes none of the first's files; the first then ends with one line per episode."""
    rows = _nochange_rows(server, 2)
    tasks_file = tmp_path / "tasks.jsonl"
    _write_rows(tasks_file, rows)
    out = tmp_path / "rollouts.jsonl"
    # Both episodes wait on the model while the second run is tried, so nothing of the first
    # run's is written in between.
    arrivals, release = [threading.Event(), threading.Event()], threading.Event()
    scripts = {
        row["prompt"]: [Hold(arrived, release, Text("Nothing to change."))]
        for row, arrived in zip(rows, arrivals, strict=True)
    }
    options = ModelRunOptions(
        base_url=None, model="stand-in", api="responses", max_turns=5, api_key_env="STANDIN_KEY",
        timeout_s=10, max_retries=0, temperature=None, max_output_tokens=None, repeats=1,
        out=out, concurrency=2,
    )  # fmt: skip
    with StandInModel(scripts) as standin:
        model = _client(standin, max_retries=0)
        exits: list[int] = []

        def first() -> None:
            exits.append(
                run_model_policy(rows, options, target=local(server.port), model_client=model)
            )

        runner = threading.Thread(target=first)
        runner.start()
        try:
            assert all(arrived.wait(timeout=30) for arrived in arrivals)
            before = {p: p.read_bytes() for p in tmp_path.iterdir()}
            with pytest.raises(CommandError, match="another run is writing") as refused:
                run_model_policy(rows, options, target=local(server.port), model_client=model)
            assert refused.value.exit_code == 2
            assert {p: p.read_bytes() for p in tmp_path.iterdir()} == before
        finally:
            release.set()
            runner.join(timeout=60)
    assert exits == [0]
    _assert_one_plan(out)
    assert len(out.read_text().splitlines()) == len(rows)


def test_a_rollout_line_without_its_input_digest_is_another_plan(tmp_path):
    """A line of an older version (no ``workplace_env.input_sha256``) cannot be shown to belong
    to the plan: refused, not resumed."""
    item = {"id": "t", "prompt": "p", "_ng_task_index": 0, "_ng_rollout_index": 0}
    out = tmp_path / "rollouts.jsonl"
    line = {**item, "reward": 1.0, "mask_sample": False, "workplace_env": {}}
    out.write_text(json.dumps(line) + "\n")
    named = r'1 of the 1 line differs in rollouts\.jsonl: line 1 \(id "t"\)'
    with pytest.raises(PlanMismatch, match=named):
        check_plan(out, [item])
    line["workplace_env"]["input_sha256"] = input_digest(item)
    out.write_text(json.dumps(line) + "\n")
    check_plan(out, [item])  # the same episode: kept
    with pytest.raises(PlanMismatch):
        check_plan(out, [{**item, "prompt": "other"}])


def _items(count: int, prompt: str = "p") -> list[dict[str, Any]]:
    return [
        {"id": f"t{i}", "prompt": prompt, "_ng_task_index": i, "_ng_rollout_index": 0}
        for i in range(count)
    ]


def test_a_changed_count_is_named_as_recorded_lines_against_episodes(tmp_path, monkeypatch):
    """Another --repeats (5 inputs recorded, 10 now): the message gives both counts and the
    differing lines among the common ones, never more differing lines than recorded; the
    directory of a bare --out is ``./``."""
    monkeypatch.chdir(tmp_path)
    first = _items(5)
    _write_rows(materialized_inputs_path(Path("m1.jsonl")), first)
    again = [{**i, "_ng_rollout_index": r} for i in first for r in range(2)]
    with pytest.raises(PlanMismatch) as refused:
        check_plan(Path("m1.jsonl"), again)
    said = str(refused.value)
    assert "m1_materialized_inputs.jsonl records 5 lines, this run has 10 episodes" in said
    # every line but the first moved; the recorded ones named, with their ids
    assert '(4 of the 5 common lines differ: line 2 (id "t1"), line 3 (id "t2"), ' in said
    assert "this --out's files in ./ (m1.jsonl, " in said


def test_a_changed_task_is_named_as_lines_that_differ_in_the_outs_directory(tmp_path):
    """One task edited, the count the same: how many of the recorded lines differ, and the
    --out's directory by its path."""
    out = tmp_path / "m1.jsonl"
    items = _items(3)
    _write_rows(materialized_inputs_path(out), items)
    with pytest.raises(PlanMismatch) as refused:
        check_plan(out, [*items[:2], {**items[2], "prompt": "edited"}])
    said = str(refused.value)
    assert '1 of the 3 lines differs in m1_materialized_inputs.jsonl: line 3 (id "t2");' in said
    assert "this run has" not in said
    assert f"this --out's files in {tmp_path}/ (m1.jsonl, " in said


def test_a_refused_plan_names_at_most_five_differing_lines(tmp_path):
    out = tmp_path / "m1.jsonl"
    items = _items(9)
    _write_rows(materialized_inputs_path(out), items)
    with pytest.raises(PlanMismatch) as refused:
        check_plan(out, [{**i, "prompt": "edited"} for i in items])
    said = str(refused.value)
    assert "differs in" not in said and "9 lines differ in m1_materialized_inputs.jsonl: " in said
    assert 'line 5 (id "t4") and 4 more;' in said and "line 6" not in said


@pytest.mark.parametrize(
    ("out_name", "input_name"),
    [
        ("in2.jsonl", "in2.jsonl"),  # --out is FILE
        ("m1.jsonl", "m1_materialized_inputs.jsonl"),  # a file derived from --out is FILE
        ("m1.jsonl", "m1_summary.json"),
    ],
)
def test_run_refuses_an_output_that_is_its_input_file(tmp_path, monkeypatch, out_name, input_name):
    """`run FILE --out ...` where the rollouts or a file written next to them is FILE: exit 2
    before any work, naming --out and FILE, with FILE left as it was (even with --overwrite)."""
    monkeypatch.chdir(tmp_path)
    tasks = tmp_path / input_name
    tasks.write_text(json.dumps(_items(1)[0]) + "\n")
    before = tasks.read_bytes()
    args = [
        "run", input_name, "--policy", "model", "--model", "m", "--api-key-env", "STANDIN_KEY",
        "--base-url", "http://127.0.0.1:9/v1", "--out", out_name, "--overwrite",
    ]  # fmt: skip
    refused = _run_cli(args)
    said = " ".join(refused.output.split())
    assert refused.exit_code == 2, refused.output
    assert f"--out {out_name}" in said and "is the input FILE" in said
    assert "nothing was played" in said
    assert tasks.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [input_name]


def test_run_refuses_an_out_that_is_the_input_through_a_link(tmp_path):
    """A symbolic link or another spelling of FILE is the same file."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(_items(1)[0]) + "\n")
    (tmp_path / "link.jsonl").symlink_to(tasks)
    for out in (tmp_path / "link.jsonl", tmp_path / "." / "tasks.jsonl"):
        args = [
            "run", str(tasks), "--policy", "model", "--model", "m", "--api-key-env",
            "STANDIN_KEY", "--base-url", "http://127.0.0.1:9/v1", "--out", str(out),
        ]  # fmt: skip
        refused = _run_cli(args)
        assert refused.exit_code == 2, refused.output
        assert "is the input FILE" in " ".join(refused.output.split())
    assert tasks.read_text() == json.dumps(_items(1)[0]) + "\n"


# -- the experiment, the endpoint's errors and the figures a run prints --------------------------


def _first_run(server, tmp_path, *more: str):
    """Three no-change rows played once into ``tmp_path/run``; the stand-in stays up."""
    rows = _nochange_rows(server, 3)
    tasks_file = tmp_path / "tasks.jsonl"
    _write_rows(tasks_file, rows)
    out = tmp_path / "run" / "rollouts.jsonl"
    out.parent.mkdir()  # an output's directory is the user's to make
    standin = StandInModel({r["prompt"]: [Text("Nothing to change.")] for r in rows})
    return tasks_file, out, standin


def test_rollout_lines_record_the_plan_sampling_and_sandbox_as_sent(server, tmp_path):
    tasks_file, out, standin = _first_run(server, tmp_path)
    sampling = {"temperature": 0.25, "top_p": 0.5, "max_output_tokens": 64, "seed": 7}
    more = ["--temperature", "0.25", "--top-p", "0.5", "--max-output-tokens", "64"]
    with standin:
        result = _run_model(tasks_file, standin, server, out, *more, "--model-seed", "7")
        requests = [r for s in standin.scripts.values() for r in s.requests]
    assert result.exit_code == 0, result.output
    assert all(r[k] == v for r in requests for k, v in sampling.items())  # sent as given
    digest = server.store.base.digest
    assert digest in result.output  # the summary names the sandbox
    for line in strict_lines(out):
        assert sampling.items() <= line["responses_create_params"].items()  # NeMo's place
        plan = line["workplace_env"]["plan"]
        assert (plan["model"], plan["api"], plan["max_turns"]) == ("stand-in", "responses", 10)
        assert (plan["sampling"], plan["sandbox"]) == (sampling, digest)
        assert "base_url" not in plan  # how the model is reached, not what is measured
        assert line["workplace_env"]["base_url"] == standin.base_url
        assert line["workplace_env"]["sandbox"] == {
            "digest": digest,
            "origin": "generated:seed=0,scale=1.0",
        }
    summary = json.loads(out.with_name(f"{out.stem}_summary.json").read_text())
    assert summary["sandbox"]["digest"] == digest


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (("--model", "another-model"), "model:"),
        (("--temperature", "0.7"), "sampling:"),
        (("--top-p", "0.9"), "sampling:"),
        (("--max-output-tokens", "32"), "sampling:"),
        (("--model-seed", "3"), "sampling:"),
        (("--max-turns", "4"), "max_turns:"),
        (("--api", "chat"), "api:"),
    ],
)
def test_cli_refuses_a_rerun_of_another_experiment_naming_what_changed(
    server, tmp_path, change, named
):
    """A rerun into the same --out with another model, API or sampling relabelled the first
    run's rollouts; now it plays nothing (exit 2), names what changed and --overwrite."""
    tasks_file, out, standin = _first_run(server, tmp_path)
    with standin:
        first = _run_model(tasks_file, standin, server, out)
        assert first.exit_code == 0, first.output
        before = out.read_bytes()
        sent = sum(len(s.requests) for s in standin.scripts.values())
        refused = _run_model(tasks_file, standin, server, out, *change)
        assert sum(len(s.requests) for s in standin.scripts.values()) == sent
    said = " ".join(refused.output.split())
    assert refused.exit_code == 2, refused.output
    assert named in said and "--overwrite" in said
    assert out.read_bytes() == before


@pytest.mark.parametrize(
    "change",
    [
        ("--api-key-env", "ANOTHER_KEY"),
        ("--timeout", "30"),
        ("--max-retries", "1"),
        ("--concurrency", "2"),
    ],
)
def test_cli_resumes_a_rerun_that_changes_only_how_the_model_is_reached(server, tmp_path, change):
    """The key, timeout, retries and concurrency are transport, not the experiment: a rerun
    into the same --out with one of them changed resumes (nothing played again, exit 0)."""
    tasks_file, out, standin = _first_run(server, tmp_path)
    with standin:
        first = _run_model(tasks_file, standin, server, out)
        assert first.exit_code == 0, first.output
        again = _run_model(tasks_file, standin, server, out, *change)
    assert again.exit_code == 0, again.output
    assert _played(again.output) == (0, 3)
    _assert_one_plan(out)


def test_a_rerun_through_a_corrected_base_url_resumes_keeping_the_finished_episodes(
    server, tmp_path, monkeypatch
):
    """A run whose endpoint stopped answering (a dead port: connection refused) says how to
    rerun with a corrected --base-url, the command built from the run's own flags; that
    command, given the live endpoint, plays only the unfinished episode and keeps the two
    finished ones, each line naming the endpoint it was played through."""
    rows = _nochange_rows(server, 3, "moved")
    tasks_file = tmp_path / "tasks.jsonl"
    _write_rows(tasks_file, rows)
    out = tmp_path / "rollouts.jsonl"
    scripts = {r["prompt"]: [Text("Nothing to change.")] for r in rows}
    with StandInModel({**scripts, rows[2]["prompt"]: [Fail(500, 99)]}) as first:
        args = [
            "run", str(tasks_file), "--policy", "model", "--model", "stand-in", "--base-url",
            first.base_url, "--target", local(server.port), "--out", str(out),
            "--max-retries", "0",
        ]  # fmt: skip
        assert _run_cli(args).exit_code == 1  # row 2 masked by the endpoint's 500s
    dead = first.base_url  # nothing listens there any more
    monkeypatch.setattr(sys, "argv", ["workplace-env", *args])
    failed = _run_cli(args)
    said = " ".join(failed.output.split())
    assert failed.exit_code == 1, failed.output
    assert f"1 of them got no answer from the endpoint at {dead}" in said
    hint = "if that address is wrong, rerun with a corrected --base-url (the same --out "
    assert f"{hint}resumes, its finished episodes kept): workplace-env " in said, said
    corrected = shlex.split(said.split("kept): ", 1)[1].split("/v1", 1)[0] + "/v1")
    assert corrected[:3] == ["workplace-env", "run", str(tasks_file)]
    assert corrected[-2:] == ["--base-url", "http://HOST:PORT/v1"] and dead not in corrected
    with StandInModel(scripts) as live:
        resumed = _run_cli([*corrected[1:-1], live.base_url])
        assert resumed.exit_code == 0, resumed.output
        assert _played(resumed.output) == (1, 2)
        assert [len(live.scripts[r["prompt"]].requests) for r in rows] == [0, 0, 1]
    _assert_one_plan(out)
    lines = {line["id"]: line for line in read_rollouts(out)}
    assert [lines[r["id"]]["reward"] for r in rows] == [1.0, 1.0, 1.0]
    assert [lines[r["id"]]["workplace_env"]["base_url"] for r in rows] == [
        dead,
        dead,
        live.base_url,
    ]


def test_a_recorded_plan_naming_its_endpoint_is_still_the_same_plan(tmp_path):
    """A line whose recorded plan holds ``base_url`` (how the model was reached) resumes under
    any endpoint; a measured setting recorded otherwise is still named as changed."""
    item = {"id": "t", "prompt": "p", "_ng_task_index": 0, "_ng_rollout_index": 0}
    plan = {"model": "m", "api": "responses", "sampling": {}, "max_turns": 10}
    out = tmp_path / "rollouts.jsonl"
    recorded = {**plan, "base_url": "http://127.0.0.1:9/v1"}
    diagnostics = {"input_sha256": input_digest(item), "plan": recorded}
    line = {**item, "reward": 1.0, "mask_sample": False, "workplace_env": diagnostics}
    out.write_text(json.dumps(line) + "\n")
    check_plan(out, [item], plan)
    with pytest.raises(PlanMismatch, match='model: "m" -> "other"'):
        check_plan(out, [item], {**plan, "model": "other"})


def test_the_rerun_command_gives_a_replaced_option_its_new_value_once():
    argv = ["x", "run", "t.jsonl", "--base-url", "http://a/v1", "--overwrite", "--out=o.jsonl"]
    argv += ["--base-url=http://b/v1", "--model", "m"]
    said = rerun_command(argv, drop=("--overwrite",), replace={"--base-url": "http://HOST/v1"})
    assert said == ("workplace-env run t.jsonl --out=o.jsonl --model m --base-url http://HOST/v1")


def test_the_rerun_command_of_a_cli_command_keeps_each_option_once_with_its_latest_value():
    """Under a typer command, options are told apart by its parameters: a flag before the
    positional argument keeps it positional, a flag and its --no- form are one option, a
    repeated option keeps its latest value, and an added flag is set once."""
    import typer
    from typer.testing import CliRunner

    said: list[str] = []
    app = typer.Typer()

    @app.command()
    def run(file: str, concurrency: int = 1, overwrite: bool = False, out: str = "") -> None:
        said.append(rerun_command(["x", *argv], add=("--overwrite",)))

    argv = ["--no-overwrite", "t.jsonl", "--concurrency", "8", "--out=a", "--concurrency", "3"]
    argv += ["--overwrite", "--out", "b"]
    assert CliRunner().invoke(app, argv).exit_code == 0
    assert said == ["workplace-env t.jsonl --concurrency 3 --out b --overwrite"]


@pytest.mark.parametrize("status", REFUSED_STATUSES)
def test_cli_stops_at_a_configuration_error_naming_url_status_retries_and_flags(
    server, tmp_path, status
):
    """A wrong model URL (HTTP 404), key (401) or sampling parameter (400), any request the
    endpoint refuses as malformed or unauthorised, with --max-retries 0: no
    provider_unavailable, no "played again"; the run stops after the first refusal (exit 2)
    naming the URL, the status, the retries made and the flags that fix it, and says the
    endpoint's configuration masked the episode (never the model itself)."""
    rows = _nochange_rows(server, 3)
    tasks_file = tmp_path / "tasks.jsonl"
    _write_rows(tasks_file, rows)
    out = tmp_path / "rollouts.jsonl"
    with StandInModel({r["prompt"]: [Fail(status, 99)] for r in rows}) as standin:
        result = _run_model(tasks_file, standin, server, out, "--max-retries", "0")
        sent = sum(len(s.requests) for s in standin.scripts.values())
    said = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert f"{standin.base_url}/responses" in said and f"HTTP {status}" in said
    assert "after 0 retries" in said and "--base-url" in said and "--model" in said
    assert "the same --out resumes, its finished episodes kept: workplace-env " in said
    assert "--base-url http://HOST:PORT/v1; another --api, --model or sampling flag" in said
    assert "--temperature" in said and f"stand-in {status}" in said  # the endpoint's message
    assert "provider_unavailable" not in said and "play them again" not in said
    assert f"1 masked by the endpoint's configuration ({MODEL_CONFIG_ERROR})" in said
    assert "masked by the model itself" not in said
    assert sent == 1  # no episode started after the refusal
    [line] = strict_lines(out)
    assert line["failure_kind"] == MODEL_CONFIG_ERROR
    # the masked episode is to play again in every count printed and written, never finished
    assert "played now 1 (0 finished, 1 to play again)" in said and "not started 2" in said
    overall = json.loads(out.with_name(f"{out.stem}_summary.json").read_text())["categories"][-1]
    assert (overall["episodes"], overall["masked"], overall["model_failures"]) == (1, 1, 0)


@pytest.mark.parametrize("columns", [40, 80, 200])
def test_an_all_masked_run_has_no_pass_rate_and_its_numbers_stay_whole(server, tmp_path, columns):
    """Every episode masked by the endpoint: the pass rate is 0/0, '-' in the table and null in
    the summary JSON; at 80 columns (a pipe, CI logs) no number of the table is cut."""
    rows = _nochange_rows(server, 3)
    tasks_file = tmp_path / "tasks.jsonl"
    _write_rows(tasks_file, rows)
    out = tmp_path / "rollouts.jsonl"
    with StandInModel({r["prompt"]: [Fail(500, 99)] for r in rows}) as standin:
        args = [
            "run", str(tasks_file), "--policy", "model", "--model", "stand-in", "--base-url",
            standin.base_url, "--target", local(server.port), "--out", str(out),
            "--max-retries", "0",
        ]  # fmt: skip
        result = _run_cli(args, columns=columns)
    assert result.exit_code == 1, result.output
    overall = json.loads(out.with_name(f"{out.stem}_summary.json").read_text())["categories"][-1]
    assert (overall["masked"], overall["pass_rate"], overall["side_effect_rate"]) == (3, None, None)
    [row] = [line.split() for line in result.stdout.splitlines() if line.split()[:1] == ["all"]]
    # all, episodes, masked, model failures, passed, pass rate, mean turns, calls, valid, effects
    assert row[1:6] == ["3", "3", "0", "0", "-"]
    assert "…" not in result.stdout
    # the plot says the run was masked, not that the model scored 0 of something
    assert out.with_name(f"{out.stem}_pass_rate.png").read_bytes()[:4] == b"\x89PNG"
    labels, title = plot_labels(summarise(read_rollouts(out)), "stand-in: pass rate")
    assert labels[-1] == "0/0\n3 masked"
    assert title.splitlines()[1:] == ["no scored episode; 3 of 3 masked (endpoint or environment)"]


def test_the_plot_labels_name_masked_episodes_only_where_there_are_some():
    def figures(category: str, episodes: int, masked: int, passed: int) -> CategorySummary:
        counted = episodes - masked
        rate = passed / counted if counted else None
        return CategorySummary(category, episodes, masked, 0, passed, rate, 1.0, 0, None, None)

    summary = [figures("email", 2, 0, 1), figures("crm", 3, 1, 2), figures("all", 5, 1, 3)]
    labels, title = plot_labels(summary, "m: pass rate")
    assert labels == ["1/2", "2/2\n1 masked", "3/4\n1 masked"]
    assert title == "m: pass rate\n1 of 5 masked (endpoint or environment)"
    unmasked = [figures("email", 2, 0, 1), figures("all", 2, 0, 1)]
    assert plot_labels(unmasked, "m") == (["1/2", "1/2"], "m")


def test_hostile_model_answers_are_model_failures_and_every_line_is_strict_json(server, tmp_path):
    """An integer beyond float range, a lone surrogate or NaN in the model's answer: each
    episode is the model's failure (agent_run_error), the run goes on to the end, and every
    rollout line parses with a strict JSON reader."""
    hostile = [
        Fields({"created_at": HUGE}),
        Fields({"usage": {"input_tokens": HUGE}}),
        Fields({"model": "\ud800"}),
        Fields({"temperature": math.nan}),
        Fields({"top_p": -math.inf}),
    ]
    rows = _nochange_rows(server, len(hostile) + 1)
    tasks_file = tmp_path / "tasks.jsonl"
    _write_rows(tasks_file, rows)
    out = tmp_path / "rollouts.jsonl"
    scripts = {r["prompt"]: [step] for r, step in zip(rows, hostile, strict=False)}
    scripts[rows[-1]["prompt"]] = [Text("Nothing to change.")]
    with StandInModel(scripts) as standin:
        result = _run_model(tasks_file, standin, server, out, "--concurrency", "3")
    assert result.exit_code == 0, result.output
    by_id = {line["id"]: line for line in strict_lines(out)}
    assert len(by_id) == len(rows)
    assert [by_id[r["id"]]["failure_kind"] for r in rows[:-1]] == ["agent_run_error"] * 5
    assert by_id[rows[-1]["id"]]["reward"] == 1.0


_ALL_PASSED = CategorySummary("all", 4, 1, 1, 2, 2 / 3, 1.0, 3, 1.0, 0.0)


@pytest.mark.parametrize("kind", sorted(MASK_KINDS))
def test_every_mask_kind_is_described_as_its_own(kind):
    """Each failure kind's line in a model run's summary says who masked it and what it
    means from its own entry of the registry, no other kind's words; only the model's own
    kinds name the pass rate they count in."""
    masked = [{"failure_kind": kind, "mask_sample": True}] * 2
    [line] = masked_counts(masked, _ALL_PASSED, fail_on_masked=True)
    own = MASK_KINDS[kind]
    verb = "failed" if own.model_own else "masked"  # the table's model failures, not masked
    assert line.startswith(f"2 {verb} by {own.by} ({kind}): {own.meaning}")
    others = {f"({k})" for k in MASK_KINDS} - {f"({kind})"}
    assert not any(other in line for other in others), line
    assert ("(2/3 = 0.667); exit 1 (--fail-on-masked)" in line) == own.model_own


def test_a_mask_kind_of_another_vocabulary_is_not_described_as_a_known_one():
    [line] = masked_counts([{"failure_kind": "x:new"}], _ALL_PASSED, fail_on_masked=False)
    assert line.startswith("1 masked by an unknown cause (x:new)")
    assert not any(known.meaning in line for known in MASK_KINDS.values())


def test_masked_counts_group_the_kinds_of_a_run():
    masked = [{"failure_kind": k} for k in ("session_lost", "agent_run_error", "session_lost")]
    said = masked_counts(masked, _ALL_PASSED, fail_on_masked=False)
    assert [line.split(" (")[0] for line in said] == [
        "1 failed by the model itself",
        "2 masked by the environment",
    ]


@pytest.mark.parametrize("ending", [RuntimeError, KeyboardInterrupt])
def test_no_lock_file_survives_its_hold_however_it_ends(tmp_path, ending):
    """The lock file of a run's --out is removed when the run ends by an error or Ctrl-C;
    a run into that --out afterwards takes the lock again."""
    out = tmp_path / "rollouts.jsonl"
    with pytest.raises(ending), only_run_into(out):
        assert lock_path(out).read_text() == f"{os.getpid()}\n"
        raise ending()
    assert list(tmp_path.iterdir()) == []
    with only_run_into(out), pytest.raises(WriterBusy), only_run_into(out):
        pass
    assert list(tmp_path.iterdir()) == []


def test_a_run_against_an_unreachable_server_says_so_and_leaves_no_lock_file(tmp_path):
    """--policy model with --target at a dead address: one line naming the address and the
    flags to type (no traceback, exit 1); the --out lock file is gone."""
    tasks_file = tmp_path / "tasks.jsonl"
    _write_rows(tasks_file, [{"id": "t", "prompt": "p", "ground_truth": []}])
    out = tmp_path / "rollouts.jsonl"
    dead = "127.0.0.1:1"  # nothing listens on port 1
    result = _run_cli(
        ["run", str(tasks_file), "--policy", "model", "--model", "m", "--base-url",
         "http://127.0.0.1:1/v1", "--target", dead, "--out", str(out)]
    )  # fmt: skip
    said = " ".join(result.output.split())
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert said.startswith("run failed: UNAVAILABLE") and f"no server answered at {dead}" in said
    assert "--target HOST:PORT" in said and "--tls-ca" in said
    assert not lock_path(out).exists()


def _model_run_process(tasks_file: Path, standin: StandInModel, server, out: Path, *more: str):
    """``workplace-env run --policy model`` in its own process (signals are per process);
    ``more`` flags follow (a later ``--max-retries`` overrides 0)."""
    command = [
        sys.executable, "-m", "workplace_env.cli", "run", str(tasks_file), "--policy", "model",
        "--model", "stand-in", "--base-url", standin.base_url, "--target", local(server.port),
        "--out", str(out), "--max-retries", "0", *more,
    ]  # fmt: skip
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.Popen(command, cwd=REPO, stdout=PIPE, stderr=PIPE, text=True, env=env)


def _read_until(stream: Any, text: str) -> str:
    """The lines of ``stream`` up to the first holding ``text`` (all of them at its end)."""
    seen = []
    while line := stream.readline():
        seen.append(line)
        if text in line:
            break
    return "".join(seen)


def _signalled_while_held(
    proc: subprocess.Popen, signum: int, arrived: threading.Event, release: threading.Event
) -> tuple[str, str]:
    """Once the model holds ``proc``'s request (``arrived``): ``signum``, then the request
    released after the stop message; ``proc``'s stdout and its stderr (whitespace folded)."""
    try:
        assert arrived.wait(timeout=60), proc.stderr.read()
        proc.send_signal(signum)
        said = _read_until(proc.stderr, "stopping")
        release.set()
        stdout, rest = proc.communicate(timeout=60)
    finally:
        release.set()
        if proc.poll() is None:
            proc.kill()
    return stdout, " ".join((said + rest).split())


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_lets_the_episode_in_flight_end_then_says_how_to_resume(
    server, tmp_path, signum
):
    """The first Ctrl-C (or SIGTERM) while an episode waits on the model: no episode starts
    after it, the one in flight ends with its line written and its session closed, the
    summary is printed with the command that resumes, and the exit is 128 + signal; that
    command then plays only the episodes not started."""
    rows = _nochange_rows(server, 3, "sig")
    tasks_file = tmp_path / "tasks.jsonl"
    _write_rows(tasks_file, rows)
    out = tmp_path / "run" / "rollouts.jsonl"
    out.parent.mkdir()  # an output's directory is the user's to make
    arrived, release = threading.Event(), threading.Event()
    scripts = {r["prompt"]: [Text("Nothing to change.")] for r in rows}
    scripts[rows[0]["prompt"]] = [Hold(arrived, release, Text("Nothing to change."))]
    with StandInModel(scripts) as standin:
        proc = _model_run_process(tasks_file, standin, server, out)
        stdout, said = _signalled_while_held(proc, signum, arrived, release)
        assert proc.returncode == 128 + signum, said
        assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == [rows[0]["id"]]
        assert "pass rate" in stdout and "not started 2" in said
        name = signal.Signals(signum).name
        assert f"{name}: stopping. No new episode starts; waiting for those in flight" in said
        assert f"stopped by {name}: 2 episodes not started; to resume: " in said
        resume = shlex.split(said.split("to resume: ", 1)[1])
        assert resume[:2] == ["workplace-env", "run"] and str(out) in resume
        assert server.store.live_count() == 0  # the episode in flight closed its session
        assert [len(standin.scripts[r["prompt"]].requests) for r in rows] == [1, 0, 0]
        again = _run_cli(resume[1:])
        assert again.exit_code == 0, again.output
        assert _played(again.output) == (2, 1)
    _assert_one_plan(out)


def test_after_a_ctrl_c_a_failed_model_request_is_not_retried(server, tmp_path):
    """The first Ctrl-C while a model request is held: the message bounds the wait by
    --timeout; the request then fails (500), and no retry is sent although --max-retries
    allows 3: the run exits 130 at once, the episode unwritten (a resume plays it), its session
    closed."""
    rows = _nochange_rows(server, 2, "noretry")
    tasks_file = tmp_path / "tasks.jsonl"
    _write_rows(tasks_file, rows)
    out = tmp_path / "rollouts.jsonl"
    arrived, release = threading.Event(), threading.Event()
    held = Hold(arrived, release, Text("Nothing to change."), status=500)
    scripts = {rows[0]["prompt"]: [held, Text("Nothing to change.")]}
    with StandInModel(scripts) as standin:
        proc = _model_run_process(tasks_file, standin, server, out, "--max-retries", "3")
        _, said = _signalled_while_held(proc, signal.SIGINT, arrived, release)
        assert proc.returncode == 130, said
        assert "waiting for those in flight to end, at most 120 s for a model request in " in said
        assert "flight (--timeout) (press Ctrl-C again to exit at once)" in said
        assert len(standin.scripts[rows[0]["prompt"]].requests) == 1  # no retry
        assert out.read_text() == ""
        # the episode in flight made its request: interrupted, not "not started"
        assert "stopped by SIGINT: 1 episode interrupted, 1 episode not started" in said
        assert "interrupted 1; not started 1" in said
        assert server.store.live_count() == 0


def test_a_second_ctrl_c_exits_at_once(server, tmp_path):
    """A second Ctrl-C does not wait for the episode in flight: the run exits 130 at once."""
    rows = _nochange_rows(server, 2, "twice")
    tasks_file = tmp_path / "tasks.jsonl"
    _write_rows(tasks_file, rows)
    out = tmp_path / "rollouts.jsonl"
    arrived, release = threading.Event(), threading.Event()
    scripts = {rows[0]["prompt"]: [Hold(arrived, release, Text("Nothing to change."))]}
    with StandInModel(scripts) as standin:
        proc = _model_run_process(tasks_file, standin, server, out)
        try:
            assert arrived.wait(timeout=60), proc.stderr.read()
            proc.send_signal(signal.SIGINT)
            _read_until(proc.stderr, "stopping")
            proc.send_signal(signal.SIGINT)
            _, rest = proc.communicate(timeout=60)  # the model still holds its answer
        finally:
            release.set()
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130 and "exiting at once" in rest, rest
    assert out.read_text() == ""


def test_a_model_run_whose_server_dies_stops_starting_episodes_and_says_how_to_resume(
    server, tmp_path
):
    """The server is killed when the 2nd Verify arrives: that episode is masked (environment
    error), none starts after the failed health check, the summary and the resume command are
    printed, and the run exits 1."""
    rows = _nochange_rows(server, 6, "die")
    tasks_file = tmp_path / "tasks.jsonl"
    _write_rows(tasks_file, rows)
    out = tmp_path / "run" / "rollouts.jsonl"
    out.parent.mkdir()  # an output's directory is the user's to make
    scripts = {r["prompt"]: [Text("Nothing to change.")] for r in rows}
    with StandInModel(scripts) as standin, dying_server(verifies=2) as (target, dying):
        command = [
            sys.executable, "-m", "workplace_env.cli", "run", str(tasks_file), "--policy",
            "model", "--model", "stand-in", "--base-url", standin.base_url, "--target", target,
            "--out", str(out), "--max-retries", "0",
        ]  # fmt: skip
        env = {**os.environ, "COLUMNS": "200", "STANDIN_KEY": "k"}
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=env)
        assert dying.wait(timeout=30) == -signal.SIGKILL
    said = " ".join(done.stderr.split())
    assert done.returncode == 1 and "Traceback" not in done.stderr, said
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [line["failure_kind"] for line in lines] == [None, "workplace_env:environment_error"]
    assert "pass rate" in done.stdout
    assert "server lost: the server does not answer a health check" in said
    assert "stopped: server lost" in said and "4 episodes not started" in said
    resume = shlex.split(said.split("to resume: ", 1)[1])
    assert resume[:3] == ["workplace-env", "run", str(tasks_file)] and str(out) in resume
    assert [len(standin.scripts[r["prompt"]].requests) for r in rows] == [1, 1, 0, 0, 0, 0]


@pytest.mark.parametrize("which", range(5))
def test_every_output_of_a_model_run_is_checked_before_an_episode_plays(server, tmp_path, which):
    """Each file a model run writes (rollouts, inputs, summary, plot, lock file) that cannot be
    written (here a directory in its place) is refused (exit 2) naming it; nothing played."""
    rows = _nochange_rows(server, 1, "out")
    tasks_file = tmp_path / "tasks.jsonl"
    _write_rows(tasks_file, rows)
    out = tmp_path / "run" / "rollouts.jsonl"
    out.parent.mkdir()  # an output's directory is the user's to make
    blocked = [*output_files(out), lock_path(out)][which]
    (blocked / "x").mkdir(parents=True)
    with StandInModel({rows[0]["prompt"]: [Text("Nothing to change.")]}) as standin:
        result = _run_model(tasks_file, standin, server, out)
        assert result.exit_code == 2, result.output
        assert str(blocked) in " ".join(result.output.split())
        assert not standin.scripts[rows[0]["prompt"]].requests


def test_a_summary_that_cannot_be_written_at_the_end_keeps_the_totals(
    server, tmp_path, monkeypatch
):
    """A write that fails after the episodes were played (the summary JSON) is said, with the
    totals printed anyway and the rollouts kept (exit 1), never a traceback."""
    rows = _nochange_rows(server, 2, "end")
    tasks_file = tmp_path / "tasks.jsonl"
    _write_rows(tasks_file, rows)
    out = tmp_path / "rollouts.jsonl"

    def full(*_args: Any, **_kwargs: Any) -> Path:
        raise OSError(28, "No space left on device", str(tmp_path / "rollouts_summary.json"))

    monkeypatch.setattr("workplace_env.run.command.write_summary", full)
    with StandInModel({r["prompt"]: [Text("Nothing to change.")] for r in rows}) as standin:
        result = _run_model(tasks_file, standin, server, out)
    said = " ".join(result.output.split())
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), said
    assert "pass rate" in said and _played(result.output) == (2, 0)
    assert "No space left on device" in said and "rollouts_summary.json" in said
    assert len(read_rollouts(out)) == 2


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--temperature", "7"),
        ("--temperature", "-0.1"),
        ("--temperature", "nan"),
        ("--top-p", "1.5"),
        ("--top-p", "nan"),
        ("--timeout", "nan"),
        ("--timeout", "inf"),
        ("--max-output-tokens", "0"),
        ("--max-turns", "0"),
        ("--max-retries", "-1"),
    ],
)
def test_sampling_flags_out_of_range_are_usage_errors_before_any_request(tmp_path, flag, value):
    """A sampling or request flag out of its range (or nan, an infinity) exits 2 naming the
    flag, before the endpoint is asked anything."""
    tasks_file = tmp_path / "t.jsonl"
    tasks_file.write_text(json.dumps({"id": "t", "prompt": "p", "ground_truth": []}) + "\n")
    with StandInModel({}) as standin:
        result = _run_cli(
            ["run", str(tasks_file), "--policy", "model", "--model", "m", "--base-url",
             standin.base_url, "--out", str(tmp_path / "o.jsonl"), flag, value]
        )  # fmt: skip
        assert not standin.unknown
    assert result.exit_code == 2 and f"'{flag}'" in result.output, result.output
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("api", APIS)
def test_a_model_runs_rollouts_replayed_by_the_recorded_policy_reproduce_their_rewards(
    server, tmp_path, api
):
    """A rollouts file re-run with ``--policy recorded`` replays each line's function_call
    items of ``response.output`` (in order, as Verify takes them): the ground-truth playback
    scores 1.0 again, the wrong write 0.0; the lines masked for the model's failure and by the
    endpoint (reward 0.0, no score) are replayed, their rewards not compared. No
    "no recorded calls" warning, 0 mismatches, exit 0."""
    tasks = [_crm_multi(server), _crm_single(server), _no_change(server), _no_change(server)]
    tasks[3] = {**tasks[3], "id": "masked-row", "prompt": tasks[3]["prompt"] + " (masked)"}
    tasks_file = tmp_path / "tasks.jsonl"
    _write_rows(tasks_file, tasks)
    scripts = {
        tasks[0]["prompt"]: _playback(tasks[0], api),
        tasks[1]["prompt"]: [Calls([("email_send_email", SPURIOUS_EMAIL)]), Text()],
        tasks[2]["prompt"]: [Raw([_fc(name=_MISSING)]), Text()],
        tasks[3]["prompt"]: [Fail(500, 99)],
    }
    out = tmp_path / "rollouts.jsonl"
    with StandInModel(scripts) as standin:
        first = _run_model(tasks_file, standin, server, out, "--api", api, "--max-retries", "0")
    assert first.exit_code == 1, first.output  # the masked episode: no score of the model
    lines = read_rollouts(out)
    recorded = {line["id"]: line["reward"] for line in lines}
    assert (recorded[tasks[0]["id"]], recorded[tasks[1]["id"]]) == (1.0, 0.0)
    masked = sum(line["mask_sample"] for line in lines)  # the model's failure (responses), 500
    assert masked == (2 if api == "responses" else 1)
    totals = tmp_path / "totals.json"
    replay = _run_cli(["run", str(out), "--target", local(server.port), "--json-out", str(totals)])
    said = " ".join(replay.output.split())
    assert replay.exit_code == 0, replay.output
    assert "no recorded calls" not in said
    agreed = "lines is a masked rollout" if masked == 1 else "lines are masked rollouts"
    assert f"{masked} of the 4 {agreed}" in said
    document = json.loads(totals.read_text())
    assert (document["played_episodes"], document["reward_mismatches"]) == (4, 0)
    assert document["mismatches"] == []


@pytest.mark.parametrize(
    ("argv0", "starts"),
    [
        (".venv/bin/workplace-env", ".venv/bin/workplace-env"),
        ("/opt/x y/.venv/bin/workplace-env", "'/opt/x y/.venv/bin/workplace-env'"),
        ("/repo/service/workplace_env/cli.py", "workplace-env"),
        ("workplace-env", "workplace-env"),
    ],
)
def test_the_rerun_command_starts_as_the_command_was_started(argv0: str, starts: str) -> None:
    said = rerun_command([argv0, "run", "t.jsonl", "--concurrency", "8"])
    assert said == f"{starts} run t.jsonl --concurrency 8"
