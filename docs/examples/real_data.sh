#!/usr/bin/env bash
# Get the WorkBench sandbox and tasks, then play the tasks as the oracle on those tables.
# The source is --from SRC or $WORKPLACE_ENV_DATA_FROM (a directory holding the WorkBench CSVs).
set -euo pipefail
DATA=$(.venv/bin/workplace-env data fetch)  # prints the data directory alone
.venv/bin/workplace-env run "$DATA/tasks_public.jsonl" --policy oracle --data-dir "$DATA"
