"""Cost of each embedder option, each measured in a FRESH process: model size on disk, load
time, embedding throughput and peak resident memory.

Why a separate script: a Hydra multirun with the basic launcher runs its jobs in one process,
where ``ru_maxrss`` only grows, so the embedder_sweep's run.json cannot attribute peak memory
to one model. Here each option runs in its own ``python`` child; the child loads the embedder,
encodes one warm-up batch, then ``--n`` FOLDOC chunk texts (128-token chunks, seeded sample),
and reports texts/s, tokens/s (embedder tokens after truncation) and its own peak RSS.

Not a test: ``HF_HUB_OFFLINE=1 python scripts/embedder_cost.py --dataset .data/foldoc
[--n 500] [minilm onnx_minilm_int8 onnx_paraphrase_l3]``; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

CONF = Path(__file__).resolve().parent.parent / "conf" / "embedder"


def child(option: str, dataset: str, n: int, seed: int) -> dict[str, object]:
    import time

    import numpy as np
    from omegaconf import OmegaConf

    from bench.config.build import build
    from bench.embedding.base import SizedEmbedder
    from bench.telemetry.basic import peak_rss_bytes

    t0 = time.perf_counter()
    emb: SizedEmbedder | None = build(OmegaConf.load(CONF / f"{option}.yaml"), "embedder",
                                      device="cpu")
    assert emb is not None
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_embed import load_texts  # the same chunk sample as scripts/bench_embed.py

    texts = load_texts(dataset, n, seed, emb.tokenizer)
    emb.encode(texts[:8], kind="document", out=np.zeros((8, emb.dim), np.float32))  # warm-up
    load_s = time.perf_counter() - t0
    out = np.zeros((len(texts), emb.dim), dtype=np.float32)
    stats = emb.encode(texts, kind="document", out=out)
    return {"option": option, "n_texts": stats.n_texts, "texts_per_s": stats.texts_per_s,
            "tokens_per_s": stats.tokens_per_s, "load_and_warmup_s": load_s,
            "model_bytes": emb.model_bytes, "peak_rss_bytes": peak_rss_bytes()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("options", nargs="*",
                        default=["minilm", "onnx_minilm_int8", "onnx_paraphrase_l3"])
    parser.add_argument("--dataset", default=".data/foldoc")
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.dataset, args.n, args.seed)))
        return 0
    rows = []
    for option in args.options:
        proc = subprocess.run([sys.executable, __file__, "--child", option, "--dataset",
                               args.dataset, "--n", str(args.n), "--seed", str(args.seed)],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(f"{option}: failed: {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            return 1
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print("| embedder | model MB | texts/s | tokens/s | load+warm-up s | peak RSS MB |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['option']} | {int(r['model_bytes']) / 1e6:.1f} | {r['texts_per_s']:.1f} | "
              f"{r['tokens_per_s']:.0f} | {r['load_and_warmup_s']:.1f} | "
              f"{int(r['peak_rss_bytes']) / 2**20:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
