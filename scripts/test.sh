#!/usr/bin/env bash
# Builds and runs the whole test suite (unit, parity, invariance, ISA levels, mutation audit, fuzz smoke).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
phase() { echo "== test.sh: $1 ($((SECONDS - start)) s so far)"; }

phase build
./scripts/build.sh
./scripts/fetch-tokenizer-ref.sh   # npm ci (pinned) + node reference ids for the tokenizer tests

# A test that runs 240 s gets its stacks written to build/watchdog/<test>.log and aborts (see
# tests/watchdog_test.cpp); ctest's own limit is 300 s a test. A test that hung is run once more,
# visibly: its log is printed, and the run fails if it hangs again or anything else failed.
phase ctest
export LOCKSTEP_WATCHDOG_DIR="$PWD/build/watchdog"
rm -rf "$LOCKSTEP_WATCHDOG_DIR" && mkdir -p "$LOCKSTEP_WATCHDOG_DIR"
if ! ctest --test-dir build --output-on-failure -j"$(nproc)"; then
  failed=build/Testing/Temporary/LastTestsFailed.log
  [[ -f "$failed" ]] || exit 1
  while IFS=: read -r _ name; do
    if [[ ! -f "$LOCKSTEP_WATCHDOG_DIR/$name.log" ]]; then
      echo "test.sh: $name failed (it did not hang): no rerun" >&2
      exit 1
    fi
  done <"$failed"
  echo "test.sh: these tests hung; their stacks follow, then they run once more:" >&2
  cat "$LOCKSTEP_WATCHDOG_DIR"/*.log >&2
  ctest --test-dir build --output-on-failure --rerun-failed
fi

# The exactness tests again with the kernels a smaller CPU would pick (LOCKSTEP_ISA caps the
# level); levels above this CPU's are skipped by the tests themselves.
exactness='Invariance|Exactness|DrafterInput|LabAccept|LabTeacherForce|IsaCoverage|Quant|Sample'
for isa in avx2 portable; do
  phase "exactness tests at LOCKSTEP_ISA=$isa"
  LOCKSTEP_ISA=$isa ctest --test-dir build --output-on-failure -j"$(nproc)" \
    -R "$exactness" -E Cuda
done

phase "mutation audit"
./scripts/mutants.sh   # each exactness guarantee broken on purpose must fail a named test
phase "fuzz smoke"
./scripts/fuzz.sh "${FUZZ_SECONDS:-60}"   # GGUF reader under libFuzzer + ASan/UBSan, bounded
phase done
