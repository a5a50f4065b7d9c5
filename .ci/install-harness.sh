#!/usr/bin/env bash
# Installs the real agent harness used by the end-to-end harness test
# (cmd/orchard/harness_e2e_test.go): Qwen Code from the npm registry, into a
# cache directory outside the repository. Idempotent: does nothing when the
# pinned version is already there. The test finds the binary at
# $ORCHARD_HARNESS_DIR/node_modules/.bin/qwen (or $ORCHARD_QWEN_BIN) and
# skips without it.
#
# Usage: .ci/install-harness.sh   (env: ORCHARD_HARNESS_DIR, default
# $HOME/.cache/orchard-harness)
set -euo pipefail

QWEN_VERSION=0.15.10
dir="${ORCHARD_HARNESS_DIR:-${HOME:-/root}/.cache/orchard-harness}"
pkg="$dir/node_modules/@qwen-code/qwen-code/package.json"

if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  echo "install-harness: node and npm are needed (Node 20)" >&2
  exit 1
fi

if [ -f "$pkg" ] && [ "$(node -p "require('$pkg').version")" = "$QWEN_VERSION" ] && [ -x "$dir/node_modules/.bin/qwen" ]; then
  echo "install-harness: qwen-code $QWEN_VERSION already in $dir"
  exit 0
fi

mkdir -p "$dir"
[ -f "$dir/package.json" ] || echo '{"name":"orchard-harness","private":true}' >"$dir/package.json"
echo "install-harness: installing @qwen-code/qwen-code@$QWEN_VERSION into $dir"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "@qwen-code/qwen-code@$QWEN_VERSION"
"$dir/node_modules/.bin/qwen" --version
