#!/usr/bin/env bash
# The main job on the embedded default: build the tiny model, start the bundled reference server
# (CPU frontend + real vLLM engine) and vLLM's own servers, run the conformance suite, write a report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/tokenspec embedded --report "${1:-out/embedded}"
