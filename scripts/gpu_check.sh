#!/usr/bin/env bash
# One prepared GPU check (run on a CUDA box, e.g. the lent H200): environment, the gpu-marked
# tests, the CUDA metric kernels vs CPU, and the default experiment on device=cuda.
# Writes logs under ${OUT:-gpu_check_out}/. Exit code: non-zero if any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_check_out}
mkdir -p "$OUT"
status=0
step() { echo "== $1"; shift; "$@" 2>&1 | tee -a "$OUT/gpu_check.log"; local rc=${PIPESTATUS[0]}; [[ $rc -eq 0 ]] || status=$rc; }

step "nvidia-smi" nvidia-smi
step "setup (gpu extras)" env EXTRAS=gpu scripts/setup.sh
step "gpu tests" .venv/bin/python -m pytest -q -m gpu
step "metrics engine benchmark (cpu, vs pytrec_eval)" .venv/bin/python scripts/bench_metrics.py --queries 100000
step "data" .venv/bin/python -m bench.data.foldoc build --out .data/foldoc
step "quickstart on cuda" env HF_HUB_OFFLINE=1 .venv/bin/python -m bench +experiment=quickstart device=cuda telemetry=nvml hydra.run.dir="$OUT/quickstart"
step "fp16 embedding + GPU IVF index" env HF_HUB_OFFLINE=1 .venv/bin/python -m bench +experiment=quickstart device=cuda telemetry=nvml embedder.precision=fp16 embedder.batch_size=256 index=ivf_flat hydra.run.dir="$OUT/ivf_fp16"
exit $status
