"""The model loop (issue 18) with the real ``openai`` client against a stand-in model server.

The stand-in (tests/model_standin.py) plays back scripts on loopback: ground-truth calls, wrong
calls, malformed arguments, cut-off calls, 429s and 500s, over the Responses API and Chat
Completions; the environment is a real in-process gRPC server on the embedded sandbox. Covered:
the SDK's sync and async loops and ``workplace-env run --policy model`` (rollouts file,
materialized inputs, summary, plot, resume).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import local
from tests.model_standin import Calls, CutOff, Fail, Raw, StandInModel, Text
from tests.nemo.venv import nemo_python
from workplace_env.model_runs import read_rollouts, side_effect_tables, summarise
from workplace_env.sandbox.tables import CRM, EMAILS
from workplace_env.taskgen import generate_tasks
from workplace_env_client import (
    AsyncEnvironmentClient,
    ModelPolicy,
    arun_rollout,
    arun_rollouts,
    openai_client,
    run_rollout,
)

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


@pytest.mark.parametrize("api", APIS)
def test_malformed_arguments_mask_the_episode_with_the_reason(server, sdk, api):
    task = _crm_single(server)
    bad = '{"customer_id": "00000001", "field": '
    script = [Calls([("customer_relationship_manager_update_customer", bad)]), Text()]
    with StandInModel({task["prompt"]: script}) as standin:
        rollout = run_rollout(sdk, _client(standin), task, _policy(api))
    assert (rollout.reward, rollout.mask_sample, rollout.failure_kind) == (
        0.0,
        True,
        "agent_run_error",
    )
    assert "not JSON" in rollout.failure_reason and "update_customer" in rollout.failure_reason
    assert rollout.invalid_tool_calls == 1


@pytest.mark.parametrize("api", APIS)
def test_a_cut_off_tool_call_masks_the_episode(server, sdk, api):
    task = _crm_single(server)
    script = [CutOff("customer_relationship_manager_update_customer", '{"customer_id": "000')]
    with StandInModel({task["prompt"]: script}) as standin:
        rollout = run_rollout(sdk, _client(standin), task, _policy(api))
    assert rollout.mask_sample and rollout.failure_kind == "agent_run_error"
    assert "cut off" in rollout.failure_reason


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


@pytest.mark.parametrize(
    ("status", "kind"), [(500, "provider_unavailable"), (429, "provider_quota_exhausted")]
)
@pytest.mark.parametrize("api", APIS)
def test_errors_past_the_retries_mask_the_episode(server, sdk, api, status, kind):
    task = _crm_single(server)
    with StandInModel({task["prompt"]: [Fail(status, 99)]}) as standin:
        rollout = run_rollout(sdk, _client(standin, max_retries=2), task, _policy(api))
        requests = standin.scripts[task["prompt"]].requests
    assert (rollout.reward, rollout.mask_sample, rollout.failure_kind) == (0.0, True, kind)
    assert f"HTTP {status} after retries" in rollout.failure_reason
    assert len(requests) == 3 and rollout.tables == ()


def test_an_unreachable_endpoint_masks_the_episode(server, sdk):
    task = _crm_single(server)
    with StandInModel({}) as standin:
        url = standin.base_url
    client = openai_client(url, api_key="k", timeout_s=2, max_retries=0)
    rollout = run_rollout(sdk, client, task, _policy("responses"))
    assert rollout.mask_sample and rollout.failure_kind == "provider_unavailable"
    assert "APIConnectionError" in rollout.failure_reason


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
    # The reference's text for an unknown tool, in the tool route's body; then the refusal.
    assert outputs[0] == {"output": "Error executing tool 'no_such_tool': 'no_such_tool'"}
    assert outputs[1]["error"].startswith("INVALID_TOOL_ARGUMENTS")


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
    ("deeper than Python parses", "responses", Raw([_fc(arguments=DEEPEST)]), "refused", None),
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
    line = json.dumps(rollout.to_json())  # the rollout line stays writable
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
        assert len(answered) == 1 and answered[0]["error"].startswith("INVALID_TOOL_ARGUMENTS")
        assert len(requests) == 2
    else:  # no usable message: a turn without calls ends the episode, scored
        assert (rollout.reward, rollout.mask_sample, rollout.turns) == (1.0, False, 1)


# -- the CLI ----------------------------------------------------------------------------------


def _run_cli(args: list[str]) -> Any:
    from typer.testing import CliRunner

    from workplace_env.cli import app

    return CliRunner().invoke(app, args, env={"STANDIN_KEY": "k", "COLUMNS": "200"})


@pytest.mark.parametrize("api", APIS)
def test_cli_writes_rollouts_summary_and_plot_then_resumes(server, tmp_path, api):
    tasks = [_crm_multi(server), _crm_single(server), _no_change(server)]
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    out = tmp_path / "run" / "rollouts.jsonl"
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
        # L17: the endpoint's failure left an episode unfinished (no score of the model): exit 1
        assert first.exit_code == 1, first.output
        assert "1 not finished" in " ".join(first.output.split())
        lines = read_rollouts(out)
        by_id = {line["id"]: line for line in lines}
        assert [by_id[t["id"]]["reward"] for t in tasks] == [1.0, 0.0, 0.0]
        assert by_id[tasks[2]["id"]]["failure_kind"] == "provider_unavailable"
        assert "played 3, skipped 0" in first.output and "masked" in first.output
        # Rerun: the two finished episodes are kept, the masked one is played again.
        second = _run_cli([*args, "--base-url", standin.base_url])
        assert second.exit_code == 0, second.output
        assert "played 1, skipped 2" in second.output
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
    overall = summary[-1]
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
    def line(category, reward, masked=False, calls=2, invalid=0, tables=()):
        return {
            "category": f"workplace_assistant_{category}",
            "ground_truth": [{"name": "email_send_email", "arguments": "{}"}],
            "reward": reward,
            "mask_sample": masked,
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
            line("crm", 0.0, masked=True, calls=1, invalid=1),
        ]
    )
    assert [r.category for r in rows] == ["crm", "email", "all"]
    crm, email, overall = rows
    assert (crm.masked, crm.pass_rate, crm.tool_call_validity) == (1, 0.0, 0.0)
    assert (email.pass_rate, email.side_effect_rate) == (0.5, 0.5)
    assert overall.tool_call_validity == pytest.approx(4 / 5)


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
                pytest.skip("the gateway does not offer stateless re-verification (issue 12)")
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
        script = Path(__file__).resolve().parents[1] / "e2e" / "nemo_reverify.py"
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


def test_cli_masks_an_episode_whose_seed_is_refused_and_goes_on(server, tmp_path):
    good = _no_change(server)
    refused = {**_crm_single(server), "environment_name": "some_other_env"}
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(json.dumps(refused) + "\n" + json.dumps(good) + "\n")
    out = tmp_path / "rollouts.jsonl"
    with StandInModel({good["prompt"]: [Text("Nothing to change.")]}) as standin:
        result = _run_model(tasks_file, standin, server, out)
    assert result.exit_code == 1, result.output  # L17: the environment's refusal, unfinished
    by_id = {line["id"]: line for line in read_rollouts(out)}
    bad = by_id[refused["id"]]
    assert bad["mask_sample"] and bad["failure_kind"] == "workplace_env:environment_error"
    assert "environment_name" in bad["failure_reason"]
    assert bad["response"]["output"] == [] and bad["response"]["object"] == "response"
    assert by_id[good["id"]]["reward"] == 1.0


def test_cli_exit_status_counts_the_models_own_failures_only_with_fail_on_masked(server, tmp_path):
    """L17: 16 of 28 episodes masked agent_run_error exited 0 and the README did not say how
    masked episodes count. A model failure (its output cannot be run or scored) is part of the
    model's score, not a failure of the run: exit 0, reported as such; --fail-on-masked makes
    it exit 1."""
    bad = '{"customer_id": "00000001", "field": '
    task, good = _crm_single(server), _no_change(server)
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(json.dumps(task) + "\n" + json.dumps(good) + "\n")
    script = {
        task["prompt"]: [Calls([("customer_relationship_manager_update_customer", bad)]), Text()],
        good["prompt"]: [Text("Nothing to change.")],
    }
    for more, status in (((), 0), (("--fail-on-masked",), 1)):
        out = tmp_path / f"rollouts{status}.jsonl"
        with StandInModel(script) as standin:
            result = _run_model(tasks_file, standin, server, out, *more)
        assert result.exit_code == status, result.output
        said = " ".join(result.output.split())
        assert "1 masked by the model itself (agent_run_error)" in said
        assert "not finished" not in said
        by_id = {line["id"]: line for line in read_rollouts(out)}
        assert by_id[task["id"]]["failure_kind"] == "agent_run_error"
        assert by_id[good["id"]]["reward"] == 1.0
