"""Benchmark bench's embed stage against bare sentence-transformers on the same texts.

Texts: the chunks of the FOLDOC benchmark (``FixedTokenChunker(size=128, overlap=16)`` with the
embedder's tokenizer), a seeded sample of ``--n``. Timed interleaved in one process (bench,
bare, bench, bare, ...; one untimed warm-up of each first) so drift in machine load hits both
sides alike; medians over ``--reps``:

* bench: ``SentenceTransformerEmbedder.encode`` into a fresh ``.npy`` memmap (what the
  pipeline's embed stage does: token counts, length-sorted batches, scatter to input order);
* bare: ``SentenceTransformer.encode(texts, batch_size=same, normalize_embeddings=True)`` of a
  separately loaded copy of the same model.

Reports bench/bare time (target <= 1.0), the minimum cosine between the two outputs (target
>= 0.99999), texts/s and tokens/s (tokens: embedder tokens after truncation, no specials).
Not a test: ``HF_HUB_OFFLINE=1 python scripts/bench_embed.py [--n 1000] [--reps 3]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def load_texts(dataset: str, n: int, seed: int, tokenizer: object) -> list[str]:
    """A seeded sample of ``n`` FOLDOC chunk texts (all of them when there are fewer)."""
    from bench.chunking.fixed_tokens import FixedTokenChunker
    from bench.data.foldoc import FoldocDataset

    docs = FoldocDataset(path=dataset).load().documents
    chunks = FixedTokenChunker(size=128, overlap=16).chunk(docs, tokenizer=tokenizer)  # type: ignore[arg-type]
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(len(chunks), min(n, len(chunks)), replace=False))
    return [chunks.text[i] for i in pick]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="texts (default 1000)")
    parser.add_argument("--reps", type=int, default=3, help="timed repetitions per side")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--model", default="packaged:all-MiniLM-L6-v2")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dataset", default=".data/foldoc", help="built FOLDOC folder")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from sentence_transformers import SentenceTransformer

    from bench.embedding.sentence_transformers import (
        SentenceTransformerEmbedder,
        resolve_model_path,
    )

    embedder = SentenceTransformerEmbedder(
        model=args.model, batch_size=args.batch_size, device=args.device
    )
    texts = load_texts(args.dataset, args.n, args.seed, embedder.tokenizer)
    bare_model = SentenceTransformer(resolve_model_path(args.model), device=args.device)
    bare_model.eval()

    def sync() -> None:
        if args.device == "cuda":  # GPU work is timed with device synchronisation
            import torch

            torch.cuda.synchronize()

    with tempfile.TemporaryDirectory() as tmp:
        n_tokens = 0

        def run_bench() -> tuple[float, np.ndarray]:
            nonlocal n_tokens
            path = Path(tmp) / "vectors.npy"
            t0 = time.perf_counter()
            out = np.lib.format.open_memmap(
                path, mode="w+", dtype=np.float32, shape=(len(texts), embedder.dim)
            )
            stats = embedder.encode(texts, kind="document", out=out)
            out.flush()
            sync()
            wall = time.perf_counter() - t0
            n_tokens = stats.n_tokens
            vecs = np.array(out)
            del out
            return wall, vecs

        def run_bare() -> tuple[float, np.ndarray]:
            t0 = time.perf_counter()
            vecs = bare_model.encode(
                texts, batch_size=args.batch_size, normalize_embeddings=True,
                convert_to_numpy=True, show_progress_bar=False,
            )
            sync()
            return time.perf_counter() - t0, np.asarray(vecs, dtype=np.float32)

        # warm-up (allocator, first-call kernels) on a slice, untimed
        warm = texts[: args.batch_size]
        embedder.encode(warm, kind="document", out=np.empty((len(warm), embedder.dim), np.float32))
        bare_model.encode(warm, batch_size=args.batch_size, show_progress_bar=False)

        bench_s: list[float] = []
        bare_s: list[float] = []
        for _ in range(args.reps):
            wall, bench_vecs = run_bench()
            bench_s.append(wall)
            wall, bare_vecs = run_bare()
            bare_s.append(wall)

    # both sides are L2-normalised, so the row-wise dot product is the cosine
    min_cos = float(np.min(np.einsum("nd,nd->n", bench_vecs.astype(np.float64),
                                     bare_vecs.astype(np.float64))))
    med_bench, med_bare = statistics.median(bench_s), statistics.median(bare_s)
    ratio = med_bench / med_bare
    n = len(texts)
    print(f"\n{n} FOLDOC chunks, {n_tokens} tokens, model {args.model}, batch {args.batch_size}, "
          f"device {args.device}, {args.reps} interleaved reps (medians)\n")
    print("| side | median s | texts/s | tokens/s | all reps s |")
    print("|---|---:|---:|---:|---|")
    for name, med, reps in (("bench (memmap)", med_bench, bench_s), ("bare ST", med_bare, bare_s)):
        print(f"| {name} | {med:.2f} | {n / med:.1f} | {n_tokens / med:.0f} | "
              f"{', '.join(f'{r:.2f}' for r in reps)} |")
    ok = {True: "met", False: "MISSED"}
    print(f"\n| check | value | target | |\n|---|---:|---|---|\n"
          f"| time ratio bench/bare | {ratio:.3f} | <= 1.0 | {ok[ratio <= 1.0]} |\n"
          f"| min cosine bench vs bare | {min_cos:.7f} | >= 0.99999 | {ok[min_cos >= 0.99999]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
