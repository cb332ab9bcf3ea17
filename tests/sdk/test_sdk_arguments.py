"""Every public entry point of the SDK, sync and async, checks the shape of its Python
arguments and raises ArgumentError (an InvalidRequestError) naming the field as the server names
it, before anything is sent; before, Python's or protobuf's own errors escaped (AttributeError,
TypeError, UnicodeEncodeError) naming no field. ``max_attempts`` is checked alike by both.
"""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from tests.helpers import EP, TASK, TID, RefusingStandIn
from workplace_env.server.in_process import in_process_client
from workplace_env_client import (
    AdminClient,
    ArgumentError,
    AsyncEnvironmentClient,
    ClientClosedError,
    EnvironmentClient,
    InvalidRequestError,
    ModelPolicy,
    WorkplaceEnvError,
    arun_rollout,
    arun_rollouts,
    checks,
    openai_client,
    run_rollout,
)
from workplace_env_client.messages import to_function_call

SEARCH = "email_search_emails"
TOOL = "INVALID_TOOL_ARGUMENTS"
REQUEST = "INVALID_REQUEST"
ROLLOUT = "episode_id.rollout_id"


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


ROW_WITH_SET = {"id": "t1", "x": {"alpha", "beta", "gamma", "delta"}}

#: (label, method, args, kwargs, the field named, reason) for both clients. ``session`` is the
#: context manager; ``handle.*`` a method of the handle it yields.
CASES: list[tuple[str, str, tuple[Any, ...], dict[str, Any], str, str]] = [
    ("row None", "session", (None,), {"episode": EP}, "task", REQUEST),
    ("row a list", "session", ([1],), {"episode": EP}, "task", REQUEST),
    (
        "ground-truth name an int",
        "session",
        ({"id": "t", "ground_truth": [{"name": 1, "arguments": "{}"}]},),
        {"episode": EP},
        "task.ground_truth[0].name",
        REQUEST,
    ),
    (
        "ground-truth call without a name",
        "session",
        ({"id": "t", "ground_truth": [{"arguments": "{}"}]},),
        {},
        "task.ground_truth[0].name",
        REQUEST,
    ),
    (
        "ground-truth call not a pair",
        "session",
        ({"id": "t", "ground_truth": [("a",)]},),
        {},
        "task.ground_truth[0]",
        REQUEST,
    ),
    (
        "ground truth a number",
        "session",
        ({"id": "t", "ground_truth": 5},),
        {},
        "task.ground_truth",
        REQUEST,
    ),
    (
        "ground truth a JSON string",
        "session",
        ({"id": "t", "ground_truth": '[{"name": "email_delete_email", "arguments": "{}"}]'},),
        {},
        "task.ground_truth",
        REQUEST,
    ),
    (
        "ground truth empty text",
        "session",
        ({"id": "t", "ground_truth": ""},),
        {},
        "task.ground_truth",
        REQUEST,
    ),
    (
        "prompt a lone surrogate",
        "session",
        ({"id": "t", "prompt": "\ud800"},),
        {},
        "task.prompt",
        REQUEST,
    ),
    ("episode (5, 0)", "session", (TASK,), {"episode": (5, 0)}, "episode_id.rollout_id", REQUEST),
    ("episode a string", "session", (TASK,), {"episode": "rollout"}, "episode_id", REQUEST),
    (
        "attempt a string",
        "session",
        (TASK,),
        {"episode": ("r", "0")},
        "episode_id.attempt",
        REQUEST,
    ),
    (
        "attempt past int32",
        "session",
        (TASK,),
        {"episode": ("r", 2**40)},
        "episode_id.attempt",
        REQUEST,
    ),
    ("task id of one", "session", (TASK,), {"task_id": ("u",)}, "task_id", REQUEST),
    ("task id an int", "session", (TASK,), {"task_id": ("u", 5)}, "task_id.task_id", REQUEST),
    ("session id an int", "session", (TASK,), {"session_id": 5}, "resources_session_id", REQUEST),
    ("seed id an int", "seed", (5, EP, TID, TASK), {}, "resources_session_id", REQUEST),
    ("seed task None", "seed", ("s", EP, TID, None), {}, "task", REQUEST),
    ("seed rollout id too long", "seed", ("s", ("r" * 257, 0), TID, TASK), {}, ROLLOUT, REQUEST),
    ("close rollout id too long", "close_session", ("s", ("r" * 257, 0)), {}, ROLLOUT, REQUEST),
    (
        "session rollout id too long",
        "session",
        (TASK,),
        {"episode": ("r" * 257, 0)},
        ROLLOUT,
        REQUEST,
    ),
    ("legacy seed task a list", "seed_legacy", ("s", [1]), {}, "task", REQUEST),
    (
        "arguments a lone surrogate",
        "call_tool",
        ("s", SEARCH, {"query": "\ud800"}),
        {},
        "arguments.query",
        TOOL,
    ),
    (
        "arguments text a lone surrogate",
        "call_tool_raw",
        ("s", SEARCH, '{"query": "\ud800"}'),
        {},
        "arguments.query",
        TOOL,
    ),
    ("arguments a list", "call_tool", ("s", SEARCH, [1]), {}, "arguments", TOOL),
    ("arguments a set", "call_tool", ("s", SEARCH, {"q": {1}}), {}, "arguments.q", TOOL),
    ("arguments a giant int", "call_tool", ("s", SEARCH, {"q": 10**5000}), {}, "arguments.q", TOOL),
    (
        "arguments nested 200 deep",
        "call_tool",
        ("s", SEARCH, _nested(200)),
        {},
        "arguments.a.a.a.a... (128 levels)",  # not 128 of ".a"
        TOOL,
    ),
    ("tool name an int", "call_tool", ("s", 5, {}), {}, "tool_name", REQUEST),
    ("call_id an int", "call_tool", ("s", SEARCH, {}), {"call_id": 5}, "call_id", REQUEST),
    ("call session id None", "call_tool", (None, SEARCH, {}), {}, "resources_session_id", REQUEST),
    ("verify [1]", "verify", ("s", [1]), {}, "function_calls.calls[0]", REQUEST),
    ("verify [('a',)]", "verify", ("s", [("a",)]), {}, "function_calls.calls[0]", REQUEST),
    ("verify calls a number", "verify", ("s", 5), {}, "function_calls.calls", REQUEST),
    (
        "verify output a lone surrogate",
        "verify",
        ("s",),
        {"response_output": [{"x": "\ud800"}]},
        "response_output_json[0].x",
        REQUEST,
    ),
    (
        "verify output a number",
        "verify",
        ("s",),
        {"response_output": 5},
        "response_output_json",
        REQUEST,
    ),
    (
        "verify truth arguments an int",
        "verify",
        ("s", []),
        {"ground_truth": [("n", 5)]},
        "ground_truth.calls[0].arguments",
        REQUEST,
    ),
    (
        "verify truth json an int",
        "verify",
        ("s", []),
        {"ground_truth_json": 5},
        "ground_truth_json",
        REQUEST,
    ),
    ("close episode a string", "close_session", ("s", "r"), {}, "episode_id", REQUEST),
    ("close id bytes", "close_session", (b"s", EP), {}, "resources_session_id", REQUEST),
    (
        "handle call a lone surrogate",
        "handle.call_tool",
        (SEARCH, {"query": "\ud800"}),
        {},
        "arguments.query",
        TOOL,
    ),
    # A row value that is not JSON (its digest changed with PYTHONHASHSEED for a set)
    ("row holding a set", "session", (ROW_WITH_SET,), {}, "task.x", REQUEST),
    (
        "seed row a frozenset",
        "seed",
        ("s", EP, TID, {"id": "t", "x": frozenset()}),
        {},
        "task.x",
        REQUEST,
    ),
    (
        "seed row bytes",
        "seed",
        ("s", EP, TID, {"id": "t", "x": [1, b"a"]}),
        {},
        "task.x[1]",
        REQUEST,
    ),
    (
        "legacy seed row a set",
        "seed_legacy",
        ("s", {"id": "t", "y": {"z": {1}}}),
        {},
        "task.y.z",
        REQUEST,
    ),
    ("row a complex", "session", ({"id": "t", "n": 1j},), {}, "task.n", REQUEST),
    ("row key a tuple", "session", ({"id": "t", (1, 2): 1},), {}, "task", REQUEST),
    ("row a giant int", "session", ({"id": "t", "n": 10**5000},), {}, "task.n", REQUEST),
    (
        "row nested 200 deep",
        "session",
        ({"id": "t", "a": _nested(199)},),
        {},
        "task.a.a.a.a... (128 levels)",
        REQUEST,
    ),
    ("handle verify [1]", "handle.verify", ([1],), {}, "function_calls.calls[0]", REQUEST),
    ("handle verify a number", "handle.verify", (5,), {}, "function_calls.calls", REQUEST),
]
IDS = [c[0] for c in CASES]

#: The sync client's further entry points: (label, call(client, handle), field).
SYNC_ONLY: list[tuple[str, Any, str]] = [
    ("recovery bogus", lambda c, h: c.session(TASK, recovery="bogus").__enter__(), "recovery"),
    ("session admin a string", lambda c, h: c.session(TASK, admin="x").__enter__(), "admin"),
    ("checkpoint admin an int", lambda c, h: h.checkpoint(5), "admin"),
    ("recover strategy bogus", lambda c, h: h.recover("bogus"), "strategy"),
    ("recover checkpoint an int", lambda c, h: h.recover("checkpoint", checkpoint=5), "checkpoint"),
    ("export ids [5]", lambda c, h: c.admin().export_sessions([5]), "resources_session_ids[0]"),
    ("export ids a string", lambda c, h: c.admin().export_sessions("s"), "resources_session_ids"),
    ("restore [5]", lambda c, h: c.admin().restore_sessions([5]), "snapshots[0]"),
    ("retire id None", lambda c, h: c.admin().retire_session(None), "resources_session_id"),
    (
        "rollout row None",
        lambda c, h: run_rollout(c, None, None, ModelPolicy("m"), tools=[]),
        "task",
    ),
    (
        "rollout row holding a set",
        lambda c, h: run_rollout(c, None, ROW_WITH_SET, ModelPolicy("m"), tools=[]),
        "task.x",
    ),
    (
        "legacy seed of a row holding bytes",
        lambda c, h: c.seed_legacy("s", {"id": "t", "x": b"a"}),
        "task.x",
    ),
    ("rollout policy a string", lambda c, h: run_rollout(c, None, TASK, "m", tools=[]), "policy"),
    (
        "rollout episode a string",
        lambda c, h: run_rollout(c, None, TASK, ModelPolicy("m"), tools=[], episode="r"),
        "episode_id",
    ),
]


@pytest.fixture(scope="module")
def stand_in() -> Iterator[RefusingStandIn]:
    """Answers every RPC OK and counts them: a refused argument must leave the count alone."""
    running = RefusingStandIn(refusals=0)
    yield running
    running.stop()


def _refused(error: BaseException, field: str, reason: str) -> None:
    assert isinstance(error, ArgumentError) and isinstance(error, InvalidRequestError)
    assert isinstance(error, ValueError)  # the Python convention for a bad argument, too
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert (error.reason, [v.field for v in error.violations]) == (reason, [field])
    assert str(error).startswith(f"INVALID_ARGUMENT {reason}: {field}: ")


@pytest.mark.parametrize(("label", "method", "args", "kwargs", "field", "reason"), CASES, ids=IDS)
def test_sync_client_names_the_field_of_a_malformed_argument_and_sends_nothing(
    stand_in, label, method, args, kwargs, field, reason
):
    with EnvironmentClient(stand_in.target) as client:
        if method.startswith("handle."):
            with client.session(TASK, episode=EP) as handle:
                sent = stand_in.total()
                with pytest.raises(ArgumentError) as err:
                    getattr(handle, method.removeprefix("handle."))(*args, **kwargs)
                assert stand_in.total() == sent
        else:
            sent = stand_in.total()
            with pytest.raises(ArgumentError) as err:
                answer = getattr(client, method)(*args, **kwargs)
                if method == "session":
                    with answer:
                        pytest.fail("the block must not run")
            assert stand_in.total() == sent
    _refused(err.value, field, reason)


@pytest.mark.parametrize(("label", "method", "args", "kwargs", "field", "reason"), CASES, ids=IDS)
def test_async_client_names_the_field_of_a_malformed_argument_and_sends_nothing(
    stand_in, label, method, args, kwargs, field, reason
):
    async def run() -> tuple[BaseException, int]:
        async with AsyncEnvironmentClient(stand_in.target) as client:
            if method.startswith("handle."):
                async with client.session(TASK, episode=EP) as handle:
                    sent = stand_in.total()
                    with pytest.raises(ArgumentError) as err:
                        await getattr(handle, method.removeprefix("handle."))(*args, **kwargs)
                    return err.value, stand_in.total() - sent
            sent = stand_in.total()
            with pytest.raises(ArgumentError) as err:
                answer = getattr(client, method)(*args, **kwargs)
                if method == "session":
                    async with answer:
                        pytest.fail("the block must not run")
                else:
                    await answer
            return err.value, stand_in.total() - sent

    error, sent = asyncio.run(run())
    assert sent == 0
    _refused(error, field, reason)


@pytest.mark.parametrize(("label", "call", "field"), SYNC_ONLY, ids=[c[0] for c in SYNC_ONLY])
def test_sync_session_admin_and_rollout_entry_points_name_the_field(stand_in, label, call, field):
    with EnvironmentClient(stand_in.target) as client, client.session(TASK, episode=EP) as handle:
        sent = stand_in.total()
        with pytest.raises(ArgumentError) as err:
            call(client, handle)
        assert stand_in.total() == sent
    _refused(err.value, field, REQUEST)


@pytest.mark.parametrize(("row", "field"), [([1], "task"), (ROW_WITH_SET, "task.x")])
def test_async_rollout_names_the_field_of_a_malformed_row(stand_in, row, field):
    async def run() -> BaseException:
        async with AsyncEnvironmentClient(stand_in.target) as client:
            with pytest.raises(ArgumentError) as err:
                await arun_rollout(client, None, row, ModelPolicy("m"), tools=[])
            return err.value

    _refused(asyncio.run(run()), field, REQUEST)


def test_the_in_process_client_refuses_a_row_holding_a_set(server):
    client = in_process_client(server)
    with pytest.raises(ArgumentError) as err:
        client.seed("s-set", EP, TID, ROW_WITH_SET)
    _refused(err.value, "task.x", REQUEST)


_DIGEST = (
    "import math, sys; from workplace_env_client import task_from_row; "
    "print(task_from_row({'id': 't1', 'x': ('alpha', 'beta', 'gamma'), 'n': math.nan, "
    "'i': -math.inf, 1: 'int key'}).data_digest)"
)


def test_the_rows_accepted_have_one_digest_in_every_process():
    """What the check lets through (a tuple, NaN, infinities, non-str keys json.dumps writes)
    is hashed the same whatever the process's hash seed, so an identical retry from another
    process is a retry (S2), not SESSION_CONFLICT."""
    digests = {
        subprocess.run(
            [sys.executable, "-c", _DIGEST],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(digests) == 1 and len(digests.pop().strip()) == 32


def test_well_formed_odd_arguments_are_still_sent(stand_in):
    """The checks refuse shapes, not values the server rules on (S5, T3), nor shapes the SDK
    always took: a pb message, a mapping's non-str JSON keys, a tuple list of calls."""
    with EnvironmentClient(stand_in.target) as client:
        sent = stand_in.total()
        client.call_tool("s", SEARCH, {1: "x", "n": None, "f": 1.5, "l": (1, [2])})
        client.verify("s", ({"name": "a", "arguments": {}},), ground_truth=(("b", "{}"),))
        client.seed("bad id!", ("-bad", -1), TID, {"id": 7, "ground_truth": []})
        assert stand_in.total() == sent + 3


@pytest.mark.parametrize("max_attempts", [0, 6, -1, 2.0, True, "4"])
@pytest.mark.parametrize("client_class", [EnvironmentClient, AsyncEnvironmentClient])
def test_both_clients_take_max_attempts_1_to_5_only(client_class, max_attempts):
    """The async client took any ``max_attempts`` (the sync one 1..5): now both refuse."""
    with pytest.raises(ValueError, match="max_attempts"):
        client_class("127.0.0.1:1", max_attempts=max_attempts)


@pytest.mark.parametrize("client_class", [EnvironmentClient, AsyncEnvironmentClient])
def test_both_clients_take_max_attempts_1_and_5(client_class):
    async def make() -> None:  # a grpc.aio channel is made inside an event loop
        for attempts in (1, 5):
            client = client_class("127.0.0.1:1", max_attempts=attempts)
            closed = client.close()
            if asyncio.iscoroutine(closed):
                await closed

    asyncio.run(make())


@pytest.mark.parametrize("client_class", [EnvironmentClient, AsyncEnvironmentClient])
@pytest.mark.parametrize("given", [(), ("target", "transport"), ("channel", "transport")])
def test_both_clients_take_exactly_one_of_target_channel_and_transport(client_class, given):
    """Neither, or two of them, is a ValueError before anything is made."""
    stand_ins = {"target": "127.0.0.1:1", "channel": object(), "transport": object()}
    kwargs = {name: stand_ins[name] for name in given if name != "target"}
    with pytest.raises(ValueError, match="exactly one of target, channel or transport"):
        client_class(stand_ins["target"] if "target" in given else None, **kwargs)


# -- The clients' constructor arguments ------------------------------------------------------

#: (timeout_s, what was seen before): None and a string failed at the first call (TypeError),
#: inf answered DEADLINE_EXCEEDED at once, -1, 0 and NaN answered whatever gRPC's arithmetic gave.
BAD_TIMEOUTS = [None, "abc", "30", True, math.inf, -math.inf, math.nan, -1, 0, 0.0, 2e9, [30]]


def _construct(client_class: Any, target: Any = "127.0.0.1:1", **kwargs: Any) -> None:
    async def make() -> None:  # a grpc.aio channel is made inside an event loop
        client = client_class(target, **kwargs)
        closed = client.close()
        if asyncio.iscoroutine(closed):
            await closed

    asyncio.run(make())


CLIENTS = [EnvironmentClient, AsyncEnvironmentClient, AdminClient]


@pytest.mark.parametrize("timeout_s", BAD_TIMEOUTS, ids=repr)
@pytest.mark.parametrize("client_class", CLIENTS)
def test_every_client_refuses_a_timeout_that_is_not_a_finite_positive_number(
    client_class, timeout_s
):
    with pytest.raises(ArgumentError) as err:
        _construct(client_class, timeout_s=timeout_s)
    _refused(err.value, "timeout_s", REQUEST)


@pytest.mark.parametrize(
    ("client_class", "argument", "value"),
    [
        (EnvironmentClient, "max_attempts", "4"),
        (AsyncEnvironmentClient, "max_attempts", 2.0),
        (EnvironmentClient, "retry_refusals", "no"),
        (AsyncEnvironmentClient, "retry_refusals", 0),
        (EnvironmentClient, "affinity", "yes"),
        (AsyncEnvironmentClient, "affinity", 1),
        (AdminClient, "affinity", "yes"),
        (EnvironmentClient, "admin_token", 5),
        (AdminClient, "token", b"t"),
    ],
)
def test_every_client_names_a_malformed_option(client_class, argument, value):
    with pytest.raises(ArgumentError) as err:
        _construct(client_class, **{argument: value})
    _refused(err.value, argument, REQUEST)


#: Targets that name no server: gRPC took them and failed each RPC UNAVAILABLE, "errors
#: resolving", long after the client was made.
BAD_TARGETS = ["::::", "::1", "http://x:1", "https://h:443/", "", " ", "x:abc", "h:99999", "h:0",
               "a b:1", "[::1]x", "x:", "h\x00:1"]  # fmt: skip


@pytest.mark.parametrize("target", BAD_TARGETS, ids=repr)
@pytest.mark.parametrize("client_class", CLIENTS)
def test_every_client_refuses_a_target_that_names_no_server(client_class, target):
    with pytest.raises(ArgumentError) as err:
        _construct(client_class, target)
    _refused(err.value, "target", REQUEST)


@pytest.mark.parametrize(
    "target",
    ["localhost", "h:1", "[::1]:50051", "[::1]", "dns:///svc.ns:50051", ":50051",
     "ipv4:10.0.0.1:1,10.0.0.2:2", "unix:/tmp/x.sock", "my-svc.ns.svc.cluster.local:50051"],
)  # fmt: skip
def test_every_client_takes_a_target_grpc_resolves(target):
    for client_class in CLIENTS:
        _construct(client_class, target)


def test_a_deep_value_is_named_by_its_first_levels_and_its_depth():
    """A value 200 arrays deep was named ``arguments[0][0]...`` with 128 ``[0]``."""
    value: Any = 1
    for _ in range(200):
        value = [value]
    assert checks.json_problem(value, "arguments") == (
        "arguments[0][0][0][0]... (128 levels)",
        "nested deeper than 128 levels",
    )
    assert checks.json_problem([[{"k": "\ud800"}]], "row") == (
        "row[0][0].k",
        "a lone surrogate (U+D800) that UTF-8 cannot carry",
    )


def test_every_client_says_it_is_closed_when_used_after_close(stand_in):
    """gRPC's raw ``ValueError: Cannot invoke RPC on closed channel!`` (``UsageError`` for
    asyncio) becomes ClientClosedError, a WorkplaceEnvError and still a ValueError; a channel
    its owner closed alike."""

    def check(error: BaseException) -> None:
        assert isinstance(error, ClientClosedError) and isinstance(error, ValueError)
        assert (error.code, error.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "CLIENT_CLOSED")
        assert "the client is closed" in str(error)

    client = EnvironmentClient(stand_in.target)
    client.close()
    with pytest.raises(WorkplaceEnvError) as err:
        client.list_tools()
    check(err.value)
    admin = AdminClient(stand_in.target, token="t")
    admin.close()
    with pytest.raises(WorkplaceEnvError) as err:
        admin.retire_session("s")
    check(err.value)
    channel = grpc.insecure_channel(stand_in.target)
    over_theirs = EnvironmentClient(channel=channel)
    channel.close()
    with pytest.raises(WorkplaceEnvError) as err:
        over_theirs.list_tools()
    check(err.value)

    async def run() -> None:
        env = AsyncEnvironmentClient(stand_in.target)
        await env.close()
        with pytest.raises(WorkplaceEnvError) as err:
            await env.list_tools()
        check(err.value)

    asyncio.run(run())


def test_the_admin_client_of_an_environment_client_takes_its_token_checked(stand_in):
    with EnvironmentClient(stand_in.target) as client, pytest.raises(ArgumentError) as err:
        client.admin(5)  # type: ignore[arg-type]
    _refused(err.value, "token", REQUEST)


@pytest.mark.parametrize("client_class", CLIENTS)
def test_the_bounds_of_timeout_s_are_taken_and_work(stand_in, client_class):
    """An int, a small float and the largest deadline (1e9 s) are taken, and an RPC under the
    largest one is answered (gRPC's deadline arithmetic holds there)."""

    async def run() -> None:
        for timeout_s in (1, 0.001, 1e9):
            client = client_class(stand_in.target, timeout_s=timeout_s)
            assert client.timeout_s == float(timeout_s)
            closed = client.close()
            if asyncio.iscoroutine(closed):
                await closed
        if client_class is AsyncEnvironmentClient:
            async with client_class(stand_in.target, timeout_s=1e9) as env:
                await env.list_tools()
        elif client_class is EnvironmentClient:
            with client_class(stand_in.target, timeout_s=1e9) as env:
                env.list_tools()

    asyncio.run(run())


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: ModelPolicy("m", max_turns=0), "max_turns"),
        (lambda: ModelPolicy("m", max_turns="3"), "max_turns"),
        (lambda: openai_client("http://x/v1", timeout_s=math.inf), "timeout_s"),
        (lambda: openai_client("http://x/v1", timeout_s=None), "timeout_s"),
        (lambda: openai_client("http://x/v1", max_retries=-1), "max_retries"),
        (lambda: openai_client("http://x/v1", max_retries=2.5), "max_retries"),
        (
            lambda: asyncio.run(arun_rollouts(None, None, [], ModelPolicy("m"), concurrency=0)),
            "concurrency",
        ),
        (
            lambda: asyncio.run(arun_rollouts(None, None, [], ModelPolicy("m"), concurrency="8")),
            "concurrency",
        ),
    ],
)
def test_the_rollout_loops_bounds_are_checked(call, field):
    with pytest.raises(ArgumentError) as err:
        call()
    _refused(err.value, field, REQUEST)


def test_a_call_map_without_arguments_sends_an_empty_object_and_ignores_other_keys():
    """A call map needs its name only: ``arguments`` left out is ``{}`` (as ``call_tool(name)``),
    other keys (a NeMo ``function_call`` item's ``type``, ``call_id``) are not sent."""
    item = {"type": "function_call", "call_id": "c1", "name": "email_delete_email"}
    assert to_function_call(item) == to_function_call(("email_delete_email", "{}"))
    with pytest.raises(ArgumentError, match=r"call\.name"):
        to_function_call({"arguments": "{}"})
