"""A remote embedder that dies mid-run (a real uvicorn server that stops after N requests):

- at query time the queries of the batches it never answered get status ``failed`` (no
  value, counted), the others are scored exactly as in an uninterrupted run, nothing
  incomplete is cached, and the rerun against the restarted server asks only the failed
  batches again;
- at index time the configs that need the corpus vectors fail with one line naming
  ``embedder.base_url`` and the endpoint (exit code 5), the BM25 config completes, and the
  rerun asks only the corpus batches that were never answered.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dying_server import DIM, DyingServer

from bench.http.client import free_port

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

BATCH = 8


def compose(overrides: list[str]):  # type: ignore[no-untyped-def]
    """The config `python -m bench` would run (conftest's compose_cfg, for module-scoped
    fixtures)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from bench.app import CONF_DIR
    from bench.config.schema import register

    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=overrides,
                            return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


def overrides(url: str, cache: Path, *extra: str) -> list[str]:
    return ["dataset=synthetic", f"cache_dir={cache}", "embedder=openai_http",
            f"embedder.base_url={url}", f"embedder.dimensions={DIM}",
            f"embedder.batch_size={BATCH}", "embedder.max_concurrency=1",
            "embedder.max_retries=1", "embedder.backoff_s=0", "embedder.timeout_s=10",
            "metrics.bootstrap_resamples=200", "latency.interleave=false", *extra]


def per_query(run_dir: Path) -> dict[tuple[str, str, str], tuple[str, float | None]]:
    """(config label, query, metric) -> (status, value)."""
    labels = {r["config_id"]: r["label"]
              for r in pq.read_table(run_dir / "configs.parquet").to_pylist()}
    return {(labels[r["config_id"]], r["query_id"], r["metric"]): (r["status"], r["value"])
            for r in pq.read_table(run_dir / "per_query.parquet").to_pylist()}


def stored(cache: Path, stage: str) -> int:
    """Artifacts of ``stage`` in the cache (complete ones: they have their meta file)."""
    return len(list((cache / stage).glob("*/*/_meta.json"))) if (cache / stage).is_dir() else 0


@pytest.fixture(scope="module")
def texts() -> tuple[dict[str, str], set[str]]:
    """(query id -> text, chunk texts) of the synthetic corpus."""
    from bench.pipeline.components import build_components

    comps = build_components(compose(overrides("http://127.0.0.1:9/v1", Path("."))), "cpu")
    data = comps.source.load()
    chunks = comps.chunker.chunk(data.documents, tokenizer=comps.embedder.tokenizer)
    return {q.query_id: q.text for q in data.queries}, set(chunks.text)


Reference = tuple[dict[tuple[str, str, str], tuple[str, float | None]], int]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, texts) -> Reference:  # type: ignore[no-untyped-def]
    """An uninterrupted run's per-query values (the same server, never dying), and the
    number of corpus batches it asked for."""
    from bench.pipeline.run import run

    root = tmp_path_factory.mktemp("ref")
    with DyingServer(free_port()) as srv:
        res = run(compose(overrides(srv.url, root / "cache", "lexical=bm25")),
                  root / "run")
        doc_batches = sum(1 for b in srv.seen if set(b) <= texts[1])
    assert res.exit_code == 0 and doc_batches > 2
    return per_query(res.run_dir), doc_batches


@pytest.mark.slow
def test_query_embeddings_lost_mid_run_are_failed_and_resumed(
        tmp_path: Path, compose_cfg, texts, reference) -> None:  # type: ignore[no-untyped-def]
    from bench.pipeline.run import run

    queries, chunks = texts
    reference, doc_batches = reference
    port, cache = free_port(), tmp_path / "cache"
    # the preflight probe, the corpus and the first query batch are answered, then it dies
    with DyingServer(port, die_after=1 + doc_batches + 1) as srv:
        first = run(compose_cfg(overrides(srv.url, cache)), tmp_path / "run1")
        answered = {t for b in srv.seen for t in b}
    assert first.exit_code == 0  # query-time failures are statuses, not a failed run
    got = per_query(first.run_dir)
    dense = {k: v for k, v in got.items() if k[0] == "dense" and k[2] == "ndcg@10"}
    failed = {k[1] for k, (st, _) in dense.items() if st == "failed"}
    scored = {k for k, (st, _) in dense.items() if st == "scored"}
    # exactly the queries of the batches never answered: BATCH were, the rest were not
    assert len([q for q, t in queries.items() if t in answered]) == BATCH
    assert failed == {q for q in (k[1] for k in dense) if queries[q] not in answered}
    assert all(got[k][1] is None for k in dense if k[1] in failed)  # no value, never a 0
    for k in scored:  # the answered queries: exactly the uninterrupted run's values
        assert got[k] == reference[k]
    configs = pq.read_table(first.run_dir / "configs.parquet").to_pylist()
    dense_row = next(c for c in configs if c["label"] == "dense")
    assert dense_row["status"] == "ok" and dense_row["failed_share"] > 0.5
    # nothing incomplete was cached: the query vectors and the search are computed again
    assert stored(cache, "embed_queries") == 0 and stored(cache, "retrieve") == 0
    assert stored(cache, "embed_docs") == 1

    with DyingServer(port) as srv:  # the server is back
        second = run(compose_cfg(overrides(srv.url, cache)), tmp_path / "run2")
        # the corpus came from the cache and the answered query batch from the memo: only
        # the two batches never answered are asked again (then one query at a time for the
        # single-query latency measurement)
        assert srv.requests_with(chunks) == 0
        batches = [b for b in srv.seen if len(b) > 1]
        assert len(batches) == 2 and all(set(b) <= set(queries.values()) for b in batches)
    assert second.exit_code == 0
    again = per_query(second.run_dir)
    assert {k: v for k, v in again.items() if k[0] == "dense"} == \
        {k: v for k, v in reference.items() if k[0] == "dense"}
    assert stored(cache, "embed_queries") == 1 and stored(cache, "retrieve") == 1


@pytest.mark.slow
def test_corpus_embedding_lost_mid_run_fails_its_configs_and_resumes(
        tmp_path: Path, compose_cfg, texts, reference) -> None:  # type: ignore[no-untyped-def]
    from bench.pipeline.run import run

    _, chunks = texts
    reference, doc_batches = reference
    port, cache = free_port(), tmp_path / "cache"
    with DyingServer(port, die_after=3) as srv:  # the probe and two corpus batches
        first = run(compose_cfg(overrides(srv.url, cache, "lexical=bm25")), tmp_path / "run1")
    assert first.exit_code == 5
    (line,) = first.failed_configs
    assert "config key embedder.base_url: POST " in line and f":{port}/v1/embeddings" in line
    assert "\n" not in line
    configs = {c["label"]: c for c in
               pq.read_table(first.run_dir / "configs.parquet").to_pylist()}
    assert configs["dense"]["status"] == "failed" and configs["bm25"]["status"] == "ok"
    got = per_query(first.run_dir)
    assert all(st == "failed" and v is None for (lbl, _, _), (st, v) in got.items()
               if lbl == "dense")
    for k, v in got.items():  # the BM25 config completed, exactly as in the full run
        if k[0] == "bm25":
            assert v == reference[k]
    manifest = json.loads((first.run_dir / "run.json").read_text())
    assert [f["label"] for f in manifest["failed_configs"]] == ["dense"]
    assert "FAILED: config key embedder.base_url" in \
        (first.run_dir / "report.md").read_text()
    assert stored(cache, "embed_docs") == 0  # never an incomplete corpus in the cache

    with DyingServer(port) as srv:
        second = run(compose_cfg(overrides(srv.url, cache, "lexical=bm25")),
                     tmp_path / "run2")
        # the two corpus batches answered before the crash came from the memo
        assert sum(1 for b in srv.seen if set(b) <= chunks) == doc_batches - 2
    assert second.exit_code == 0 and not second.failed_configs
    assert per_query(second.run_dir) == reference


@pytest.mark.slow
def test_a_reranker_lost_mid_run_fails_its_queries_and_resumes(
        tmp_path: Path, compose_cfg, texts, reference) -> None:  # type: ignore[no-untyped-def]
    """The /rerank server dies after 5 queries: those 5 are reranked, the next 3 fail after
    their retries, the rest are not asked (the server is gone); all carry ``failed`` in the
    reranked config only. The rerun against the restarted server scores every query."""
    from bench.pipeline.run import run

    reference, _ = reference
    cache = tmp_path / "cache"
    with DyingServer(free_port()) as emb:
        port = free_port()

        def cfg(url: str):  # type: ignore[no-untyped-def]
            return compose_cfg(overrides(emb.url, cache, "reranker=http",
                                         f"reranker.base_url={url}", "reranker.depths=[5]",
                                         "reranker.max_retries=1", "reranker.backoff_s=0",
                                         "reranker.max_concurrency=1"))

        with DyingServer(port, die_after=5) as rr:
            first = run(cfg(rr.url), tmp_path / "run1")
        assert first.exit_code == 0
        got = per_query(first.run_dir)
        reranked = {k: v for k, v in got.items() if k[0] != "dense" and k[2] == "ndcg@10"}
        statuses = sorted(st for st, _ in reranked.values())
        assert statuses.count("failed") == len(reranked) - 5
        assert all(v == reference[k] for k, v in got.items()
                   if k[0] == "dense")  # the pool itself is untouched
        assert stored(cache, "rerank_scores") == 0
        with DyingServer(port) as rr:
            second = run(cfg(rr.url), tmp_path / "run2")
            # nothing of the cut-short pass was cached: every query is scored again, and
            # the per-depth latency sample (every query here) is measured again
            assert len(rr.seen) == 2 * len(texts[0])
    again = per_query(second.run_dir)
    assert all(st == "scored" for (lbl, _, m), (st, _) in again.items())
    for k, (st, v) in got.items():
        if st == "scored":
            assert again[k] == (st, v)
