"""Pairs/s of the offline rerankers (maxsim, bi_encoder) on FOLDOC-like passages, this CPU.

Each query gets ``--depth`` passages drawn at random (seeded) from the corpus documents, cut to
their first ``--words`` words (~ one 128-token chunk); one ``score`` call covers every query,
as the pipeline makes it. Repetitions are interleaved across rerankers (a load spike hits
both), models are loaded and warmed before timing; the medians are printed.

    PYTHONPATH=$PWD:$PWD/kernels HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_rerank.py \
        --corpus .data/foldoc/corpus.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

from bench.config.build import build
from bench.rerank.base import Reranker

RERANKERS = {
    "maxsim": {"_target_": "bench.rerank.maxsim.MaxSimReranker"},
    "bi_encoder": {
        "_target_": "bench.rerank.bi_encoder.BiEncoderReranker",
        "embedder": {
            "_target_": "bench.embedding.sentence_transformers.SentenceTransformerEmbedder",
            "model": "packaged:all-MiniLM-L6-v2",
            "max_seq_length": 512,
        },
    },
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=Path(".data/foldoc/corpus.jsonl"))
    ap.add_argument("--queries-file", type=Path, default=None,
                    help="queries.jsonl (default: next to the corpus)")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--words", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    docs = [json.loads(line)["text"] for line in args.corpus.open()]
    qfile = args.queries_file or args.corpus.with_name("queries.jsonl")
    queries = [json.loads(line)["query"] for line in qfile.open()][: args.queries]
    rng = np.random.default_rng(args.seed)
    pools = [[" ".join(docs[j].split()[: args.words])
              for j in rng.choice(len(docs), size=args.depth, replace=False)] for _ in queries]
    n_pairs = sum(len(p) for p in pools)
    n_distinct = len({t for p in pools for t in p})
    print(f"{len(queries)} queries x {args.depth} passages = {n_pairs} pairs, "
          f"{n_distinct} distinct passages, ~{args.words} words each")

    rerankers: dict[str, Reranker] = {}
    for name, node in RERANKERS.items():
        r = build(node, "reranker", device="cpu")
        assert r is not None
        r.score(queries[:2], [p[:4] for p in pools[:2]])  # load and warm the model
        rerankers[name] = r
    walls: dict[str, list[float]] = {n: [] for n in rerankers}
    for rep in range(args.reps):
        for name, r in rerankers.items():
            t0 = time.perf_counter()
            r.score(queries, pools)
            walls[name].append(time.perf_counter() - t0)
            print(f"rep {rep}: {name} {walls[name][-1]:.2f} s", flush=True)
    for name, w in walls.items():
        med = statistics.median(w)
        print(f"{name}: median {med:.2f} s/call, {n_pairs / med:.1f} pairs/s, "
              f"{n_distinct / med:.1f} distinct passages/s (reps: "
              f"{', '.join(f'{x:.2f}' for x in w)})")


if __name__ == "__main__":
    main()
