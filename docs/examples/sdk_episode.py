"""One episode through the SDK against a running server: seed, two tool calls, verify, close."""

import sys

from workplace_env_client import EnvironmentClient

target = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051"
delete = ("email_delete_email", '{"email_id": "00000057"}')
task = {"id": "demo-1", "ground_truth": [{"name": delete[0], "arguments": delete[1]}]}

with EnvironmentClient(target) as env, env.session(task, episode=("rollout-7", 0)) as s:
    # the session is seeded; leaving the block closes it, whatever happens inside
    found = s.call_tool("email_search_emails", {"query": "Data Governance"})  # decoded JSON
    print(len(found), "emails found")
    s.call_tool(delete[0], {"email_id": "00000057"})
    result = s.verify([delete])  # the model's calls, scored against the task's ground truth
    print("reward", result.reward)
