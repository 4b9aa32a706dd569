#!/usr/bin/env bash
# Create .venv (if missing) and install agentkit with its development tools.
# Usage: bash scripts/setup.sh [EXTRAS]   (default extras: dev)
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-dev}"
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[${extras}]"
