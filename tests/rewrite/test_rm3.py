"""RM3 on the lexical lane: Anserini's relevance model checked against numbers computed by
hand from its definition, the weighted BM25 search, and the lane it adds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bench.config.build import OptionError
from bench.lexical.bm25 import BM25Index
from bench.rewrite.rm3 import RM3Rewriter

# feedback documents (index tokens) and their first-search scores
D1 = ["cat", "cat", "cat", "dog", "dog", "bird", "a", "común"]  # "a": < 2 chars; "común":
D2 = ["dog", "dog", "fish", "cat", "zebra"]                     # not [a-z0-9]+
DF = {"zebra": 0.9}  # share of indexed documents holding a term (others 0.1)


def df_ratio(term: str) -> float:
    return DF.get(term, 0.1)


def test_the_expansion_is_anserinis_rm3_computed_by_hand() -> None:
    rm3 = RM3Rewriter(fb_docs=2, fb_terms=3, original_query_weight=0.5, max_df_ratio=0.5)
    # D1 after the filters: cat 3, dog 2, bird 1 (a, común dropped); |D1|_1 = 6
    # D2: zebra dropped (df 0.9 > 0.5): dog 2, fish 1, cat 1; |D2|_1 = 4
    # rm(cat)  = 3/6 * 2.0 + 1/4 * 1.0 = 1.25
    # rm(dog)  = 2/6 * 2.0 + 2/4 * 1.0 = 7/6
    # rm(bird) = 1/6 * 2.0             = 1/3
    # rm(fish) =             1/4 * 1.0 = 1/4   -> pruned (fb_terms = 3)
    # L1 over the three kept: 1.25 + 7/6 + 1/3 = 2.75 (11/4)
    # w = 0.5 * qfv + 0.5 * rm, qfv = {cat: 1}:
    #   cat = 0.5 + 0.5 * 1.25 / 2.75 = 8/11; dog = 0.5 * (7/6) / 2.75 = 7/33;
    #   bird = 0.5 * (1/3) / 2.75 = 2/33
    got = rm3.expand(["cat"], [(D1, 2.0), (D2, 1.0)], df_ratio)
    assert [t for t, _ in got] == ["cat", "dog", "bird"]
    np.testing.assert_allclose([w for _, w in got], [8 / 11, 7 / 33, 2 / 33], rtol=1e-12)
    assert abs(sum(w for _, w in got) - 1.0) < 1e-12


def test_per_document_pruning_and_its_tie_rule() -> None:
    rm3 = RM3Rewriter(fb_docs=1, fb_terms=2, original_query_weight=0.0, max_df_ratio=0.5)
    # D2 pruned to 2 terms: dog 2, then cat and fish tie at 1 -> "cat" (sorts first) kept;
    # |D2|_1 = 3; rm = {dog: 2/3, cat: 1/3} (score 1.0), already unit L1; weight 0 on the query
    got = dict(rm3.expand(["owl"], [(D2, 1.0)], df_ratio))
    assert got == pytest.approx({"dog": 2 / 3, "cat": 1 / 3, "owl": 0.0})


def test_feedback_documents_are_capped_at_fb_docs_and_the_query_stays_without_any() -> None:
    rm3 = RM3Rewriter(fb_docs=1, fb_terms=10, original_query_weight=0.5, max_df_ratio=0.5)
    one = dict(rm3.expand(["cat"], [(D1, 2.0), (D2, 1.0)], df_ratio))
    assert "fish" not in one  # only D1 read
    # D1: cat 3/6*2 = 1, dog 2/3, bird 1/3; L1 2 -> cat 0.5, dog 1/3, bird 1/6
    assert one == pytest.approx({"cat": 0.5 + 0.25, "dog": 1 / 6, "bird": 1 / 12})
    assert dict(rm3.expand(["cat", "cat", "dog"], [], df_ratio)) == pytest.approx(
        {"cat": 2 / 3, "dog": 1 / 3})


@pytest.mark.parametrize("kwargs,key", [({"fb_docs": 0}, "fb_docs"), ({"fb_terms": 0}, "fb_terms"),
                                        ({"original_query_weight": 1.5}, "original_query_weight"),
                                        ({"max_df_ratio": 0.0}, "max_df_ratio")])
def test_bad_options(kwargs: dict, key: str) -> None:
    with pytest.raises(OptionError) as e:
        RM3Rewriter(**kwargs)
    assert e.value.option == key


CORPUS = ["the quick brown fox jumps over the lazy dog", "a lazy dog sleeps all day",
          "quantum chromodynamics describes gluons and quarks", "the fox and the dog are friends",
          "gluons bind quarks"]


def test_weighted_search_is_the_weighted_sum_of_per_term_bm25_scores() -> None:
    built = BM25Index().build(CORPUS)
    one = {t: built.search([t], k=5) for t in ("fox", "dog")}
    per = {t: dict(zip(r.ids[0].tolist(), r.scores[0].tolist(), strict=True))
           for t, r in one.items()}
    res = built.search_weighted([[("fox", 2.0), ("dog", 0.5), ("unseen", 3.0)]], k=5)
    got = {int(i): float(s) for i, s in zip(res.ids[0], res.scores[0], strict=True) if i >= 0}
    want = {d: 2.0 * per["fox"].get(d, 0.0) + 0.5 * per["dog"].get(d, 0.0)
            for d in set(per["fox"]) | set(per["dog"]) if d >= 0}
    assert got == pytest.approx(want, rel=1e-6)
    # unit weights give the plain search's scores
    plain = built.search(["fox dog"], k=5)
    unit = built.search_weighted([[("fox", 1.0), ("dog", 1.0)]], k=5)
    assert unit.ids.tolist() == plain.ids.tolist()
    np.testing.assert_allclose(unit.scores, plain.scores, rtol=1e-6)
    assert built.doc_freq(["dog", "gluon", "nothing"]).tolist() == [3, 0, 0]  # no stemmer


def test_an_rm3_lane_follows_the_bm25_config(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from bench.pipeline.run import run

    cfg = compose_cfg(["dataset=synthetic", f"cache_dir={tmp_path / 'cache'}", "lexical=bm25",
                       "rewriter=rm3", "metrics.bootstrap_resamples=200",
                       "latency.queries=4", "latency.warmup=1"])
    res = run(cfg, tmp_path / "run")
    assert res.exit_code == 0
    rows = {r["label"]: r for r in pq.read_table(tmp_path / "run/configs.parquet").to_pylist()}
    assert list(rows) == ["dense", "bm25", "bm25>rm3"]
    assert rows["bm25>rm3"]["kind"] == "lexical"
    assert rows["bm25>rm3"]["parent_config_id"] == rows["bm25"]["config_id"]
    cmp = pq.read_table(tmp_path / "run/comparisons.parquet").to_pylist()
    assert any(c["baseline_config_id"] == rows["bm25"]["config_id"]
               and c["config_id"] == rows["bm25>rm3"]["config_id"] for c in cmp)
