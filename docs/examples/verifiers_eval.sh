# verifiers 0.4.0's evaluation of a model on workplace-env (docs/http-gateway.md).
# verifiers in a venv of its own (Python 3.11 to 3.14), uv on PATH for its agent program
python3.13 -m venv vf && vf/bin/pip install verifiers==0.4.0
DATA=$(.venv/bin/workplace-env data fetch)  # the WorkBench tables and NeMo Gym's example.jsonl
.venv/bin/workplace-env serve --data-dir "$DATA" --http-address 127.0.0.1:8080 &
export POLICY_API_KEY=...                   # the key of the endpoint in verifiers_eval.toml
vf/bin/vf-eval @ docs/examples/verifiers_eval.toml --env.taskset.dataset "$DATA/example.jsonl" --no-rich
