#!/usr/bin/env bash
# The fuzz tests with random examples instead of the suite's 40 derandomised ones; writes the
# count per target and every status seen to $WORKPLACE_ENV_FUZZ_REPORT (default: fuzz.json in a
# fresh temporary directory, named at the end).
set -euo pipefail
export WORKPLACE_ENV_FUZZ_REPORT=${WORKPLACE_ENV_FUZZ_REPORT:-$(mktemp -d)/fuzz.json}
WORKPLACE_ENV_FUZZ_EXAMPLES=${WORKPLACE_ENV_FUZZ_EXAMPLES:-10000} \
  .venv/bin/python -m pytest -q -p no:cacheprovider \
  tests/fuzz/test_fuzz_grpc.py tests/fuzz/test_fuzz_http.py tests/cli/test_fuzz_cli.py
echo "report: $WORKPLACE_ENV_FUZZ_REPORT"
