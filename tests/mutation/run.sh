#!/usr/bin/env bash
# Mutation testing of the core: mutmut over the modules listed in pyproject.toml's
# [tool.mutmut] only_mutate, each mutant checked by the tests that reach its function (mutmut
# records which tests call which function), then the score per module.
#
#   tests/mutation/run.sh [MUTANT_GLOB ...]    e.g. 'workplace_env.parity.*'
#
# Niced, at most $MUTMUT_CHILDREN (default 2) test processes at once. Results stay in
# .mutation/mutants/, so a rerun only tests the mutants not decided yet and those of functions
# that changed; rm -rf .mutation/ to start afresh. `cd .mutation && ../.venv/bin/mutmut show
# NAME` prints a mutant's change; `../.venv/bin/python ../tests/mutation/score.py --survivors`
# lists the survivors. Needs ./build.sh first and the reference data (../shared, or
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

# mutmut names a module after its file's path (service/workplace_env/x.py would be module
# "service.workplace_env.x", not the module's name at run time), so it runs in .mutation/ (git-
# ignored), where workplace_env/, tests/, docs/, pyproject.toml and README.md are links to the
# repository's; its results stay in .mutation/mutants/. The repository itself is left as it is.
mkdir -p .mutation
for name in workplace_env:service/workplace_env tests:tests docs:docs pyproject.toml:pyproject.toml README.md:README.md; do
  ln -sfn "../${name#*:}" ".mutation/${name%%:*}"
done
cd .mutation
nice -n 10 ../.venv/bin/mutmut run --max-children "${MUTMUT_CHILDREN:-2}" "$@"
../.venv/bin/python ../tests/mutation/score.py
