"""Bo1 on the lexical lane: Terrier's expansion checked against numbers computed by hand from
its definition, the collection statistics counted from the index's own tokens, and the lane
it adds (its statistics an index-time node, cached)."""

from __future__ import annotations

from math import log2
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.config.build import OptionError
from bench.lexical.bm25 import BM25Index
from bench.rewrite.bo1 import Bo1Rewriter, CollectionStats

# three feedback documents (index tokens), best first, in a collection of N = 10 documents
D1 = ["cat", "cat", "dog", "owl"]
D2 = ["cat", "dog", "fish"]
D3 = ["dog", "emu"]
STATS = CollectionStats(cf={"cat": 8, "dog": 4, "owl": 2, "fish": 1, "emu": 1},
                        df={"cat": 5, "dog": 3, "owl": 2, "fish": 1, "emu": 1},
                        n_docs=10, n_tokens=40)
# tfx (frequency in the three): cat 2 + 1 = 3, dog 1 + 1 + 1 = 3; Pn = F / N
W_CAT = 3 * log2((1 + 8 / 10) / (8 / 10)) + log2(1 + 8 / 10)
W_DOG = 3 * log2((1 + 4 / 10) / (4 / 10)) + log2(1 + 4 / 10)
W_OWL = 1 * log2((1 + 2 / 10) / (2 / 10)) + log2(1 + 2 / 10)
# parameter-free normaliser: the Bo1 formula at the heaviest term's tfx (dog: 3), f = 3 / N
NORM = 3 * log2((1 + 3 / 10) / (3 / 10)) + log2(1 + 3 / 10)


def test_the_expansion_is_terriers_bo1_computed_by_hand() -> None:
    bo1 = Bo1Rewriter()  # Terrier's defaults: 3 documents, 10 terms, min 2 documents
    got = bo1.expand(["cat"], [D1, D2, D3], STATS)
    # owl, fish, emu occur in one feedback document each (< 2): weight 0, not added;
    # cat (the query term, held by 2) and dog (held by 3) are added to the query's weights
    assert [t for t, _ in got] == ["cat", "dog"]
    assert dict(got) == pytest.approx({"cat": 1 + W_CAT / NORM, "dog": W_DOG / NORM},
                                      rel=1e-12)
    assert W_DOG > W_CAT  # dog is the heaviest term, so its tfx sets the normaliser


def test_without_parameter_free_the_heaviest_weight_normalises_times_beta() -> None:
    bo1 = Bo1Rewriter(parameter_free=False, beta=0.4)
    got = dict(bo1.expand(["cat"], [D1, D2, D3], STATS))
    assert got == pytest.approx({"cat": 1 + 0.4 * W_CAT / W_DOG, "dog": 0.4}, rel=1e-12)


def test_min_docs_applies_only_with_enough_feedback_documents_and_fb_terms_cuts() -> None:
    # one feedback document (< min_docs 2): nothing is filtered; D1: cat 2, dog 1, owl 1
    w_cat = 2 * log2((1 + 8 / 10) / (8 / 10)) + log2(1 + 8 / 10)
    w_dog = 1 * log2((1 + 4 / 10) / (4 / 10)) + log2(1 + 4 / 10)
    # heaviest: w_cat (3.19) > w_owl (2.85) > w_dog (2.29); normaliser at tfx 2, f = 2 / 10
    norm = 2 * log2((1 + 2 / 10) / (2 / 10)) + log2(1 + 2 / 10)
    got = dict(Bo1Rewriter(fb_docs=1).expand(["cat"], [D1, D2, D3], STATS))
    assert got == pytest.approx({"cat": 1 + w_cat / norm, "owl": W_OWL / norm,
                                 "dog": w_dog / norm}, rel=1e-12)
    # fb_terms 2 with a one-term query: the 2 heaviest (cat, owl) reweighted, dog left out
    cut = dict(Bo1Rewriter(fb_docs=1, fb_terms=2).expand(["cat"], [D1], STATS))
    assert cut == pytest.approx({"cat": 1 + w_cat / norm, "owl": W_OWL / norm}, rel=1e-12)


def test_the_query_keeps_its_term_counts_without_feedback() -> None:
    assert dict(Bo1Rewriter().expand(["cat", "cat", "dog"], [], STATS)) == {"cat": 2.0,
                                                                            "dog": 1.0}


@pytest.mark.parametrize("kwargs,key", [({"fb_docs": 0}, "fb_docs"), ({"fb_terms": 0}, "fb_terms"),
                                        ({"min_docs": 0}, "min_docs"), ({"beta": 0.0}, "beta")])
def test_bad_options(kwargs: dict, key: str) -> None:
    with pytest.raises(OptionError) as e:
        Bo1Rewriter(**kwargs)
    assert e.value.option == key


def test_collection_statistics_count_the_index_tokens() -> None:
    corpus = ["the quick brown fox jumps over the lazy dog", "a lazy dog sleeps all day",
              "the dog and the dog"]
    built = BM25Index().build(corpus)
    stats = CollectionStats.of(built.analyze(corpus))
    # "the", "a", "and", "all", "over" are bm25s English stop words: not counted
    assert (stats.cf["dog"], stats.df["dog"]) == (1 + 1 + 2, 3)
    assert (stats.cf["lazy"], stats.df["lazy"]) == (2, 2)
    assert "the" not in stats.cf and stats.n_docs == 3
    assert stats.n_tokens == sum(stats.cf.values()) == len(built.analyze(corpus)[0]) + \
        len(built.analyze(corpus)[1]) + len(built.analyze(corpus)[2])
    assert built.doc_freq(["dog", "lazy"]).tolist() == [stats.df["dog"], stats.df["lazy"]]


def test_a_bo1_lane_follows_the_bm25_config(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from bench.pipeline.run import run

    over = ["dataset=synthetic", f"cache_dir={tmp_path / 'cache'}", "lexical=bm25",
            "rewriter=bo1", "metrics.bootstrap_resamples=200", "latency.queries=4",
            "latency.warmup=1"]
    res = run(compose_cfg(over), tmp_path / "run")
    assert res.exit_code == 0
    rows = {r["label"]: r for r in pq.read_table(tmp_path / "run/configs.parquet").to_pylist()}
    assert list(rows) == ["dense", "bm25", "bm25>bo1"]
    assert rows["bm25>bo1"]["kind"] == "lexical"
    assert rows["bm25>bo1"]["parent_config_id"] == rows["bm25"]["config_id"]
    stats = [k for k in res.cache_hits if k.startswith("lexical_stats")]
    assert len(stats) == 1 and not res.cache_hits[stats[0]]
    # a second run reads the statistics from the cache (an index-time artifact)
    again = run(compose_cfg(over), tmp_path / "run2")
    assert again.exit_code == 0 and again.cache_hits[stats[0]]
