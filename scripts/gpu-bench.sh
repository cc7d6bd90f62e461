#!/usr/bin/env bash
# Issue 12's full-size GPU benchmark: Gemma 4 shapes with random weights in the Q4_K_M mix,
# written by lockstep itself, then prefill of 512 tokens and decode of 128 at batch 1
# (`lockstep generate`, the same prompt four times in one process: pp512 is the last two
# prompts', warm as llama-bench's after its warm-up, next to the first prompt's cold figure) and
# aggregate decode at 1, 8 and 32 sequences (engine_bench, which also
# checks every sequence against a solo run). Prints one table row per model. The KV cache is F16,
# llama.cpp's default, as in the llama.cpp figures it is compared with.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-common.sh

usage() {
  cat <<'USAGE'
usage: scripts/gpu-bench.sh [--bin DIR] [--presets e4b,26b-a4b,31b] [--work DIR] [--mix Q4_K_M]
                           [--cache-type f16]

  --bin DIR      directory holding lockstep, cpu_compare_bench and engine_bench
                 (default: build-gpu; the binaries may sit in DIR or in DIR/src, DIR/bench)
  --presets P    comma-separated shapes of cpu_compare_bench --write-preset (default: all three)
  --work DIR     where the model files are written, one at a time (default: /tmp; 5-19 GB each)
  --mix M        quantization mix (default: Q4_K_M)
  --cache-type T KV cache element type: f16 (default, as llama.cpp's figures), bf16 or f32
Needs a CUDA device.
USAGE
}

bin=build-gpu presets=e4b,26b-a4b,31b work=/tmp mix=Q4_K_M cache=f16
while [[ $# -gt 0 ]]; do
  case "$1" in
    --help | -h) usage; exit 0 ;;
    --bin) bin="$2"; shift ;;
    --presets) presets="$2"; shift ;;
    --work) work="$2"; shift ;;
    --mix) mix="$2"; shift ;;
    --cache-type) cache="$2"; shift ;;
    *) usage >&2; exit 2 ;;
  esac
  shift
done

lockstep=$(find_bin "$bin" lockstep) writer=$(find_bin "$bin" cpu_compare_bench) engine=$(find_bin "$bin" engine_bench)

prompts="$work/lockstep-bench-prompts-$$.jsonl"
python3 -c 'import json, sys; open(sys.argv[1], "w").write((json.dumps(list(range(1000, 1512))) + "\n") * 4)' \
  "$prompts"  # the same 512 token ids, four times
echo "| model | file GB | pp512 tok/s warm (cold) | tg128 tok/s | engine 1 / 8 / 32 seqs tok/s | exact |"
echo "|---|---|---|---|---|---|"
for preset in ${presets//,/ }; do
  model="$work/lockstep-bench-$preset-$$.gguf"
  trap 'rm -f "$model" "$prompts"' EXIT
  "$writer" --write-preset "$preset" "$model" "$mix" >&2
  gen=$("$lockstep" generate -m "$model" --device cuda --prompts-file "$prompts" --parallel 1 \
    -n 128 --ignore-eos --no-hash --cache-type-k "$cache" --cache-type-v "$cache")
  engine_out=$("$engine" --model "$model" --device cuda --tokens 64 --seqs 1,8,32 --reps 1 \
    --cache-type "$cache" --json)
  python3 - "$preset" "$model" "$gen" "$engine_out" <<'PY'
import json, os, sys
preset, model, engine = sys.argv[1], sys.argv[2], sys.argv[4]
runs = sorted((json.loads(line) for line in sys.argv[3].splitlines() if line.strip()),
              key=lambda r: r["index"])
pps = [r["n_prompt"] / (r["timings"]["prompt_ms"] / 1e3) for r in runs]
warm = sum(pps[2:]) / len(pps[2:])
last = runs[-1]
tg = last["n_generated"] / (last["timings"]["generate_ms"] / 1e3)
rows = [r for r in json.loads(engine)["rows"] if r["mode"] == "engine"]
agg = " / ".join(f"{r['tok_s']:.0f}" for r in rows)
exact = "yes" if rows and all(r["exact"] for r in rows) else "NO"
gb = os.path.getsize(model) / 1e9
ids = {tuple(r["tokens"]) for r in runs}
exact = exact if len(ids) == 1 else "NO (the four runs differ)"
print(f"| {preset} | {gb:.1f} | {warm:.0f} ({pps[0]:.0f}) | {tg:.1f} | {agg} | {exact} |")
PY
  rm -f "$model"
done
