"""index=torch_flat against faiss Flat (the CPU reference): same ids up to ties, same scores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.config.build import OptionError
from bench.index.exact import exact_topk
from bench.index.torch_flat import MISSING_SCORE, VECTORS_FILE, TorchFlatIndex


def _data(n: int = 1000, d: int = 32, n_q: int = 41, seed: int = 3) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = rng.standard_normal((n_q, d)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return x, q


@pytest.mark.parametrize(("query_batch", "block_rows", "k"),
                         [(1024, 65536, 10), (7, 97, 10), (1, 1000, 25), (16, 3, 5)])
def test_same_top_k_as_faiss_flat(query_batch: int, block_rows: int, k: int) -> None:
    # block_rows=97/3 and query_batch=7/1 force many blocks and batches through the merge
    x, q = _data()
    index = TorchFlatIndex(query_batch=query_batch, block_rows=block_rows)
    built, info = index.build(x)
    got = built.search(q, k, {})
    want = exact_topk(x, q, k)
    np.testing.assert_array_equal(got.ids, want.ids)  # continuous random scores: no ties
    np.testing.assert_allclose(got.scores, want.scores, rtol=1e-5, atol=1e-6)
    assert got.ids.dtype == np.int64 and got.scores.dtype == np.float32
    assert (info.n_vectors, info.dim, info.index_bytes) == (1000, 32, 1000 * 32 * 4)


def test_ties_return_a_member_of_the_tie_with_the_same_scores() -> None:
    # every vector appears 3 times: each score is a 3-way tie, so only the score multiset and
    # the exactness of each returned id's score can be compared with faiss
    x, q = _data(n=120, d=8)
    x3 = np.repeat(x, 3, axis=0)
    got = TorchFlatIndex(block_rows=50, query_batch=9).build(x3)[0].search(q, 7, {})
    want = exact_topk(x3, q, 7)
    np.testing.assert_allclose(got.scores, want.scores, rtol=1e-5, atol=1e-6)
    exact_scores = np.einsum("qd,qkd->qk", q, x3[got.ids])
    np.testing.assert_allclose(got.scores, exact_scores, rtol=1e-5, atol=1e-6)
    # equal scores come out in id order, whatever the block boundaries
    for row_s, row_i in zip(got.scores, got.ids, strict=True):
        for j in range(len(row_s) - 1):
            if row_s[j] == row_s[j + 1]:
                assert row_i[j] < row_i[j + 1]


def test_k_above_n_pads_like_faiss() -> None:
    x, q = _data(n=4, d=8, n_q=2)
    got = TorchFlatIndex().build(x)[0].search(q, 6, {})
    assert (got.ids[:, 4:] == -1).all() and (got.scores[:, 4:] == MISSING_SCORE).all()
    assert sorted(got.ids[0, :4].tolist()) == [0, 1, 2, 3]


def test_save_load_roundtrip_is_a_plain_npy(tmp_path: Path) -> None:
    x, q = _data(n=300)
    index = TorchFlatIndex(block_rows=64)
    built, _ = index.build(x)
    built.save(tmp_path)
    assert np.load(tmp_path / VECTORS_FILE, allow_pickle=False).shape == (300, 32)
    again = index.load(tmp_path).search(q, 10, {})
    first = built.search(q, 10, {})
    np.testing.assert_array_equal(again.ids, first.ids)
    np.testing.assert_array_equal(again.scores, first.scores)


def test_options_are_validated() -> None:
    with pytest.raises(OptionError, match="needs device=cuda"):
        TorchFlatIndex(precision="bf16", device="cpu")
    with pytest.raises(OptionError, match="query_batch"):
        TorchFlatIndex(query_batch=0)
    with pytest.raises(OptionError, match="block_rows"):
        TorchFlatIndex(block_rows=0)
    with pytest.raises(OptionError, match="no query-time parameters"):
        TorchFlatIndex(query_params=[{"nprobe": 4}])
    assert TorchFlatIndex().exact
    assert TorchFlatIndex().query_params() == [{}]


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
def test_cuda_precisions_match_the_cpu_reference(precision: str) -> None:
    # reference in float64 numpy, not faiss: the lent GPU machine has no faiss at all
    x, q = _data(n=20000, d=64, n_q=100)
    index = TorchFlatIndex(precision=precision, device="cuda", block_rows=4096)
    got = index.build(x)[0].search(q, 10, {})
    sims = q.astype(np.float64) @ x.T.astype(np.float64)
    want_ids = np.argsort(-sims, axis=1)[:, :10]
    want_scores = np.take_along_axis(sims, want_ids, 1)
    tol = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1.6e-2}[precision]
    np.testing.assert_allclose(got.scores, want_scores, atol=tol)
    # rounding may swap near-equal neighbours; most of the top-10 must agree
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got.ids, want_ids,
                                                                   strict=True)])
    assert overlap >= (1.0 if precision == "fp32" else 0.9)
    assert index.exact == (precision == "fp32")
