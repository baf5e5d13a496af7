"""Is the search latency bench reports the system's? One interleaved run against bare faiss.

Loads the default experiment's index and query vectors from the artifact cache (run
``python -m bench +experiment=quickstart cache_dir=DIR`` once, or point ``--cache-dir`` at a
filled cache), then, for ``--reps`` rounds with the order alternating per round, measures on
the SAME index, queries and depth:

- bench: ``DenseRetriever.search`` — the code that produces the reported figures (single-query
  samples for p50/p95, batch samples for QPS; ``latency_mode=both``);
- bare: a plain loop of ``faiss.Index.search`` on the index file read from the cache (one
  query per call for p50/p95; the same batches for QPS), timed with perf_counter around each
  call and nothing else.

Per round it takes p50, p95 and batch QPS of each; it prints the median over rounds and the
ratio bench / bare (target: within 3 %). ``--out`` writes the figures as JSON.

    python scripts/bench_search_latency.py --cache-dir /tmp/c --data /path/.data/foldoc
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np


def _compose(cache_dir: str, data: str, extra: list[str]) -> Any:
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from bench.app import CONF_DIR
    from bench.config.schema import register

    register()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            "+experiment=quickstart", f"cache_dir={cache_dir}", f"dataset.path={data}", *extra],
            return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


def bare_single(index: Any, q: np.ndarray, depth: int) -> list[float]:
    clock = time.perf_counter
    rows = [q[i : i + 1] for i in range(len(q))]
    out = []
    for r in rows:
        t0 = clock()
        index.search(r, depth)
        out.append((clock() - t0) * 1000.0)
    return out


def bare_batch_qps(index: Any, q: np.ndarray, depth: int, batch: int) -> float:
    clock = time.perf_counter
    total = 0.0
    for b0 in range(0, len(q), batch):
        qb = q[b0 : b0 + batch]
        t0 = clock()
        index.search(qb, depth)
        total += clock() - t0
    return len(q) / total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache-dir", required=True)
    ap.add_argument("--data", required=True, help="the FOLDOC dataset folder")
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("overrides", nargs="*", help="extra Hydra overrides")
    a = ap.parse_args()

    import faiss

    from bench.cache.store import ArtifactStore
    from bench.index.faiss_index import INDEX_FILE
    from bench.pipeline.components import build_components
    from bench.pipeline.executor import Executor
    from bench.pipeline.plan import plan
    from bench.retrieval.dense import DenseRetriever
    from bench.telemetry.base import TimingLog
    from bench.telemetry.basic import BasicTelemetry

    cfg = _compose(a.cache_dir, a.data, a.overrides)
    comps = build_components(cfg, "cpu")
    dataset = comps.source.load()
    p = plan(comps, dataset, device="cpu", relevance_level=1)
    store = ArtifactStore(Path(a.cache_dir))
    ex = Executor(store, BasicTelemetry(), "cpu")
    art = ex.value(p.index)
    queries = np.ascontiguousarray(np.asarray(ex.value(p.embed_queries).vectors),
                                   dtype=np.float32)
    n_chunks = art.info.n_vectors
    folder = store.lookup("index", p.index.key)
    assert folder is not None, "the index is not in the cache"
    bare = faiss.read_index(str(folder / INDEX_FILE))
    ret = comps.retriever
    assert isinstance(ret, DenseRetriever)
    depth = ret.depth(n_chunks)
    qp = dict(next(iter(comps.index.query_params())))
    qids = [q.query_id for q in dataset.queries]
    print(f"index {type(bare).__name__} {bare.ntotal} x {bare.d}, {len(queries)} queries, "
          f"depth {depth}, batch {ret.batch_size}, faiss threads {faiss.omp_get_max_threads()}")

    def run_bench() -> tuple[float, float, float]:
        timing = TimingLog("retrieve")
        ret.search(art.built, queries, qp, n_chunks=n_chunks, timing=timing, query_ids=qids)
        single = [s.wall_ms for s in timing.samples if s.sample_kind == "query"]
        batch = [s for s in timing.samples if s.sample_kind == "batch"]
        qps = sum(s.n_items for s in batch) / (sum(s.wall_ms for s in batch) / 1000.0)
        return (float(np.percentile(single, 50)), float(np.percentile(single, 95)), qps)

    def run_bare() -> tuple[float, float, float]:
        qps = bare_batch_qps(bare, queries, depth, ret.batch_size)
        single = bare_single(bare, queries, depth)
        return (float(np.percentile(single, 50)), float(np.percentile(single, 95)), qps)

    run_bench()
    run_bare()  # warm-up of both paths
    rounds: dict[str, list[tuple[float, float, float]]] = {"bench": [], "bare": []}
    ratios: list[tuple[float, float, float]] = []
    for r in range(a.reps):
        order = [("bench", run_bench), ("bare", run_bare)]
        if r % 2:
            order.reverse()
        got = {name: fn() for name, fn in order}
        for name, v in got.items():
            rounds[name].append(v)
        b, f = got["bench"], got["bare"]
        ratios.append((b[0] / f[0], b[1] / f[1], b[2] / f[2]))
    med = {k: [statistics.median(x[i] for x in v) for i in range(3)] for k, v in rounds.items()}
    ratio_med = [statistics.median(x[i] for x in ratios) for i in range(3)]
    names = ("single p50 ms", "single p95 ms", "batch QPS")
    print(f"{'':16}{'bench':>12}{'bare faiss':>12}{'ratio (paired median)':>24}")
    for i, n in enumerate(names):
        print(f"{n:16}{med['bench'][i]:12.4f}{med['bare'][i]:12.4f}{ratio_med[i]:24.4f}")
    if a.out:
        a.out.write_text(json.dumps({
            "reps": a.reps, "queries": len(queries), "depth": depth, "n_vectors": bare.ntotal,
            "median": {k: dict(zip(names, v, strict=True)) for k, v in med.items()},
            "ratio_bench_over_bare_paired_median": dict(zip(names, ratio_med, strict=True)),
        }, indent=2))


if __name__ == "__main__":
    main()
