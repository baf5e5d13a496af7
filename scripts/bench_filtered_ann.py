"""Filtered ANN across selectivity, per engine, on the default experiment's vectors.

For each engine (faiss HNSW with an IDSelector; pgvector HNSW and IVFFlat in a PostgreSQL
server this script starts and stops — the planner's own choice and the ANN index forced;
LanceDB's HNSW pre- and post-filtered; Milvus IVF_FLAT in a Milvus Lite server this script
starts and stops, and Milvus HNSW / IVF_FLAT on a Milvus server with --milvus-uri) and each
selectivity (50 / 10 / 1 / 0.1 % of the
corpus eligible; bench.index.selectivity): recall@k against the exact filtered search,
short lists, unauthorized hits, the seed's false-exclusion rate (and the exact search's,
its floor), p50/p95/p99 of one request. Then build time, size on disk, connect / server start
time and memory per engine. Every engine is built ONCE with all four filter columns.

Reads the chunks and embeddings from the artifact cache (computed once if missing):

    python scripts/bench_filtered_ann.py --cache-dir .cache/bench --out runs/filtered_ann.md

Answer-level damage (--answers N, off by default): N answerable queries (seeded) are answered
at each of --answer-selectivities from every engine's filtered top-k and from the exact
filtered top-k, and paired per query (bench.index.filtered_answers): the packaged CPU
generator (SmolLM2-135M, greedy, top-3 passages, a prompt memo in the artifact cache so an
identical context is answered once) — a plumbing check of the measurement, not of answers.

Latency is measured in this process, one query per call, queries in dataset order, after 5
warm-up calls per row; memory: the PostgreSQL server's PSS (postmaster + backends, read from
/proc), and this process's RSS growth across each embedded engine's build and queries (an
upper bound: it includes Python allocations of the run).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np


def _compose(cache_dir: str, extra: list[str]) -> Any:
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from bench.app import CONF_DIR
    from bench.config.schema import register

    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"cache_dir={cache_dir}", *extra],
                      return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def _mb(b: float) -> str:
    return f"{b / 2**20:.1f}"


def _f(x: float | None, nd: int = 3) -> str:
    return "–" if x is None else f"{x:.{nd}f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache-dir", required=True)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--queries", type=int, default=0, help="first N queries (0: all)")
    ap.add_argument("--ef", type=int, default=40, help="HNSW ef / ef_search of every engine")
    ap.add_argument("--probes", type=int, default=8, help="pgvector IVFFlat probes")
    ap.add_argument("--out", type=Path, default=None, help="markdown file (and .json beside)")
    ap.add_argument("--no-milvus", action="store_true",
                    help="skip Milvus (default: Milvus Lite, started here, if installed)")
    ap.add_argument("--milvus-uri", default=None,
                    help="a Milvus server (http://host:19530): Milvus HNSW and IVF_FLAT rows on "
                         "it instead of Milvus Lite; token from $MILVUS_TOKEN when set")
    ap.add_argument("--milvus-embedded", action="store_true",
                    help="start a Milvus standalone server from the `milvus` wheel (embedded "
                         "Milvus 2.3: pip install milvus) for the --milvus-uri rows; stop it after")
    ap.add_argument("--milvus-only", action="store_true",
                    help="only the Milvus rows (and their answers): no faiss, pgvector, LanceDB")
    ap.add_argument("--qdrant-url", default=None,
                    help="a Qdrant server (http://host:6333): Qdrant HNSW rows (hnsw_ef = --ef); "
                         "API key from $QDRANT_API_KEY when set")
    ap.add_argument("--answers", type=int, default=0,
                    help="answer N answerable queries per engine row (0: no answers)")
    ap.add_argument("--answer-selectivities", default="0.1,0.01",
                    help="comma-separated selectivities whose rows get answers")
    ap.add_argument("--keep-server", action="store_true",
                    help="keep the PostgreSQL data folder (default: removed at the end)")
    ap.add_argument("overrides", nargs="*", help="extra Hydra overrides (dataset=..., ...)")
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from bench.cache.store import ArtifactStore
    from bench.index import selectivity as sel
    from bench.index.lancedb_index import LanceIndex
    from bench.index.pgvector import PgvectorIndex, stop_managed_server
    from bench.pipeline.components import build_components
    from bench.pipeline.executor import Executor
    from bench.pipeline.plan import plan
    from bench.telemetry.basic import BasicTelemetry

    answer_overrides = ["generator=transformers_cpu", "context=budgeted", "answers=default",
                        "context.top_k=3", "context.max_tokens=384",
                        "generation.max_tokens=48"] if a.answers else []
    cfg = _compose(a.cache_dir, [*a.overrides, *answer_overrides])
    comps = build_components(cfg, "cpu")
    dataset = comps.source.load()
    p = plan(comps, dataset, device="cpu", relevance_level=1)
    ex = Executor(ArtifactStore(Path(a.cache_dir)), BasicTelemetry(), "cpu")
    chunks = ex.value(p.chunk)
    x = np.ascontiguousarray(np.asarray(ex.value(p.embed_docs).vectors), dtype=np.float32)
    q = np.ascontiguousarray(np.asarray(ex.value(p.embed_queries).vectors), dtype=np.float32)
    docs = dataset.doc_index()
    gold = [np.asarray(sorted({docs[d] for d, g in qq.qrels if g >= 1 and d in docs}),
                       dtype=np.int64) for qq in dataset.queries]
    if a.queries:
        q, gold = q[:a.queries], gold[:a.queries]
    chunk_doc = np.asarray(chunks.doc_idx)
    wls = [sel.workload(chunk_doc, len(dataset.documents), gold, s, seed=0)
           for s in sel.SELECTIVITIES]
    attrs = {w.column: w.chunk_bucket for w in wls}
    print(f"{dataset.name}: {len(x)} chunks x {x.shape[1]} of {len(dataset.documents)} docs, "
          f"{len(q)} queries, k={a.k}")

    root = Path(a.cache_dir).resolve() / "filtered_ann"
    pg_dir = root / "pgvector"
    rows: list[sel.SelectivityRow] = []
    builds: list[dict[str, Any]] = []
    answer_sel = {float(v) for v in a.answer_selectivities.split(",") if v.strip()}
    #: (backend, params, selectivity) -> the filtered top-k of every query, for answers
    results: dict[tuple[str, str, float], Any] = {}

    def run_rows(name: str, built: Any, params: dict[str, int], explain: bool) -> None:
        for w in wls:
            plan_txt = ""
            if explain:
                full = built.plan(q[0], a.k, params, column=w.column, value=int(w.values[0]))
                plan_txt = "ANN index" if "_ann" in full else (
                    "exact (btree + sort)" if "Bitmap" in full or "Index Scan" in full
                    else "exact (seq scan)")
            got, ms = sel.timed_search(built, params, q, w, a.k)
            r = sel.score_row(name, params, got, ms, x, q, w, a.k, gold, chunk_doc,
                              plan=plan_txt)
            rows.append(r)
            if a.answers and w.selectivity in answer_sel:
                results[(name, r.params, w.selectivity)] = got
            print(f"  {name:28} {r.params:26} s={w.selectivity:<6g} recall {r.recall:.3f} "
                  f"short {r.short_share:.3f} unauth {r.unauthorized} p50 {r.p50_ms:.2f} ms "
                  f"{plan_txt}")

    embedded: Any = None
    if a.milvus_embedded:
        import milvus  # the `milvus` wheel: an embedded Milvus standalone

        embedded = milvus.default_server
        embedded.set_base_dir(str(root / "milvus-server"))
        t0 = time.perf_counter()
        embedded.start()
        a.milvus_uri = f"http://127.0.0.1:{embedded.listen_port}"
        print(f"  embedded Milvus standalone started in {time.perf_counter() - t0:.2f} s at "
              f"{a.milvus_uri}")
    try:
        if not a.milvus_only:
            # faiss HNSW (conf/index/hnsw.yaml's graph) with an IDSelector
            rss0 = _rss()
            fa, info = sel.build_faiss_hnsw(x, attrs)
            run_rows("faiss HNSW32 (IDSelector)", fa, {"ef_search": a.ef}, False)
            builds.append({"backend": "faiss HNSW32", "build_s": info.build_s,
                           "disk_bytes": info.index_bytes, "connect_s": None, "start_s": None,
                           "memory": f"process RSS +{_mb(_rss() - rss0)} MB"})
            # pgvector: one server for both methods, started here
            for method, knob in (("hnsw", {"ef_search": a.ef}), ("ivfflat", {"probes": a.probes})):
                idx = PgvectorIndex(method=method, data_dir=str(pg_dir))
                t0 = time.perf_counter()
                built, info = idx.build_with_attributes(x, attrs)
                wall = time.perf_counter() - t0
                name = f"pgvector {method}"
                run_rows(f"{name} (planner)", built, dict(knob), True)
                run_rows(f"{name} (index forced)", built, {**knob, "force_index": 1}, True)
                mem = built.server_memory()
                srv = built.server
                builds.append({
                    "backend": f"{name} ({'m=16, ef_construction=64' if method == 'hnsw' else f'lists={idx.resolve_lists(len(x))}'})",  # noqa: E501
                    "build_s": info.build_s, "build_wall_s": wall, "disk_bytes": info.index_bytes,
                    "ann_index_bytes": built.sizes()["ann_index_bytes"],
                    "connect_s": built.connect_s,
                    "start_s": None if srv is None else srv.start_s,
                    "initdb": None if srv is None else srv.initialised,
                    "memory": f"server PSS {_mb(mem['pss_bytes'])} MB (RSS sum "
                              f"{_mb(mem['rss_bytes'])} MB)"})
            # LanceDB, embedded
            rss0 = _rss()
            li = LanceIndex(data_dir=str(root / "lancedb"))
            built_l, info = li.build_with_attributes(x, attrs)
            run_rows("lancedb IVF_HNSW_SQ (prefilter)", built_l, {"ef": a.ef}, False)
            run_rows("lancedb IVF_HNSW_SQ (postfilter)", built_l, {"ef": a.ef, "postfilter": 1},
                     False)
            builds.append({"backend": "lancedb IVF_HNSW_SQ (1 partition, m=16, ef_construction=64)",
                           "build_s": info.build_s, "disk_bytes": info.index_bytes,
                           "connect_s": built_l.connect_s, "start_s": None,
                           "memory": f"process RSS +{_mb(_rss() - rss0)} MB"})
        if not a.no_milvus:
            _milvus_rows(a, x, attrs, root, run_rows, builds)
        if a.qdrant_url:
            _qdrant_rows(a, x, attrs, root, run_rows, builds)
        if not a.milvus_only:
            # a restart on the existing data folder (no initdb): what a later run pays
            stop_managed_server(str(pg_dir))
            from bench.index.pgvector import managed_server

            restart = managed_server(str(pg_dir)).start_s
            for b in builds:
                if b["backend"].startswith("pgvector"):
                    b["restart_s"] = restart
    finally:
        stop_managed_server(str(pg_dir))
        if not a.keep_server:
            shutil.rmtree(pg_dir, ignore_errors=True)
        _stop_milvus()
        if embedded is not None:
            embedded.stop()

    damage: list[Any] = []
    memo_line = ""
    if a.answers:
        damage, memo_line = _answers(a, cfg, comps, dataset, chunks, x, q, wls, results,
                                     answer_sel)
    md = _markdown(rows, builds, dataset.name, len(x), len(q), a.k)
    if damage:
        md += _answers_markdown(damage, memo_line)
    print(md)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(md)
        a.out.with_suffix(".json").write_text(json.dumps(
            {"rows": [asdict(r) for r in rows], "builds": builds, "k": a.k,
             "answers": [asdict(d) for d in damage], "answers_memo": memo_line,
             "n_chunks": len(x), "n_queries": len(q)}, indent=2, default=str))


def _milvus_rows(a: Any, x: np.ndarray, attrs: dict[str, np.ndarray], root: Path,
                 run_rows: Any, builds: list[dict[str, Any]]) -> None:
    """Milvus IVF_FLAT (nprobe = --probes) in Milvus Lite started here, or Milvus HNSW
    (ef = --ef) and IVF_FLAT on the --milvus-uri server."""
    import importlib.util

    if importlib.util.find_spec("pymilvus") is None:
        print("  Milvus skipped: pymilvus is not installed (pip install -e '.[vectordb]')")
        return
    from bench.errors import BenchError
    from bench.index.milvus import MilvusIndex, lite_binary

    if a.milvus_uri is None:
        try:
            lite_binary()
        except BenchError as exc:
            print(f"  Milvus skipped: {exc}")
            return
        # Milvus Lite searches exactly (its local mode never indexes): its rows say so
        setups = [("IVF_FLAT", {"nprobe": a.probes}, "milvus lite IVF_FLAT (searched exactly)")]
    else:
        setups = [("HNSW", {"ef": a.ef}, "milvus HNSW"),
                  ("IVF_FLAT", {"nprobe": a.probes}, "milvus IVF_FLAT")]
    token = "MILVUS_TOKEN" if os.environ.get("MILVUS_TOKEN") else None
    for index_type, knob, name in setups:
        idx = MilvusIndex(index_type=index_type, uri=a.milvus_uri, token_env=token,
                          data_dir=str(root / "milvus"))
        t0 = time.perf_counter()
        built, info = idx.build_with_attributes(x, attrs)
        wall = time.perf_counter() - t0
        run_rows(name, built, dict(knob), False)
        srv = built.server
        mem = built.server_memory()
        setting = ("m=16, ef_construction=64" if index_type == "HNSW"
                   else f"nlist={idx.resolve_nlist(len(x))}")
        builds.append({
            "backend": f"{name} ({setting})", "build_s": info.build_s, "build_wall_s": wall,
            "disk_bytes": info.index_bytes, "connect_s": built.connect_s,
            "load_s": built.load_s, "start_s": None if srv is None else srv.start_s,
            "memory": "–" if srv is None else
            f"server PSS {_mb(mem['pss_bytes'])} MB (RSS {_mb(mem['rss_bytes'])} MB)"})


def _qdrant_rows(a: Any, x: np.ndarray, attrs: dict[str, np.ndarray], root: Path,
                 run_rows: Any, builds: list[dict[str, Any]]) -> None:
    """Qdrant HNSW (hnsw_ef = --ef) on the --qdrant-url server (never the client's local mode:
    that is a brute force, not the Qdrant engine)."""
    from bench.index.qdrant import QdrantIndex

    key_env = "QDRANT_API_KEY" if os.environ.get("QDRANT_API_KEY") else None
    idx = QdrantIndex(url=a.qdrant_url, api_key_env=key_env, data_dir=str(root / "qdrant"))
    t0 = time.perf_counter()
    built, info = idx.build_with_attributes(x, attrs)
    wall = time.perf_counter() - t0
    run_rows("qdrant HNSW", built, {"hnsw_ef": a.ef}, False)
    builds.append({"backend": "qdrant HNSW (m=16, ef_construct=64)", "build_s": info.build_s,
                   "build_wall_s": wall, "disk_bytes": info.index_bytes,
                   "connect_s": built.connect_s, "start_s": None, "memory": "–"})


def _stop_milvus() -> None:
    import importlib.util

    if importlib.util.find_spec("pymilvus") is not None:
        from bench.index.milvus import stop_lite

        stop_lite()


def _answers(a: Any, cfg: Any, comps: Any, dataset: Any, chunks: Any, x: np.ndarray,
             q: np.ndarray, wls: list[Any], results: dict[tuple[str, str, float], Any],
             answer_sel: set[float]) -> tuple[list[Any], str]:
    """Answer-level damage rows (bench.index.filtered_answers) and the memo's counts."""
    from bench.cache.store import ArtifactStore
    from bench.generation.base import SamplingParams
    from bench.generation.memo import MemoGenerator
    from bench.generation.stage import generator_name, query_subset
    from bench.index import selectivity as sel
    from bench.index.filtered_answers import FilteredAnswers

    g = cfg.generation
    sampling = SamplingParams(max_tokens=int(g.max_tokens), temperature=0.0,
                              top_p=float(g.top_p), seed=int(g.seed))
    among = {qq.query_id for qq in dataset.queries[:len(q)]}
    subset = set(query_subset(dataset, a.answers, int(g.seed), among, answerable_only=True))
    positions = [i for i, qq in enumerate(dataset.queries) if qq.query_id in subset]
    memo = MemoGenerator(comps.generator, ArtifactStore(Path(a.cache_dir)))
    fa = FilteredAnswers(dataset, positions, np.asarray(chunks.doc_idx), chunks.text,
                         comps.context, memo, comps.answers, sampling)
    out = []
    t0 = time.perf_counter()
    for w in wls:
        if w.selectivity not in answer_sel:
            continue
        exact = fa.answer(sel.exact_filtered(x, q, w, a.k).ids)
        for (name, params, s), got in results.items():
            if s != w.selectivity:
                continue
            row = fa.damage(name, params, s, exact, fa.answer(got.ids))
            out.append(row)
            f1 = row.delta("token_f1")
            print(f"  answers {name:28} {params:26} s={s:<6g} contexts changed "
                  f"{row.n_context_changed}/{row.n_queries} answers changed "
                  f"{row.n_answer_changed} token F1 delta {_f(f1.delta)}")
    c = memo.counts
    line = (f"{generator_name(comps.generator)}, greedy, {sampling.max_tokens} new tokens, "
            f"{len(positions)} answerable queries (seed {int(g.seed)}); answers generated "
            f"{c.answer_misses}, from the memo {c.answer_hits}; "
            f"{time.perf_counter() - t0:.0f} s")
    return out, line


def _ci(d: Any, n_queries: int) -> str:
    if d.delta is None:
        return "–"
    n = "" if d.n == n_queries else f" (n={d.n})"
    return (f"{d.exact_mean:.3f} → {d.mean:.3f}, Δ {d.delta:+.3f} "
            f"[{d.ci_low:+.3f}, {d.ci_high:+.3f}]{n}")


def _answers_markdown(damage: list[Any], memo_line: str) -> str:
    out = ["", "## Answer-level damage (answered subset, paired against exact filtered)", "",
           f"Generator: {memo_line}. Per query, the answer from the engine's filtered top-k "
           "against the answer from the exact filtered top-k; mean exact → engine, Δ "
           "[95 % paired bootstrap CI] over the queries both scored.", "",
           "| engine | setting | eligible | n | contexts changed | answers changed | failed | "
           "token F1 | answer_correct | claims coverage |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in damage:
        out.append(f"| {r.backend} | {r.params} | {r.selectivity * 100:g} % | {r.n_queries} | "
                   f"{r.n_context_changed} | {r.n_answer_changed} | {r.n_failed} | "
                   f"{_ci(r.delta('token_f1'), r.n_queries)} | "
                   f"{_ci(r.delta('answer_correct'), r.n_queries)} | "
                   f"{_ci(r.delta('claims_coverage'), r.n_queries)} |")
    return "\n".join(out) + "\n"


def _markdown(rows: list[Any], builds: list[dict[str, Any]], name: str, n: int, n_q: int,
              k: int) -> str:
    out = [f"## Filtered ANN across selectivity ({name}: {n} chunks, {n_q} queries, k={k})", "",
           "| engine | setting | eligible | eligible chunks (median) | recall@k vs exact "
           "filtered | short lists | mean returned | unauthorized | false exclusion (exact "
           "floor) | n gold q | p50 / p95 / p99 ms | plan |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        fe = ("–" if r.false_exclusion_rate is None
              else f"{r.false_exclusion_rate:.3f} ({r.exact_false_exclusion_rate:.3f})")
        out.append(f"| {r.backend} | {r.params} | {r.selectivity * 100:g} % | "
                   f"{r.eligible_chunks_median:g} | {r.recall:.3f} | {r.short_share:.3f} | "
                   f"{r.returned_mean:.1f} | {r.unauthorized} | {fe} | {r.n_gold_queries} | "
                   f"{r.p50_ms:.2f} / {r.p95_ms:.2f} / {r.p99_ms:.2f} | {r.plan or '–'} |")
    out += ["", "## Build, size and memory", "",
            "| engine | build s | on disk MB | ANN index MB | connect s | load s | "
            "server start s | memory |", "|---|---|---|---|---|---|---|---|"]
    for b in builds:
        start = "–" if b.get("start_s") is None else (
            f"{b['start_s']:.2f}" + (" (with initdb)" if b.get("initdb") else "")
            + ("" if b.get("restart_s") is None else f"; restart {b['restart_s']:.2f}"))
        ann = b.get("ann_index_bytes")
        out.append(f"| {b['backend']} | {b['build_s']:.2f} | {_mb(b['disk_bytes'])} | "
                   f"{'–' if ann is None else _mb(ann)} | {_f(b.get('connect_s'))} | "
                   f"{_f(b.get('load_s'))} | {start} | "
                   f"{b['memory']} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
