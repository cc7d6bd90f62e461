#!/usr/bin/env bash
# Builds the GGUF libFuzzer target with clang (ASan+UBSan) in build-fuzz/ and runs it for a
# bounded time from a writer-generated seed corpus. Usage: scripts/fuzz.sh [SECONDS] (default 60).
# Exit status is non-zero when the fuzzer finds a crash; the input is saved under build-fuzz/fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-${FUZZ_SECONDS:-60}}"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DLOCKSTEP_FUZZ=ON -DLOCKSTEP_BENCH=OFF >/dev/null
cmake --build build-fuzz --target gguf_fuzz gguf_seedgen
corpus=build-fuzz/fuzz/corpus
mkdir -p "$corpus"
build-fuzz/fuzz/gguf_seedgen "$corpus"
# -max_len bounds inputs (metadata-heavy files need no more); the RSS limit turns a count the
# reader failed to cap into a reported failure instead of a swapping machine.
build-fuzz/fuzz/gguf_fuzz -max_total_time="$seconds" -max_len=8192 -rss_limit_mb=2048 \
  -timeout=10 -dict=fuzz/gguf.dict -artifact_prefix=build-fuzz/fuzz/ -print_final_stats=1 \
  "$corpus"
