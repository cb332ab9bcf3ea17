#!/usr/bin/env bash
# Move live sessions across a restart: save them from one server, restore them into the next.
set -euo pipefail
GRPC=${GRPC:-127.0.0.1:50051} GRPCURL=${GRPCURL:-.venv/bin/grpcurl}
CKPT=$(mktemp -d)  # the checkpoint's directory
export WORKPLACE_ENV_ADMIN_TOKEN=${WORKPLACE_ENV_ADMIN_TOKEN:-$(openssl rand -hex 32)}
serve() {  # a server whose admin token comes from the variable; returns once it is SERVING
  .venv/bin/workplace-env serve --address "$GRPC" &
  SERVER=$!
  until $GRPCURL -plaintext "$GRPC" grpc.health.v1.Health/Check >/dev/null 2>&1; do sleep 0.2; done
}
serve
$GRPCURL -plaintext -d '{"resources_session_id": "s1", "episode_id": {"rollout_id": "r1"},
  "task_id": {"taskset": "demo", "task_id": "t1"}, "task": {"id": "t1"}}' \
  "$GRPC" workplace.env.v1.EnvironmentService/SeedSession
.venv/bin/workplace-env checkpoint save "$CKPT" --target "$GRPC"
kill -TERM "$SERVER" && wait "$SERVER"
serve
.venv/bin/workplace-env checkpoint restore "$CKPT" --target "$GRPC"
$GRPCURL -plaintext -d '{"resources_session_id": "s1", "tool_name": "email_search_emails",
  "arguments": "{\"query\": \"budget\"}"}' "$GRPC" workplace.env.v1.EnvironmentService/CallTool
kill -TERM "$SERVER" && wait "$SERVER"
