#!/usr/bin/env bash
# NeMo Gym's example tasks (from `data fetch`) played by the oracle on the WorkBench tables,
# the totals written as JSON into a fresh temporary directory.
set -euo pipefail
DATA=$(.venv/bin/workplace-env data fetch)  # prints the data directory alone
OUT=$(mktemp -d)
.venv/bin/workplace-env run "$DATA/example.jsonl" --policy oracle --data-dir "$DATA" \
  --json-out "$OUT/totals.json"
