"""Shared fixtures. GPU tests are marked `gpu` and skipped on machines without CUDA."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# One folder of dequantised GGUF weights for every test, worker and subprocess: each run on its
# own cache otherwise dequantised SmolLM2 again (15-20 s of a core each, three times in `make
# test`). It is keyed by the GGUF's sha256 and written atomically, so no test can read stale
# or half-written weights. It is the folder test_transformers_cpu's fixture keeps in pytest's
# cache (`pytestconfig.cache.mkdir("bench-gguf-weights")`), so a clean clone dequantises once.
os.environ.setdefault("BENCH_WEIGHTS_DIR", str(Path(__file__).resolve().parents[1]
                                               / ".pytest_cache" / "d" / "bench-gguf-weights"))

# On a pytest-xdist worker (`make test`'s parallel pass), the OpenMP/BLAS pools of torch and
# faiss would each start one thread per core in every worker: on 2 cores, 2 workers x 2 threads
# spin against each other. A worker gets its share of the cores instead (set before anything
# imports torch; subprocesses the tests start inherit it). The serial pass keeps the defaults.
if os.environ.get("PYTEST_XDIST_WORKER"):
    _share = max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_var, str(_share))


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


# `make test` runs the suite in two passes: `-m "not serial"` on pytest-xdist workers (one
# module per worker, --dist loadfile), then `-m serial` alone. Serial modules assert wall-clock
# bounds (latency, throughput, lock staleness, deadlines) or find a capacity knee, which a
# second worker's load on a 2-core box would move; docs/contributing.md says how to add one.
# The capacity studies of tests/pipeline (test_capacity_study.py, test_capacity_http.py) are
# not here: they run at slow rates against lenient targets so that load does not move what they
# assert, and they mostly wait on the clock, which the parallel pass overlaps with real work.
SERIAL: dict[str, str] = {
    "tests/cache/test_heal.py": "stale-lock waits asserted within 0.4-5 s, heartbeats in 1.5 s",
    "tests/capacity/test_driver.py": "20 ms request timeouts and queueing over 2 workers",
    "tests/capacity/test_loadgen.py": "throughput within 20 % of the service rate",
    "tests/capacity/test_study.py": "knee search: levels run and ceiling depend on latency",
    # failed once in make test-fast (2026-12-08): the dying replica answered its 3 batches
    # last and was never asked again, so no batch was redone
    "tests/embedding/test_openai_replicas.py": "which replica takes a batch depends on when "
                                               "each server thread answers",
    "tests/generation/test_openai_http.py": "end-to-end latency asserted in 300-2000 ms",
    "tests/system/test_hostile_served.py": "deadlines asserted within 1.5 s of slack",
    "tests/system/test_http_client.py": "time to first token asserted >= 90 ms",
}

# Left out of `make test-fast`, beside the tests marked `slow` in their own files: a module
# whose tests share one expensive module fixture, or a single test (node id, parameters
# included), each 4 s or more on a loaded 2-core box (`pytest --durations`).
_WHOLE_RUN = "a whole pipeline run"
SLOW: dict[str, str] = {
    "tests/serve/test_remote_backends.py": "FOLDOC build, two runs and a served process",
    "tests/pipeline/test_lanes_e2e.py": "a 20-config run with HNSW and filters",
    "tests/embedding/test_engine.py": "a local Ray for the module; Ray Data passes 5-7 s each",
    "tests/serve/test_serve_generation.py": "a generating run and a served process",
    "tests/pipeline/test_per_query.py": "every query-time op against batch rows of a run",
    "tests/iterative/test_report.py": _WHOLE_RUN,
    "tests/pipeline/test_truncation.py": _WHOLE_RUN + " per chunker",
    "tests/rerank/test_rerank_stage.py::test_retrieval_runs_once_for_every_rerank_point":
        _WHOLE_RUN,
    "tests/rewrite/test_generative.py::test_the_suite_runs_every_rewriter_caches_texts_and_decides":
        _WHOLE_RUN,
    "tests/rewrite/test_generative.py::test_failed_generations_fall_back_to_the_raw_query":
        _WHOLE_RUN,
    "tests/route/test_llm_router.py::test_an_llm_routed_run_is_scored_like_any_router":
        _WHOLE_RUN,
    "tests/pipeline/test_generation_plan.py::"
    "test_judge_repeats_split_query_variation_from_judge_noise": _WHOLE_RUN,
    "tests/report/test_one_results_view.py::test_bench_compare_reproduces_the_runs_own_comparisons":
        _WHOLE_RUN,
    "tests/pipeline/test_budget_pipeline.py::test_rerank_ceiling_prunes_reranked_configs_only":
        _WHOLE_RUN,
    "tests/pipeline/test_budget_pipeline.py::test_budget_gate_passes_with_exit_0": _WHOLE_RUN,
    "tests/pipeline/test_plan.py::test_config_id_is_the_chain_not_the_run": "two runs",
    "tests/pipeline/test_plan.py::test_plan_only_on_a_multirun_prints_one_plan_across_its_jobs":
        "a multirun in a subprocess",
    "tests/rewrite/test_bo1.py::test_a_bo1_lane_follows_the_bm25_config": _WHOLE_RUN,
    "tests/rewrite/test_rm3.py::test_an_rm3_lane_follows_the_bm25_config": _WHOLE_RUN,
    "tests/kernels/test_cuda_twins.py::test_cuda_twins_match_cpu_in_simulator":
        "the CUDA simulator",
    "tests/filters/test_metadata_filter.py::test_seed_worked_example_false_exclusion_and_recall":
        _WHOLE_RUN,
    "tests/report/test_markdown_ux.py::test_unauthorized_hits_read_not_enforced_without_a_filter":
        _WHOLE_RUN,
    "tests/scripts/test_bench_scale.py::test_two_tiny_sizes_end_to_end": "two scaled runs",
    "tests/pipeline/test_decisions_pipeline.py::test_a_rule_is_evaluated_and_reported":
        _WHOLE_RUN,
    "tests/generation/test_transformers_cpu.py::test_weights_are_cached_by_file_hash":
        "loads SmolLM2 twice",
}
# the tests of test_http_system.py, test_pipeline_e2e.py and test_serve.py that share the
# module's run or server (their one-line config-error tests stay in make test-fast)
for _name in ("the_service_is_a_ranking_config_and_an_answered_config",
              "failures_are_statuses_never_dropped", "answers_are_checked_with_the_same_statuses",
              "the_service_is_paired_with_the_first_config",
              "every_request_is_recorded_with_its_latency_split",
              "a_server_that_dies_mid_run_keeps_what_was_answered",
              "the_builder_checks_the_mapping_before_work"):
    SLOW[f"tests/system/test_http_system.py::test_{_name}"] = "a run against a served system"
for _name in ("writes_every_result_file", "retrieval_quality_is_real",
              "trec_export_scores_the_same",
              "second_run_is_all_cache_hits", "downstream_knob_reuses_upstream",
              "vectors_are_normalised", "budget_prunes_and_counts", "failed_gate_exits_3",
              "passing_gates_say_so"):
    SLOW[f"tests/pipeline/test_pipeline_e2e.py::test_{_name}"] = "the module's shared run"
for _name in ("retrieve_gives_the_runs_ranking_for_every_query",
              "retrieve_any_text_with_request_id_and_server_timing",
              "embeddings_are_the_runs_embedder", "rerank_cohere_and_tei_shapes",
              "bad_requests_are_statuses_with_one_message", "ready_and_config",
              "admission_limit_and_graceful_drain"):
    SLOW[f"tests/serve/test_serve.py::test_{_name}"] = "the module's shared run and server"


# Seconds each of the costliest modules took in the parallel pass (pytest --durations=0,
# summed per module, idle 2-core box, clean clone of 7314274, 2026-12-07; the traffic loop
# and pipeline_e2e less that day's cuts: its judge step, its bad-config subprocesses; the
# launchers less their static encoder since).
# xdist hands whole modules to the workers in collection order, by default with the modules
# of most tests first, so a 3-test module of several minutes used to start last and run alone
# at the end. The scheduler below hands out the costliest module first
# (longest-processing-time order); unlisted modules follow in xdist's order. A stale figure
# only reorders the queue: no test is added or dropped.
COST_S: dict[str, float] = {
    "tests/report/test_launchers.py": 95, "tests/traces/test_traces_traffic.py": 135,
    "tests/pipeline/test_capacity_study.py": 107, "tests/serve/test_remote_backends.py": 103,
    "tests/hostile/test_hostile_inputs.py": 65, "tests/embedding/test_engine.py": 63,
    "tests/pipeline/test_generation_plan.py": 62, "tests/pipeline/test_capacity_http.py": 61,
    "tests/pipeline/test_gates_pipeline.py": 60, "tests/pipeline/test_per_query.py": 56,
    "tests/pipeline/test_lanes_e2e.py": 52, "tests/traces/test_traces_serve.py": 49,
    "tests/rerank/test_rerank_stage.py": 46, "tests/pipeline/test_pipeline_e2e.py": 43,
    "tests/serve/test_serve_generation.py": 43, "tests/pipeline/test_report_from_files.py": 42,
    "tests/generation/test_transformers_cpu.py": 35, "tests/capacity/test_freshness.py": 35,
    "tests/config/test_configs.py": 32,
}


@pytest.hookimpl(optionalhook=True)  # `-p no:xdist` (the serial pass) has no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # type: ignore[no-untyped-def]
    """``--dist loadfile`` with the costliest module first (COST_S); other modes as xdist's."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class CostFirst(LoadFileScheduling):  # type: ignore[misc]
        def _assign_work_unit(self, node):  # type: ignore[no-untyped-def]
            # xdist pops the queue's head; take the costliest module instead (ties: the head)
            scope = max(self.workqueue, key=lambda s: COST_S.get(s, 0.0))
            self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return CostFirst(config, log)


def pytest_configure(config: pytest.Config) -> None:
    # numba compiles the CPU kernels into their __pycache__ on first use (~40 s of one core);
    # without this, every worker and every subprocess started before the cache exists compiled
    # them again. make setup has usually done it (0.6 s to check); the controller or a plain
    # pytest run does it once, before any worker starts.
    if not hasattr(config, "workerinput"):
        import bench_kernels

        bench_kernels.warmup()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The serial pass (``-m serial``, alone or ``and not slow``) collects only the SERIAL
    modules: `serial` is given by that list and nothing else, so no other file can hold one,
    and importing every module only to deselect it cost the pass ~20 s of its ~90 s."""
    if config.getoption("markexpr", "") not in ("serial", "serial and not slow"):
        return None
    if collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    root = Path(str(config.rootpath))
    try:
        rel = collection_path.resolve().relative_to(root).as_posix()
    except ValueError:
        return None
    return rel not in {key.split("::", 1)[0] for key in SERIAL}


def _listed(nodeid: str, listed: dict[str, str]) -> bool:
    path = nodeid.split("::", 1)[0]
    return path in listed or nodeid in listed or nodeid.split("[", 1)[0] in listed


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _listed(item.nodeid, SERIAL):
            item.add_marker(pytest.mark.serial)
        if _listed(item.nodeid, SLOW):
            item.add_marker(pytest.mark.slow)
    if _cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# What a skip means and the command that makes the test run: matched against the skip reason
# (first match wins) and printed once per remedy at the end of the run.
REMEDIES: tuple[tuple[str, str], ...] = (
    # tests of a fallback that only a machine without the thing can check
    ("has a gpu", "a machine without a CUDA GPU (it checks the CPU path)"),
    ("has the cuda provider", "onnxruntime's CPU wheel (the default .venv)"),
    ("vllm is installed", "an environment without vLLM (the default .venv)"),
    ("onnxruntime-gpu", "onnxruntime-gpu on a GPU box (pip install -e '.[onnx-gpu]')"),
    ("chromium", "the Debian package chromium-headless-shell (.ci/run installs it as root: "
                 "apt-get install chromium-headless-shell)"),
    ("tesseract", "Debian's tesseract OCR (scripts/setup.sh installs it as root: "
                  "apt-get install tesseract-ocr tesseract-ocr-eng)"),
    ("cuda", "a CUDA GPU (make gpu-check on a GPU box)"),
    ("gpu", "a CUDA GPU (make gpu-check on a GPU box)"),
    ("vllm", "vLLM's own environment (make setup-vllm; BENCH_VLLM_TEST_MODEL names a model)"),
    ("stemmer", "PyStemmer (make setup installs the stemmer extra: "
                ".venv/bin/pip install -e '.[stemmer]')"),
    ("debian packages", "network access to Debian's mirror, or a `make data` build"),
    ("make data", "a `make data` build of FOLDOC"),
    ("not installed", "make setup (it installs every extra the tests use)"),
    ("could not import", "make setup (it installs every extra the tests use)"),
)


def _remedy(reason: str) -> str:
    low = reason.lower()
    for key, remedy in REMEDIES:
        if key in low:
            return remedy
    return "what its reason names"


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:  # type: ignore[no-untyped-def]
    """One line per skipped test naming what enables it; with BENCH_SKIPPED_FILE set, the
    lines are appended there too, so `make test` repeats both passes' skips at its very end."""
    if hasattr(config, "workerinput"):  # an xdist worker: its controller reports
        return
    lines = []
    for rep in terminalreporter.stats.get("skipped", []):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        reason = reason.removeprefix("Skipped: ")
        lines.append(f"skipped {rep.nodeid} ({reason}); it runs with {_remedy(reason)}")
    if not lines:
        return
    terminalreporter.section("skipped here, and what makes them run")
    for line in lines:
        terminalreporter.write_line(line)
    out = os.environ.get("BENCH_SKIPPED_FILE")
    if out:
        with open(out, "a", encoding="utf-8") as f:
            f.write("".join(f"{line}\n" for line in lines))


@pytest.fixture
def compose_cfg():  # type: ignore[no-untyped-def]
    """compose_cfg(overrides) -> the config `python -m bench` would run, hydra resolvers set."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import DictConfig, open_dict

    from bench.app import CONF_DIR
    from bench.config.schema import register

    def _compose(overrides: list[str]) -> DictConfig:
        register()
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            cfg = compose(config_name="config", overrides=overrides, return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        with open_dict(cfg):
            del cfg["hydra"]
        return cfg

    return _compose


