#!/usr/bin/env bash
# Generate WorkBench-style tasks on the embedded sandbox and let the oracle play them.
set -euo pipefail
.venv/bin/workplace-env generate-tasks --count 500 --seed 1 --out tasks.jsonl
.venv/bin/workplace-env run tasks.jsonl --policy oracle --concurrency 8
