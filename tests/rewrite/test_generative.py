"""HyDE and multi-query: prompt templates, sampling rules, the merged rankings, the lanes they
add, texts cached so a second run never regenerates, failures, and the suite's decisions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from rewrite_fakes import RewriteGenerator

from bench.config.build import OptionError
from bench.retrieval.base import Hits
from bench.rewrite.generative import HyDERewriter, MultiQueryRewriter, check_template
from bench.rewrite.stage import merge_rankings

FAKE = ["generator@rewriter.generator=none",
        "rewriter.generator._target_=rewrite_fakes.RewriteGenerator"]


@pytest.mark.parametrize("template,msg", [("no slot", "no {query} slot"),
                                          ("{query} and {other}", "unknown slot"),
                                          ("{query", "not a valid template")])
def test_a_template_needs_exactly_the_query_slot(template: str, msg: str) -> None:
    with pytest.raises(OptionError) as e:
        check_template("prompt", template)
    assert e.value.option == "prompt" and msg in e.value.message
    assert check_template("prompt", "Q: {query}\nA:") == "Q: {query}\nA:"


def test_samples_are_seeded_requests_and_greedy_n_is_refused() -> None:
    gen = RewriteGenerator()
    mq = MultiQueryRewriter(generator=gen, n=3, temperature=0.7, seed=5)
    reqs = mq.requests("q1", "what is a fox")
    assert [r.sampling.seed for r in reqs] == [5, 6, 7]
    assert all(r.sampling.temperature == 0.7 for r in reqs)
    assert reqs[0].messages[-1].content.endswith("Query: what is a fox\nRewritten query:")
    with pytest.raises(OptionError) as e:
        HyDERewriter(generator=gen, n=2, temperature=0.0)
    assert e.value.option == "temperature"
    with pytest.raises(OptionError) as e:
        MultiQueryRewriter(generator=gen, max_tokens=0)
    assert e.value.option == "max_tokens"
    # small models number their lines or quote them: the first phrasing is kept
    assert mq.parse('1. "a red fox"\n2. another') == "a red fox"


def _hits(docs: list[int], scores: list[float]) -> Hits:
    return Hits(np.asarray([0, len(docs)], np.int64), np.asarray(docs, np.int32),
                np.asarray(scores, np.float32), np.asarray(docs, np.int32) * 10)


def test_rankings_merge_by_rrf_or_union_before_the_cut() -> None:
    a = _hits([1, 2, 3], [0.9, 0.8, 0.7])
    b = _hits([3, 4], [0.95, 0.5])
    key = np.arange(10, dtype=np.int64)
    # rrf (k=60): d3 = 1/63 + 1/61, d1 = 1/61, d2 = 1/62, d4 = 1/62 (tie: higher id first)
    got = merge_rankings([a, b], fuse="rrf", rrf_k=60, k=3, id_key=key)
    assert got.doc_idx.tolist() == [3, 1, 4]
    np.testing.assert_allclose(got.scores, [1 / 63 + 1 / 61, 1 / 61, 1 / 62], rtol=1e-6)
    assert got.chunks().tolist() == [30, 10, 40]  # each document's chunk travels with it
    # union: each document at its best score
    got = merge_rankings([a, b], fuse="union", rrf_k=60, k=10, id_key=key)
    assert got.doc_idx.tolist() == [3, 1, 2, 4]
    np.testing.assert_allclose(got.scores, [0.95, 0.9, 0.8, 0.5], rtol=1e-6)


def test_the_suite_runs_every_rewriter_caches_texts_and_decides(compose_cfg, tmp_path: Path
                                                                ) -> None:  # type: ignore[no-untyped-def]
    from bench.pipeline.run import run

    over = ["dataset=synthetic", f"cache_dir={tmp_path / 'cache'}", "lexical=bm25",
            "rewriter=query_rewrite", *FAKE, "metrics.bootstrap_resamples=200",
            "latency.interleave=false", "rewriter.in_domain=[]"]
    RewriteGenerator.calls.clear()
    res = run(compose_cfg(over), tmp_path / "run")
    assert res.exit_code == 0
    rows = {r["label"]: r for r in pq.read_table(tmp_path / "run/configs.parquet").to_pylist()}
    assert list(rows) == ["dense", "dense>rocchio", "dense>hyde", "dense>mq2", "dense>mq3",
                          "bm25", "bm25>rm3", "bm25>bo1"]
    for label in ("dense>rocchio", "dense>hyde", "dense>mq2", "dense>mq3"):
        assert rows[label]["parent_config_id"] == rows["dense"]["config_id"]
    n_q = 24
    # hyde: 1 request per query, mq2: 2, mq3: 3, each generated once
    assert len(RewriteGenerator.calls) == n_q * (1 + 2 + 3)
    # the texts are an artifact: a run that changes only what is downstream generates none
    RewriteGenerator.calls.clear()
    res = run(compose_cfg([*over, "metrics.bootstrap_resamples=300"]), tmp_path / "run2")
    assert res.exit_code == 0 and RewriteGenerator.calls == []
    doc = json.loads((tmp_path / "run2/run.json").read_text())["rewrite"]
    assert doc["min_gain"] == {"metric": "recall@100", "scope": "all", "delta": 0.01}
    outcomes = {o["label"]: o for o in doc["outcomes"]}
    assert set(outcomes) == {"dense>rocchio", "dense>hyde", "dense>mq2", "dense>mq3",
                             "bm25>rm3", "bm25>bo1"}
    for o in outcomes.values():
        assert o["verdict"] in ("adopt", "reject", "inconclusive")
        slices = {c["slice"] for c in o["checks"]}
        assert {"all", "low_confidence", "high_confidence", "in_domain",
                "out_of_domain"} <= slices
        for c in o["checks"]:
            if c["delta"] is not None:
                assert c["ci_low"] <= c["delta"] + 1e-12 <= c["ci_high"] + 2e-12
            lo, hi = c["ci_low"], c["ci_high"]
            if c["metric"] == "recall@100" and lo is not None:
                want = ("adopt" if lo >= 0.01 else "reject" if hi < 0.01 else "inconclusive")
                assert c["verdict"] == want
            else:
                assert c["verdict"] is None
    # tokens of the fake generator: the prompt's words, the answers' words, per query
    assert outcomes["dense>mq3"]["prompt_tokens_per_query"] > 0
    assert outcomes["dense>rocchio"]["prompt_tokens_per_query"] is None
    report = (tmp_path / "run2/report.md").read_text()
    assert "## Query rewriting" in report and "| mq3 | dense>mq3 | dense | all |" in report


def test_failed_generations_fall_back_to_the_raw_query(compose_cfg, tmp_path: Path
                                                       ) -> None:  # type: ignore[no-untyped-def]
    from bench.pipeline.run import run

    over = ["dataset=synthetic", f"cache_dir={tmp_path / 'cache'}", "rewriter=hyde", *FAKE,
            "+rewriter.generator.fail_every=1", "metrics.bootstrap_resamples=200",
            "latency.queries=3", "latency.warmup=1"]
    res = run(compose_cfg(over), tmp_path / "run")
    assert res.exit_code == 0
    doc = json.loads((tmp_path / "run/run.json").read_text())["rewrite"]
    (o,) = doc["outcomes"]
    assert o["failed_generations"] == 24 and o["verdict"] is None
    # every query searched its own vector: the same ranking as the raw query
    pq_rows = pq.read_table(tmp_path / "run/per_query.parquet").to_pylist()
    by = {}
    for r in pq_rows:
        by.setdefault(r["config_id"], {})[(r["query_id"], r["metric"])] = r["value"]
    a, b = list(by.values())
    assert a == b
    # the generation latency is part of the rewritten config's e2e latency
    lat = pq.read_table(tmp_path / "run/latency.parquet").to_pylist()
    assert any("rewrite_generate" in json.loads(r["stage_ms_json"]) for r in lat)


def test_a_generative_rewriter_needs_a_generator_block(compose_cfg) -> None:  # type: ignore[no-untyped-def]
    from bench.errors import ConfigError
    from bench.pipeline.components import build_components

    cfg = compose_cfg(["dataset=synthetic", "rewriter=hyde", "~rewriter.generator"])
    with pytest.raises(ConfigError) as e:
        build_components(cfg, "cpu")
    assert e.value.key == "rewriter.generator"
