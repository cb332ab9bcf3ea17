# NeMo Gym's launcher starting workplace-env from this checkout's configs (docs/http-gateway.md).
# in NeMo Gym's venv, with uv on PATH: ./build.sh installs uv into this checkout's .venv/bin.
# nemo-gym 0.7.0 requires Python >= 3.13.14:
#   python3.13 -m venv nemo && nemo/bin/pip install nemo-gym==0.7.0
# on an older 3.13 patch (e.g. 3.13.0) pip refuses it; install it anyway, and let NeMo's own
# servers and the MCP agent reuse this venv (ng_run would otherwise have uv build theirs,
# refused the same way):
#   nemo/bin/pip install --ignore-requires-python nemo-gym==0.7.0
#   for s in responses_api_agents/simple_agent responses_api_models/openai_model \
#     environment_servers/single_agent_turn environment_servers/legacy_agent \
#     responses_api_agents/workplace_env_mcp; do
#     mkdir -p venvs/$s && ln -sfn "$PWD/nemo" venvs/$s/.venv; done
#   VENVS="++skip_venv_if_present=true ++uv_venv_dir=$PWD/venvs"   # add $VENVS to each command
export NEMO_GYM_EXTRA_ROOTS=/path/to/workplace-env        # this checkout (or --search-dir)
# uv builds each server's venv with the exact Python running ng_run: put that interpreter's
# directory (the base Python of NeMo's venv) ahead of any shim, or uv downloads one
export PATH="$(python3 -c 'import sys; print(sys.base_prefix)')/bin:$PATH"
export PATH="$NEMO_GYM_EXTRA_ROOTS/.venv/bin:$PATH"       # its uv (after NeMo's venv is active)
# on a busy machine Ray's node may miss its 30 s startup wait ("The current node timed out
# during startup"): give it longer, and launch again if it still does
export RAY_raylet_start_wait_time_s=300
MODEL="+policy_base_url=http://127.0.0.1:8000/v1 +policy_api_key=KEY +policy_model_name=NAME"
DATA="++workplace_assistant.resources_servers.workplace_env.server.data_dir=/path/to/workbench"
# typed: start everything, then collect routed by taskset (rows: {task_id, task_input}).
# nemo-gym 0.7.0: ng_run prints "`ng_run` is deprecated ...; use `gym env start` instead" and
# runs `gym env start` with the same arguments: either works; `gym env start` is the one to keep
ng_run "+config_paths=[resources_servers/workplace_env/configs/workplace_env.yaml,resources_servers/workplace_env/configs/typed.yaml,responses_api_models/openai_model/configs/openai_model.yaml]" $MODEL $DATA &
ng_collect_rollouts "+environment_server_routes={workplace_assistant_typed: workplace_assistant_env}" \
  +input_jsonl_fpath=typed_in.jsonl +output_jsonl_fpath=typed.jsonl
# typed over MCP: the same with typed_mcp.yaml (its workplace_env_mcp agent plays the tools
# over the seed's MCP endpoint), collected through its environment server
ng_collect_rollouts "+environment_server_routes={workplace_assistant_typed: workplace_assistant_mcp_env}" \
  +input_jsonl_fpath=typed_in.jsonl +output_jsonl_fpath=typed_mcp.jsonl
# legacy: the same with legacy.yaml, then collect from the agent (rows as NeMo's example.jsonl)
ng_collect_rollouts +agent_name=workplace_assistant_simple_agent \
  +input_jsonl_fpath=rows.jsonl +output_jsonl_fpath=legacy.jsonl
# re-verify (starts the resources server from its config, then stops it)
gym eval reverify --config resources_servers/workplace_env/configs/workplace_env.yaml $DATA \
  --inputs typed_materialized_inputs.jsonl --rollouts typed.jsonl --output reverified.jsonl
