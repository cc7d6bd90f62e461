#!/usr/bin/env bash
# Device entry point: one stage of training the default pair (target | assistant | all), then the
# trained models as GGUF files through lockstep's own convert and quantize; results land in $OUT.
# lockstep and its shared libraries travel in .gpu/bin and .gpu/lib (built on the dev machine).
# Usage: bash train/run_device.sh target; then, on the same machine, bash train/run_device.sh assistant
set -o pipefail
stage=${1:-all}
work=/tmp/lockstep-train
export LOCKSTEP_T0=$(date +%s.%N) LOCKSTEP_DEST=$OUT PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=$PWD/.gpu/bin/lockstep
python3 train/train_pair.py "$work" "$stage" 2>&1 | tee "$OUT/run-$stage.log"
rc=$?

say() { echo "[run_device] $*" | tee -a "$OUT/run-$stage.log"; }
if [ ! -f "$work/target-Q4_K_M.gguf" ] && [ -f "$work/lockstep-code-target/model.safetensors" ]; then
  if "$bin" convert "$work/lockstep-code-target" -o "$work/target-f16.gguf" --outtype f16 &&
    "$bin" quantize "$work/target-f16.gguf" "$work/target-Q4_K_M.gguf" Q4_K_M; then
    split -b 15M -d "$work/target-Q4_K_M.gguf" "$OUT/target-Q4_K_M.gguf.part"
    (cd "$work" && sha256sum target-f16.gguf target-Q4_K_M.gguf) | tee -a "$OUT/gguf.sha256"
  else
    say "target conversion failed"; rc=4
  fi
fi
if [ "$stage" != target ] && [ -f "$work/lockstep-code-assistant/model.safetensors" ]; then
  if "$bin" convert "$work/lockstep-code-assistant" -o "$OUT/assistant-f16.gguf" --outtype f16; then
    (cd "$OUT" && sha256sum assistant-f16.gguf) | tee -a "$OUT/gguf.sha256"
  else
    say "assistant conversion failed"; rc=4
  fi
  # lockstep's logits on the f16 target against transformers' f32 and f64 references.
  if [ -x .gpu/bin/lockstep_logits ] && [ -f "$work/parity_prompts.json" ]; then
    .gpu/bin/lockstep_logits "$work/target-f16.gguf" "$work/parity_prompts.json" /tmp/lockstep-logits &&
      python3 train/parity/compare.py "$work/parity_prompts.json" /tmp/lockstep-logits \
        "$work/parity_f32.npz" "$work/parity_f64.npz" 2>&1 | tee "$OUT/parity.txt"
  fi
fi
ls -la "$OUT"
say "exit $rc after $(($(date +%s) - ${LOCKSTEP_T0%.*})) s"
exit $rc
