#!/usr/bin/env bash
# Device probe: copies the transformers sources the pipeline relies on and surveys the corpus.
set -x
T=$(python3 -c "import transformers,os;print(os.path.dirname(transformers.__file__))")
mkdir -p /tmp/src && cd "$T" && cp models/gemma4/modeling_gemma4.py models/gemma4/configuration_gemma4.py \
  models/gemma4_assistant/*.py generation/candidate_generator.py generation/utils.py \
  modeling_rope_utils.py masking_utils.py cache_utils.py models/gemma4/convert_gemma4_weights.py /tmp/src/
python3 - <<'P' > /tmp/src/gen_snippets.txt
import transformers, inspect
from transformers.generation import utils
src = inspect.getsource(utils)
print(len(src))
P
cd - >/dev/null
python3 train/corpus_survey.py > /tmp/src/survey.json
python3 -c "import sys,sysconfig;print(sys.version, sysconfig.get_paths())" > /tmp/src/env.txt
nvidia-smi >> /tmp/src/env.txt; nproc >> /tmp/src/env.txt; free -g >> /tmp/src/env.txt; df -h /tmp >> /tmp/src/env.txt
python3 -c "import tokenizers, transformers, torch; print(tokenizers.__version__, transformers.__version__, torch.__version__)" >> /tmp/src/env.txt
ls /usr/lib/python3* -d >> /tmp/src/env.txt 2>&1
tar czf $OUT/src.tgz -C /tmp src
ls -la $OUT
