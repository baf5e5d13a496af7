"""The database backends run the unchanged pipeline on the synthetic corpus: one dense config
per swept knob, ANN recall against faiss exact, the per-query path equal to the batch one,
and a second run that loads the cached build (the same numbers)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from db_dirs import server_data_dir

pytest.importorskip("pgserver")
pytest.importorskip("lancedb")

from bench.index.pgvector import stop_managed_server
from bench.pipeline.node import OneQuery, QueryTimer
from bench.retrieval.base import order_key
from bench.retrieval.stage import RetrieveOp

BACKENDS = {
    "pgvector_hnsw": ["index.query_params=[{ef_search: 10}, {ef_search: 100}]"],
    "lancedb": ["index.query_params=[{ef: 100}, {ef: 200}]"],
    # Milvus Lite (a real Milvus server process; it searches exactly: bench/index/milvus.py)
    "milvus_ivf": ["index.query_params=[{nprobe: 1}, {nprobe: 8}]"],
}


@pytest.fixture(scope="module")
def root() -> Iterator[Path]:
    with server_data_dir("bench-vdb-", postgres=("pg",),
                         milvus_lite=importlib.util.find_spec("pymilvus") is not None) as d:
        yield d


def _rows(run_dir: Path) -> list[tuple[str, str, str, float]]:
    rows = pq.read_table(run_dir / "per_query.parquet").to_pylist()
    return sorted((r["config_id"], r["query_id"], r["metric"], r["value"]) for r in rows)


@pytest.mark.slow
@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_backend_runs_the_pipeline(backend: str, root: Path, compose_cfg) -> None:  # type: ignore[no-untyped-def]
    if backend.startswith("milvus"):
        pytest.importorskip("pymilvus")
    from bench.cache.store import ArtifactStore
    from bench.pipeline.components import build_components
    from bench.pipeline.executor import Executor
    from bench.pipeline.plan import plan
    from bench.pipeline.run import run
    from bench.telemetry.basic import BasicTelemetry

    cache = root / f"cache-{backend}"
    data = {"pgvector_hnsw": root / "pg", "lancedb": root / "lance",
            "milvus_ivf": root / "milvus"}[backend]
    cfg = compose_cfg(["dataset=synthetic", f"cache_dir={cache}", f"index={backend}",
                       *BACKENDS[backend], f"index.data_dir={data}",
                       "metrics.bootstrap_resamples=200", "latency.interleave=false"])
    first = run(cfg, root / f"run1-{backend}")
    configs = pq.read_table(first.run_dir / "configs.parquet").to_pylist()
    dense = [c for c in configs if c["kind"] == "dense"]
    assert len(dense) == 2 and all(c["index_bytes"] > 0 and c["p50_ms"] > 0 for c in dense)
    recall = [r for r in first.summary if r.metric == "ann_recall@10" and r.scope == "all"]
    assert len(recall) == 2 and all(0.0 < r.mean <= 1.0 for r in recall)
    # the cached build is loaded (table verified, not rebuilt): identical per-query values
    second = run(cfg, root / f"run2-{backend}")
    assert _rows(second.run_dir) == _rows(first.run_dir)

    # run_one (the served path) gives each query's batch row: one database query per request
    comps = build_components(cfg, "cpu")
    dataset = comps.source.load()
    p = plan(comps, dataset, device="cpu", relevance_level=1)
    ex = Executor(ArtifactStore(cache), BasicTelemetry(), "cpu")
    spec = next(c for c in p.configs if isinstance(c.leaf.op, RetrieveOp))
    node = spec.leaf
    pool = ex.value(node)
    inputs = node.bind({i.key: ex.value(i) for i in node.inputs})
    queries = np.asarray(inputs.queries.vectors)
    id_key = order_key(dataset.doc_ids)
    for qi in range(4):
        one_inputs = type(inputs)(index=inputs.index, chunks=inputs.chunks, data=inputs.data,
                                  queries=type(inputs.queries)(queries[qi:qi + 1],
                                                               inputs.queries.stats))
        timer = QueryTimer()
        got = node.op.run_one(one_inputs, OneQuery(dataset.queries[qi], dataset, id_key), timer)
        docs, scores = pool.hits.for_query(qi)
        assert got.hits.for_query(0)[0].tolist() == docs.tolist()
        np.testing.assert_allclose(got.hits.for_query(0)[1], scores, rtol=1e-5)
        assert timer.ms["retrieve"] > 0


@pytest.mark.slow
def test_a_database_stopped_mid_run_fails_its_queries_and_resumes(
        root: Path, compose_cfg, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """PostgreSQL stops under the run after 10 searches: the queries it never answered are
    ``failed`` (no value, counted), the others scored, the search is not cached; the rerun
    (bench starts the server again) searches again and scores every query, the answered ones
    with the same values."""
    from bench.index import pgvector as pg
    from bench.pipeline.run import run

    folder, cache = root / "pg-dying", root / "cache-dying"
    cfg = compose_cfg(["dataset=synthetic", f"cache_dir={cache}", "index=pgvector_hnsw",
                       "index.query_params=[{ef_search: 100}]", f"index.data_dir={folder}",
                       "retriever.latency_mode=batch", "metrics.bootstrap_resamples=200",
                       "latency.interleave=false"])
    one, calls = pg.PgvectorBuiltIndex._one, [0]

    def dying(self, *args):  # type: ignore[no-untyped-def]
        calls[0] += 1
        if calls[0] == 11:  # the server stops (bench's record of it stays: a crash)
            pg._HANDLES[str(folder.resolve())].cleanup()
        return one(self, *args)

    monkeypatch.setattr(pg.PgvectorBuiltIndex, "_one", dying)
    try:
        first = run(cfg, root / "run-dying-1")
    finally:
        monkeypatch.undo()
        stop_managed_server(str(folder))
    assert first.exit_code == 0
    rows = {(r["query_id"], r["metric"]): (r["status"], r["value"])
            for r in pq.read_table(first.run_dir / "per_query.parquet").to_pylist()}
    ndcg = {q: v for (q, m), v in rows.items() if m == "ndcg@10"}
    failed = [q for q, (st, _) in ndcg.items() if st == "failed"]
    assert len(failed) == len(ndcg) - 10 and all(ndcg[q][1] is None for q in failed)
    assert len(list((cache / "retrieve").glob("*/*/_meta.json"))) == 0  # not cached
    try:
        second = run(cfg, root / "run-dying-2")
    finally:
        stop_managed_server(str(folder))
    again = {(r["query_id"], r["metric"]): (r["status"], r["value"])
             for r in pq.read_table(second.run_dir / "per_query.parquet").to_pylist()}
    assert all(st == "scored" for st, _ in again.values())
    for key, (st, v) in rows.items():
        if st == "scored":
            assert again[key] == (st, v)
    assert len(list((cache / "retrieve").glob("*/*/_meta.json"))) == 1
