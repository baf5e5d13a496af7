"""Freshness under ingest (bench.capacity.freshness): the exact truth over the rows present
at a query's send, the changed-answer classes, and the study against real databases —
pgvector on bench's PostgreSQL server, Milvus Lite's server binary, LanceDB embedded and
faiss in process — inserting while queries run open loop; failures and timeouts are
per-document statuses, bad options one line naming the key."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from db_dirs import server_data_dir

from bench.capacity.freshness import (
    FreshnessStudy,
    build_study,
    changed_answers,
    recall_present,
    run_one,
    synthetic_corpus,
)
from bench.capacity.live_stores import STORES, PgvectorStore
from bench.errors import ConfigError


def _unit(*rows: list[float]) -> np.ndarray:
    x = np.asarray(rows, dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_recall_is_against_the_rows_acknowledged_before_the_send() -> None:
    # base rows 0, 1, 2; ingest rows 3 (ingest 0) and 4 (ingest 1), acknowledged in that order
    vectors = _unit([1, 0], [0, 1], [-1, 0], [1, 0.1], [0.7, 0.7])
    q = _unit([1, 0.05], [1, 0.05], [1, 0.05])
    acked = np.asarray([0, 1])
    # query 0 sent before any ingest ack: exact top-2 over {0, 1, 2} is (0, 1) (scores 1.0,
    # 0.05); it returned (0, 1): recall 2 / 2
    # query 1 sent after ingest 0's ack: exact top-2 over {0..3} is (3, 0); it returned (0, 1):
    # one of two
    # query 2 sent before any ack but returned (3, 0): row 3 was in flight; its exact score
    # 0.99 + 0.005 beats the k-th present score (0.05): a hit, so 2 / 2
    ids = np.asarray([[0, 1], [0, 1], [3, 0]])
    got = recall_present(ids, q, vectors, 3, np.asarray([0, 1, 0]), acked, 2)
    assert got.tolist() == [1.0, 0.5, 1.0]


def test_changed_answers_are_classed_per_paired_query() -> None:
    n_base = 10
    before = {0: np.asarray([1, 2]), 1: np.asarray([1, 2]), 2: np.asarray([3, 4]),
              3: np.asarray([5, 6]), 4: np.asarray([7, 8])}
    after = {0: np.asarray([11, 1]),  # changed, a new doc (10 + 1) in it
             1: np.asarray([2, 1]),   # changed order, no new doc
             2: np.asarray([3, 4]),   # unchanged, though its exact top-k gained a new doc
             3: np.asarray([5, 6]),   # unchanged
             9: np.asarray([1, 2])}   # asked once only (4 failed after): not paired
    should = {0: True, 1: False, 2: True, 3: False, 4: True, 9: False}
    c = changed_answers(before, after, should, n_base)
    assert (c.paired, c.changed, c.changed_new, c.changed_old) == (4, 2, 1, 1)
    assert (c.should_change, c.missed_new) == (2, 1)  # 0 and 2 should; 2 missed it


def test_the_corpus_is_seeded_unit_vectors() -> None:
    a, b = synthetic_corpus(50, 8, 4, 3), synthetic_corpus(50, 8, 4, 3)
    assert np.array_equal(a, b) and np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert not np.array_equal(a, synthetic_corpus(50, 8, 4, 4))


def _node(**kw: object) -> dict[str, object]:
    return {"_target_": "bench.capacity.freshness.FreshnessStudy", "databases": ["faiss_hnsw"],
            **kw}


@pytest.mark.parametrize(("kw", "key"), [
    ({"databases": ["qdrant"]}, "databases"),
    ({"databases": []}, "databases"),
    ({"ingest_rps": 0}, "ingest_rps"),
    ({"poll_ms": float("nan")}, "poll_ms"),
    ({"k": 50, "n_base": 10}, "k"),
    ({"insert_batch": 300}, "insert_batch"),
    ({"lancedb_optimize_every_s": -1}, "lancedb_optimize_every_s"),
    ({"bogus": 1}, "bogus"),
])
def test_a_bad_option_names_its_key(kw: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError, match=rf"capacity\.freshness\.{key}"):
        build_study(_node(**kw))


SMALL = {"n_base": 300, "n_ingest": 20, "dim": 32, "clusters": 8, "query_rps": 20.0,
         "ingest_rps": 20.0, "poll_ms": 10.0, "searchable_timeout_s": 5.0, "m": 8,
         "ef_construction": 32, "ef_search": 64, "lancedb_optimize_every_s": 0.2}


@pytest.fixture(scope="module")
def data_dir() -> Iterator[str]:
    with server_data_dir("bench-freshness-", postgres=("pgvector",), milvus_lite=True) as root:
        yield str(root)


def _available(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(STORES[name][0]) is not None


@pytest.mark.slow
@pytest.mark.parametrize("database", list(STORES))
def test_every_inserted_document_becomes_searchable(database: str, data_dir: str,
                                                    tmp_path: Path) -> None:
    if not _available(database):
        pytest.skip(f"{STORES[database][0]} is not installed")
    study = FreshnessStudy(databases=[database], data_dir=data_dir, **SMALL)  # type: ignore[arg-type]
    (r,) = study.run(tmp_path)
    assert len(r.docs) == 20 and r.count("searchable") == 20
    for d in r.docs:
        # found by a probe sent after the acknowledgement: its reply comes after the ack
        assert d.probes >= 1 and d.searchable_ms is not None and d.after_ack_ms is not None
        assert d.searchable_ms >= d.insert_ms > 0 and d.after_ack_ms > 0
    # every phase asks each of its 20 requests' queries (query_rps x 1 s); none failed here
    assert [(p.phase, p.queries, p.failed) for p in r.phases] == [
        ("idle", 20, 0), ("ingest", 20, 0), ("after", 20, 0)]
    ingest = [q for q in r.queries if q.phase == "ingest"]
    assert max(q.n_present for q in ingest) > 0  # some queries ran with new rows present
    assert all(q.n_present == 20 for q in r.queries if q.phase == "after")
    assert all(p.recall is not None and p.recall >= 0.9 for p in r.phases)
    c = r.changed
    # queries near ingest vectors: exact answers gained new documents, and the served ones
    # changed with them (a served answer holding a new doc differs from the idle one)
    assert c.paired == 20 and c.should_change > 0 and c.changed_new > 0
    assert c.changed == c.changed_new + c.changed_old
    assert c.changed_new >= c.should_change - c.missed_new
    indexed = [d.indexed_ms for d in r.docs]
    if database == "milvus_lite":
        # Milvus Lite never indexes (docs/vector-databases.md): 0 indexed rows reported
        assert r.indexed_at_start == 0 and indexed == [None] * 20
    else:
        # pgvector and faiss index inside the insert, LanceDB at its next optimize()
        assert all(t is not None for t in indexed)
    if database == "lancedb":
        assert r.maintenance_runs >= 1
    saved = json.loads((tmp_path / "freshness.json").read_text())
    assert saved["schema_version"] == 1 and len(saved["results"][0]["docs"]) == 20
    assert "| never searchable |" in (tmp_path / "freshness.md").read_text()


@pytest.mark.slow
def test_lancedb_searches_rows_it_has_not_indexed(data_dir: str, tmp_path: Path) -> None:
    if not _available("lancedb"):
        pytest.skip("lancedb is not installed")
    study = FreshnessStudy(databases=["lancedb"], data_dir=data_dir,
                           **{**SMALL, "lancedb_optimize_every_s": 0.0})  # type: ignore[arg-type]
    (r,) = study.run(tmp_path)
    # never optimized: every new row is found (a flat scan of the unindexed fragment) and
    # none is in the ANN index
    assert r.count("searchable") == 20 and all(d.indexed_ms is None for d in r.docs)
    assert r.indexed_at_start == 300 and r.maintenance_runs == 0


def test_a_deadline_shorter_than_the_insert_is_never_searchable(tmp_path: Path) -> None:
    # the deadline (1 us after the intended insert) passes before the acknowledgement: no
    # probe is sent, and every document is counted never_searchable, none dropped
    study = FreshnessStudy(databases=["faiss_hnsw"], **{
        **SMALL, "searchable_timeout_s": 1e-6})  # type: ignore[arg-type]
    (r,) = study.run(tmp_path)
    assert r.count("never_searchable") == 20
    assert all(d.probes == 0 and d.searchable_ms is None for d in r.docs)
    assert all(math.isfinite(d.insert_ms) for d in r.docs)


@pytest.mark.slow
def test_refused_inserts_are_statuses_and_the_queries_still_run(data_dir: str) -> None:
    if not _available("pgvector"):
        pytest.skip("pgserver is not installed")
    study = FreshnessStudy(databases=["pgvector"], data_dir=data_dir, **SMALL)  # type: ignore[arg-type]
    corpus = synthetic_corpus(320, 32, 8, 0)
    from bench.capacity.freshness import query_vectors

    store = PgvectorStore(corpus[:300], data_dir=str(Path(data_dir) / "pgvector"), m=8,
                          ef_construction=32, ef_search=64)
    try:
        store._writer._conn.close()  # the writer's connection is gone: every insert fails
        r = run_one(store, corpus, query_vectors(corpus, study.n_queries, 0), study)
    finally:
        store.close()
    assert r.count("insert_failed") == 20
    assert all("closed" in d.error and d.probes == 0 for d in r.docs)
    assert [p.failed for p in r.phases] == [0, 0, 0] and r.changed.changed_new == 0


def test_the_experiment_refuses_a_bad_option_before_any_work(tmp_path: Path) -> None:
    from tests.pipeline.test_budget_pipeline import _run

    with pytest.raises(ConfigError, match=r"capacity\.freshness\.ingest_rps"):
        _run(tmp_path / "cache", tmp_path / "run", "+experiment=freshness",
             "capacity.freshness.ingest_rps=-1")
    assert not (tmp_path / "run" / "freshness").exists()


@pytest.mark.parametrize(("overrides", "databases", "n_ingest"), [
    (["+experiment=freshness"], ("pgvector", "milvus_lite", "lancedb", "faiss_hnsw"), 200),
    (["+experiment=capacity_http"], ("pgvector",), 100),
    (["+experiment=capacity_http", "capacity/freshness=none"], None, None),
])
def test_the_experiments_options_compose_and_build(
        overrides: list[str], databases: tuple[str, ...] | None, n_ingest: int | None) -> None:
    from hydra import compose, initialize_config_dir

    from bench.app import CONF_DIR
    from bench.config.schema import register

    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=["cache_dir=/tmp/x", *overrides])
    if databases is None:
        assert not cfg.capacity.freshness  # off
        return
    study = build_study(cfg.capacity.freshness)
    assert study.databases == databases and study.n_ingest == n_ingest
    assert study.options.data_dir == "/tmp/x/freshness"
    # each phase lasts n_ingest / ingest_rps seconds and asks each query once
    assert study.duration_s == n_ingest / 10.0 and study.n_queries == 20 * n_ingest / 10
