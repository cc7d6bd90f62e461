#!/usr/bin/env bash
# The main job: complete Python code with the embedded default pair, speculative and plain,
# and print both speeds (the outputs are byte-identical by construction; the run checks it).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=./build/src/lockstep
target=models/lockstep-code-target.gguf
draft=models/lockstep-code-assistant.gguf
prompt=${1:-'def fibonacci(n):'}
if [ ! -f "$target" ]; then
  echo "demo: $target is missing (see docs/default-model.md)" >&2
  exit 1
fi
args=(generate -m "$target" -p "$prompt" -n 128 --threads 2)
if [ -f "$draft" ]; then
  args+=(--draft "$draft" --draft-max 3 --compare)
fi
"$bin" "${args[@]}"
