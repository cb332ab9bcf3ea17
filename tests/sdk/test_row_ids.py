"""A dataset row's ``id``: a string, or an integer written in decimal; absent, null or ``""``
takes the default; anything else is an ArgumentError naming ``task.id`` and its JSON type,
raised before anything is sent, in the SDK and in each adapter."""

from __future__ import annotations

from typing import Any

import pytest

from workplace_env_client import ArgumentError, EnvironmentClient
from workplace_env_client.messages import session_identity
from workplace_env_client.openenv import WorkplaceSessionFactory
from workplace_env_client.rollouts import episode_for, row_name
from workplace_env_client.trl import WorkplaceEnvironment

#: No server listens here: a row that got past its checks would fail UnavailableError.
NOWHERE = "127.0.0.1:1"

REFUSED = [([1], "array"), ({"n": 1}, "object"), (1.5, "number"), (True, "boolean")]
TAKEN = [("t-1", "t-1"), (5, "5"), (0, "0"), (-3, "-3"), (10**20, str(10**20))]
DEFAULTED = [{}, {"id": None}, {"id": ""}]


@pytest.mark.parametrize(("value", "json_type"), REFUSED)
def test_a_row_id_of_another_json_type_is_refused_naming_the_field(value, json_type):
    row = {"id": value, "ground_truth": []}
    with pytest.raises(ArgumentError) as refused:
        session_identity(row, None, None, None)
    (violation,) = refused.value.violations
    assert violation.field == "task.id"
    assert violation.description == f"must be a string or an integer, not {json_type}"
    with pytest.raises(ArgumentError):
        row_name(row)


@pytest.mark.parametrize(("value", "text"), TAKEN)
def test_a_string_or_integer_row_id_is_the_task_id(value, text):
    _sid, _ep, task, task_id = session_identity({"id": value}, None, None, None)
    assert task.id == text and task_id == ("default", text) and row_name({"id": value}) == text


@pytest.mark.parametrize("row", DEFAULTED)
def test_a_row_without_an_id_takes_the_default(row):
    _sid, _ep, task, task_id = session_identity(row, None, None, None)
    assert task.id == "" and task_id == ("default", "task")
    assert row_name(row) == "task" and episode_for(row) == ("rtask-0", 0)


@pytest.mark.parametrize(("value", "json_type"), REFUSED)
def test_the_session_block_and_the_adapters_refuse_a_bad_row_id_sending_nothing(value, json_type):
    row: dict[str, Any] = {"id": value, "ground_truth": []}
    with EnvironmentClient(NOWHERE) as env:
        with pytest.raises(ArgumentError, match=f"task.id: .* not {json_type}"), env.session(row):
            pytest.fail("the block must not run")
        slot = type("Slot", (WorkplaceEnvironment,), {"client": env})()
        with pytest.raises(ArgumentError, match=f"task.id: .* not {json_type}"):
            slot.reset(**row)
        factory = WorkplaceSessionFactory(env, tools=[])
        with pytest.raises(ArgumentError, match=f"task.id: .* not {json_type}"):
            factory.create(task=row)
