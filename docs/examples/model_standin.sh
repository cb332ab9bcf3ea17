#!/usr/bin/env bash
# A stand-in for a model, to try the launcher without one: tests/model_standin.py of this
# checkout (run from it) serves the Responses API and Chat Completions on 127.0.0.1:$PORT and
# answers each task of example.jsonl with its ground-truth calls, one a turn, then a text
# answer, however often the task is played; a prompt of no task gets 400. It serves until
# Ctrl-C; meanwhile, in another shell:
#   POLICY_BASE_URL=http://127.0.0.1:8000/v1 POLICY_MODEL_NAME=stand-in docs/examples/nemo_launcher.sh
set -euo pipefail
WORKBENCH=${WORKBENCH:-$(.venv/bin/workplace-env data fetch)}  # the CSVs and example.jsonl
.venv/bin/python -m tests.model_standin --tasks "$WORKBENCH/example.jsonl" --port "${PORT:-8000}"
