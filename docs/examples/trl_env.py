"""TRL's environment_factory over a running server, driven as GRPO's loop drives it (no model)."""

import sys

from workplace_env_client import EnvironmentClient
from workplace_env_client.trl import trl_environment

target = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051"
delete = {"name": "email_delete_email", "arguments": '{"email_id": "00000057"}'}
row = {"id": "demo-1", "prompt": "Delete the email with id 00000057.", "ground_truth": [delete]}

with EnvironmentClient(target) as client:
    WorkplaceEnv = trl_environment(client)  # one ListTools: the 27 tools become its methods
    # Training: GRPOTrainer(model, train_dataset=rows, environment_factory=WorkplaceEnv)
    env = WorkplaceEnv()  # TRL makes one per rollout slot
    env.reset(**row)  # at each rollout's start: seeds a typed session for the row's task
    print(env.email_delete_email(email_id="00000057"))  # a model's tool call: the JSON output
    print(env.email_delete_email())  # a bad call answers the tool's error text
    print("reward", env.get_reward())  # verifies the calls made, closes the session
