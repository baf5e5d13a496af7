"""Fusion of the dense and lexical pools: RRF and convex combination."""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from bench.app import CONF_DIR
from bench.config.build import OptionError, build
from bench.errors import ConfigError
from bench.fusion.base import FusionVariant, trec_perm
from bench.fusion.convex import ConvexFusion
from bench.fusion.rrf import RRFFusion
from bench.metrics.engine import Run, rrf
from bench.retrieval.base import Hits, order_key

# doc_idx -> external id; "d10" < "d9" in byte order, so id_key is not the doc_idx order
IDS = ["a", "b", "c", "d", "e", "d10", "d9"]
KEY = order_key(IDS)


def hits(*queries: list[tuple[int, float]]) -> Hits:
    """Hits from per-query [(doc_idx, score), ...] in the given order."""
    offsets = np.cumsum([0, *(len(q) for q in queries)], dtype=np.int64)
    docs = [d for q in queries for d, _ in q]
    scores = [s for q in queries for _, s in q]
    return Hits(offsets, np.array(docs, dtype=np.int32), np.array(scores, dtype=np.float32))


def f32(values: list[float]) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def ranking(h: Hits, q: int) -> list[str]:
    return [IDS[d] for d in h.for_query(q)[0]]


A, B, C, D, E = range(5)


def test_rrf_hand_example_with_ties_broken_by_id_desc() -> None:
    dense = hits([(A, 0.9), (B, 0.8), (C, 0.7)], [(E, 0.5)])
    sparse = hits([(B, 12.0), (A, 11.0), (D, 10.0)], [])
    fusion = RRFFusion()
    (variant,) = fusion.variants()
    assert variant == FusionVariant("rrf(k=60)", (("k", 60),))
    fused = fusion.fuse(dense, sparse, variant, id_key=KEY, k=10)
    # a: 1/61 + 1/62, b: 1/62 + 1/61 (exact tie -> "b" before "a"); c: 1/63, d: 1/63 (-> d, c)
    assert ranking(fused, 0) == ["b", "a", "d", "c"]
    expected = np.array([1 / 61 + 1 / 62, 1 / 61 + 1 / 62, 1 / 63, 1 / 63], dtype=np.float32)
    np.testing.assert_array_equal(fused.for_query(0)[1], expected)
    assert fused.scores.dtype == np.float32
    # a query only one lane answered
    assert ranking(fused, 1) == ["e"]
    assert fused.for_query(1)[1].tolist() == [np.float32(1 / 61)]
    # cut at k documents per query
    cut = fusion.fuse(dense, sparse, variant, id_key=KEY, k=3)
    assert cut.offsets.tolist() == [0, 3, 4]
    assert ranking(cut, 0) == ["b", "a", "d"]


def test_rrf_ranks_lanes_in_trec_order_whatever_the_stored_order() -> None:
    # equal scores: "d9" > "d10" in byte order, so d9 is rank 1 of the dense lane
    dense = hits([(5, 1.0), (6, 1.0)])
    sparse = hits([])
    fused = RRFFusion(k=[1]).fuse(dense, sparse, RRFFusion(k=[1]).variants()[0], id_key=KEY, k=5)
    assert ranking(fused, 0) == ["d9", "d10"]
    np.testing.assert_array_equal(fused.scores, f32([1 / 2, 1 / 3]))


def _random_hits(rng: np.random.Generator, n_q: int, n_docs: int) -> Hits:
    queries = []
    for _ in range(n_q):
        size = int(rng.integers(0, 12))
        docs = rng.choice(n_docs, size=size, replace=False)
        scores = rng.integers(0, 4, size=size) / 4  # coarse scores: many exact ties
        queries.append(list(zip(docs.tolist(), scores.tolist(), strict=True)))
    return hits(*queries)


def _run(h: Hits, ids: np.ndarray) -> Run:
    qids = tuple(f"q{i}" for i in range(h.n_queries))
    return Run(qids, h.offsets, ids[h.doc_idx], h.scores.astype(np.float64))


@pytest.mark.parametrize("rrf_k", [0, 60])
def test_rrf_equals_metrics_engine_rrf(rrf_k: int) -> None:
    rng = np.random.default_rng(7)
    n_docs = 40
    ids = np.array([f"doc{i}" for i in rng.permutation(n_docs)])  # byte order != index order
    key = order_key(ids.tolist())
    dense, sparse = _random_hits(rng, 30, n_docs), _random_hits(rng, 30, n_docs)
    fusion = RRFFusion(k=[rrf_k])
    fused = fusion.fuse(dense, sparse, fusion.variants()[0], id_key=key, k=n_docs)
    ref = rrf([_run(dense, ids), _run(sparse, ids)], k=rrf_k)
    assert ref.query_ids == tuple(f"q{i}" for i in range(30))
    np.testing.assert_array_equal(fused.offsets, ref.offsets)
    np.testing.assert_array_equal(ids[fused.doc_idx], ref.doc_ids)
    assert ref.scores is not None
    np.testing.assert_array_equal(fused.scores, ref.scores.astype(np.float32))


def test_convex_minmax_hand_example() -> None:
    dense = hits([(A, 0.75), (B, 0.5), (C, 0.25)])
    sparse = hits([(B, 10.0), (D, 4.0), (A, 2.0)])
    fusion = ConvexFusion(alpha=[0.5], normalization=["minmax"])
    (variant,) = fusion.variants()
    assert variant.name == "convex(alpha=0.5,minmax)"
    fused = fusion.fuse(dense, sparse, variant, id_key=KEY, k=10)
    # dense: a 1, b (0.5-0.25)/(0.75-0.25) = 0.5, c 0, d absent -> lane min 0
    # sparse: b 1, d (4-2)/(10-2) = 0.25, a 0, c absent -> lane min 0
    assert ranking(fused, 0) == ["b", "a", "d", "c"]
    expected = [0.5 * 0.5 + 0.5 * 1, 0.5 * 1 + 0.5 * 0, 0.5 * 0 + 0.5 * 0.25, 0.0]
    np.testing.assert_array_equal(fused.scores, f32(expected))


def test_convex_zscore_hand_example_absent_gets_lane_minimum() -> None:
    dense = hits([(A, 3.0), (B, 2.0), (C, 1.0)])
    sparse = hits([(C, 4.0), (D, 2.0)])
    fusion = ConvexFusion(alpha=[0.25], normalization=["zscore"])
    fused = fusion.fuse(dense, sparse, fusion.variants()[0], id_key=KEY, k=10)
    # dense: mean 2, population std sqrt(2/3) -> a +sqrt(1.5), b 0, c -sqrt(1.5); d absent ->
    # -sqrt(1.5). sparse: mean 3, std 1 -> c +1, d -1; a, b absent -> -1
    z = math.sqrt(1.5)
    expected = {
        "a": 0.25 * z + 0.75 * -1,
        "b": 0.25 * 0 + 0.75 * -1,
        "c": 0.25 * -z + 0.75 * 1,
        "d": 0.25 * -z + 0.75 * -1,
    }
    order = sorted(expected, key=lambda d: -expected[d])
    assert ranking(fused, 0) == order
    np.testing.assert_allclose(fused.scores, [expected[d] for d in order], rtol=1e-6)


def test_convex_flat_lane_and_empty_lane() -> None:
    # one sparse hit: min == max -> 1.0, and absent docs get that lane minimum (1.0) too;
    # the second query has no sparse hit at all: that lane adds 0
    dense = hits([(A, 0.75), (B, 0.25)], [(C, 0.5), (D, 0.25)])
    sparse = hits([(B, 3.0)], [])
    fusion = ConvexFusion(alpha=[0.5])
    fused = fusion.fuse(dense, sparse, fusion.variants()[0], id_key=KEY, k=10)
    assert ranking(fused, 0) == ["a", "b"]
    np.testing.assert_array_equal(fused.for_query(0)[1], f32([0.5 + 0.5, 0 + 0.5]))
    assert ranking(fused, 1) == ["c", "d"]
    np.testing.assert_array_equal(fused.for_query(1)[1], f32([0.5 * 1, 0.5 * 0]))


@pytest.mark.parametrize("normalization", ["minmax", "zscore"])
def test_convex_alpha_one_is_the_dense_ranking(normalization: str) -> None:
    rng = np.random.default_rng(3)
    n_docs = 7
    for _ in range(20):
        docs = rng.permutation(n_docs)
        dense = hits(
            list(zip(docs.tolist(), rng.permutation(n_docs).astype(float).tolist(), strict=True))
        )
        sub = rng.choice(n_docs, size=4, replace=False)  # sparse docs are a subset of dense
        sparse = hits(list(zip(sub.tolist(), rng.normal(size=4).tolist(), strict=True)))
        fusion = ConvexFusion(alpha=[1.0, 0.0], normalization=[normalization])
        by_dense, by_sparse = (
            fusion.fuse(dense, sparse, v, id_key=KEY, k=n_docs) for v in fusion.variants()
        )
        dense_order = np.argsort(-dense.scores, kind="stable")
        assert by_dense.doc_idx.tolist() == dense.doc_idx[dense_order].tolist()
        # alpha = 0: dense-only docs tie with the last sparse doc (lane minimum), so compare
        # the sparse docs' relative order
        sparse_order = sparse.doc_idx[np.argsort(-sparse.scores, kind="stable")].tolist()
        assert [d for d in by_sparse.doc_idx.tolist() if d in sparse_order] == sparse_order


def test_variants_sweep_every_combination() -> None:
    names = [
        v.name for v in ConvexFusion(alpha=[0, 1], normalization=["minmax", "zscore"]).variants()
    ]
    assert names == [
        "convex(alpha=0.0,minmax)",
        "convex(alpha=1.0,minmax)",
        "convex(alpha=0.0,zscore)",
        "convex(alpha=1.0,zscore)",
    ]
    assert [v.name for v in RRFFusion(k=[10, 60]).variants()] == ["rrf(k=10)", "rrf(k=60)"]


def test_pools_must_cover_the_same_queries_once() -> None:
    fusion = RRFFusion()
    with pytest.raises(ValueError, match="sparse pool has 2 queries"):
        fusion.fuse(hits([]), hits([], []), fusion.variants()[0], id_key=KEY, k=5)
    with pytest.raises(ValueError, match="twice"):
        fusion.fuse(hits([(A, 1.0), (A, 0.5)]), hits([]), fusion.variants()[0], id_key=KEY, k=5)


@pytest.mark.parametrize(
    ("make", "option"),
    [
        (lambda: RRFFusion(k=[]), "k"),
        (lambda: RRFFusion(k=[-1]), "k"),
        (lambda: RRFFusion(k=[60, 60]), "k"),
        (lambda: ConvexFusion(alpha=[1.5]), "alpha"),
        (lambda: ConvexFusion(alpha=[-0.1]), "alpha"),
        (lambda: ConvexFusion(alpha=[]), "alpha"),
        (lambda: ConvexFusion(normalization=["l2"]), "normalization"),
        (lambda: ConvexFusion(normalization=["minmax", "minmax"]), "normalization"),
    ],
)
def test_option_validation(make: object, option: str) -> None:
    with pytest.raises(OptionError) as err:
        make()  # type: ignore[operator]
    assert err.value.option == option


@pytest.mark.parametrize(("name", "cls"), [("rrf", RRFFusion), ("convex", ConvexFusion)])
def test_yaml_lists_every_option_with_its_default(name: str, cls: type) -> None:
    node = OmegaConf.load(Path(CONF_DIR) / "fusion" / f"{name}.yaml")
    options = dict(OmegaConf.to_container(node))  # type: ignore[arg-type]
    del options["_target_"]
    defaults = {n: list(p.default) for n, p in inspect.signature(cls).parameters.items()}
    assert options == defaults
    assert isinstance(build(node, "fusion"), cls)
    assert build(OmegaConf.load(Path(CONF_DIR) / "fusion" / "none.yaml"), "fusion") is None


def test_bad_config_value_names_the_key() -> None:
    node = OmegaConf.load(Path(CONF_DIR) / "fusion" / "convex.yaml")
    with pytest.raises(ConfigError, match=r"fusion\.alpha"):
        build(OmegaConf.merge(node, {"alpha": [2.0]}), "fusion")


@pytest.mark.parametrize("n_queries", [50, 2**40])  # packed uint64 key / two-key lexsort
def test_trec_perm_matches_the_reference_order(n_queries: int) -> None:
    rng = np.random.default_rng(11)
    n, n_docs = 5000, 300
    key = rng.permutation(n_docs).astype(np.int64)
    query = np.sort(rng.integers(0, 50, n))
    doc = rng.integers(0, n_docs, n)
    values = f32([-1.5, -0.0, 0.0, 2.25, 1e-30, -1e-30, 3.0, np.inf, -np.inf])
    score = rng.choice(values, n)
    ref = np.lexsort((-key[doc], -score, query))  # -0.0 == 0.0 here too
    perm = trec_perm(query, doc, score, key, n_queries)
    np.testing.assert_array_equal(query[perm], query[ref])
    np.testing.assert_array_equal(score[perm], score[ref])
    np.testing.assert_array_equal(key[doc[perm]], key[doc[ref]])
