#!/usr/bin/env bash
# Where a decode step's GPU time goes: writes a full-size preset, times plain decode, then runs
# Nsight Compute over one decode step (each kernel's duration, serialized) and prints the time
# per kernel name, the kernel count and the sum next to the measured step time.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-common.sh

usage() {
  cat <<'USAGE'
usage: scripts/gpu-profile.sh [--bin DIR] [--presets 26b-a4b,31b] [--work DIR] [--out DIR]
                              [--context N] [--prefill] [--model FILE]

  --bin DIR      directory holding lockstep and cpu_compare_bench (default: build; the
                 binaries may sit in DIR, DIR/src or DIR/bench)
  --model FILE   an existing GGUF to use instead of writing the preset (one preset only); kept
  --presets P    comma-separated shapes of cpu_compare_bench --write-preset (default: 26b-a4b)
  --work DIR     where the model files are written, one at a time (default: /tmp)
  --out DIR      where the per-kernel CSV files go (default: the work directory)
  --context N    prompt length before the profiled step (default: 512)
  --prefill      profile the prompt's forward pass (N rows at once) instead of a decode step
Needs a CUDA device and ncu (Nsight Compute) on the PATH.
USAGE
}

bin=build presets=26b-a4b work=/tmp out="" context=512 prefill=0 given_model=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --help | -h) usage; exit 0 ;;
    --bin) bin="$2"; shift ;;
    --presets) presets="$2"; shift ;;
    --model) given_model="$2"; shift ;;
    --work) work="$2"; shift ;;
    --out) out="$2"; shift ;;
    --context) context="$2"; shift ;;
    --prefill) prefill=1 ;;
    *) usage >&2; exit 2 ;;
  esac
  shift
done
out=${out:-$work}
check_given_model "$presets"
command -v ncu >/dev/null || { echo "gpu-profile: ncu not found" >&2; exit 2; }

lockstep=$(find_bin "$bin" lockstep) writer=$(find_bin "$bin" cpu_compare_bench)
prompt=$(seq -s, 1000 $((999 + context)))

kv_flags="--cache-type-k f16 --cache-type-v f16"  # llama.cpp's default, as in gpu-bench.sh
for preset in ${presets//,/ }; do
  preset_model "$writer" "$preset" "$work/lockstep-profile-$preset-$$.gguf"
  gen=$("$lockstep" generate -m "$model" --device cuda --tokens "$prompt" -n 64 --ignore-eos \
    --json --no-hash $kv_flags)
  step_ms=$(python3 -c 'import json,sys; t=json.loads(sys.argv[1]); print(t["timings"]["generate_ms"]/t["n_generated"])' "$gen")
  # Kernels of one decode step: those of 2 generated tokens less those of 1 (the prompt's
  # forward passes alone).
  count_kernels() {
    ncu --metrics gpu__time_duration.sum --csv --print-units base --cache-control none \
      --clock-control none "$lockstep" generate -m "$model" --device cuda --tokens "$prompt" \
      -n "$1" --ignore-eos --json --no-hash $kv_flags 2>/dev/null | grep -c '"gpu__time_duration.sum"' || true
  }
  k1=$(count_kernels 1)
  k2=$(count_kernels 2)
  per_step=$((k2 - k1))
  # Profile the 6th decode step after the prompt (steps 1-2 run plainly, then graphs replay),
  # or the prompt's pass: every kernel before the first decode step.
  skip=$((k1 + 5 * per_step)) count=$per_step what="decode step $step_ms ms"
  if ((prefill)); then
    skip=0 count=$k1 what="prefill of $context tokens"
    step_ms=$(python3 -c 'import json,sys; t=json.loads(sys.argv[1]); print(t["timings"]["prompt_ms"])' "$gen")
  fi
  csv="$out/profile-$preset.csv"
  ncu --metrics gpu__time_duration.sum --csv --print-units base --cache-control none \
    --clock-control none --launch-skip "$skip" --launch-count "$count" \
    "$lockstep" generate -m "$model" --device cuda --tokens "$prompt" -n 12 --ignore-eos --json \
    --no-hash $kv_flags 2>/dev/null | grep '"gpu__time_duration.sum"' >"$csv" || true
  echo "== $preset: $what (context $context), $count kernels profiled, $per_step a decode step"
  python3 - "$csv" "$step_ms" <<'PY'
import csv, sys, collections
path, step_ms = sys.argv[1], float(sys.argv[2])
by_name = collections.defaultdict(lambda: [0, 0.0])
total = 0.0
for row in csv.reader(open(path)):
    # ncu --csv columns: ID, Process ID, Process Name, Host Name, Kernel Name, Context, Stream,
    # Block Size, Grid Size, Device, CC, Section Name, Metric Name, Metric Unit, Metric Value
    name, grid, value = row[4], row[8], float(row[-1].replace(",", ""))
    short = name.split("(")[0].split("<")[0].replace("lockstep::backend::cuda::", "")
    key = f"{short} {grid}"
    by_name[key][0] += 1
    by_name[key][1] += value / 1e3  # ns -> us
    total += value / 1e3
print(f"sum of kernel durations {total / 1e3:.2f} ms of a {step_ms:.2f} ms step")
print(f"{'kernel grid':60s} {'n':>5s} {'us':>9s} {'%':>6s}")
for key, (n, us) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:40]:
    print(f"{key[:60]:60s} {n:5d} {us:9.1f} {100 * us / total:6.1f}")
PY
  drop_model
done
