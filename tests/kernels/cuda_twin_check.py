"""Run every CUDA twin against its CPU kernel on random inputs; exit 0 when all agree.

Run by tests/kernels/test_cuda_twins.py in a subprocess, with NUMBA_ENABLE_CUDASIM=1 (numba's
CUDA simulator, any machine) or on a real GPU. Usage: cuda_twin_check.py [n_queries]. Ties,
graded and negative qrels, unjudged docs, missing and unscored runs are all in the data.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from bench_kernels import _core, api


def _case(rng: np.random.Generator, nq: int, kind: str):  # type: ignore[no-untyped-def]
    sizes = rng.integers(0, 12, nq)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    ids = []
    for m in sizes:
        ids += [f"d{x}" for x in rng.choice(40, m, replace=False)]
    arr = np.array(ids if ids else ["x"], dtype=kind)[: offsets[-1]]
    scores = rng.integers(0, 4, offsets[-1]).astype(np.float64) / 2
    return api.id_units(arr), offsets, scores


def main(nq: int) -> int:
    from bench_kernels import cpu, cuda

    rng = np.random.default_rng(7)
    failures = []

    def same(name: str, a: Any, b: Any) -> None:
        for x, y in zip(np.atleast_1d(a) if not isinstance(a, tuple) else a,
                        np.atleast_1d(b) if not isinstance(b, tuple) else b, strict=True):
            x, y = np.asarray(x), np.asarray(y)
            ok = x.shape == y.shape and (
                np.allclose(x, y, rtol=0, atol=1e-12) if x.dtype.kind == "f"
                else np.array_equal(x, y))
            if not ok:
                failures.append(name)
                return

    for kind in ("U", "S"):
        units, offsets, scores = _case(rng, nq, kind)
        same(f"hash_rows {kind}", cpu.hash_rows(units), cuda.hash_rows(units))
        same(f"find_duplicates {kind}", cpu.find_duplicates(units, offsets),
             cuda.find_duplicates(units, offsets))
        dup_units = units.copy()
        if offsets[1] >= 2:
            dup_units[1] = dup_units[0]
        same(f"find_duplicates planted {kind}", cpu.find_duplicates(dup_units, offsets),
             cuda.find_duplicates(dup_units, offsets))
        # qrels: a random judged subset (grades -1..3) of each query's slice, one planted NaN
        picked = rng.random(len(units)) < 0.5
        per_query = np.bincount(np.repeat(np.arange(nq), np.diff(offsets))[picked],
                                minlength=nq)
        q_off = np.concatenate([[0], np.cumsum(per_query)]).astype(np.int64)
        q_units = np.ascontiguousarray(units[picked])
        rels = rng.integers(-1, 4, len(q_units)).astype(np.int32)
        prepared = cpu.prepare_qrels(q_units, q_off, rels)[:2]
        num_rel = np.bincount(np.repeat(np.arange(nq), per_query), weights=rels >= 1,
                              minlength=nq).astype(np.int64)
        expected = np.flatnonzero(num_rel > 0).astype(np.int64)
        run_of = expected.copy()
        run_of[::5] = -1
        fams = np.array(list(_core.FAMILY_CODES.values()) * 2, dtype=np.int64)
        ks = np.array([3] * 8 + [0, 0, 5, 5, 5, 0, 0, 0], dtype=np.int64)
        nan_scores = scores.copy()
        nan_scores[offsets[expected[1]]] = np.nan
        for s, has in ((scores, True), (scores, False), (nan_scores, True)):
            same(f"rank_runs {kind} {has}", cpu.rank_runs(units, offsets, s, has)[:2],
                 cuda.rank_runs(units, offsets, s, has)[:2])
            args = (units, offsets, s, has, q_units, q_off, prepared[0], rels, prepared[1],
                    num_rel, expected, run_of, fams, ks, np.int64(1))
            same(f"evaluate_runs {kind} {has}", cpu.evaluate_runs(*args),
                 cuda.evaluate_runs(*args))
        ranked = cpu.rank_runs(units, offsets, scores, True)[0]
        half = nq // 2
        starts = np.stack([offsets[:half], offsets[half:2 * half]], axis=1).astype(np.int64)
        ends = np.stack([offsets[1:half + 1], offsets[half + 1:2 * half + 1]], axis=1)
        ends = np.minimum(ends, starts + 6).astype(np.int64)
        ru = np.ascontiguousarray(units[ranked])
        same(f"rrf_fuse {kind}", cpu.rrf_fuse(ru, starts, ends, 60.0),
             cuda.rrf_fuse(ru, starts, ends, 60.0))

    ann = rng.integers(-1, 30, (nq, 10))
    exact = np.stack([rng.choice(30, 10, replace=False) for _ in range(nq)]).astype(np.int64)
    ed = np.sort(rng.integers(0, 5, (nq, 10)).astype(np.float64), axis=1)
    ad = rng.integers(0, 6, (nq, 10)).astype(np.float64)
    same("ann_recall", cpu.ann_recall(ann, ad, exact, ed, np.int64(10)),
         cuda.ann_recall(ann, ad, exact, ed, np.int64(10)))
    vals = rng.random((2, 37))
    same("bootstrap_means", cpu.bootstrap_means(vals, np.int64(50), np.uint64(3)),
         cuda.bootstrap_means(vals, np.int64(50), np.uint64(3)))
    deltas = rng.normal(0.1, 1.0, 45)
    same("sign_flip_count", cpu.sign_flip_count(deltas, np.int64(60), np.uint64(3), 0.1),
         cuda.sign_flip_count(deltas, np.int64(60), np.uint64(3), 0.1))
    if failures:
        print("twins differ: " + ", ".join(failures))
        return 1
    print("all twins agree")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 40))
