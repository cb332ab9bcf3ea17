#!/usr/bin/env bash
# The fuzz tests with random examples instead of the suite's 40 derandomised ones; writes the
# count per target and every status seen.
set -euo pipefail
WORKPLACE_ENV_FUZZ_EXAMPLES=${WORKPLACE_ENV_FUZZ_EXAMPLES:-10000} WORKPLACE_ENV_FUZZ_REPORT=fuzz.json \
  .venv/bin/python -m pytest -q -p no:cacheprovider \
  tests/fuzz/test_fuzz_grpc.py tests/fuzz/test_fuzz_http.py tests/cli/test_fuzz_cli.py
