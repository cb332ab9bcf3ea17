#!/usr/bin/env bash
# A whole episode with curl against the gateway, the cookie jar playing NeMo Gym's agent.
# Each "# " line is the answer to the command above it ("..." stands for text that varies).
set -euo pipefail
G=${G:-http://127.0.0.1:8080} J=$(mktemp) H='content-type: application/json'
TRUTH='[{"name": "email_delete_email", "arguments": "{\"email_id\": \"00000057\"}"}]'
curl -s -c $J -b $J -H "$H" -d "{\"id\": \"demo-1\", \"ground_truth\": $TRUTH}" $G/seed_session
# {"mcp":{"server_name":"workplace_assistant","url_path":"/mcp","transport":"http","headers":{"X-NeMo-Gym-Session-Token":"..."}}}
curl -s -c $J -b $J -H "$H" -d '{"email_id": "00000057", "field": "subject"}' \
  $G/email_get_email_information_by_id
# {"output":{"subject":"Update on Data Governance Briefing"}}
curl -s -c $J -b $J -H "$H" -d '{"email_id": "00000057"}' $G/email_delete_email
# {"output":"Email deleted successfully."}
curl -s -c $J -b $J -H "$H" -d "{\"ground_truth\": $TRUTH, \"responses_create_params\": {},
  \"response\": {\"output\": [{\"type\": \"function_call\", \"call_id\": \"c1\",
  \"name\": \"email_delete_email\", \"arguments\": \"{\\\"email_id\\\": \\\"00000057\\\"}\"}]}}" $G/verify
# {"responses_create_params":{},"response":{...},"reward":1.0,"mask_sample":false,"failure_kind":null,"failure_reason":null}
