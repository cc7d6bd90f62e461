#!/usr/bin/env bash
# The main job: complete Python code with the embedded default pair (a function body, a class, a
# test), each speculatively and plainly, and print both speeds; the outputs are byte-identical by
# construction and every run checks it (exit 1 if any differ).
# Usage: scripts/demo.sh [PROMPT ...]   (each PROMPT's \n and \t are processed like llama.cpp's)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=./build/src/lockstep
target=models/lockstep-code-target.gguf
draft=models/lockstep-code-assistant.gguf
if [ ! -f "$target" ]; then
  echo "demo: $target is missing (see docs/default-model.md)" >&2
  exit 1
fi
prompts=(
  'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'
  'class Stack:\n    """A last-in, first-out stack."""\n\n    def __init__(self):\n'
  'import unittest\n\n\nclass TestSplitLines(unittest.TestCase):\n    def test_empty(self):\n'
)
[ $# -gt 0 ] && prompts=("$@")
# A mild repetition penalty keeps this small model from looping; the speculative run applies it
# to the same logits as the plain one, so the outputs stay identical.
args=(-m "$target" -n 96 --threads 2 --repeat-penalty 1.15)
[ -f "$draft" ] && args+=(--draft "$draft" --draft-max 3 --compare)
status=0
for p in "${prompts[@]}"; do
  echo "----"
  "$bin" generate "${args[@]}" -p "$p" || status=$?
done
exit "$status"
