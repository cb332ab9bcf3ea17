#!/usr/bin/env bash
# One episode with grpcurl (reflection names every service and message).
set -euo pipefail
GRPC=${GRPC:-127.0.0.1:50051} GRPCURL=${GRPCURL:-.venv/bin/grpcurl}
$GRPCURL -plaintext "$GRPC" list
$GRPCURL -plaintext "$GRPC" describe workplace.env.v1.EnvironmentService
$GRPCURL -plaintext -d '{"resources_session_id": "s1", "episode_id": {"rollout_id": "r1"},
  "task_id": {"taskset": "demo", "task_id": "t1"}, "task": {"id": "t1"}}' \
  "$GRPC" workplace.env.v1.EnvironmentService/SeedSession
$GRPCURL -plaintext -d '{"resources_session_id": "s1", "tool_name": "company_directory_find_email_address",
  "arguments": "{\"name\": \"a\"}"}' "$GRPC" workplace.env.v1.EnvironmentService/CallTool
$GRPCURL -plaintext -d '{"resources_session_id": "s1", "function_calls": {}}' \
  "$GRPC" workplace.env.v1.EnvironmentService/Verify
$GRPCURL -plaintext -d '{"resources_session_id": "s1", "episode_id": {"rollout_id": "r1"}}' \
  "$GRPC" workplace.env.v1.EnvironmentService/CloseSession
