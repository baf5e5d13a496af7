"""Numbers we publish do not move: the per-query values of the shipped experiments on the
synthetic dataset equal the snapshot taken before the planned-graph redesign
(tests/data/golden/synthetic_per_query.parquet, written by scripts/snapshot_per_query.py from
runs of the previous pipeline), keyed by (experiment, config label, query, metric)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from bench.pipeline.run import run

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "data" / "golden" / "synthetic_per_query.parquet"

spec = importlib.util.spec_from_file_location("snapshot",
                                              REPO / "scripts" / "snapshot_per_query.py")
assert spec is not None and spec.loader is not None
snapshot = importlib.util.module_from_spec(spec)
spec.loader.exec_module(snapshot)

RUNS = {
    "quickstart": ["+experiment=quickstart"],
    "hybrid": ["+experiment=hybrid"],
    "filters": ["+experiment=filters"],
    "ann_hnsw": ["+experiment=quickstart", "index=hnsw"],
    "ann_ivf_flat": ["+experiment=quickstart", "index=ivf_flat"],
    # 60 synthetic vectors cannot train 256 PQ centroids: 4-bit codes (16 centroids)
    "ann_ivf_pq": ["+experiment=quickstart", "index=ivf_pq",
                   "index.factory='IVF{nlist},PQ{pq_m}x4'"],
}


@pytest.mark.slow
def test_per_query_values_identical_to_golden(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cache = tmp_path / "cache"
    after: dict[tuple[str, str, str, str], float] = {}
    for name, overrides in RUNS.items():
        cfg = compose_cfg([*overrides, "dataset=synthetic", f"cache_dir={cache}",
                           "metrics.bootstrap_resamples=200", "report.plot=false"])
        res = run(cfg, tmp_path / name)
        assert res.exit_code == 0
        after.update(snapshot.values_of(name, tmp_path / name))
    before = snapshot.load(GOLDEN)
    n, only_before, worst, lines = snapshot.compare(before, after)
    assert n == len(before) == 4212, lines
    assert only_before == 0
    assert worst == 0.0, "\n".join(lines)
