#!/usr/bin/env bash
# Builds and runs the whole test suite (unit, parity, invariance, mutation audit, fuzz smoke).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
./scripts/fetch-tokenizer-ref.sh   # npm ci (pinned) + node reference ids for the tokenizer tests
ctest --test-dir build --output-on-failure -j"$(nproc)"
./scripts/mutants.sh   # each exactness guarantee broken on purpose must fail a named test
./scripts/fuzz.sh "${FUZZ_SECONDS:-60}"   # GGUF reader under libFuzzer + ASan/UBSan, bounded
