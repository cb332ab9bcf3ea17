#!/usr/bin/env bash
# NeMo Gym's launcher starting workplace-env from this checkout's configs (docs/http-gateway.md).
# Run it from any directory (its rows and rollouts are written there); each setting is an
# environment variable with a default that works in a checkout:
#   WORKPLACE_ENV_ROOT  the checkout (default: the one holding this script in docs/examples/,
#                       else the git repository holding it; a copy kept elsewhere needs it set)
#   WORKBENCH           the CSVs and example.jsonl (default: where `workplace-env data fetch`
#                       puts them, ${XDG_CACHE_HOME:-~/.cache}/workplace-env/workbench)
#   HEAD_PORT           the launcher's head server (default 11000, NeMo Gym's)
#   POLICY_BASE_URL     an OpenAI-compatible endpoint (default http://127.0.0.1:8000/v1),
#   POLICY_API_KEY      its key (default EMPTY) and POLICY_MODEL_NAME, the model it serves
#   VENVS               NeMo Gym settings added to each command that starts servers (default
#                       none; the workaround below sets it)
# in NeMo Gym's venv, with uv on PATH: ./build.sh installs uv into this checkout's .venv/bin.
# nemo-gym 0.7.0 requires Python >= 3.13.14; PY313: python3.13 on PATH if it runs (a pyenv
# shim may not), else pyenv's newest 3.13, as build.sh picks it:
#   PY313=$(for p in python3.13 $(ls -r ~/.pyenv/versions/3.13.*/bin/python3.13 2>/dev/null); do "$p" -c '' 2>/dev/null && echo "$p" && break; done)
#   "$PY313" -m venv nemo && nemo/bin/pip install nemo-gym==0.7.0
# on an older 3.13 patch (e.g. 3.13.0) pip refuses it; install it anyway, and let NeMo's own
# servers and the MCP agent reuse this venv (ng_run would otherwise have uv build theirs,
# refused the same way):
#   nemo/bin/pip install --ignore-requires-python nemo-gym==0.7.0
#   for s in responses_api_agents/simple_agent responses_api_models/openai_model \
#     environment_servers/single_agent_turn environment_servers/legacy_agent \
#     responses_api_agents/workplace_env_mcp; do
#     mkdir -p venvs/$s && ln -sfn "$PWD/nemo" venvs/$s/.venv; done
#   export VENVS="++skip_venv_if_present=true ++uv_venv_dir=$PWD/venvs"  # read by this script
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
holds_configs() { [ -f "$1/resources_servers/workplace_env/configs/workplace_env.yaml" ]; }
ROOT=${WORKPLACE_ENV_ROOT:-$(dirname "$(dirname "$HERE")")}
if [ -z "${WORKPLACE_ENV_ROOT:-}" ] && ! holds_configs "$ROOT"; then
  ROOT=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || echo "$ROOT")
fi
holds_configs "$ROOT" || {
  echo "no workplace-env checkout at $ROOT: set WORKPLACE_ENV_ROOT to the checkout" >&2; exit 2; }
export NEMO_GYM_EXTRA_ROOTS="$ROOT"
# uv builds each server's venv with the exact Python running ng_run: put that interpreter's
# directory (the base Python of NeMo's venv) ahead of any shim, or uv downloads one
export PATH="$(python3 -c 'import sys; print(sys.base_prefix)')/bin:$PATH"
export PATH="$NEMO_GYM_EXTRA_ROOTS/.venv/bin:$PATH"       # its uv (after NeMo's venv is active)
# on a busy machine Ray's node may miss its 30 s startup wait ("The current node timed out
# during startup"): give it longer, and launch again if it still does
export RAY_raylet_start_wait_time_s=300
MODEL="+policy_base_url=${POLICY_BASE_URL:-http://127.0.0.1:8000/v1} +policy_api_key=${POLICY_API_KEY:-EMPTY}"
MODEL="$MODEL +policy_model_name=${POLICY_MODEL_NAME:?set POLICY_MODEL_NAME: the model the endpoint serves}"
WORKBENCH=${WORKBENCH:-${XDG_CACHE_HOME:-$HOME/.cache}/workplace-env/workbench}
DATA="++workplace_assistant.resources_servers.workplace_env.server.data_dir=$WORKBENCH"
HEAD_PORT=${HEAD_PORT:-11000}
HEAD="++head_server.port=$HEAD_PORT"
CONFIGS=$NEMO_GYM_EXTRA_ROOTS/resources_servers/workplace_env/configs
MODEL_CONFIG=responses_api_models/openai_model/configs/openai_model.yaml
# nemo-gym 0.7.0: ng_run prints "`ng_run` is deprecated ...; use `gym env start` instead" and
# runs `gym env start` with the same arguments: either works; `gym env start` is the one to keep
# the launcher takes SIGINT (its Ctrl-C) whatever this script inherited: started in the
# background (`nohup ... &`, CI) the script may get SIGINT ignored, which bash cannot undo for
# its children, so a one-line Python wrapper restores its default and execs ng_run
DEFAULT_SIGINT='import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])'
STOP_WAIT_S=${STOP_WAIT_S:-120}  # how long stop waits for the launcher's exit
start() {  # the launcher with the server's config, $1 and the model's; returns once it is ready
  python3 -c "$DEFAULT_SIGINT" ng_run "+config_paths=[$CONFIGS/workplace_env.yaml,$1,$MODEL_CONFIG]" \
    $MODEL "$DATA" "$HEAD" ${VENVS:-} &
  LAUNCHER=$!
  until curl -sf "http://127.0.0.1:$HEAD_PORT/readyz" >/dev/null; do  # its head server
    kill -0 $LAUNCHER || return 1; sleep 2
  done
}
stop() {  # Ctrl-C, then wait for its exit: the next launcher and reverify take the same ports
  kill -INT $LAUNCHER
  for _ in $(seq $STOP_WAIT_S); do
    kill -0 $LAUNCHER 2>/dev/null || { wait $LAUNCHER || true; return 0; }
    sleep 1
  done
  echo "stop: launcher pid $LAUNCHER still running ${STOP_WAIT_S} s after SIGINT; kill it" >&2
  return 1
}
# typed: collect routed by taskset; rows {task_id, task_input}, here made of the example tasks
TYPED_ROWS=typed_in.jsonl
python3 "$ROOT/docs/examples/typed_rows.py" "$WORKBENCH/example.jsonl" $TYPED_ROWS
start "$CONFIGS/typed.yaml"
ng_collect_rollouts "+environment_server_routes={workplace_assistant_typed: workplace_assistant_env}" \
  "$HEAD" +input_jsonl_fpath=$TYPED_ROWS +output_jsonl_fpath=typed.jsonl
stop
# typed over MCP: typed_mcp.yaml (its workplace_env_mcp agent plays the tools over the seed's
# MCP endpoint), collected through its environment server
start "$CONFIGS/typed_mcp.yaml"
ng_collect_rollouts "+environment_server_routes={workplace_assistant_typed: workplace_assistant_mcp_env}" \
  "$HEAD" +input_jsonl_fpath=$TYPED_ROWS +output_jsonl_fpath=typed_mcp.jsonl
stop
# legacy: legacy.yaml, collected from the agent (rows as NeMo's example.jsonl)
start "$CONFIGS/legacy.yaml"
ng_collect_rollouts +agent_name=workplace_assistant_simple_agent "$HEAD" \
  "+input_jsonl_fpath=$WORKBENCH/example.jsonl" +output_jsonl_fpath=legacy.jsonl
stop
# re-verify (starts the resources server from its config, then stops it; no launcher is up)
gym eval reverify --config "$CONFIGS/workplace_env.yaml" "$DATA" "$HEAD" ${VENVS:-} \
  --inputs typed_materialized_inputs.jsonl --rollouts typed.jsonl --output reverified.jsonl
