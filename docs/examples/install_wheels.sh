#!/usr/bin/env bash
# Nothing is on a package index: build both wheels in a clone, then, where they run, install
# the server (CLI and SDK with it), the server with the model extra, or the SDK alone.
set -euo pipefail
./build.sh  # generates the stubs into gen/, which the SDK wheel packages
.venv/bin/python -m pip wheel --no-deps -w dist ./client .  # both wheels, into dist/
pip install dist/workplace_env_client-0.1.0-py3-none-any.whl dist/workplace_env-0.1.0-py3-none-any.whl
pip install dist/workplace_env_client-0.1.0-py3-none-any.whl 'dist/workplace_env-0.1.0-py3-none-any.whl[model]'
pip install dist/workplace_env_client-0.1.0-py3-none-any.whl  # the SDK alone
