#!/usr/bin/env bash
# Builds lockstep with the CUDA backend and runs the GPU tests (CUDA op tests and the engine's
# exactness suite on the GPU), optionally under compute-sanitizer, then the rest of the suite.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'USAGE'
usage: scripts/test-gpu.sh [--no-build] [--sanitize] [--shards N] [--gpu-only] [BUILD_DIR]
                          (default BUILD_DIR: build-gpu)

  --no-build   use the binaries already in BUILD_DIR (built elsewhere with -DLOCKSTEP_CUDA=ON, for
               a GPU machine without the build dependencies); the CPU suite then runs from the
               test binary directly instead of through ctest
  --sanitize   also run the GPU tests under compute-sanitizer: memcheck (every GPU test), then
               racecheck and synccheck (the kernels that share memory between warps)
  --shards N   run each sanitizer tool as N test shards side by side (default 6: memcheck over
               every GPU test takes over 10 minutes in one process); logs in a temp directory
  --gpu-only   skip the CPU suite
Needs a CUDA device; the GPU tests print SKIPPED without one.
USAGE
}

build=build-gpu no_build=0 sanitize=0 gpu_only=0 shards=6
while [[ $# -gt 0 ]]; do
  case "$1" in
    --help|-h) usage; exit 0 ;;
    --no-build) no_build=1 ;;
    --sanitize) sanitize=1 ;;
    --gpu-only) gpu_only=1 ;;
    --shards) shards="$2"; shift ;;
    -*) usage >&2; exit 2 ;;
    *) build="$1" ;;
  esac
  shift
done
tests="$build/tests/lockstep_tests"
gpu_filter='CudaOps.*:*Cuda*:EngineAssistant.*'

if [[ $no_build -eq 0 ]]; then
  command -v nvcc >/dev/null || { echo "test-gpu: nvcc not found (install the CUDA toolkit)" >&2; exit 2; }
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_WERROR=ON -DLOCKSTEP_CUDA=ON
  cmake --build "$build" -j"$(nproc)"
fi
[[ -x "$tests" ]] || { echo "test-gpu: $tests is missing (build first, or drop --no-build)" >&2; exit 2; }

# The GPU cases first and verbosely: a missing device must show as SKIPPED, not pass silently.
"$tests" --gtest_filter="$gpu_filter" --gtest_brief=0

if [[ $sanitize -eq 1 ]]; then
  command -v compute-sanitizer >/dev/null || { echo "test-gpu: compute-sanitizer not found" >&2; exit 2; }
  [[ "$shards" =~ ^[1-9][0-9]*$ ]] || { echo "test-gpu: --shards takes a positive count" >&2; exit 2; }
  logs=$(mktemp -d)
  # TOOL FILTER: the tool over the filter's tests in $shards shards at once; a shard's log is
  # printed when it fails (a reported error or a failed test), and any failure fails the script.
  sanitize() {
    local pids=() i failed=0
    for ((i = 0; i < shards; ++i)); do
      GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i compute-sanitizer --tool "$1" \
        --error-exitcode 1 "$tests" --gtest_filter="$2" --gtest_brief=1 > "$logs/$1-$i.log" 2>&1 &
      pids+=($!)
    done
    for ((i = 0; i < shards; ++i)); do
      if ! wait "${pids[$i]}"; then
        failed=1
        cat "$logs/$1-$i.log"
      fi
      echo "test-gpu: $1 shard $i: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/$1-$i.log" | tail -1)"
    done
    return "$failed"
  }
  status=0
  sanitize memcheck "$gpu_filter" || status=1
  shared='CudaOps.Attention*:CudaOps.RmsNorm*:CudaOps.SelectTokens*:CudaOps.Moe*:CudaIntMatMul.*'
  sanitize racecheck "$shared" || status=1
  sanitize synccheck "$shared" || status=1
  rm -rf "$logs"
  [[ $status -eq 0 ]] || { echo "test-gpu: compute-sanitizer reported errors" >&2; exit 1; }
fi

if [[ $gpu_only -eq 1 ]]; then
  exit 0
elif [[ $no_build -eq 1 ]]; then
  "$tests" --gtest_filter="-$gpu_filter" --gtest_brief=1
else
  ctest --test-dir "$build" -j"$(nproc)" --output-on-failure
fi
