#!/usr/bin/env bash
# Configures and builds lockstep (Release, warnings as errors) into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_WERROR=ON >/dev/null
cmake --build build -j"$(nproc)"
