#!/usr/bin/env bash
# Packs a CUDA build's binaries and their non-system libraries into one archive, for a GPU machine
# that lacks the build dependencies (unpack there, then scripts/test-gpu.sh --no-build BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'USAGE'
usage: scripts/pack-gpu.sh [BUILD_DIR] [OUT]   (defaults: build, .gpu/gpu.tar.xz)

Packs BUILD_DIR/src/lockstep, the GPU benchmarks and the test binary, stripped, with the shared
libraries they need that a bare Debian machine lacks (under lib/; run with LD_LIBRARY_PATH=lib).
USAGE
}
[[ "${1:-}" == --help || "${1:-}" == -h ]] && { usage; exit 0; }
build="${1:-build}" out="${2:-.gpu/gpu.tar.xz}"
bins=(src/lockstep bench/cpu_compare_bench bench/engine_bench bench/cuda_kernels_bench bench/oracle_spec_bench
      tests/lockstep_tests)
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
for b in "${bins[@]}"; do
  [[ -x "$build/$b" ]] || { echo "pack-gpu: $build/$b not built" >&2; exit 2; }
  mkdir -p "$stage/$build/$(dirname "$b")"
  strip -o "$stage/$build/$b" "$build/$b"
done
mkdir -p "$stage/lib"
# The libraries outside glibc and the C++ runtime, which every machine has.
for b in "${bins[@]}"; do ldd "$build/$b"; done | awk '/=> \//{print $3}' | sort -u |
  grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
mkdir -p "$(dirname "$out")"
tmp="$out.tmp.$$"
tar -C "$stage" -cf - . | xz -9 -T0 > "$tmp"
mv "$tmp" "$out"
echo "pack-gpu: $out $(du -h "$out" | cut -f1)"
