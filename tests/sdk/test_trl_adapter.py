"""The TRL adapter (workplace_env_client.trl): its tool methods' schemas as transformers reads
them, and episodes driven as TRL's GRPO loop drives an ``environment_factory``."""

from __future__ import annotations

import gc
import inspect
import json
import logging
import warnings
from typing import Any

import grpc
import pytest
from transformers.utils import get_json_schema

from workplace_env.config import Settings
from workplace_env.taskgen import generate_tasks
from workplace_env_client import (
    ArgumentError,
    EnvironmentClient,
    SessionClosedError,
    SessionLeftOpenWarning,
    UnavailableError,
)
from workplace_env_client.trl import EPISODE_METHODS, UNSET, WorkplaceEnvironment, trl_environment

ADMIN_TOKEN = "trl-adapter-admin"
SLOTS = 3  # rollout slots: one environment instance each, reused from step to step


@pytest.fixture
def served(make_server):
    return make_server(settings=Settings(admin_token=ADMIN_TOKEN), admin_token=ADMIN_TOKEN)


@pytest.fixture
def rows(sandbox) -> list[dict[str, Any]]:
    """Generated tasks on the generated (default) sandbox, as a dataset's rows."""
    return generate_tasks(sandbox, 2 * SLOTS, seed=27)


def tool_methods(environment: WorkplaceEnvironment) -> dict[str, Any]:
    """The public methods TRL exposes as tools (its episode hooks left out)."""
    return {
        name: method
        for name, method in inspect.getmembers(environment, inspect.ismethod)
        if not name.startswith("_") and name not in EPISODE_METHODS
    }


def as_trl_presents(tool: dict[str, Any]) -> dict[str, Any]:
    """A ListTools schema in get_json_schema's shape (``required`` only when not empty)."""
    parameters = tool["parameters"]
    shown = {"type": "object", "properties": parameters["properties"]}
    if parameters["required"]:
        shown["required"] = parameters["required"]
    return {
        "type": "function",
        "function": {
            "name": tool["name"],
            "description": tool["description"],
            "parameters": shown,
        },
    }


def run_step(envs: list[WorkplaceEnvironment], rows, drop_first: bool = False) -> list[float]:
    """One GRPO step: reset each slot with its row, make the row's ground-truth calls through
    the methods (less the first one when ``drop_first``), then read each slot's reward."""
    for env, row in zip(envs, rows, strict=True):
        assert env.reset(**row) is None
        tools = tool_methods(env)
        for call in row["ground_truth"][1 if drop_first else 0 :]:
            output = tools[call["name"]](**json.loads(call["arguments"]))
            assert isinstance(output, str)
            json.loads(output)
    return [env.get_reward() for env in envs]


def test_each_tool_method_schema_is_the_listtools_schema(served):
    tools = served.client.list_tools()
    env = trl_environment(served.client, tools)()
    methods = tool_methods(env)
    assert list(methods) == sorted(t["name"] for t in tools) and len(methods) == 27
    got = {name: get_json_schema(method) for name, method in methods.items()}
    assert got == {t["name"]: as_trl_presents(t) for t in tools}


def test_oracle_scores_one_perturbed_zero_and_nothing_stays_open(served, rows):
    factory = trl_environment(served.client)
    envs = [factory() for _ in range(SLOTS)]
    assert run_step(envs, rows[:SLOTS]) == [1.0] * SLOTS
    assert served.store.live_count() == 0
    assert run_step(envs, rows[SLOTS:]) == [1.0] * SLOTS  # the same instances, next step
    assert run_step(envs, rows[:SLOTS], drop_first=True) == [0.0] * SLOTS
    assert [env.verify_result.reward for env in envs] == [0.0] * SLOTS
    assert served.store.live_count() == 0
    assert served.admin.export_sessions().snapshots == []


def test_bad_calls_answer_the_tools_error_text(served, rows):
    env = trl_environment(served.client)()
    env.reset(**rows[0])
    assert env.email_get_email_information_by_id(field="body") == '"Email ID not provided."'
    assert env.email_delete_email(email_id="nope") == '"Email not found."'
    assert env.email_search_emails(bogus=1) == (
        "\"Error executing tool 'email_search_emails': EmailTool.search_emails() got an"
        " unexpected keyword argument 'bogus'\""
    )
    assert env.get_reward() == 0.0
    assert served.store.live_count() == 0


def test_unset_optional_arguments_are_not_sent(served, rows):
    env = trl_environment(served.client)()
    search = inspect.signature(env.email_search_emails).parameters
    assert search["page"].default is UNSET and search["query"].default is UNSET
    assert inspect.signature(env.email_delete_email).parameters["email_id"].default is (
        inspect.Parameter.empty
    )
    env.reset(**rows[0])
    shown = env.email_search_emails(query="budget", page=UNSET)
    sid = env._episode.session_id
    assert shown == served.raw.call_tool_raw(sid, "email_search_emails", {"query": "budget"})
    assert env._episode.calls == [("email_search_emails", '{"query": "budget"}')]
    env.get_reward()


def left_open_warnings(record: pytest.WarningsRecorder, here: bool = True) -> list[str]:
    """The messages of the SessionLeftOpenWarnings ``record`` holds; with ``here``, each checked
    to point at this file (the test's own call, not the SDK's insides)."""
    found = [w for w in record if issubclass(w.category, SessionLeftOpenWarning)]
    assert not here or all(w.filename == __file__ for w in found), [w.filename for w in found]
    return [str(w.message) for w in found]


def assert_gone(served, session_id: str) -> None:
    """The server holds ``session_id`` no more: a call on it is refused NOT_FOUND."""
    with pytest.raises(SessionClosedError) as refused:
        served.raw.call_tool_raw(session_id, "email_search_emails", {"query": "budget"})
    assert refused.value.code == grpc.StatusCode.NOT_FOUND


def test_reset_mid_episode_closes_the_open_session_and_warns_once(served, rows):
    env = trl_environment(served.client)()
    env.reset(**rows[0])
    first = env._episode.session_id
    with pytest.warns(SessionLeftOpenWarning) as warned:
        env.reset(**rows[1])
    assert left_open_warnings(warned) == [
        f"session {first!r} was closed after its episode was left unfinished (reset to a new "
        "episode before get_reward()): the episode is not scored"
    ]
    assert served.store.live_count() == 1
    assert_gone(served, first)
    env.get_reward()
    assert served.store.live_count() == 0


def test_a_with_block_ended_mid_episode_closes_the_session_and_warns_once(served, rows):
    with pytest.warns(SessionLeftOpenWarning) as warned, trl_environment(served.client)() as env:
        env.reset(**rows[0])
        sid = env._episode.session_id
    [said] = left_open_warnings(warned)
    assert f"session {sid!r} was closed after its episode was left unfinished" in said
    assert_gone(served, sid)
    assert served.store.live_count() == 0


def test_a_finished_episode_ends_without_a_warning(served, rows):
    with warnings.catch_warnings():
        warnings.simplefilter("error", SessionLeftOpenWarning)
        with trl_environment(served.client)() as env:
            env.reset(**rows[0])
            env.get_reward()
        del env
        gc.collect()
    assert served.store.live_count() == 0


@pytest.mark.parametrize("how", ["reset", "dropped"])
def test_an_abandoned_episode_whose_close_fails_is_logged_and_warned_never_raised(
    make_server, rows, caplog, how
):
    """The server gone when the slot is reset or dropped mid-episode: the close's error is
    logged and said once by the warning (the session stays until the idle TTL), never raised
    (a reset raises its own seed's error)."""
    served = make_server()
    with EnvironmentClient(served.target, timeout_s=30, max_attempts=1) as client:
        env = trl_environment(client)()
        env.reset(**rows[0])
        sid = env._episode.session_id
        served.running.stop(grace_s=0)
        logged = caplog.at_level(logging.WARNING, "workplace_env_client")
        with logged, pytest.warns(SessionLeftOpenWarning) as warned:
            if how == "reset":
                with pytest.raises(UnavailableError):
                    env.reset(**rows[1])
            else:
                del env
                gc.collect()
    # once for the episode (a reset's own seed, unanswered, also warns about its new id)
    [said] = [m for m in left_open_warnings(warned, here=how == "reset") if repr(sid) in m]
    assert f"session {sid!r} was not closed (" in said and "idle TTL" in said
    [logged] = [r.getMessage() for r in caplog.records if sid in r.getMessage()]
    assert "failed" in logged


def test_out_of_episode_use_and_bad_rows_are_refused_leaving_nothing_open(served, rows):
    env = trl_environment(served.client)()
    with pytest.raises(RuntimeError, match=r"reset\(\*\*row\) first"):
        env.get_reward()
    with pytest.raises(RuntimeError, match=r"reset\(\*\*row\) first"):
        env.email_delete_email(email_id="00000057")
    with pytest.raises(ArgumentError, match=r"task\.ground_truth"):
        env.reset(id="x", ground_truth=5)
    assert served.store.live_count() == 0
    with pytest.raises(ValueError, match="reset"):
        trl_environment(served.client, [{"name": "reset"}])


@pytest.mark.parametrize(
    ("bad", "field"),
    [({"id": {"x": 1}}, r"task\.id"), ({"ground_truth": 5}, r"task\.ground_truth")],
    ids=["id_an_object", "ground_truth_a_number"],
)
def test_a_refused_reset_keeps_the_open_episode_as_it_was(served, rows, bad, field):
    env = trl_environment(served.client)()
    env.reset(**rows[0])
    opened = env._episode
    env.email_search_emails(query="budget")
    with warnings.catch_warnings():
        warnings.simplefilter("error", SessionLeftOpenWarning)
        with pytest.raises(ArgumentError, match=field):
            env.reset(**dict(rows[0], **bad))
    assert env._episode is opened and served.store.live_count() == 1
    assert env.email_delete_email(email_id="nope") == '"Email not found."'  # still usable
    assert opened.calls[0][0] == "email_search_emails"
    env.get_reward()
    assert served.store.live_count() == 0


@pytest.mark.parametrize("body_raises", [False, True])
def test_an_environment_whose_server_died_never_hides_its_block(make_server, rows, body_raises):
    """``with`` an environment whose server died meanwhile: a completed block's exit warns
    naming the open session; an exception leaving the block goes on, noted."""
    served = make_server()
    client = EnvironmentClient(served.target, timeout_s=30, max_attempts=1)
    environment = trl_environment(client)
    with client:
        env = environment()
        if body_raises:
            with pytest.raises(LookupError) as raised, pytest.warns(SessionLeftOpenWarning), env:
                env.reset(**rows[0])
                sid = env._episode.session_id
                served.running.stop(grace_s=0)
                raise LookupError("the block's own")
            assert any(f"closing session {sid!r} also failed" in n for n in raised.value.__notes__)
            return
        with pytest.warns(SessionLeftOpenWarning) as warned, env:
            env.reset(**rows[0])
            sid = env._episode.session_id
            served.running.stop(grace_s=0)
        assert f"session {sid!r} was not closed" in str(warned[0].message)


def test_a_dropped_slot_closes_its_session_and_warns_once(served, rows):
    env = trl_environment(served.client)()
    env.reset(**rows[0])
    sid = env._episode.session_id
    assert served.store.live_count() == 1
    with pytest.warns(SessionLeftOpenWarning) as warned:
        del env
        gc.collect()
    assert left_open_warnings(warned, here=False) == [
        f"session {sid!r} was closed after its episode was left unfinished (dropped "
        "unclosed): the episode is not scored"
    ]
    assert_gone(served, sid)
    assert served.store.live_count() == 0
