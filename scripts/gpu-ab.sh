#!/usr/bin/env bash
# A/B decode timing of two CUDA builds on one GPU: writes each full-size preset once, then runs
# `lockstep generate` (512 prompt ids, 128 generated, F16 KV cache, as gpu-bench.sh) with the
# builds alternately, and prints one row per run with pp512, tg128 and the sha256 of the
# generated ids, then whether every run of a preset generated the same ids.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-common.sh

usage() {
  cat <<'USAGE'
usage: scripts/gpu-ab.sh --base DIR --new DIR [--also NAME=DIR ...] [--presets 26b-a4b,31b]
                         [--reps 2] [--work DIR] [--engine] [--model FILE]

  --base DIR, --new DIR  directories holding each build's lockstep (in DIR or DIR/src); the new
                         one also cpu_compare_bench (and engine_bench for --engine)
  --also NAME=DIR        a further build, run after new in each round (repeatable)
  --presets P            comma-separated shapes of cpu_compare_bench --write-preset
  --model FILE           an existing GGUF to use instead of writing the preset (one preset
                         only); kept
  --reps N               runs of each build per preset, alternating (default 2)
  --work DIR             where the model files are written, one at a time (default /tmp)
  --engine               also engine_bench (1 / 8 / 32 sequences, each checked against a solo
                         run) on the new build
Needs a CUDA device.
USAGE
}

base="" new="" presets=26b-a4b,31b reps=2 work=/tmp engine=0 also=() given_model=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --help | -h) usage; exit 0 ;;
    --base) base="$2"; shift ;;
    --new) new="$2"; shift ;;
    --also) also+=("$2"); shift ;;
    --presets) presets="$2"; shift ;;
    --model) given_model="$2"; shift ;;
    --reps) reps="$2"; shift ;;
    --work) work="$2"; shift ;;
    --engine) engine=1 ;;
    *) usage >&2; exit 2 ;;
  esac
  shift
done
[[ -n "$base" && -n "$new" ]] || { usage >&2; exit 2; }
check_given_model "$presets"

writer=$(find_bin "$new" cpu_compare_bench)
declare -A bin=([base]=$(find_bin "$base" lockstep) [new]=$(find_bin "$new" lockstep))
builds=(base new)
for a in "${also[@]}"; do
  bin[${a%%=*}]=$(find_bin "${a#*=}" lockstep)
  builds+=("${a%%=*}")
done

prompt=$(seq -s, 1000 1511)  # 512 token ids
echo "| model | build | run | pp512 tok/s | tg128 tok/s | sha256 of the 128 ids |"
echo "|---|---|---|---|---|---|"
for preset in ${presets//,/ }; do
  preset_model "$writer" "$preset" "$work/lockstep-ab-$preset-$$.gguf"
  hashes=()
  for ((rep = 1; rep <= reps; ++rep)); do
    for build in "${builds[@]}"; do
      gen=$("${bin[$build]}" generate -m "$model" --device cuda --tokens "$prompt" -n 128 \
        --ignore-eos --json --no-hash --cache-type-k f16 --cache-type-v f16)
      row=$(python3 - "$preset" "$build" "$rep" "$gen" <<'PY'
import hashlib, json, sys
preset, build, rep, g = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
t = g["timings"]
sha = hashlib.sha256(",".join(map(str, g["tokens"])).encode()).hexdigest()[:16]
pp = g["n_prompt"] / (t["prompt_ms"] / 1e3)
tg = g["n_generated"] / (t["generate_ms"] / 1e3)
print(f"| {preset} | {build} | {rep} | {pp:.0f} | {tg:.1f} | {sha} |")
PY
)
      echo "$row"
      hashes+=("$(echo "$row" | awk -F'|' '{print $7}')")
    done
  done
  if [[ $(printf '%s\n' "${hashes[@]}" | sort -u | wc -l) -eq 1 ]]; then
    echo "$preset: every run generated the same ids"
  else
    echo "$preset: RUNS DIFFER"
  fi
  if ((engine)); then
    eng=$(find_bin "$new" engine_bench)
    out=$("$eng" --model "$model" --device cuda --tokens 64 --seqs 1,8,32 --reps 1 \
      --cache-type f16 --json)
    python3 - "$preset" "$out" <<'PY'
import json, sys
rows = [r for r in json.loads(sys.argv[2])["rows"] if r["mode"] == "engine"]
agg = " / ".join(f"{r['tok_s']:.0f}" for r in rows)
exact = "yes" if rows and all(r["exact"] for r in rows) else "NO"
print(f"{sys.argv[1]} engine 1 / 8 / 32 seqs: {agg} tok/s, exact: {exact}")
PY
  fi
  drop_model
done
