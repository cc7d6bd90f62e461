#!/usr/bin/env bash
# Builds lockstep with the CUDA backend and runs the GPU tests (CUDA op tests and the engine's
# exactness suite on the GPU), then the rest of the suite. Needs nvcc and a CUDA device.
#   scripts/test-gpu.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-gpu}"
command -v nvcc >/dev/null || { echo "test-gpu: nvcc not found (install the CUDA toolkit)" >&2; exit 2; }
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_WERROR=ON -DLOCKSTEP_CUDA=ON
cmake --build "$build" -j"$(nproc)"
# The GPU cases first and verbosely: a missing device must show as SKIPPED, not pass silently.
"$build/tests/lockstep_tests" --gtest_filter='CudaOps.*:*Cuda*:EngineAssistant.*' --gtest_brief=0
ctest --test-dir "$build" -j"$(nproc)" --output-on-failure
