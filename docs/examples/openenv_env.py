"""OpenEnv's ResourceSessionFactory over a running server, driven by OpenEnv's own harness."""

import sys

from openenv.core.harness import MCPHarnessAdapter, ModelStepResult, build_harness_rollout_func
from openenv.core.llm_client import LLMResponse, ToolCall

from workplace_env_client import EnvironmentClient
from workplace_env_client.openenv import WorkplaceSessionFactory

target = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051"
delete = {"name": "email_delete_email", "arguments": '{"email_id": "00000057"}'}
row = {"id": "demo-1", "prompt": "Delete the email with id 00000057.", "ground_truth": [delete]}


def scripted_model(messages, tools, sampling):
    """Stands in for build_model_step(llm_client): one tool call, then an answer."""
    if messages[-1]["role"] == "tool":
        return ModelStepResult(LLMResponse("Done."))
    call = ToolCall("call-1", "email_delete_email", {"email_id": "00000057"})
    return ModelStepResult(LLMResponse("", [call]))


with EnvironmentClient(target) as client:
    factory = WorkplaceSessionFactory(client)  # one ListTools: the 27 tools as OpenEnv specs
    session = factory.create(task=row)  # seeds a typed session for the row's task
    print(len(session.list_tools()))
    print(session.call_tool("email_delete_email", {}).data)  # a bad call: the error text
    session.close()  # closes ours (so does dropping it)

    # Training: TRL's rollout_func, one session per prompt (a dataset row), closed after verify
    rollout_func = build_harness_rollout_func(
        session_factory=factory,
        harness_adapter=MCPHarnessAdapter(),
        model_step_builder=lambda trainer, session: scripted_model,
    )
    print("reward", rollout_func([row], None)["env_reward"][0])
