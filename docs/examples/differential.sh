#!/usr/bin/env bash
# More differential sequences than the suite runs: each sent to NeMo Gym's own server (black box,
# over its HTTP routes) and to ours, every output compared.
set -euo pipefail
.venv/bin/python -m tests.differential --sequences "${SEQUENCES:-3000}" --seed 1
