#!/usr/bin/env bash
# The project's reference data (recorded rollouts and tasks, for its developers): outputs and
# rewards of the rollouts compared, then the tasks played by the oracle.
set -euo pipefail
D="${WORKPLACE_ENV_SHARED:-../shared}/data/workbench"
.venv/bin/workplace-env run "$D/rollouts_public.jsonl" --data-dir "$D"
.venv/bin/workplace-env run "$D/tasks_public.jsonl" --policy oracle --data-dir "$D" \
  --json-out totals.json
