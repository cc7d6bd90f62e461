#!/usr/bin/env bash
# Fresh machine to first output: installs dependencies, builds, installs `lockstep` and the
# default models into a prefix the user owns (PREFIX, default ~/.local: bin/ and share/lockstep/),
# then runs the main job (demo).
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="${PREFIX:-$HOME/.local}"
./scripts/install-deps.sh
./scripts/build.sh
cmake --install build --prefix "$prefix" >/dev/null
echo "installed $prefix/bin/lockstep (models in $prefix/share/lockstep/models)"
case ":$PATH:" in
  *":$prefix/bin:"*) ;;
  *) echo "note: $prefix/bin is not on PATH; add: export PATH=\"$prefix/bin:\$PATH\"" ;;
esac
./scripts/demo.sh
