#!/usr/bin/env bash
# Device entry point: trains and evaluates the default pair; results land in $OUT.
set -o pipefail
export LOCKSTEP_T0=$(date +%s.%N) LOCKSTEP_DEST=$OUT PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
python3 train/train_pair.py /tmp/lockstep-train 2>&1 | tee $OUT/run.log
rc=$?
ls -la $OUT
exit $rc
