"""The asyncio SDK: the same surface and the same answers as the sync client (issue 8)."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.helpers import local
from workplace_env_client import (
    AsyncEnvironmentClient,
    EnvironmentClient,
    SessionConflictError,
    SessionLostError,
)

SEND = ("email_send_email", {"recipient": "a@b.com", "subject": "async", "body": "b"})
TASK = {"id": "t1", "ground_truth": [{"name": SEND[0], "arguments": json.dumps(SEND[1])}]}
CALLS = [
    ("company_directory_find_email_address", {"name": "a"}),
    SEND,
    ("email_search_emails", {"query": "async"}),
    ("calendar_create_event", {"event_name": "x", "participant_email": "a@b.com"}),
    ("nope", {}),
]


@pytest.fixture(scope="module")
def target(server) -> str:
    return local(server.port)


def test_async_episode_matches_the_sync_client(target):
    async def episode() -> tuple[list, float, list]:
        async with AsyncEnvironmentClient(target) as env:
            tools = await env.list_tools()
            async with env.session(TASK, episode=("async-r", 0)) as s:
                outputs = [await s.call_tool(name, args) for name, args in CALLS]
                reward = (await s.verify([SEND])).reward
            return outputs, reward, tools

    outputs, reward, tools = asyncio.run(episode())
    with EnvironmentClient(target) as env, env.session(TASK, episode=("sync-r", 0)) as s:
        assert outputs == [s.call_tool(name, args) for name, args in CALLS]
        assert reward == s.verify([SEND]).reward == 1.0
        assert tools == env.list_tools()


def test_async_errors_are_typed(target):
    async def run() -> None:
        async with AsyncEnvironmentClient(target) as env:
            await env.seed("a1", ("r", 0), ("u", "t"), TASK)
            with pytest.raises(SessionConflictError):
                await env.seed("a1", ("other", 0), ("u", "t"), TASK)
            with pytest.raises(SessionLostError):
                await env.call_tool("ghost", *SEND)
            lost = await env.verify("ghost", [])
            assert (lost.mask_sample, lost.failure_kind) == (True, "session_lost")
            assert await env.close_session("a1", ("r", 0)) == "CLOSED"

    asyncio.run(run())


def test_async_session_closes_on_error(target):
    async def run() -> str:
        async with AsyncEnvironmentClient(target) as env:
            with pytest.raises(RuntimeError):
                async with env.session(TASK, session_id="a2", episode=("r2", 0)):
                    raise RuntimeError("agent crashed")
            return await env.close_session("a2", ("r2", 0))

    assert asyncio.run(run()) == "ALREADY_CLOSED"
