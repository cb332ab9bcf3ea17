"""Typed HTTP bodies are refused as NeMo Gym's models refuse them, naming the field as sent.

a ``/close_session`` with a key outside
``ResourcesCloseSessionRequest`` closed the session and answered the legacy shape
(docs/http-gateway.md: extra keys are 422); a ``/verify`` whose ``ground_truth`` the service
refuses named the service's
field ``ground_truth_json`` instead of the body's ``ground_truth``.
"""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from workplace_env_client import InvalidRequestError

ROW = {"id": "typed-bodies", "ground_truth": [], "responses_create_params": {"input": []}}


def seed(http: httpx.Client, task_data: dict | None = None) -> str:
    sid = f"tb-{uuid.uuid4().hex}"
    body = {
        "resources_session_id": sid,
        "episode_id": {"rollout_id": "r1", "attempt": 0},
        "task_id": {"taskset": "ts", "task_id": "typed-bodies"},
        "task_data": ROW if task_data is None else task_data,
    }
    answer = http.post("/seed_session", json=body)
    assert answer.status_code == 200, answer.text
    return sid


def locs(answer: httpx.Response) -> list[list]:
    assert answer.status_code == 422, answer.text
    return [d["loc"] for d in answer.json()["detail"]]


@pytest.mark.parametrize(
    ("extra", "loc"),
    [
        ({"junk": 1}, ["body", "junk"]),
        (
            {"episode_id": {"rollout_id": "r1", "attempt": 0, "junk": 1}},
            ["body", "episode_id", "junk"],
        ),
    ],
)
def test_close_with_an_extra_key_is_422_and_closes_nothing(http, extra, loc):
    sid = seed(http)
    episode = {"rollout_id": "r1", "attempt": 0}
    body = {"resources_session_id": sid, "episode_id": episode, **extra}
    http.cookies.clear()
    assert loc in locs(http.post("/close_session", json=body))
    # still live: the typed close closes it now, and says so
    answer = http.post("/close_session", json={"resources_session_id": sid, "episode_id": episode})
    assert answer.status_code == 200 and answer.json() == {"resources_session_id": sid}
    assert answer.headers["x-workplace-close-outcome"] == "CLOSED"


def test_legacy_close_with_an_extra_key_is_422(http):
    http.post("/seed_session", json=ROW)
    assert ["body", "junk"] in locs(http.post("/close_session", json={"junk": 1}))


LIST, STR = "list[dict[str,str]]", "str"  # the reference's two ground-truth branches


@pytest.mark.parametrize(
    ("truth", "at"),
    [
        (None, [[]]),
        (3, [[]]),
        (True, [[]]),
        # An object, and an item whose arguments is an object, scored
        ({"a": 1}, [[]]),
        ({}, [[]]),
        (["x"], [[0]]),
        ([{"name": "email_send_email", "arguments": {}}], [[0, "arguments"]]),
        ([{"name": 1, "arguments": "{}"}, None], [[0, "name"], [1]]),
        ([{"name": "a", "arguments": "{}", "extra": 2}], [[0, "extra"]]),
    ],
)
@pytest.mark.parametrize("cookie", [False, True])
def test_verify_ground_truth_is_typed_as_the_reference_types_it(http, sdk, truth, at, cookie):
    """NeMo Gym's verify body (observed black box) types ``ground_truth`` as an array of
    objects whose values are strings, or a string: anything else is 422 with a loc under each
    branch (the list's offending place, then ``str``). gRPC's ``ground_truth_json`` follows the
    same rule, naming ``ground_truth_json[i].<key>``."""
    http.cookies.clear()
    if cookie:
        http.post("/seed_session", json=ROW)
    body = {"ground_truth": truth, "responses_create_params": {}, "response": {"output": []}}
    expected = [["body", "ground_truth", LIST, *p] for p in at] + [["body", "ground_truth", STR]]
    assert locs(http.post("/verify", json=body)) == expected
    if cookie:  # nothing was scored or released: the legacy session still runs tools
        assert http.post("/email_search_emails", json={"query": "x"}).status_code == 200
    sid = seed(http)
    with pytest.raises(InvalidRequestError) as err:
        sdk.verify(sid, [], ground_truth_json=json.dumps(truth))
    fields = [
        "ground_truth_json" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in a)
        for a in at
    ]
    assert [v.field for v in err.value.violations] == fields


@pytest.mark.parametrize(
    "truth",
    ["[]", "not json", [], [{}], [{"name": "email_send_email"}], [{"arguments": "{}", "x": "y"}]],
)
def test_verify_takes_every_ground_truth_the_reference_takes(http, truth):
    body = {"ground_truth": truth, "responses_create_params": {}, "response": {"output": []}}
    answer = http.post("/verify", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["mask_sample"] is False


DELETE_57 = [{"name": "email_delete_email", "arguments": '{"email_id": "00000057"}'}]


@pytest.mark.parametrize("truth", [json.dumps(DELETE_57), "abc", ""])
def test_a_typed_seed_takes_a_string_ground_truth_and_verify_scores_it_as_the_reference(
    http, truth
):
    """The reference's seed takes any row; its verify scores a string ground truth as "change
    nothing" (REFERENCE.md c.2): a verify with no calls 1.0, the delete it spells out 0.0."""
    row = {**ROW, "ground_truth": truth}
    for calls, reward in (([], 1.0), (DELETE_57, 0.0)):
        sid = seed(http, row)
        output = [{"type": "function_call", "call_id": f"c{i}", **c} for i, c in enumerate(calls)]
        body = {**row, "resources_session_id": sid, "response": {"output": output}}
        answer = http.post("/verify", json=body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["reward"] == reward


@pytest.mark.parametrize(
    "change",
    [
        {"responses_create_params": {"input": [{"role": "user", "content": "other"}]}},
        {"prompt": "another prompt"},
        {"extra_key": 1},
        {"ground_truth": [{"name": "email_delete_email", "arguments": '{"email_id": "1"}'}]},
    ],
)
def test_typed_seed_of_the_same_identity_with_other_task_data_is_409(http, change):
    """Any difference in ``task_data`` (not only the ground truth) is a conflict;
    the identical row is a retry."""
    sid = seed(http)
    body = {
        "resources_session_id": sid,
        "episode_id": {"rollout_id": "r1", "attempt": 0},
        "task_id": {"taskset": "ts", "task_id": "typed-bodies"},
        "task_data": ROW,
    }
    assert http.post("/seed_session", json=body).status_code == 200  # retry
    answer = http.post("/seed_session", json={**body, "task_data": {**ROW, **change}})
    assert answer.status_code == 409, answer.text
    assert answer.json()["reason"] == "SESSION_CONFLICT"


def test_typed_seed_without_task_data_is_422_and_binds_nothing(http):
    """A typed seed with no row at all (NeMo's ``task_data`` is
    required) answered 200 and bound an empty task."""
    sid = f"tb-{uuid.uuid4().hex}"
    identity = {
        "resources_session_id": sid,
        "episode_id": {"rollout_id": "r1", "attempt": 0},
        "task_id": {"taskset": "ts", "task_id": "typed-bodies"},
    }
    assert locs(http.post("/seed_session", json=identity)) == [["body", "task_data"]]
    assert http.post("/email_send_email", json={}).status_code == 404  # no cookie was set
    # nothing bound: the same id seeds for another episode
    other = {**identity, "episode_id": {"rollout_id": "r2", "attempt": 0}, "task_data": ROW}
    assert http.post("/seed_session", json=other).status_code == 200


@pytest.mark.parametrize("live", [False, True])
def test_close_naming_an_id_without_episode_id_is_422_and_closes_nothing(http, live):
    """``{"resources_session_id": X}`` (NeMo's typed close without its
    required ``episode_id``) was taken as a legacy close: X fenced, or 409 when live. NeMo
    Gym's server answers 422 ``["body", "episode_id"]`` (observed black box)."""
    sid = seed(http) if live else f"tb-{uuid.uuid4().hex}"
    http.cookies.clear()
    assert locs(http.post("/close_session", json={"resources_session_id": sid})) == [
        ["body", "episode_id"]
    ]
    episode = {"rollout_id": "r1", "attempt": 0}
    answer = http.post("/close_session", json={"resources_session_id": sid, "episode_id": episode})
    assert answer.headers["x-workplace-close-outcome"] == ("CLOSED" if live else "NOT_SEEDED")
    # and with no cookie and no id at all, both fields are named, as NeMo Gym names them
    assert locs(http.post("/close_session", json={})) == [
        ["body", "resources_session_id"],
        ["body", "episode_id"],
    ]


def test_typed_seed_whose_ground_truth_names_no_tool_is_422_and_binds_nothing(http):
    row = {**ROW, "ground_truth": [{"name": "email_delet_email", "arguments": "{}"}]}
    sid = f"tb-{uuid.uuid4().hex}"
    body = {
        "resources_session_id": sid,
        "episode_id": {"rollout_id": "r1", "attempt": 0},
        "task_id": {"taskset": "ts", "task_id": "typed-bodies"},
        "task_data": row,
    }
    answer = http.post("/seed_session", json=body)
    assert locs(answer) == [["body", "task_data", "ground_truth", 0, "name"]]
    assert answer.json()["detail"][0]["msg"] == (
        "'email_delet_email' is not a tool of this environment; did you mean 'email_delete_email'?"
    )
    assert http.post("/email_send_email", json={}).status_code == 404  # no cookie was set
    assert http.post("/seed_session", json={**body, "task_data": ROW}).status_code == 200
