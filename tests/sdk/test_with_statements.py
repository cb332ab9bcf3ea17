"""A context manager of the SDK used with the wrong ``with`` raises a TypeError saying which
statement to write, before it does anything (nothing is dialed, seeded or closed)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from workplace_env_client import AdminClient, AsyncEnvironmentClient, EnvironmentClient
from workplace_env_client.trl import WorkplaceEnvironment

#: No server listens here: anything sent would fail with UnavailableError, not TypeError.
NOWHERE = "127.0.0.1:1"
ROW = {"id": "t", "ground_truth": []}


def _enter_sync(manager: Any) -> None:
    with manager:
        pytest.fail("the block must not run")


async def _enter_async(manager: Any) -> None:
    async with manager:
        pytest.fail("the block must not run")


@pytest.mark.parametrize("what", ["client", "session block"])
def test_an_async_object_used_with_with_says_to_write_async_with(what):
    async def run() -> None:
        env = AsyncEnvironmentClient(NOWHERE)
        try:
            manager = env if what == "client" else env.session(ROW)
            with pytest.raises(TypeError) as refused:
                _enter_sync(manager)
            said = str(refused.value)
            assert "is asynchronous" in said and "async with " in said
            usage = "AsyncEnvironmentClient(target) as env" if what == "client" else "env.session"
            assert usage in said
            assert "(EnvironmentClient" in said
        finally:
            await env.close()

    asyncio.run(run())


def test_sync_objects_used_with_async_with_say_to_write_with():
    env = EnvironmentClient(NOWHERE)
    environment = type("Slot", (WorkplaceEnvironment,), {"client": env})()
    # usage -> (manager, whether an asyncio counterpart exists to point at)
    managers = {
        "EnvironmentClient(target) as env": (env, True),
        "with env.session(task) as s": (env.session(ROW), True),
        "AdminClient(target, token=...) as admin": (AdminClient(NOWHERE), False),
        "WorkplaceEnvironment(...) as environment": (environment, False),
    }
    try:
        for usage, (manager, has_async_form) in managers.items():
            with pytest.raises(TypeError) as refused:
                asyncio.run(_enter_async(manager))
            said = str(refused.value)
            assert "is synchronous" in said and usage in said and "not `async with`" in said
            assert ("(AsyncEnvironmentClient" in said) is has_async_form, said
            assert ("no asyncio" in said) is not has_async_form, said
    finally:
        env.close()
