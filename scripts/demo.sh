#!/usr/bin/env bash
# The main job: greedy generation on the embedded default model.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "demo: not available yet (the model issues land next)"
