#!/usr/bin/env bash
# Fresh machine to first output: installs dependencies, builds, runs the main job (demo).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
./scripts/demo.sh
