#!/usr/bin/env bash
# Install NVIDIA Dynamo (the frontend, the KV-aware router, the mocker and the Python backend
# API) into its own virtual environment, .dynamo/venv, for the Dynamo end-to-end test
# (tests/e2e/test_dynamo.py). Dynamo runs here on the CPU with no etcd and no NATS.
#
# `pip install ai-dynamo==1.6.1` does not work on its own: it requires `aisimulate`, a
# placeholder package that downloads from a vendor index this machine cannot reach (the
# frontend, the router and the mocker do not use it). So both wheels are installed with
# --no-deps and their other requirements after them.
#
# Idempotent: a venv that already imports Dynamo at the pinned version is kept (a second run
# takes about a second). Delete .dynamo/ to install from scratch (~1 min with a warm pip cache).
set -euo pipefail
cd "$(dirname "$0")/.."

DYNAMO_VERSION=1.6.1
root=.dynamo
venv=$root/venv
python=${PYTHON:-python3}

if [ -x "$venv/bin/python" ] && [ "$(cat "$root/installed" 2>/dev/null)" = "$DYNAMO_VERSION" ] \
    && "$venv/bin/python" -c "import dynamo.frontend, dynamo.mocker, dynamo.llm" 2>/dev/null; then
    echo "== dynamo: ai-dynamo $DYNAMO_VERSION already in $venv"
    exit 0
fi

echo "== dynamo: installing ai-dynamo $DYNAMO_VERSION into $venv"
started=$(date +%s)
rm -rf "$venv" "$root/installed" "$root/wheels"
mkdir -p "$root/wheels"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip download -q --no-deps -d "$root/wheels" \
    "ai-dynamo==$DYNAMO_VERSION" "ai-dynamo-runtime==$DYNAMO_VERSION"
"$venv/bin/python" -m pip install -q --no-deps "$root"/wheels/*.whl
# ai-dynamo's and ai-dynamo-runtime's requirements, less aisimulate.
"$venv/bin/python" -m pip install -q --no-warn-conflicts \
    "pydantic>=2.10.6,<=2.13.5" "uvloop>=0.21.0" "aiohttp>=3.14.3,<4.0" "certifi>=2026.10.19" \
    "kubernetes>=32.0.1,<33.0.0" "msgspec>=0.19.0" "prometheus-client>=0.23.1,<1.0" \
    "pyzmq>=26.0.0" "redis>=6.2.0,<9.0.0" "tqdm>=4.0.0" "transformers>=4.56.0" \
    "typing-extensions>=4.10.0" "zstandard>=0.23.0,<1.0"
"$venv/bin/python" -c "import dynamo.frontend, dynamo.mocker, dynamo.llm"
rm -rf "$root/wheels"
echo "$DYNAMO_VERSION" >"$root/installed"
echo "== dynamo: installed in $(($(date +%s) - started)) s"
