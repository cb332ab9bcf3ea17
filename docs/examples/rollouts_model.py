"""The model loop of ``run --policy model``, embedded: one rollout, then a batch, async."""

import asyncio
import sys

from openai import AsyncOpenAI, OpenAI

from workplace_env_client import (
    AsyncEnvironmentClient,
    EnvironmentClient,
    ModelPolicy,
    arun_rollouts,
    run_rollout,
)

target = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051"
base_url = sys.argv[2] if len(sys.argv) > 2 else "http://127.0.0.1:8000/v1"
task_row = {
    "id": "t1",
    "prompt": "Delete the email with id 00000057.",
    "ground_truth": [{"name": "email_delete_email", "arguments": '{"email_id": "00000057"}'}],
}
policy = ModelPolicy(model="Qwen/Qwen3-4B", api="chat", max_turns=10)

with EnvironmentClient(target) as env:
    llm = OpenAI(base_url=base_url, api_key="EMPTY", max_retries=4)
    rollout = run_rollout(env, llm, task_row, policy)
    print(rollout.reward, rollout.turns, rollout.to_json()["response"]["output"])


async def collect(rows):
    async with AsyncEnvironmentClient(target) as env:
        llm = AsyncOpenAI(base_url=base_url, api_key="EMPTY")
        return await arun_rollouts(env, llm, rows, policy, concurrency=16)


print([r.reward for r in asyncio.run(collect([task_row, {**task_row, "id": "t2"}]))])
