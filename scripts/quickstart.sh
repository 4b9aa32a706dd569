#!/usr/bin/env bash
# Set up, then run the quickstart agent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
.venv/bin/python examples/quickstart.py "$@"
