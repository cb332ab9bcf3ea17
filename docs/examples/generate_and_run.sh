#!/usr/bin/env bash
# Generate WorkBench-style tasks on the embedded sandbox and let the oracle play them (the
# tasks file goes into a fresh temporary directory).
set -euo pipefail
OUT=$(mktemp -d)
.venv/bin/workplace-env generate-tasks --count 500 --seed 1 --out "$OUT/tasks.jsonl"
.venv/bin/workplace-env run "$OUT/tasks.jsonl" --policy oracle --concurrency 8
