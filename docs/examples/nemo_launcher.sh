# NeMo Gym's launcher starting workplace-env from this checkout's configs (docs/http-gateway.md).
# in NeMo Gym's venv (pip install nemo-gym==0.7.0), with uv on PATH
export NEMO_GYM_EXTRA_ROOTS=/path/to/workplace-env        # this checkout (or --search-dir)
MODEL="+policy_base_url=http://127.0.0.1:8000/v1 +policy_api_key=KEY +policy_model_name=NAME"
DATA="++workplace_assistant.resources_servers.workplace_env.server.data_dir=/path/to/workbench"
# typed: start everything, then collect routed by taskset (rows: {task_id, task_input})
ng_run "+config_paths=[resources_servers/workplace_env/configs/workplace_env.yaml,resources_servers/workplace_env/configs/typed.yaml,responses_api_models/openai_model/configs/openai_model.yaml]" $MODEL $DATA &
ng_collect_rollouts "+environment_server_routes={workplace_assistant_typed: workplace_assistant_env}" \
  +input_jsonl_fpath=typed_in.jsonl +output_jsonl_fpath=typed.jsonl
# legacy: the same with legacy.yaml, then collect from the agent (rows as NeMo's example.jsonl)
ng_collect_rollouts +agent_name=workplace_assistant_simple_agent \
  +input_jsonl_fpath=rows.jsonl +output_jsonl_fpath=legacy.jsonl
# re-verify (starts the resources server from its config, then stops it)
gym eval reverify --config resources_servers/workplace_env/configs/workplace_env.yaml $DATA \
  --inputs typed_materialized_inputs.jsonl --rollouts typed.jsonl --output reverified.jsonl
