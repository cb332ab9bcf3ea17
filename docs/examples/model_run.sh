#!/usr/bin/env bash
# A model served by vLLM (or SGLang, NIM, a hosted API) plays the WorkBench tasks; the key, if
# any, is read from $OPENAI_API_KEY. Then: a tiny local model on llama.cpp (built from the
# llama-cpp-python source package, ~5 min on 2 cores), 10 tasks, and NeMo Gym's
# re-verification of the rollouts when WORKPLACE_ENV_NEMO_VENV is set.
set -euo pipefail
DATA=$(.venv/bin/workplace-env data fetch)
BASE_URL=${BASE_URL:-http://127.0.0.1:8000/v1} MODEL=${MODEL:-Qwen/Qwen3-4B}
mkdir -p runs/model  # output options name files in a directory that exists
.venv/bin/workplace-env run "$DATA/example.jsonl" --data-dir "$DATA" \
  --policy model --base-url "$BASE_URL" --model "$MODEL" --api responses \
  --concurrency 16 --out runs/model/rollouts.jsonl
if [ -z "${SKIP_LOCAL_MODEL:-}" ]; then e2e/local_model.sh 10 runs/local; fi
