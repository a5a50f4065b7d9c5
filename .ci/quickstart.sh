#!/usr/bin/env bash
# Runs the README's quick start as written, in a scratch directory, with the
# benchmark's scripted vLLM-style server on 127.0.0.1:8000 standing in for
# the inference server and Qwen Code from .ci/install-harness.sh as the
# harness. Needs bin/ built (make build). Exits 0 with a warning when Qwen
# Code is not installed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
qwen_dir="${ORCHARD_HARNESS_DIR:-${HOME:-/root}/.cache/orchard-harness}/node_modules/.bin"
if [ ! -x "$qwen_dir/qwen" ]; then
  echo "quickstart: WARNING: Qwen Code not installed; the quick start was not run" >&2
  exit 0
fi
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ln -s "$repo/bin" "$work/bin"
cd "$work"
export HOME="$work/home" PATH="$qwen_dir:$PATH"
mkdir -p "$HOME"
"$repo/bin/orchard-bench" upstream --listen 127.0.0.1:8000 >upstream.log 2>&1 &
pids+=($!)
# The quick start block of the README, line by line, backgrounded commands kept.
script=$(awk '/^## Quick start/{q=1} q&&/^```sh/{c=1;next} c&&/^```/{exit} c' "$repo/README.md")
printf '%s\n' "$script" >quickstart-block.sh
wait_port() { for _ in $(seq 100); do curl -fs -o /dev/null "$1" && return 0; sleep 0.1; done; echo "quickstart: $1 did not answer" >&2; return 1; }
wait_port http://127.0.0.1:8000/healthz
# Run the block with the proxy's readiness awaited after its first line.
first=$(printf '%s\n' "$script" | head -1)
rest=$(printf '%s\n' "$script" | tail -n +2)
eval "$first"
pids+=($!)
wait_port http://127.0.0.1:8080/healthz
bash -euo pipefail -c "$rest"
grep -q '"episode_id":"ep-1"' samples.jsonl || { echo "quickstart: samples.jsonl has no ep-1 sample" >&2; exit 1; }
test -s ep-1.jsonl
echo "quickstart: the README quick start ran: $(wc -l <samples.jsonl) sample(s), $(wc -l <ep-1.jsonl) record line(s)"
