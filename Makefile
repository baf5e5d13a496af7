# The two commands of README.md:
#   make bench   set up, build the default dataset, run the default experiment
#   make test    set up, run the test suite, the linters and the strict docs build
# and, for contributors' inner loop (docs/contributing.md), make test-fast: the suite less `slow`.
PY := .venv/bin/python
DATA_DIR ?= .data
EXPERIMENT ?= quickstart

# pytest-xdist workers for the parallel pass; the box CI times is 2 cores
TEST_WORKERS ?= 2
# the slowest tests of the parallel pass are listed at its end (where the time goes, #37)
DURATIONS ?= 30
SKIPPED := .pytest_cache/bench-skipped.txt
PYTEST := HF_HUB_OFFLINE=1 BENCH_SKIPPED_FILE=$(SKIPPED) $(PY) -m pytest -q

.PHONY: setup data bench test test-fast lint docs gpu-check setup-vllm clean-cache

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

# Two passes: everything but `serial` on $(TEST_WORKERS) workers, one module per worker (module
# fixtures such as a served process start once), then the load-sensitive `serial` tests alone
# (tests/conftest.py SERIAL). The skipped tests and what enables each are repeated at the end.
test: setup
	@mkdir -p .pytest_cache && rm -f $(SKIPPED)
	$(PYTEST) -n $(TEST_WORKERS) --dist loadfile -m "not serial" --durations=$(DURATIONS)
	$(PYTEST) -p no:xdist -m serial
	$(MAKE) --no-print-directory lint
	@if [ -s $(SKIPPED) ]; then echo "make test: $$(wc -l < $(SKIPPED)) skipped:"; cat $(SKIPPED); fi

# the inner loop (docs/contributing.md): every module's tests less those marked `slow`, the
# same two passes, no linters
test-fast: setup
	$(PYTEST) -n $(TEST_WORKERS) --dist loadfile -m "not slow and not serial"
	$(PYTEST) -p no:xdist -m "serial and not slow"

lint:
	.venv/bin/ruff check bench kernels tests scripts
	.venv/bin/mypy bench kernels/bench_kernels
	.venv/bin/python scripts/import_cycles.py bench
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
