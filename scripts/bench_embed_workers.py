"""One corpus pass of the embedding stage, in this process or over Ray workers (the engine the
pipeline's ``embedding=local|ray`` runs): for the worker-scaling table and the kill -9 resume
check of docs/clusters.md.

    scripts/bench_embed_workers.py --corpus runs/scale100k --engine local --save local.npy
    scripts/bench_embed_workers.py --corpus runs/scale100k --engine ray --workers 2 \\
        --save ray2.npy --same-as local.npy

``--corpus``: a folder written by ``bench.data.scale.write_scale_corpus`` (written there first
when it has no manifest, with ``--docs`` passages); the passages are the documents' texts.
Prints one JSON line: the pass's wall time (in-process, from before the first shard to the
assembled vectors; Ray's start and the workers' model loads included), texts/s and the shard
counts; ``--same-as`` adds whether the vectors equal a saved pass's (``np.array_equal``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    from bench.config.build import build
    from bench.data.scale import iter_shards, write_scale_corpus
    from bench.embedding.engine import ConfigRecipe, LocalEngine, RayEngine
    from bench.errors import BenchError

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", required=True)
    p.add_argument("--docs", type=int, default=100_000)
    p.add_argument("--embedder", default="static_l3", help="a conf/embedder option")
    p.add_argument("--engine", choices=("local", "ray"), default="local")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--shard-rows", type=int, default=8192)
    p.add_argument("--shards-dir", default=str(ROOT / ".cache/bench/embed_shards"))
    p.add_argument("--save", help="write the vectors here (.npy)")
    p.add_argument("--same-as", help="a saved pass's vectors to compare with")
    p.add_argument("--threads", type=int, default=None,
                   help="the embedder's threads option (ONNX: intra-op threads per process)")
    a = p.parse_args(argv)
    try:
        corpus = Path(a.corpus)
        if not (corpus / "manifest.json").exists():
            write_scale_corpus(corpus, n_docs=a.docs, n_queries=10)
        texts = [d.text for _, docs in iter_shards(corpus) for d in docs][: a.docs]
        conf = OmegaConf.load(ROOT / "conf/embedder" / f"{a.embedder}.yaml")
        if a.threads is not None:
            conf.threads = a.threads
        emb = build(conf, "embedder", device="cpu")
        assert emb is not None
        recipe = ConfigRecipe(json.dumps(OmegaConf.to_container(conf, resolve=True)), "cpu")
        engine = (LocalEngine() if a.engine == "local" else
                  RayEngine(workers=a.workers, shard_rows=a.shard_rows,
                            shards_dir=a.shards_dir, embedder=recipe))
        out = np.zeros((len(texts), emb.dim), dtype=np.float32)
        t0 = time.perf_counter()
        stats = engine.encode_documents(emb, texts, out=out)
        wall = time.perf_counter() - t0
    except BenchError as err:
        print(err.one_line(), file=sys.stderr)
        return err.exit_code
    row = {"engine": a.engine, "workers": a.workers if a.engine == "ray" else 0,
           "embedder": a.embedder, "threads": a.threads, "n": len(texts), "wall_s": round(wall, 3),
           "texts_per_s": round(len(texts) / wall, 1), "shards": stats.shards,
           "shards_reused": stats.shards_reused, "shards_redone": stats.shards_redone}
    if a.save:
        np.save(a.save, out)
    if a.same_as:
        row["identical"] = bool(np.array_equal(out, np.load(a.same_as, mmap_mode="r")))
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
