"""Compile every CPU kernel once, for every signature bench uses, into numba's disk cache."""

from __future__ import annotations

import numpy as np


def warmup() -> None:
    """Run each CPU kernel on a tiny input for both id unit types (bytes and code points).

    Numba writes each compiled signature next to the module (``__pycache__``, or the user-wide
    cache if that is read-only); a later process loads it instead of compiling.
    """
    from bench_kernels import api

    for ids in (np.array([b"d1", b"d2"]), np.array(["d1", "d2"])):
        units = api.id_units(ids)
        offsets = np.array([0, 2], dtype=np.int64)
        scores = np.array([1.0, 1.0])
        api.score_keys(scores)
        api.hash_rows(units)
        api.find_duplicates(units, offsets)
        rels = np.array([1, 0], dtype=np.int32)
        hashes, ideal, _ = api.prepare_qrels(units, offsets, rels)
        for s in (scores, None):
            api.rank_runs(units, offsets, s)
            api.evaluate_runs(
                units, offsets, s, units, offsets, rels, (hashes, ideal),
                np.array([1]), np.array([0]), np.array([0]), np.array([0, 6]),
                np.array([2, 0]), 1,
            )
        api.rrf_fuse(units, np.array([[0, 0]]), np.array([[2, 2]]), 60.0)
    data = np.frombuffer(b"ab", dtype=np.uint8)
    api.pack_ids(data, np.array([0, 1, 2]), np.zeros((2, 1), np.uint8), 0)
    api.segment_starts(data, np.array([0, 1, 2]))
    line = np.frombuffer(b"q Q0 d 1 0.5 t\n", dtype=np.uint8)
    for as_int in (False, True):
        api.scan_trec_lines(line, 6, 0, 0, 2, 4, as_int, 3)
    api.pack_spans(line, np.array([0]), np.array([1]), 1)
    ids2 = np.array([[1, 2]], dtype=np.int64)
    dist = np.array([[0.1, 0.2]])
    api.ann_recall(ids2, dist, ids2, dist, 2)
    api.bootstrap_means(np.array([[1.0, 2.0]]), 4, 0)
    api.sign_flip_count(np.array([1.0, 2.0]), 4, 0, 1.0)
