# verifiers 0.4.0's evaluation of a model on workplace-env (docs/http-gateway.md).
# verifiers in a venv of its own (Python 3.11 to 3.14), uv on PATH for its agent program
# Python 3.13: python3.13 on PATH if it runs (a pyenv shim may not), else pyenv's newest 3.13
PY313=$(for p in python3.13 $(ls -r ~/.pyenv/versions/3.13.*/bin/python3.13 2>/dev/null); do "$p" -c '' 2>/dev/null && echo "$p" && break; done)
"$PY313" -m venv vf && vf/bin/pip install verifiers==0.4.0
DATA=$(.venv/bin/workplace-env data fetch)  # the WorkBench tables and NeMo Gym's example.jsonl
.venv/bin/workplace-env serve --data-dir "$DATA" --http-address 127.0.0.1:8080 &
export POLICY_API_KEY=...                   # the key of the endpoint in verifiers_eval.toml
vf/bin/vf-eval @ docs/examples/verifiers_eval.toml --env.taskset.dataset "$DATA/example.jsonl" --no-rich
