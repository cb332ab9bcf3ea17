"""Re-verify a rollouts file with NeMo Gym's own re-verification, against our HTTP gateway.

Run with the NeMo Gym venv's Python (never imported by the project):

    $NEMO_VENV/bin/python e2e/nemo_reverify.py --gateway http://127.0.0.1:8080 \
        --rollouts runs/local/rollouts.jsonl [--force]

It names the gateway as the ``workplace_assistant`` resources server of a NeMo Gym config
(resolved by NeMo's own parser), runs NeMo's ``RolloutReverificationHelper`` on the rollouts and
their ``*_materialized_inputs.jsonl`` (what ``gym eval reverify`` runs, without starting servers:
ours is already serving), then compares each re-verified reward with the recorded one. Exit 0
when every unmasked rollout got its recorded reward back.
"""

import argparse
import asyncio
import json
import os
import socket
import sys
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gateway", required=True, help="base URL of our HTTP gateway")
    parser.add_argument("--rollouts", required=True, type=Path)
    parser.add_argument("--force", action="store_true", help="accept reverify_mode unsupported")
    args = parser.parse_args()

    from nemo_gym.global_config import GlobalConfigDictParser, GlobalConfigDictParserConfig
    from omegaconf import OmegaConf

    host, _, port = args.gateway.removeprefix("http://").rstrip("/").partition(":")
    rollouts = args.rollouts.resolve()
    inputs = rollouts.with_name(rollouts.stem + "_materialized_inputs.jsonl")
    output = rollouts.with_name(rollouts.stem + "_reverified.jsonl")
    config = {
        "head_server": {"host": "127.0.0.1", "port": _free_port()},
        "ray_enabled": False,
        "error_on_agent_without_environment_server": False,
        "workplace_assistant": {
            "resources_servers": {
                "workplace_assistant": {
                    "entrypoint": "app.py",
                    "host": host,
                    "port": int(port),
                    "domain": "agent",
                }
            }
        },
    }
    parsed = GlobalConfigDictParser().parse(
        GlobalConfigDictParserConfig(
            initial_global_config_dict=OmegaConf.create(config), skip_load_from_cli=True
        )
    )
    settings = {
        "materialized_inputs_jsonl_fpath": str(inputs),
        "rollouts_jsonl_fpath": str(rollouts),
        "output_jsonl_fpath": str(output),
        "overwrite": True,
        "force": args.force,
        "disable_aggregation": True,
    }
    os.environ["NEMO_GYM_CONFIG_DICT"] = OmegaConf.to_yaml(
        OmegaConf.merge(parsed, OmegaConf.create(settings))
    )

    from nemo_gym.global_config import get_global_config_dict
    from nemo_gym.rollout_reverification import (
        RolloutReverificationConfig,
        RolloutReverificationHelper,
    )

    reverify = RolloutReverificationConfig.model_validate(get_global_config_dict())
    asyncio.run(RolloutReverificationHelper().run_from_config(reverify))

    written = output if output.exists() else output.with_name("unsafe_" + output.name)
    recorded = {}
    for text in rollouts.open(encoding="utf-8"):
        line = json.loads(text)
        recorded[(line["_ng_task_index"], line["_ng_rollout_index"])] = line
    agree = disagree = 0
    for text in written.open(encoding="utf-8"):
        line = json.loads(text)
        ours = recorded[(line["_ng_task_index"], line["_ng_rollout_index"])]
        if ours.get("mask_sample"):
            continue
        if line.get("reward") == ours["reward"] and not line.get("mask_sample"):
            agree += 1
        else:
            disagree += 1
            print(
                f"reward differs: {ours.get('id')}: recorded {ours['reward']}, "
                f"NeMo Gym {line.get('reward')} ({line.get('failure_kind')})"
            )
    print(
        f"NeMo Gym re-verified {agree + disagree} unmasked rollouts: {agree} agree, "
        f"{disagree} differ ({written})"
    )
    return 0 if disagree == 0 and agree > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
