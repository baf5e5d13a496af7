# The two commands of README.md:
#   make bench   set up, build the default dataset, run the default experiment
#   make test    set up, run the test suite, the linters and the strict docs build
PY := .venv/bin/python
DATA_DIR ?= .data
EXPERIMENT ?= quickstart

.PHONY: setup data bench test lint docs gpu-check setup-vllm clean-cache

setup:
	scripts/setup.sh

# version 3 is the default dataset; versions 2 and 1 (dataset=foldoc_v2, foldoc_v1) keep old
# runs comparable. All come from the same .debs, downloaded once into $(DATA_DIR)/debs.
data: setup
	$(PY) -m bench.data.foldoc build --version 3 --out $(DATA_DIR)/foldoc --cache-dir $(DATA_DIR)/debs
	$(PY) -m bench.data.foldoc build --version 2 --out $(DATA_DIR)/foldoc_v2 --cache-dir $(DATA_DIR)/debs
	$(PY) -m bench.data.foldoc build --version 1 --out $(DATA_DIR)/foldoc_v1 --cache-dir $(DATA_DIR)/debs
	# the ingestion benchmark (docs/ingestion-benchmark.md): SQuAD sample + FOLDOC rendered to
	# PDF / scans / HTML / DOCX, and real python3.11-doc pages (its .deb also in debs/)
	$(PY) -m bench.ingest.build --out $(DATA_DIR)/ingest --foldoc $(DATA_DIR)/foldoc --cache-dir $(DATA_DIR)/debs

bench: data
	HF_HUB_OFFLINE=1 $(PY) -m bench +experiment=$(EXPERIMENT)

test: setup
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q
	$(MAKE) --no-print-directory lint

lint:
	.venv/bin/ruff check bench kernels tests scripts
	.venv/bin/mypy bench kernels/bench_kernels
	$(MAKE) --no-print-directory docs

# the documentation site into site/ (git-ignored); --strict: a broken link, a missing page or
# an anchor that does not exist fails the build. `.venv/bin/mkdocs serve` previews it.
docs:
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict

gpu-check: setup
	scripts/gpu_check.sh

setup-vllm:
	VENV=.venv-vllm EXTRAS=vllm scripts/setup.sh

clean-cache:
	rm -rf .cache/bench
