#!/usr/bin/env bash
# Mutation audit: breaks each exactness guarantee on purpose in a scratch copy and requires a test to fail.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TABLE="$ROOT/scripts/mutants_table.py"

usage() {
  cat <<'USAGE'
usage: scripts/mutants.sh [--full] [--only NAME] [--build-dir DIR] [--check] [--list]

Applies each mutation of scripts/mutants_table.py (an exact source edit that must match once) to
a scratch copy of the tree, rebuilds lockstep_tests incrementally, runs the tests expected to
kill it and reverts the edit. Exits 1 if any mutant survives (its tests pass), 2 on an error (a
pattern that no longer matches, a mutant that does not compile).

The scratch copy (source and a copy of the build dir) is mounted over this tree in a private
mount namespace (unshare -rm), so every path the build recorded stays valid and only the mutated
file recompiles, while the worktree itself is never edited, even if the script is killed.
Without user namespaces the copy is configured and built from scratch (CUDA off): slower.

  --full           run the whole suite per mutant instead of its killing filter (local audits)
  --only NAME      run one mutant (repeatable)
  --build-dir DIR  the configured, built tree to copy (default: build, as scripts/build.sh makes)
  --check          only check that every mutation still applies (no build)
  --list           print the mutants and their filters
USAGE
}

die() { echo "mutants.sh: $*" >&2; exit 2; }

full=0 check=0 build_dir=build inside="" only=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --help|-h) usage; exit 0 ;;
    --full) full=1 ;;
    --check) check=1 ;;
    --list) python3 "$TABLE" list | cut -f1,3,4 | column -t -s $'\t'; exit 0 ;;
    --only) [[ $# -ge 2 ]] || die "--only needs a mutant name"; only+=("$2"); shift ;;
    --build-dir) [[ $# -ge 2 ]] || die "--build-dir needs a directory"; build_dir="$2"; shift ;;
    --inside) inside="$2"; shift ;;  # internal: running in the private mount namespace
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  shift
done
command -v python3 >/dev/null || die "python3 is required"
[[ "$build_dir" != /* ]] || die "--build-dir must be relative to the tree (paths must stay valid)"

# Outside the namespace: make the scratch copy, then re-run this script inside the namespace
# with the copy mounted over the tree.
if [[ -z "$inside" && $check -eq 0 ]]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/lockstep-mutants.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/tree" "$work/logs"
  # Tracked and untracked-but-not-ignored files, mtimes kept (tar).
  git ls-files -z -co --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$work/tree"
  # LOCKSTEP_MUTANTS_FRESH=1 forces the fresh-build path (to test it where namespaces work).
  if [[ -z "${LOCKSTEP_MUTANTS_FRESH:-}" && -f "$build_dir/build.ninja" ]] &&
    unshare -rm true 2>/dev/null; then
    mkdir -p "$work/tree/$(dirname "$build_dir")"
    cp -a "$build_dir" "$work/tree/$build_dir"
    args=(--inside "$work" --build-dir "$build_dir")
    [[ $full -eq 1 ]] && args+=(--full)
    for name in "${only[@]}"; do args+=(--only "$name"); done
    set +e
    unshare -rm bash -c 'mount --bind "$1/tree" "$2" && cd "$2" && shift 2 && exec "$@"' _ \
      "$work" "$ROOT" "$ROOT/scripts/mutants.sh" "${args[@]}"
    exit $?
  fi
  echo "mutants.sh: no user namespaces or no $build_dir/build.ninja: building a fresh copy" >&2
  tree="$work/tree" build="$work/build" logs="$work/logs"
  cmake -S "$tree" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_WERROR=ON \
    -DLOCKSTEP_CUDA=OFF -DLOCKSTEP_SHARED_DIR_OVERRIDE="$ROOT/../shared" >"$logs/configure.log" \
    || die "configure failed: $logs/configure.log"
elif [[ -n "$inside" ]]; then
  # In the namespace $ROOT is the scratch copy: edits here never reach the worktree.
  tree="$ROOT" build="$ROOT/$build_dir" logs="$inside/logs"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/lockstep-mutants.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/tree"
  git ls-files -z -co --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$work/tree"
  tree="$work/tree" logs="$work"
fi

mapfile -t rows < <(python3 "$TABLE" list)
if [[ ${#only[@]} -gt 0 ]]; then
  sel=()
  for name in "${only[@]}"; do
    found=0
    for row in "${rows[@]}"; do [[ "${row%%$'\t'*}" == "$name" ]] && sel+=("$row") && found=1; done
    [[ $found -eq 1 ]] || die "unknown mutant: $name (see --list)"
  done
  rows=("${sel[@]}")
fi

# Applies mutant $1 to the scratch copy after saving the file it edits; Revert puts it back
# with a fresh mtime, so the next build recompiles the original.
Apply() { cp "$tree/$2" "$logs/saved"; python3 "$TABLE" apply "$tree" "$1"; }
Revert() { cp "$logs/saved" "$tree/$1"; touch "$tree/$1"; }

if [[ $check -eq 1 ]]; then
  for row in "${rows[@]}"; do
    IFS=$'\t' read -r name file _ _ <<<"$row"
    Apply "$name" "$file" || die "mutant $name no longer applies"
    Revert "$file"
  done
  echo "mutants.sh: all ${#rows[@]} mutations apply"
  exit 0
fi

start=$SECONDS
echo "mutants.sh: building the unmutated copy in $build"
cmake --build "$build" --target lockstep_tests -j"$(nproc)" >"$logs/build.log" 2>&1 \
  || { tail -30 "$logs/build.log" >&2; die "the unmutated tree does not build"; }

# A mutant named *_avx512 breaks code that runs only at the AVX-512 level (AVX-512 F/BW/VL/DQ
# and VNNI, as quant::CpuHasIsa asks); on a CPU without it the tests of that level skip, so the
# mutant is reported as skipped instead of run (it could only survive).
has_avx512() {
  local f
  for f in avx512f avx512bw avx512vl avx512dq avx512_vnni; do
    grep -qw "$f" /proc/cpuinfo 2>/dev/null || return 1
  done
}
survived=() table=() skipped=0
for row in "${rows[@]}"; do
  IFS=$'\t' read -r name file filter what <<<"$row"
  if [[ "$name" == *_avx512 ]] && ! has_avx512; then
    table+=("$name -> SKIPPED (this CPU lacks the AVX-512 level)")
    echo "mutants.sh: $name ($what): skipped, this CPU lacks the AVX-512 level"
    skipped=$((skipped + 1))
    continue
  fi
  [[ $full -eq 1 ]] && filter="*"
  t0=$SECONDS
  Apply "$name" "$file" || die "mutant $name no longer applies"
  if ! cmake --build "$build" --target lockstep_tests -j"$(nproc)" >"$logs/$name.build.log" 2>&1; then
    Revert "$file"
    tail -30 "$logs/$name.build.log" >&2
    die "mutant $name does not compile"
  fi
  set +e
  timeout 600 "$build/tests/lockstep_tests" --gtest_filter="$filter" >"$logs/$name.test.log" 2>&1
  rc=$?
  set -e
  Revert "$file"
  killers=$(grep -oE '^\[  FAILED  \] [A-Za-z0-9_/]+\.[A-Za-z0-9_/.]+' "$logs/$name.test.log" | awk '{print $NF}' \
    | sort -u | paste -sd' ' - || true)
  if [[ $rc -eq 0 ]]; then
    survived+=("$name")
    table+=("$name -> SURVIVED ($filter)")
  elif [[ -z "$killers" ]]; then
    # A crash (a CHECK firing) or a timeout: the test that was running is the one that caught it.
    last=$(grep -oE '^\[ RUN      \] [A-Za-z0-9_/.]+' "$logs/$name.test.log" | tail -1 \
      | awk '{print $NF}' || true)
    why=$(grep -m1 -E 'Check failed|CHECK|terminate|what\(\)' "$logs/$name.test.log" | cut -c1-100 || true)
    table+=("$name -> ${last:-?} (exit $rc${why:+: $why})")
  else
    table+=("$name -> $killers")
  fi
  echo "mutants.sh: $name ($what): $([[ $rc -eq 0 ]] && echo SURVIVED || echo killed) in $((SECONDS - t0)) s"
done
echo
echo "mutant -> killing test(s)   [$((SECONDS - start)) s]"
printf '  %s\n' "${table[@]}"
if [[ ${#survived[@]} -gt 0 ]]; then
  echo "mutants.sh: ${#survived[@]} mutant(s) survived: ${survived[*]}" >&2
  exit 1
fi
if [[ $skipped -gt 0 ]]; then
  echo "mutants.sh: all $((${#rows[@]} - skipped)) mutants run were killed; $skipped skipped (no AVX-512 level here)"
else
  echo "mutants.sh: all ${#rows[@]} mutants killed"
fi
