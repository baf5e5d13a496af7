"""The plan is data: printed before any work, shared nodes once, config ids stable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from bench.pipeline.run import run

REPO = Path(__file__).resolve().parents[2]


def test_plan_only_prints_the_graph_and_computes_nothing(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    out = subprocess.run(
        [sys.executable, "-m", "bench", "+experiment=hybrid", "dataset=synthetic",
         f"cache_dir={cache}", "plan_only=true", f"hydra.run.dir={tmp_path / 'run'}"],
        capture_output=True, text=True, cwd=REPO, timeout=300,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()  # Hydra's log lines come first
    start = next(i for i, line in enumerate(lines) if line.startswith("plan: "))
    text = "\n".join(lines[start:])
    # hybrid: dense + bm25 + rrf + 6 convex variants
    assert lines[start].startswith("plan: 9 configs")
    assert "0 of" in lines[start]  # nothing cached yet
    assert "shared by 9 configs" in text  # chunks are one node for every config
    assert text.count("=> config ") == 9
    # nothing was computed: no artifact in the store
    assert not any(p.name == "_meta.json" for p in cache.rglob("*")) if cache.exists() else True
    assert (tmp_path / "run" / "plan.json").is_file()


def test_config_id_is_the_chain_not_the_run(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Adding fusion variants to a run keeps the ids of the configs both runs have; the
    same config in two runs has one id."""
    cache = tmp_path / "cache"
    common = ["dataset=synthetic", f"cache_dir={cache}", "metrics.bootstrap_resamples=200",
              "report.plot=false", "lexical=bm25"]
    small = run(compose_cfg([*common, "fusion=rrf"]), tmp_path / "a")
    big = run(compose_cfg([*common, "fusion=rrf_and_convex"]), tmp_path / "b")
    ids_a = {r["label"]: r["config_id"] for r in
             pq.read_table(small.run_dir / "configs.parquet").to_pylist()}
    ids_b = {r["label"]: r["config_id"] for r in
             pq.read_table(big.run_dir / "configs.parquet").to_pylist()}
    assert set(ids_a) == {"dense", "bm25", "rrf(k=60)"}
    assert len(ids_b) == 9
    for label, cid in ids_a.items():
        assert ids_b[label] == cid, label
    # the second run found every shared artifact in the cache
    assert all(big.cache_hits[k] for k in ("chunk", "embed_docs", "index", "retrieve"))
    # end-to-end latency: a dense config pays its query's own single-query encoding, a BM25
    # one does not; neither chain's id depends on that latency node
    timings = pq.read_table(small.run_dir / "timings.parquet").to_pylist()
    stages = {cid: {t["stage"] for t in timings if t["config_id"] == cid}
              for cid in ids_a.values()}
    assert "embed_query" in stages[ids_a["dense"]] and "embed_query" in stages[ids_a["rrf(k=60)"]]
    assert "embed_query" not in stages[ids_a["bm25"]]
    rows = {r["label"]: r for r in pq.read_table(small.run_dir / "configs.parquet").to_pylist()}
    enc = sorted(t["wall_ms"] for t in timings
                 if t["config_id"] == ids_a["dense"] and t["stage"] == "embed_query")
    assert len(enc) == rows["dense"]["n_e2e_samples"]
    assert rows["dense"]["e2e_p50_ms"] >= enc[0]


def test_end_to_end_is_the_sum_along_the_chain_per_query() -> None:
    from bench.pipeline.record import end_to_end_ms
    from bench.telemetry.base import StageTiming

    t = (StageTiming("embed_query", "query", 1, 10.0, query_id="q1"),
         StageTiming("embed_query", "query", 1, 20.0, query_id="q2"),
         StageTiming("embed_queries", "total", 2, 8.0),  # the batch pass: not per request
         StageTiming("retrieve", "query", 1, 1.0, query_id="q1"),
         StageTiming("retrieve", "query", 1, 2.0, query_id="q2"),
         StageTiming("retrieve", "batch", 2, 1.0),
         StageTiming("fusion", "total", 2, 4.0),  # measured as a whole: an even share each
         StageTiming("retrieve", "query", 1, 3.0, query_id="q3"))  # q3 was not encoded alone
    assert end_to_end_ms(t, ("embed_query", "retrieve", "fold", "fusion")) == [13.0, 24.0]
    # a stage a chain runs twice for one query (a search after a query rewrite) adds up
    twice = (*t, StageTiming("retrieve", "query", 1, 5.0, query_id="q1"))
    assert end_to_end_ms(twice, ("embed_query", "retrieve", "fold", "fusion")) == [18.0, 24.0]


def test_plan_only_on_a_multirun_prints_one_plan_across_its_jobs(tmp_path: Path) -> None:
    cache, sweep = tmp_path / "cache", tmp_path / "sweep"
    out = subprocess.run(
        [sys.executable, "-m", "bench", "-m", "dataset=synthetic", "reranker=maxsim,bi_encoder",
         f"cache_dir={cache}", "plan_only=true",
         f"hydra.sweep.dir={sweep}"],
        capture_output=True, text=True, cwd=REPO, timeout=300,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert sum(line.startswith("plan: ") for line in lines) == 0  # no per-job plans
    start = next(i for i, line in enumerate(lines) if line.startswith("sweep plan: "))
    assert lines[start].startswith("sweep plan: 2 jobs, 8 configs")  # dense + 3 depths each
    text = "\n".join(lines[start:])
    # the dense pool and everything under it is one node for both jobs
    assert "retrieve: dense" in text and "jobs 0, 1" in text
    assert text.count("  dense  (dense)") == 2  # the same config in both jobs
    assert (sweep / "sweep_plan.json").is_file() and not (sweep / "sweep_report.md").exists()
    assert not any(p.name == "_meta.json" for p in cache.rglob("*")) if cache.exists() else True
