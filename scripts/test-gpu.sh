#!/usr/bin/env bash
# Builds lockstep with the CUDA backend and runs the GPU tests (CUDA op tests and the engine's
# exactness suite on the GPU), optionally under compute-sanitizer, then the rest of the suite.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'USAGE'
usage: scripts/test-gpu.sh [--no-build] [--sanitize] [--gpu-only] [BUILD_DIR]   (default BUILD_DIR: build-gpu)

  --no-build   use the binaries already in BUILD_DIR (built elsewhere with -DLOCKSTEP_CUDA=ON, for
               a GPU machine without the build dependencies); the CPU suite then runs from the
               test binary directly instead of through ctest
  --sanitize   also run the GPU tests under compute-sanitizer: memcheck (every GPU test), then
               racecheck and synccheck (the kernels that share memory between warps)
  --gpu-only   skip the CPU suite
Needs a CUDA device; the GPU tests print SKIPPED without one.
USAGE
}

build=build-gpu no_build=0 sanitize=0 gpu_only=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --help|-h) usage; exit 0 ;;
    --no-build) no_build=1 ;;
    --sanitize) sanitize=1 ;;
    --gpu-only) gpu_only=1 ;;
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
  sanitize() { compute-sanitizer --tool "$1" --error-exitcode 1 "$tests" --gtest_filter="$2" --gtest_brief=1; }
  sanitize memcheck "$gpu_filter"
  shared='CudaOps.Attention*:CudaOps.RmsNorm*:CudaOps.SelectTokens*:CudaOps.Moe*'
  sanitize racecheck "$shared"
  sanitize synccheck "$shared"
fi

if [[ $gpu_only -eq 1 ]]; then
  exit 0
elif [[ $no_build -eq 1 ]]; then
  "$tests" --gtest_filter="-$gpu_filter" --gtest_brief=1
else
  ctest --test-dir "$build" -j"$(nproc)" --output-on-failure
fi
