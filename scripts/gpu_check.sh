#!/usr/bin/env bash
# The GPU check: every GPU path present, one figures table (scripts/gpu_check.py says which).
#
# Runs on the machine the device tool lends (python3 with CUDA torch, no registry, no
# hydra/omegaconf/faiss/our packaged model) as well as on a user's GPU box (.venv from
# `make setup`). Nothing is installed from a registry: on the lent machine the pure-Python
# wheels and the fp16 MiniLM come from .gpu_payload/, built beforehand with
# `.venv/bin/python scripts/gpu_payload.py` and carried with the call (45 MiB of 64).
#
#   scripts/gpu_check.sh                 # on a CUDA box; OUT=dir for the table (gpu_check_out)
#   scripts/gpu_check.sh --cpu           # the same plumbing with CPU fallbacks, any machine
#   device tool: run(command="scripts/gpu_check.sh", carry=[".gpu_payload"], timeout_s=540)
#
# Exit code: 0 all sections ok or skipped, 1 a section failed, 2 no GPU / bad arguments.
set -uo pipefail
cd "$(dirname "$0")/.."
if [[ -n "${PYTHON:-}" ]]; then PY=$PYTHON
elif [[ -x .venv/bin/python ]]; then PY=.venv/bin/python
else PY=python3
fi
OUT=${OUT:-gpu_check_out}
PAYLOAD=${BENCH_GPU_PAYLOAD:-.gpu_payload}
mkdir -p "$OUT"

if ! "$PY" -c "import omegaconf, hydra" 2>/dev/null; then
    if ! ls "$PAYLOAD"/wheels/*.whl >/dev/null 2>&1; then
        echo "gpu_check: hydra-core/omegaconf missing and no wheels in $PAYLOAD/wheels" \
             "(build them with scripts/gpu_payload.py and carry $PAYLOAD)" >&2
        exit 2
    fi
    SITE=${TMPDIR:-/tmp}/bench-gpu-site
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$SITE" "$PAYLOAD"/wheels/*.whl || exit 2
    export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD:$PWD/kernels${PYTHONPATH:+:$PYTHONPATH}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export TQDM_DISABLE=1

if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader \
        2>&1 | tee "$OUT/nvidia-smi.txt"
fi
"$PY" scripts/gpu_check.py --out "$OUT" "$@" 2>&1 | tee "$OUT/gpu_check.log"
exit "${PIPESTATUS[0]}"
