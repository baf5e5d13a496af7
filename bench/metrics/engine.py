"""Ranking evaluation, trec_eval ordering and RRF fusion on flat arrays.

``evaluate(qrels, run, metrics)`` equals pytrec_eval per query (ties and graded qrels included)
and aggregates by docs/metrics.md. The heavy work is one kernel call (``bench_kernels``,
CPU or CUDA by ``device``); this module only prepares arrays, vectorised.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import numpy as np

from bench.errors import BenchError
from bench.metrics.base import DuplicateDocError, Evaluation, Qrels, Run
from bench.metrics.registry import MetricSpec, UnknownMetricError, parse_metric
from bench_kernels import api

__all__ = ["AVERAGING", "Averaging", "Evaluation", "Qrels", "Run", "evaluate", "rank", "rrf"]

#: Which queries a mean is taken over (docs/metrics.md):
#: ``bench`` qrels queries with >= 1 relevant doc; a query without a run scores 0 (counted);
#: ``trec_eval`` trec_eval's default: qrels queries that also have a run, all-non-relevant
#: ones included (scoring 0); ``trec_eval_c`` trec_eval ``-c``: every qrels query, a query
#: without a run scoring 0.
Averaging = Literal["bench", "trec_eval", "trec_eval_c"]
AVERAGING: tuple[str, ...] = get_args(Averaging)


def _ranking_specs(metrics: Sequence[str]) -> list[MetricSpec]:
    specs: dict[str, MetricSpec] = {}
    for name in metrics:
        spec = parse_metric(name)
        if spec.kernel_code is None:
            raise UnknownMetricError(f"metric {spec.name!r} is not a ranking metric")
        specs.setdefault(spec.name, spec)
    if not specs:
        raise UnknownMetricError("no metric requested")
    return list(specs.values())


def _slice_rows(offsets: np.ndarray, picked: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the picked CSR slices, concatenated, and the new offsets."""
    lengths = offsets[picked + 1] - offsets[picked]
    new_offsets = np.zeros(len(picked) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    shift = np.repeat(offsets[picked] - new_offsets[:-1], lengths)
    return np.arange(new_offsets[-1], dtype=np.int64) + shift, new_offsets


def _query_index(offsets: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))


def _pick(ids: tuple[str, ...], idx: np.ndarray) -> tuple[str, ...]:
    if idx.size == len(ids):
        return ids
    return tuple(np.array(ids, dtype=object)[idx].tolist())


def _raise_duplicate(source: str, query_ids: Sequence[str], offsets: np.ndarray,
                     doc_ids: np.ndarray, dup: np.ndarray) -> None:
    """Raise DuplicateDocError for the earliest repeat in ``dup`` (-1 = none), if any."""
    bad = dup[dup >= 0]
    if bad.size:
        pos = int(bad.min())
        q = int(np.searchsorted(offsets, pos, side="right") - 1)
        doc = doc_ids[pos]
        doc = doc.decode("utf-8", "replace") if isinstance(doc, bytes) else str(doc)
        raise DuplicateDocError(source, query_ids[q], doc, pos)


def _raise_nan(run: Run, nan: np.ndarray) -> None:
    bad = nan[nan >= 0]
    if bad.size:
        pos = int(bad.min())
        q = run.query_ids[int(np.searchsorted(run.offsets, pos, side="right") - 1)]
        raise BenchError(f"run score of query {q!r} (row {pos}) is NaN: rankings need "
                         "comparable scores")


def _run_positions(qrels_ids: tuple[str, ...], run_ids: tuple[str, ...]) -> np.ndarray:
    """For each qrels query, its slice in the run or -1."""
    if qrels_ids == run_ids:  # the common case of a run written in qrels order
        return np.arange(len(qrels_ids), dtype=np.int64)
    pos = {qid: i for i, qid in enumerate(run_ids)}
    return np.array([pos.get(q, -1) for q in qrels_ids], dtype=np.int64)


def _prepared_qrels(
    qrels: Qrels, unit: np.dtype
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """(id units, (hashes, ideal grades)) of ``qrels`` for runs of ``unit`` ids; cached on the
    Qrels and checked for docs judged twice on first use."""
    key = f"units-{unit.str}"
    if key not in qrels.prepared:
        q_units = api.units_as(api.id_units(qrels.doc_ids), unit)
        hashes, ideal, dup = api.prepare_qrels(q_units, qrels.offsets, qrels.rels)
        _raise_duplicate("qrels", qrels.query_ids, qrels.offsets, qrels.doc_ids, dup)
        qrels.prepared[key] = (q_units, (hashes, ideal))
    return qrels.prepared[key]  # type: ignore[no-any-return]


def evaluate(
    qrels: Qrels,
    run: Run,
    metrics: Sequence[str],
    *,
    relevance_level: int = 1,
    device: str = "cpu",
    averaging: Averaging = "bench",
    max_docs: int | None = None,
) -> Evaluation:
    """Per-query values of ``metrics`` for the queries ``averaging`` selects from ``qrels``.

    ``bench`` (default): expected = judged docs with grade >= ``relevance_level`` (>= 1, as
    trec_eval) exist; a run without an expected query counts as an empty ranking and is listed
    in ``missing_runs``. ``trec_eval`` / ``trec_eval_c``: see :data:`Averaging`.
    ``max_docs``: keep each ranking's first N docs in trec_eval order (trec_eval ``-M``).
    Raises UnknownMetricError, DuplicateDocError (run or qrels), BenchError on a NaN score,
    DeviceError, ValueError on a relevance level below 1, a bad ``max_docs`` or averaging.
    """
    if relevance_level < 1:
        raise ValueError(f"relevance_level must be >= 1, got {relevance_level}")
    if averaging not in AVERAGING:
        raise ValueError(f"averaging must be one of {', '.join(AVERAGING)}, got {averaging!r}")
    specs = _ranking_specs(metrics)
    if max_docs is not None:
        run = _truncate(run, max_docs, device)
    n_rel = np.bincount(
        _query_index(qrels.offsets), weights=qrels.rels >= relevance_level,
        minlength=len(qrels.query_ids),
    ).astype(np.int64)
    all_positions = _run_positions(qrels.query_ids, run.query_ids)
    if averaging == "bench":
        expected = np.flatnonzero(n_rel > 0)
    elif averaging == "trec_eval":
        expected = np.flatnonzero(all_positions >= 0)
    else:
        expected = np.arange(len(qrels.query_ids), dtype=np.int64)
    run_units = api.id_units(run.doc_ids)
    q_units, prepared = _prepared_qrels(qrels, run_units.dtype)
    run_of_query = all_positions[expected]

    values, dup, nan = api.evaluate_runs(
        run_units, run.offsets, run.scores, q_units, qrels.offsets, qrels.rels,
        prepared,
        n_rel, expected, run_of_query,
        np.array([s.kernel_code for s in specs]), np.array([s.kernel_k for s in specs]),
        relevance_level, device=device,
    )
    _raise_duplicate("run", run.query_ids, run.offsets, run.doc_ids, dup)
    _raise_nan(run, nan)
    _check_unscored_runs(run, run_units, run_of_query, device)
    expected_ids = _pick(qrels.query_ids, expected)
    return Evaluation(
        query_ids=expected_ids,
        values={s.name: values[i] for i, s in enumerate(specs)},
        num_queries=len(expected_ids),
        missing_runs=tuple(expected_ids[i] for i in np.flatnonzero(run_of_query < 0)),
        queries_without_relevant=_pick(qrels.query_ids, np.flatnonzero(n_rel == 0)),
        averaging=averaging,
    )


def _truncate(run: Run, max_docs: int, device: str) -> Run:
    """Each ranking cut to its first ``max_docs`` docs in trec_eval order (``-M``)."""
    if max_docs < 1:
        raise ValueError(f"max_docs must be >= 1, got {max_docs}")
    lengths = np.diff(run.offsets)
    if lengths.size == 0 or lengths.max() <= max_docs:
        return run
    ranked = rank(run, device=device)
    starts = ranked.offsets[:-1]
    keep = np.minimum(lengths, max_docs)
    offsets = np.zeros(len(keep) + 1, dtype=np.int64)
    np.cumsum(keep, out=offsets[1:])
    rows = np.arange(offsets[-1], dtype=np.int64) + np.repeat(starts - offsets[:-1], keep)
    scores = None if ranked.scores is None else ranked.scores[rows]
    return Run(ranked.query_ids, offsets, ranked.doc_ids[rows], scores)


def _check_unscored_runs(run: Run, units: np.ndarray, used: np.ndarray, device: str) -> None:
    """Duplicates in rankings the evaluation did not read (queries not expected) are errors too."""
    seen = np.zeros(len(run.query_ids), dtype=bool)
    seen[used[used >= 0]] = True
    unused = np.flatnonzero(~seen)
    if unused.size == 0:
        return
    rows, offsets = _slice_rows(run.offsets, unused)
    dup = api.find_duplicates(np.ascontiguousarray(units[rows]), offsets, device=device)
    hit = dup >= 0
    if hit.any():
        mapped = np.where(hit, rows[np.maximum(dup, 0)], -1)
        _raise_duplicate("run", run.query_ids, run.offsets, run.doc_ids, mapped)


def rank(run: Run, *, device: str = "cpu") -> Run:
    """``run`` with every slice in trec_eval order (float32 score desc, doc id desc on ties).

    A run without scores is already in order and is returned as is (after the duplicate check).
    """
    units = api.id_units(run.doc_ids)
    perm, dup, nan = api.rank_runs(units, run.offsets, run.scores, device=device)
    _raise_duplicate("run", run.query_ids, run.offsets, run.doc_ids, dup)
    _raise_nan(run, nan)
    if run.scores is None:
        return run
    return Run(run.query_ids, run.offsets, run.doc_ids[perm], run.scores[perm])


def _common_ids(runs: Sequence[Run]) -> np.ndarray:
    """All runs' doc ids in one array of one kind (``U`` unless every run holds ``S``)."""
    arrays = [np.asarray(r.doc_ids) for r in runs]
    if not all(a.dtype.kind == "S" for a in arrays):
        arrays = [
            np.char.decode(a, "utf-8") if a.dtype.kind == "S" else a.astype(str) for a in arrays
        ]
    return np.concatenate(arrays) if arrays else np.zeros(0, dtype="U1")


def rrf(
    runs: Sequence[Run], *, k: int = 60, depth: int | None = None, device: str = "cpu"
) -> Run:
    """Reciprocal rank fusion: score(d) = sum over runs of 1 / (k + rank(d)), rank from 1.

    Each input is put in trec_eval order first and cut to its top ``depth`` docs (None: all).
    The fused run holds every doc of any cut input, ordered like a scored run (float32 score
    desc, doc id desc on ties), with float64 scores; its queries are the union, in first-seen
    order.
    """
    if not runs:
        raise ValueError("rrf needs at least one run")
    ranked = [rank(r, device=device) for r in runs]
    query_ids: dict[str, int] = {}
    for r in ranked:
        for q in r.query_ids:
            query_ids.setdefault(q, len(query_ids))
    starts = np.zeros((len(query_ids), len(ranked)), dtype=np.int64)
    ends = np.zeros_like(starts)
    shift = 0
    for j, r in enumerate(ranked):
        rows = np.array([query_ids[q] for q in r.query_ids], dtype=np.int64)
        starts[rows, j] = r.offsets[:-1] + shift
        stop = r.offsets[1:] + shift
        ends[rows, j] = stop if depth is None else np.minimum(stop, starts[rows, j] + depth)
        shift += len(r.doc_ids)
    all_ids = _common_ids(ranked)
    ids, scores, counts, base = api.rrf_fuse(
        api.id_units(all_ids), starts, ends, float(k), device=device
    )
    offsets = np.zeros(len(query_ids) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    keep = np.arange(offsets[-1], dtype=np.int64) + np.repeat(base[:-1] - offsets[:-1], counts)
    return Run(tuple(query_ids), offsets, all_ids[ids[keep]], scores[keep])
