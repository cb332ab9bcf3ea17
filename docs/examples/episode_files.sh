#!/usr/bin/env bash
# Play WorkBench's recorded rollouts (outputs and rewards compared) and its tasks (the oracle).
set -euo pipefail
DATA=$(.venv/bin/workplace-env data fetch)
.venv/bin/workplace-env run "$DATA/rollouts_public.jsonl" --data-dir "$DATA"
.venv/bin/workplace-env run "$DATA/tasks_public.jsonl" --policy oracle --data-dir "$DATA" \
  --json-out totals.json
