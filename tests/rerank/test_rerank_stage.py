"""The rerank stage on the plan: pool scored once, depths cut from the scores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from bench.data.synthetic import SyntheticDataset
from bench.pipeline.run import run
from bench.rerank.stage import CutInputs, RerankOp, RerankScores
from bench.retrieval.base import Hits, Pool
from bench.telemetry.base import TimingLog


def test_depth_cut_reorders_the_top_and_keeps_the_tail() -> None:
    dataset = SyntheticDataset(n_docs=10, n_queries=4, seed=0).load()  # only doc ids used
    # one query, five candidates in pool order; reranker scores for the first four
    pool = Pool(Hits(np.array([0, 5]), np.array([4, 3, 2, 1, 0], np.int32),
                     np.array([0.9, 0.8, 0.7, 0.6, 0.5], np.float32),
                     np.array([40, 30, 20, 10, 0], np.int32)))
    scores = RerankScores(np.array([0, 4]), np.array([0.1, 0.4, 0.3, 0.2], np.float32))
    out = RerankOp(depth=3, score_threshold=None).run(
        CutInputs(scores, pool, None, dataset), TimingLog("rerank_cut")).hits
    # top 3 by reranker score: doc 3 (0.4), doc 2 (0.3), doc 4 (0.1); then docs 1, 0 as pooled
    assert out.doc_idx.tolist() == [3, 2, 4, 1, 0]
    assert out.chunk_idx is not None and out.chunk_idx.tolist() == [30, 20, 40, 10, 0]
    assert np.all(np.diff(out.scores) < 0)  # rank-derived, strictly decreasing
    cut = RerankOp(depth=3, score_threshold=0.25).run(
        CutInputs(scores, pool, None, dataset), TimingLog("rerank_cut")).hits
    assert cut.doc_idx.tolist() == [3, 2, 1, 0]  # doc 4 scored 0.1 < 0.25: dropped


def test_retrieval_runs_once_for_every_rerank_point(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cache = tmp_path / "cache"
    cfg = compose_cfg(["dataset=synthetic", f"cache_dir={cache}", "reranker=maxsim",
                       "reranker.depths=[5,10,20]", "metrics.bootstrap_resamples=200"])
    res = run(cfg, tmp_path / "run")
    assert res.exit_code == 0
    configs = pq.read_table(tmp_path / "run" / "configs.parquet").to_pylist()
    assert [c["label"] for c in configs] == ["dense", "dense>maxsim@5", "dense>maxsim@10",
                                             "dense>maxsim@20"]
    dense = configs[0]["config_id"]
    assert all(c["parent_config_id"] == dense for c in configs[1:])
    assert all(c["rerank_p95_ms"] is not None and c["rerank_pairs_per_s"] for c in configs[1:])
    import json

    events = json.loads((tmp_path / "run" / "run.json").read_text())["cache"]["events"]
    computed = [e["stage"] for e in events if not e["hit"]]
    assert computed.count("retrieve") == 1  # one first-stage search for the 3 depths
    # passages encoded once: by the token index, or with the dense vectors in one shared pass
    assert computed.count("rerank_index") + computed.count("encode_shared") == 1
    assert computed.count("rerank_scores") == 1  # the pool scored once, at depth 20
    assert computed.count("rerank") == 3  # latency measured per depth
    # each reranked config is paired with the plain pool
    cmp = pq.read_table(tmp_path / "run" / "comparisons.parquet").to_pylist()
    assert {c["config_id"] for c in cmp if c["metric"] == "ndcg@10" and c["scope"] == "all"} \
        == {c["config_id"] for c in configs[1:]}
    assert (tmp_path / "run" / "rerank.png").is_file()
    assert "## Reranking" in (tmp_path / "run" / "report.md").read_text()
