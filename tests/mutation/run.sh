#!/usr/bin/env bash
# Mutation testing of the core (issue 17): mutmut over the modules listed in pyproject.toml's
# [tool.mutmut] only_mutate, each mutant checked by the tests that reach its function (mutmut
# records which tests call which function), then the score per module.
#
#   tests/mutation/run.sh [MUTANT_GLOB ...]    e.g. 'workplace_env.parity.*'
#
# Niced, at most $MUTMUT_CHILDREN (default 2) test processes at once. Results stay in mutants/
# (git-ignored), so a rerun only tests mutants of functions that changed; rm -rf mutants/ to
# start afresh. Needs ./build.sh first and the reference data (../shared, or
# WORKPLACE_ENV_SHARED).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD

SHARED="${WORKPLACE_ENV_SHARED:-$REPO/../shared}"
if [ ! -f "$SHARED/data/workbench/emails.csv" ]; then
  echo "tests/mutation/run.sh: reference data not found at $SHARED (set WORKPLACE_ENV_SHARED)" >&2
  exit 2
fi
# The tests run inside mutants/, so ../shared is not where they look: give an absolute path.
export WORKPLACE_ENV_SHARED="$(cd "$SHARED" && pwd)"

# mutmut names a mutant after its file's path (service/workplace_env/x.py would be module
# "service.workplace_env.x", which is not the module's name at run time), so it runs over
# workplace_env/ at the top: a symlink made for the run and removed after it (git-ignored).
if [ ! -e workplace_env ]; then
  ln -s service/workplace_env workplace_env
  trap 'rm -f "$REPO/workplace_env"' EXIT
fi

nice -n 10 .venv/bin/mutmut run --max-children "${MUTMUT_CHILDREN:-2}" "$@"
.venv/bin/python tests/mutation/score.py
