#!/usr/bin/env bash
# Get the WorkBench sandbox and tasks, then play the tasks as the oracle on those tables.
# The source: NeMo Gym's wheel by default, or --from SRC / $WORKPLACE_ENV_DATA_FROM.
set -euo pipefail
DATA=$(.venv/bin/workplace-env data fetch)  # prints the data directory alone
.venv/bin/workplace-env run "$DATA/example.jsonl" --policy oracle --data-dir "$DATA"
