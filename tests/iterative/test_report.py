"""The one-shot vs iterative table: answer and citation columns for both pools, paired."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq


def test_the_iterative_table_pairs_citation_support_of_both_pools(compose_cfg,  # type: ignore[no-untyped-def]
                                                                  tmp_path: Path) -> None:
    from bench.pipeline.run import run

    over = ["dataset=synthetic", f"cache_dir={tmp_path / 'cache'}", "iterative=decompose",
            "iterative.max_wall_ms=1e9", "generator._target_=citing_fakes.CitingGenerator",
            "generation.kinds=[dense]", "generation.max_queries=8", "judge=citations",
            "metrics.bootstrap_resamples=200", "latency.queries=4", "latency.warmup=1"]
    res = run(compose_cfg(over), tmp_path / "run")
    assert res.exit_code == 0
    d = tmp_path / "run"
    configs = {r["label"]: r for r in pq.read_table(d / "configs.parquet").to_pylist()}
    gen = [c for c in configs.values() if c["kind"] == "generated"]
    assert len(gen) == 2  # answers on the one-shot pool and on the iterative pool
    rows = pq.read_table(d / "per_query.parquet").to_pylist()
    for c in gen:
        prec = [r for r in rows if r["config_id"] == c["config_id"]
                and r["metric"] == "citation_precision" and r["status"] == "scored"]
        # every answer cites its first passage and the fake judge supports it
        assert prec and all(r["value"] == 1.0 for r in prec)
    pair = json.loads((d / "run.json").read_text())["stages"]["iterative"]["pairs"][0]
    scored = pair["answers_scored"]
    for metric in ("citation_precision", "citation_recall"):
        assert scored[metric]["one_shot"] > 1 and scored[metric]["iterative"] > 1
        assert scored[metric]["paired"] > 1
        assert pair["answers"][metric]["mean_a"] == 1.0 == pair["answers"][metric]["mean_b"]
    report = (d / "report.md").read_text()
    section = report.split("## Iterative retrieval vs one-shot", 1)[1]
    assert "| citation_precision (answers) | 1.000 | 1.000 | +0.000" in section
    assert "| citation_recall (answers) |" in section
