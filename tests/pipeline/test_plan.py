"""The plan is data: printed before any work, shared nodes once, config ids stable."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from bench.data.base import Dataset
from bench.data.golden import write_golden
from bench.data.synthetic import SyntheticDataset
from bench.pipeline.components import build_components
from bench.pipeline.plan import Plan, plan
from bench.pipeline.run import run

REPO = Path(__file__).resolve().parents[2]


def test_plan_only_prints_the_graph_and_computes_nothing(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    out = subprocess.run(
        [sys.executable, "-m", "bench", "+experiment=hybrid", "dataset=synthetic",
         f"cache_dir={cache}", "plan_only=true", f"hydra.run.dir={tmp_path / 'run'}"],
        capture_output=True, text=True, cwd=REPO, timeout=300,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()  # Hydra's log lines come first
    start = next(i for i, line in enumerate(lines) if line.startswith("plan: "))
    text = "\n".join(lines[start:])
    # hybrid: dense + bm25 + rrf + 6 convex variants
    assert lines[start].startswith("plan: 9 configs")
    assert "0 of" in lines[start]  # nothing cached yet
    assert "shared by 9 configs" in text  # chunks are one node for every config
    assert text.count("=> config ") == 9
    # nothing was computed: no artifact in the store
    assert not any(p.name == "_meta.json" for p in cache.rglob("*")) if cache.exists() else True
    assert (tmp_path / "run" / "plan.json").is_file()


def test_config_id_is_the_chain_not_the_run(compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Adding fusion variants to a run keeps the ids of the configs both runs have; the
    same config in two runs has one id."""
    cache = tmp_path / "cache"
    common = ["dataset=synthetic", f"cache_dir={cache}", "metrics.bootstrap_resamples=200",
              "report.plot=false", "lexical=bm25",
              # e2e from the chain's own per-query samples: the interleaved pass is a second,
              # separate timing whose p50 can fall below the fastest encoding of the first
              "latency.interleave=false"]
    small = run(compose_cfg([*common, "fusion=rrf"]), tmp_path / "a")
    big = run(compose_cfg([*common, "fusion=rrf_and_convex"]), tmp_path / "b")
    ids_a = {r["label"]: r["config_id"] for r in
             pq.read_table(small.run_dir / "configs.parquet").to_pylist()}
    ids_b = {r["label"]: r["config_id"] for r in
             pq.read_table(big.run_dir / "configs.parquet").to_pylist()}
    assert set(ids_a) == {"dense", "bm25", "rrf(k=60)"}
    assert len(ids_b) == 9
    for label, cid in ids_a.items():
        assert ids_b[label] == cid, label
    # the second run found every shared artifact in the cache
    assert all(big.cache_hits[k] for k in ("chunk", "embed_docs", "index", "retrieve"))
    # end-to-end latency: a dense config pays its query's own single-query encoding, a BM25
    # one does not; neither chain's id depends on that latency node
    timings = pq.read_table(small.run_dir / "timings.parquet").to_pylist()
    stages = {cid: {t["stage"] for t in timings if t["config_id"] == cid}
              for cid in ids_a.values()}
    assert "embed_query" in stages[ids_a["dense"]] and "embed_query" in stages[ids_a["rrf(k=60)"]]
    assert "embed_query" not in stages[ids_a["bm25"]]
    rows = {r["label"]: r for r in pq.read_table(small.run_dir / "configs.parquet").to_pylist()}
    enc = sorted(t["wall_ms"] for t in timings
                 if t["config_id"] == ids_a["dense"] and t["stage"] == "embed_query")
    assert len(enc) == rows["dense"]["n_e2e_samples"]
    assert rows["dense"]["e2e_p50_ms"] >= enc[0]


def test_end_to_end_is_the_sum_along_the_chain_per_query() -> None:
    from bench.pipeline.e2e import end_to_end_ms
    from bench.telemetry.base import StageTiming

    t = (StageTiming("embed_query", "query", 1, 10.0, query_id="q1"),
         StageTiming("embed_query", "query", 1, 20.0, query_id="q2"),
         StageTiming("embed_queries", "total", 2, 8.0),  # the batch pass: not per request
         StageTiming("retrieve", "query", 1, 1.0, query_id="q1"),
         StageTiming("retrieve", "query", 1, 2.0, query_id="q2"),
         StageTiming("retrieve", "batch", 2, 1.0),
         StageTiming("fusion", "total", 2, 4.0),  # measured as a whole: an even share each
         StageTiming("retrieve", "query", 1, 3.0, query_id="q3"))  # q3 was not encoded alone
    assert end_to_end_ms(t, ("embed_query", "retrieve", "fold", "fusion")) == [13.0, 24.0]
    # a stage a chain runs twice for one query (a search after a query rewrite) adds up
    twice = (*t, StageTiming("retrieve", "query", 1, 5.0, query_id="q1"))
    assert end_to_end_ms(twice, ("embed_query", "retrieve", "fold", "fusion")) == [18.0, 24.0]


def test_plan_only_on_a_multirun_prints_one_plan_across_its_jobs(tmp_path: Path) -> None:
    cache, sweep = tmp_path / "cache", tmp_path / "sweep"
    out = subprocess.run(
        [sys.executable, "-m", "bench", "-m", "dataset=synthetic", "reranker=maxsim,bi_encoder",
         f"cache_dir={cache}", "plan_only=true",
         f"hydra.sweep.dir={sweep}"],
        capture_output=True, text=True, cwd=REPO, timeout=300,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert sum(line.startswith("plan: ") for line in lines) == 0  # no per-job plans
    start = next(i for i, line in enumerate(lines) if line.startswith("sweep plan: "))
    assert lines[start].startswith("sweep plan: 2 jobs, 8 configs")  # dense + 3 depths each
    text = "\n".join(lines[start:])
    # the dense pool and everything under it is one node for both jobs
    assert "retrieve: dense" in text and "jobs 0, 1" in text
    assert text.count("  dense  (dense)") == 2  # the same config in both jobs
    assert (sweep / "sweep_plan.json").is_file() and not (sweep / "sweep_report.md").exists()
    assert not any(p.name == "_meta.json" for p in cache.rglob("*")) if cache.exists() else True


# --- document-side work keyed on the corpus alone -------------------------------------------

CORPUS_OVERRIDES = ["dataset=synthetic", "lexical=bm25", "fusion=rrf", "filters=hard_vs_soft",
                    "reranker=bi_encoder_l3", "index=hnsw", "index.query_params=[{ef_search: 16}]"]


def _corpus_side(p: Plan) -> set[str]:
    """Keys of the nodes no query reaches: the dataset root is none of their ancestors."""
    return {n.key for n in p.nodes() if p.data.key not in {a.key for a in n.ancestors()}}


def test_corpus_nodes_keep_their_keys_when_the_queries_change(compose_cfg) -> None:  # type: ignore[no-untyped-def]
    comps = build_components(compose_cfg(CORPUS_OVERRIDES), "cpu")
    ds = comps.source.load()
    q0, d0 = ds.queries[0], ds.documents[0]
    variants = {
        "edited": replace(ds, queries=(replace(q0, text=q0.text + " please"), *ds.queries[1:]),
                          fingerprint=""),
        "subset": replace(ds, queries=ds.queries[::2], fingerprint=""),
        "extended": replace(ds, queries=(*ds.queries, replace(q0, query_id="new")),
                            fingerprint=""),
    }

    def plan_of(d: Dataset) -> Plan:
        return plan(comps, d, device="cpu", relevance_level=1)

    base = plan_of(ds)
    corpus = _corpus_side(base)
    assert {n.stage for n in base.nodes() if n.key in corpus} == {
        "corpus", "chunk", "chunk_stats", "embed_docs", "index", "lexical_index",
        "rerank_index"}
    assert base.index.key in corpus and base.embed_docs.key in corpus
    # what reads queries is keyed on them: query vectors, the exact reference of ANN recall
    assert base.embed_queries.key not in corpus and base.exact is not None
    assert base.exact.key not in corpus
    keys = {n.key for n in base.nodes()}
    for name, d in variants.items():
        p = plan_of(d)
        assert _corpus_side(p) == corpus, name
        # every query-side node is another computation: nothing read the old queries' value
        assert keys & {n.key for n in p.nodes()} == corpus, name
        # config ids are rooted in the corpus: the same configs pair across query sets
        assert [c.config_id for c in p.configs] == [c.config_id for c in base.configs], name
    # one edited document: every node, corpus side included, is new, and so is every id
    doc = replace(ds, documents=(replace(d0, text=d0.text + " more"), *ds.documents[1:]),
                  fingerprint="")
    p = plan_of(doc)
    assert not keys & {n.key for n in p.nodes()}
    assert not {c.config_id for c in p.configs} & {c.config_id for c in base.configs}


def test_a_run_with_a_changed_query_file_reuses_every_corpus_artifact(
        compose_cfg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Two runs differing only in their query file (one question edited, one dropped): the
    second loads every corpus-side artifact (no document is embedded again), keeps the
    config ids, and its values equal those of the same run on an empty cache."""
    import json

    ds = SyntheticDataset(n_docs=40, n_queries=16).load()
    write_golden(ds.documents, ds.queries, corpus=tmp_path / "corpus.jsonl",
                 queries_path=tmp_path / "a.jsonl")
    q1 = ds.queries[1]
    edited = [replace(q1, text="which entry " + q1.text), *ds.queries[2:]]
    write_golden(ds.documents, edited, corpus=tmp_path / "corpus.jsonl",
                 queries_path=tmp_path / "b.jsonl")

    def go(queries: str, cache: str, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
        res = run(compose_cfg([
            "dataset=golden", f"dataset.corpus={tmp_path / 'corpus.jsonl'}",
            f"dataset.queries={tmp_path / queries}", f"cache_dir={tmp_path / cache}",
            "lexical=bm25", "metrics.bootstrap_resamples=200", "report.plot=false"]),
            tmp_path / name)
        assert res.exit_code == 0
        manifest = json.loads((res.run_dir / "run.json").read_text())
        rows = pq.read_table(res.run_dir / "per_query.parquet").to_pylist()
        return manifest, {(r["config_id"], r["query_id"], r["metric"]): r["value"]
                          for r in rows}

    a, _ = go("a.jsonl", "cache", "a")
    b, values_b = go("b.jsonl", "cache", "b")
    _, cold = go("b.jsonl", "cold", "b-cold")
    nodes = {n["key"]: n for n in b["plan"]["nodes"]}
    data = next(k for k, n in nodes.items() if n["stage"] == "data")

    def reads_queries(key: str) -> bool:
        return key == data or any(reads_queries(i) for i in nodes[key]["inputs"])

    corpus = {k for k in nodes if not reads_queries(k)}
    assert {nodes[k]["stage"] for k in corpus} >= {"chunk", "embed_docs", "index", "lexical_index"}
    hits = {e["key"]: e["hit"] for e in b["cache"]["events"]}
    assert all(hits.get(k) is True for k in corpus if nodes[k]["cacheable"])
    assert not any(hits.get(k, False) for k in nodes if k not in corpus)
    assert a["dataset"]["corpus_fingerprint"] == b["dataset"]["corpus_fingerprint"]
    assert a["dataset"]["fingerprint"] != b["dataset"]["fingerprint"]
    assert [c["config_id"] for c in a["plan"]["configs"]] == [
        c["config_id"] for c in b["plan"]["configs"]]
    # the reused artifacts give the numbers a run from nothing gives
    assert values_b == cold and len(values_b) > 0
