"""Rocchio feedback on the dense lane: the formula, the lane it adds, the per-query path."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bench.config.build import OptionError
from bench.rewrite.rocchio import RocchioRewriter


def test_the_rewrite_is_alpha_q_plus_beta_mean_feedback_renormalised() -> None:
    r = RocchioRewriter(fb_docs=2, alpha=1.0, beta=0.5)
    q = np.asarray([1.0, 0.0], np.float32)
    fb = np.asarray([[0.0, 1.0], [0.0, 1.0]], np.float32)
    # 1*(1, 0) + 0.5*(0, 1) = (1, 0.5); |.| = sqrt(1.25)
    np.testing.assert_allclose(r.rewrite(q, fb), [1 / 1.25**0.5, 0.5 / 1.25**0.5], rtol=1e-6)
    np.testing.assert_array_equal(r.rewrite(q, fb[:0]), q)  # no feedback: the query as is


@pytest.mark.parametrize("kwargs,key", [({"fb_docs": 0}, "fb_docs"),
                                        ({"alpha": 0.0, "beta": 0.0}, "alpha")])
def test_bad_options(kwargs: dict, key: str) -> None:
    with pytest.raises(OptionError) as e:
        RocchioRewriter(**kwargs)
    assert e.value.option == key


def test_a_rewritten_lane_follows_each_dense_config(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from bench.pipeline.run import run

    cfg = compose_cfg(["dataset=synthetic", f"cache_dir={tmp_path / 'cache'}",
                       "rewriter=rocchio", "metrics.bootstrap_resamples=200"])
    res = run(cfg, tmp_path / "run")
    assert res.exit_code == 0
    rows = {r["label"]: r for r in pq.read_table(tmp_path / "run/configs.parquet").to_pylist()}
    assert list(rows) == ["dense", "dense>rocchio"]
    assert rows["dense>rocchio"]["kind"] == "dense"
    # end to end it pays the encoder, the first search, the rewrite and the second search:
    # every request of the interleaved latency pass timed all of them
    reqs = [r for r in pq.read_table(tmp_path / "run/latency.parquet").to_pylist()
            if r["config_id"] == rows["dense>rocchio"]["config_id"]]
    assert reqs and all({"embed_query", "retrieve", "rewrite"}
                        <= set(json.loads(r["stage_ms_json"])) for r in reqs)
    cmp = pq.read_table(tmp_path / "run/comparisons.parquet").to_pylist()
    paired = [c for c in cmp if c["config_id"] == rows["dense>rocchio"]["config_id"]
              and c["metric"] == "ndcg@10" and c["scope"] == "all"]
    assert paired and paired[0]["baseline_config_id"] == rows["dense"]["config_id"]
