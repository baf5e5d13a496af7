"""``filters.pushdown=true``: a hard filter runs inside the database (SQL ``WHERE``) instead
of on the retrieved pool in Python.

- ``eligible`` is exactly what ``apply`` keeps of a pool holding every document;
- eligibility classes group documents no query tells apart (arithmetic);
- on one pgvector server, post-filtering vs push-down: where the search is exact
  (ef_search 1000 over ~70 rows) the post-filtered list is the head of the pushed-down one
  (the same documents, order and scores: the eligible top-k), and the pushed-down lists are
  never short (min(k, eligible documents) each) where post-filtering leaves short lists;
  both flow into the same metrics (the seed's false-exclusion rate is the same, no
  unauthorized hit).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from db_dirs import server_data_dir

from bench.filters.entitlement import EntitlementFilter
from bench.filters.metadata import MetadataFilter
from bench.filters.pushdown import eligibility_classes
from bench.retrieval.base import Hits, order_key

K = 10


def test_eligibility_classes_group_documents_no_query_tells_apart() -> None:
    e = np.asarray([[1, 0, 1, 1, 0],
                    [0, 1, 1, 0, 0]], dtype=bool)
    # document columns: (1,0) (0,1) (1,1) (1,0) (0,0): four classes, documents 0 and 3 share
    got = eligibility_classes(e, np.asarray([0, 0, 1, 2, 3, 4]), ["a", "b"])
    assert got.n_classes == 4
    cls = got.chunk_class
    assert cls[0] == cls[1] == cls[4] and len({cls[2], cls[3], cls[4], cls[5]}) == 4
    for qi, row in enumerate(e):  # a query's classes hold exactly its eligible documents
        docs = np.asarray([0, 0, 1, 2, 3, 4])
        seen = set(docs[np.isin(cls, got.allowed[qi])].tolist())
        assert seen == set(np.flatnonzero(row).tolist())
    assert got.row == {"a": 0, "b": 1}


@pytest.mark.parametrize("flt", [EntitlementFilter(pushdown=True),
                                 MetadataFilter(predicate="oracle_tag", pushdown=True),
                                 MetadataFilter(predicate="query_tag", entitlement=False,
                                                pushdown=True)],
                         ids=["entitlement", "metadata-oracle", "metadata-query-no-acl"])
def test_eligible_is_what_apply_keeps_of_every_document(flt, compose_cfg) -> None:  # type: ignore[no-untyped-def]
    from bench.pipeline.components import build_components

    data = build_components(compose_cfg(["dataset=synthetic"]), "cpu").source.load()
    n_q, n_d = len(data.queries), len(data.documents)
    full = Hits(np.arange(n_q + 1, dtype=np.int64) * n_d,
                np.tile(np.arange(n_d, dtype=np.int32), n_q),
                np.zeros(n_q * n_d, dtype=np.float32))
    kept = flt.apply(full, data, id_key=order_key(data.doc_ids)).hits
    want = np.zeros((n_q, n_d), dtype=bool)
    for q in range(n_q):
        want[q, kept.for_query(q)[0]] = True
    got = flt.eligible(data)
    assert got.shape == (n_q, n_d) and (got == want).all()
    assert 0 < got.sum() < n_q * n_d  # the filter does something on this corpus


def test_a_soft_filter_cannot_be_pushed_down() -> None:
    from bench.config.build import OptionError

    with pytest.raises(OptionError) as err:
        MetadataFilter(mode="soft", pushdown=True)
    assert err.value.option == "pushdown"


def test_pushdown_needs_a_database_index(tmp_path: Path, compose_cfg) -> None:  # type: ignore[no-untyped-def]
    from bench.errors import ConfigError
    from bench.pipeline.run import prepare

    cfg = compose_cfg(["dataset=synthetic", f"cache_dir={tmp_path}", "filters=entitlement",
                       "filters.pushdown=true"])
    with pytest.raises(ConfigError) as err:
        prepare(cfg)
    assert err.value.key == "filters.pushdown" and "index=pgvector_hnsw" in str(err.value)


@pytest.fixture(scope="module")
def root() -> Iterator[Path]:
    pytest.importorskip("pgserver")
    with server_data_dir("bench-pushdown-", postgres=("pg",)) as d:
        yield d


def trec(run_dir: Path, config_id: str) -> dict[str, list[tuple[str, float]]]:
    out: dict[str, list[tuple[str, float]]] = {}
    for line in (run_dir / f"run.{config_id}.trec").read_text().splitlines():
        qid, _, doc, _, score, _ = line.split()
        out.setdefault(qid, []).append((doc, float(score)))
    return out


@pytest.mark.slow
def test_pushdown_vs_post_filter_on_pgvector(root: Path, compose_cfg) -> None:  # type: ignore[no-untyped-def]
    from bench.pipeline.run import run

    base = ["dataset=synthetic", f"cache_dir={root / 'cache'}", "index=pgvector_hnsw",
            "index.query_params=[{ef_search: 1000}, {ef_search: 10}]",
            f"index.data_dir={root / 'pg'}", "filters=metadata", "filters.predicate=oracle_tag",
            f"retriever.k={K}", "metrics.bootstrap_resamples=200", "latency.interleave=false"]
    post = run(compose_cfg([*base, "filters.pushdown=false"]), root / "post")
    push = run(compose_cfg([*base, "filters.pushdown=true"]), root / "push")
    assert post.exit_code == push.exit_code == 0
    rows = {(r["label"], d): r for d, res in (("post", post), ("push", push))
            for r in pq.read_table(res.run_dir / "configs.parquet").to_pylist()}
    assert set(rows) >= {("dense(ef_search=1000)", "post"), ("dense(ef_search=10)", "post"),
                         ("dense(ef_search=1000)(where)", "push"),
                         ("dense(ef_search=10)(where)", "push")}

    from bench.pipeline.components import build_components

    data = build_components(compose_cfg(["dataset=synthetic"]), "cpu").source.load()
    eligible = MetadataFilter(predicate="oracle_tag").eligible(data).sum(axis=1)
    want = {q.query_id: min(K, int(n)) for q, n in zip(data.queries, eligible, strict=True)}
    short_post = 0
    for ef in (1000, 10):
        a = rows[(f"dense(ef_search={ef})", "post")]
        b = rows[(f"dense(ef_search={ef})(where)", "push")]
        pa_, pb = trec(post.run_dir, a["config_id"]), trec(push.run_dir, b["config_id"])
        # the pushed-down lists are never short: every query gets min(k, eligible docs)
        assert all(len(pb.get(q, [])) == n for q, n in want.items())
        short_post += sum(len(pa_.get(q, [])) < n for q, n in want.items())
        if ef == 1000:  # exact: post-filtering keeps the head of the eligible top-k
            for q, got in pa_.items():
                head = pb[q][:len(got)]
                assert [d for d, _ in got] == [d for d, _ in head]
                np.testing.assert_allclose([s for _, s in got], [s for _, s in head],
                                           rtol=1e-6)
        # the same metrics: the seed's false exclusion (over the eligible corpus), no leak
        assert b["unauthorized_hits"] == 0
        assert b["false_exclusion_rate"] == a["false_exclusion_rate"]
    assert short_post > 0  # post-filtering the unfiltered top-k leaves short lists
    recall = {(r.config_id, r.metric): r.mean for r in push.summary if r.scope == "all"}
    post_recall = {(r.config_id, r.metric): r.mean for r in post.summary if r.scope == "all"}
    a, b = rows[("dense(ef_search=10)", "post")], rows[("dense(ef_search=10)(where)", "push")]
    assert recall[(b["config_id"], "recall@10")] >= post_recall[(a["config_id"], "recall@10")]


@pytest.mark.slow
def test_pushdown_into_lancedb_returns_full_lists_and_no_leak(root: Path, compose_cfg) -> None:  # type: ignore[no-untyped-def]
    """LanceDB filters with its own ``where`` (pre-filtered): min(k, eligible) results for
    every query, nothing the caller may not see."""
    pytest.importorskip("lancedb")
    from bench.pipeline.components import build_components
    from bench.pipeline.run import run

    res = run(compose_cfg(["dataset=synthetic", f"cache_dir={root / 'cache-lance'}",
                           "index=lancedb", "index.query_params=[{ef: 100}]",
                           f"index.data_dir={root / 'lance'}", "filters=entitlement",
                           "filters.pushdown=true", f"retriever.k={K}",
                           "metrics.bootstrap_resamples=200", "latency.interleave=false"]),
              root / "lance-run")
    (row,) = [r for r in pq.read_table(res.run_dir / "configs.parquet").to_pylist()
              if r["label"].endswith("(where)")]
    assert row["unauthorized_hits"] == 0 and row["status"] == "ok"
    data = build_components(compose_cfg(["dataset=synthetic"]), "cpu").source.load()
    eligible = EntitlementFilter().eligible(data).sum(axis=1)
    got = trec(res.run_dir, row["config_id"])
    for q, n in zip(data.queries, eligible, strict=True):
        assert len(got.get(q.query_id, [])) == min(K, int(n))
