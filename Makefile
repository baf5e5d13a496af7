# The two commands of README.md:
#   make bench   set up, build the default dataset, run the default experiment
#   make test    set up, run the test suite and linters
PY := .venv/bin/python
DATA_DIR ?= .data
EXPERIMENT ?= quickstart

.PHONY: setup data bench test lint gpu-check setup-vllm clean-cache

setup:
	scripts/setup.sh

# version 3 is the default dataset; versions 2 and 1 (dataset=foldoc_v2, foldoc_v1) keep old
# runs comparable. All come from the same .debs, downloaded once into $(DATA_DIR)/debs.
data: setup
	$(PY) -m bench.data.foldoc build --version 3 --out $(DATA_DIR)/foldoc --cache-dir $(DATA_DIR)/debs
	$(PY) -m bench.data.foldoc build --version 2 --out $(DATA_DIR)/foldoc_v2 --cache-dir $(DATA_DIR)/debs
	$(PY) -m bench.data.foldoc build --version 1 --out $(DATA_DIR)/foldoc_v1 --cache-dir $(DATA_DIR)/debs

bench: data
	HF_HUB_OFFLINE=1 $(PY) -m bench +experiment=$(EXPERIMENT)

test: setup
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q
	$(MAKE) --no-print-directory lint

lint:
	.venv/bin/ruff check bench kernels tests scripts
	.venv/bin/mypy bench kernels/bench_kernels

gpu-check: setup
	scripts/gpu_check.sh

setup-vllm:
	VENV=.venv-vllm EXTRAS=vllm scripts/setup.sh

clean-cache:
	rm -rf .cache/bench
