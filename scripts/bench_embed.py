"""Benchmark bench's embed stage against bare sentence-transformers on the same texts.

Texts: the chunks of the FOLDOC benchmark (``FixedTokenChunker(size=128, overlap=16)`` with the
embedder's tokenizer), a seeded sample of ``--n``. Every case is timed interleaved in one
process (case 1, case 2, ..., case 1, case 2, ...; one untimed warm-up of each first) so drift
in machine load hits all of them alike; medians over ``--reps``. Cases (``--cases``):

* ``bare``: ``SentenceTransformer.encode(texts, batch_size=same, normalize_embeddings=True)``
  of a separately loaded copy of the model, fp32 — the baseline every ratio is against;
* ``bench``: ``SentenceTransformerEmbedder.encode`` into a fresh ``.npy`` memmap (what the
  pipeline's embed stage does: token counts, length-sorted batches, scatter to input order);
* ``bench-bf16``: the same with ``precision=bf16`` (CPU: ``torch.autocast`` bf16);
* ``bare-bf16``: bare ``encode`` inside ``torch.autocast("cpu", bfloat16)`` (is any bf16 gain
  bench's own or autocast's);
* ``onnx-int8``: ``OnnxEmbedder`` over the packaged int8 MiniLM (``conf/embedder/
  onnx_minilm_int8.yaml``), threads = ``--threads``;
* ``two-pass``: what a run with a dense lane and MaxSim reranking computed at index time before
  the shared pass: ``bench`` then MaxSim's own ``index_passages`` (a second pass of the same
  model over the same texts, its token index written to disk);
* ``shared`` / ``shared-bf16``: both from ONE pass (``bench.embedding.shared``:
  ``encode_with_tokens`` + the token index written), fp32 / bf16.

The token-index cases also report the cosine of every kept token vector to ``two-pass``'s
(min and mean over all tokens of all texts): the shared index is not bit-identical to MaxSim's
own pass (other batches), which is why it has its own cache key.

Reports per case: median seconds, texts/s, tokens/s (embedder tokens after truncation, no
specials), speed-up over ``bare`` and the cosine to ``bare``'s vectors (min and mean), and the
targets: bench fp32 time <= bare (min cosine >= 0.99999), bench bf16 >= 2.0x bare at min cosine
>= 0.9999. ``--threads N`` sets torch's (and ONNX Runtime's) intra-op threads for every case.
Not a test: ``HF_HUB_OFFLINE=1 python scripts/bench_embed.py [--n 1000] [--reps 3]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

CASES = ("bare", "bench", "bench-bf16", "bare-bf16", "onnx-int8", "two-pass", "shared",
         "shared-bf16")
#: cases that also build MaxSim's token index (dense vectors + token index)
TOKEN_CASES = ("two-pass", "shared", "shared-bf16")


def load_texts(dataset: str, n: int, seed: int, tokenizer: object) -> list[str]:
    """A seeded sample of ``n`` FOLDOC chunk texts (all of them when there are fewer)."""
    from bench.chunking.fixed_tokens import FixedTokenChunker
    from bench.data.foldoc import FoldocDataset

    docs = FoldocDataset(path=dataset).load().documents
    chunks = FixedTokenChunker(size=128, overlap=16).chunk(docs, tokenizer=tokenizer)  # type: ignore[arg-type]
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(len(chunks), min(n, len(chunks)), replace=False))
    return [chunks.text[i] for i in pick]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine (float64), whatever the rows' norms."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return np.einsum("nd,nd->n", a64, b64) / np.maximum(
        np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1), 1e-30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="texts (default 1000)")
    parser.add_argument("--reps", type=int, default=3, help="timed repetitions per case")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--model", default="packaged:all-MiniLM-L6-v2")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dataset", default=".data/foldoc", help="built FOLDOC folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None,
                        help="intra-op threads for torch and ONNX Runtime (default: theirs)")
    parser.add_argument("--cases", default="bare,bench,bench-bf16",
                        help=f"comma-separated, from {', '.join(CASES)} (bare is always run)")
    args = parser.parse_args(argv)
    cases = ["bare"] + [c for c in args.cases.split(",") if c and c != "bare"]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"--cases: unknown {', '.join(unknown)} (known: {', '.join(CASES)})")

    import torch
    from sentence_transformers import SentenceTransformer

    from bench.embedding.base import Embedder
    from bench.embedding.sentence_transformers import (
        SentenceTransformerEmbedder,
        resolve_model_path,
    )

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    embedders: dict[str, Embedder] = {}
    if "bench" in cases:
        embedders["bench"] = SentenceTransformerEmbedder(
            model=args.model, batch_size=args.batch_size, device=args.device)
    if "bench-bf16" in cases:
        embedders["bench-bf16"] = SentenceTransformerEmbedder(
            model=args.model, batch_size=args.batch_size, device=args.device, precision="bf16")
    if "onnx-int8" in cases:
        from bench.embedding.onnx import OnnxEmbedder

        embedders["onnx-int8"] = OnnxEmbedder(
            model="packaged:all-MiniLM-L6-v2-int8", batch_size=args.batch_size,
            threads=args.threads or 0, device=args.device)
    from bench.rerank.maxsim import MaxSimReranker

    rerankers: dict[str, MaxSimReranker] = {}
    for c in TOKEN_CASES:
        if c in cases:
            precision = "bf16" if c.endswith("bf16") else "fp32"
            embedders[c] = SentenceTransformerEmbedder(
                model=args.model, batch_size=args.batch_size, device=args.device,
                precision=precision)
            rerankers[c] = MaxSimReranker(model=args.model, batch_size=args.batch_size,
                                          device=args.device, precision=precision)
    counter = SentenceTransformerEmbedder(model=args.model, device=args.device)
    texts = load_texts(args.dataset, args.n, args.seed, counter.tokenizer)
    bare_model = SentenceTransformer(resolve_model_path(args.model), device=args.device)
    bare_model.eval()

    def sync() -> None:
        if args.device == "cuda":  # GPU work is timed with device synchronisation
            torch.cuda.synchronize()

    n_tokens: dict[str, int] = {}
    token_index: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # (vectors, offsets) per case

    def bench_case(name: str, tmp: str) -> Callable[[list[str]], tuple[float, np.ndarray]]:
        embedder = embedders[name]

        def run(batch: list[str]) -> tuple[float, np.ndarray]:
            path = Path(tmp) / f"{name}.npy"
            index_dir = Path(tmp) / f"{name}-index"
            index_dir.mkdir(exist_ok=True)
            t0 = time.perf_counter()
            out = np.lib.format.open_memmap(
                path, mode="w+", dtype=np.float32, shape=(len(batch), embedder.dim))
            if name in ("shared", "shared-bf16"):
                assert isinstance(embedder, SentenceTransformerEmbedder)
                stats, rows = embedder.encode_with_tokens(
                    batch, kind="document", out=out, token_rows=rerankers[name].index_rows)
                rerankers[name].write_index_rows(rows, index_dir)
            else:
                stats = embedder.encode(batch, kind="document", out=out)
                if name == "two-pass":
                    rerankers[name].index_passages(batch, index_dir)
            out.flush()
            sync()
            wall = time.perf_counter() - t0
            n_tokens[name] = stats.n_tokens
            vecs = np.array(out)
            del out
            if name in TOKEN_CASES:
                index = rerankers[name].load_index(index_dir)
                token_index[name] = (np.asarray(index.vectors, dtype=np.float32),
                                     np.asarray(index.offsets))
            return wall, vecs
        return run

    def bare_case(bf16: bool) -> Callable[[list[str]], tuple[float, np.ndarray]]:
        def run(batch: list[str]) -> tuple[float, np.ndarray]:
            t0 = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                vecs = bare_model.encode(
                    batch, batch_size=args.batch_size, normalize_embeddings=True,
                    convert_to_numpy=True, show_progress_bar=False,
                )
            sync()
            return time.perf_counter() - t0, np.asarray(vecs, dtype=np.float32)
        return run

    walls: dict[str, list[float]] = {c: [] for c in cases}
    vecs: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory() as tmp:
        runners = {c: bare_case(c == "bare-bf16") if c.startswith("bare")
                   else bench_case(c, tmp) for c in cases}
        warm = texts[: args.batch_size]  # allocator, first-call kernels; untimed
        for c in cases:
            runners[c](warm)
        for _ in range(args.reps):
            for c in cases:
                wall, vecs[c] = runners[c](texts)
                walls[c].append(wall)

    tokens = n_tokens.get("bench") or int(np.minimum(
        counter.tokenizer.count(texts), counter.effective_max_seq_length - 2).sum())
    med = {c: statistics.median(walls[c]) for c in cases}
    cos = {c: cosines(vecs[c], vecs["bare"]) for c in cases}
    n = len(texts)
    threads = args.threads if args.threads is not None else torch.get_num_threads()
    print(f"\n{n} FOLDOC chunks, {tokens} tokens, model {args.model}, batch {args.batch_size}, "
          f"device {args.device}, {threads} intra-op threads, {args.reps} interleaved reps "
          "(medians)\n")
    ref = token_index.get("two-pass")

    def token_cos(c: str) -> str:
        if c not in token_index or ref is None:
            return " | "
        got = token_index[c]
        if not np.array_equal(got[1], ref[1]):
            return "other tokens kept | "
        t = cosines(got[0], ref[0])
        return f"{t.min():.6f} | {t.mean():.7f}"

    print("| case | median s | texts/s | tokens/s | speed-up vs bare | cos min | cos mean "
          "| token cos min | token cos mean | all reps s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for c in cases:
        print(f"| {c} | {med[c]:.2f} | {n / med[c]:.1f} | {tokens / med[c]:.0f} | "
              f"{med['bare'] / med[c]:.2f}x | {cos[c].min():.6f} | {cos[c].mean():.7f} | "
              f"{token_cos(c)} | {', '.join(f'{r:.2f}' for r in walls[c])} |")
    ok = {True: "met", False: "MISSED"}
    rows = []
    if "bench" in cases:
        ratio, c_min = med["bench"] / med["bare"], float(cos["bench"].min())
        rows += [f"| time ratio bench/bare | {ratio:.3f} | <= 1.0 | {ok[ratio <= 1.0]} |",
                 f"| min cosine bench vs bare | {c_min:.7f} | >= 0.99999 | "
                 f"{ok[c_min >= 0.99999]} |"]
    if "bench-bf16" in cases:
        speed, c_min = med["bare"] / med["bench-bf16"], float(cos["bench-bf16"].min())
        rows += [f"| speed-up bench-bf16 over bare fp32 | {speed:.2f}x | >= 2.0x | "
                 f"{ok[speed >= 2.0]} |",
                 f"| min cosine bench-bf16 vs bare fp32 | {c_min:.6f} | >= 0.9999 | "
                 f"{ok[c_min >= 0.9999]} |"]
    if "shared" in cases and "two-pass" in cases:
        speed = med["two-pass"] / med["shared"]
        same = bool(np.array_equal(vecs["shared"], vecs["two-pass"]))
        rows += [f"| speed-up shared pass over two passes (fp32) | {speed:.2f}x | > 1 | "
                 f"{ok[speed > 1.0]} |",
                 f"| shared dense vectors bit-identical to bench's | {same} | True | "
                 f"{ok[same]} |"]
    if "shared-bf16" in cases:
        speed, c_min = med["bare"] / med["shared-bf16"], float(cos["shared-bf16"].min())
        rows += [f"| speed-up shared-bf16 (dense + token index) over bare fp32 (dense) | "
                 f"{speed:.2f}x | >= 2.0x | {ok[speed >= 2.0]} |",
                 f"| min cosine shared-bf16 vs bare fp32 | {c_min:.6f} | >= 0.9999 | "
                 f"{ok[c_min >= 0.9999]} |"]
    if rows:
        print("\n| check | value | target | |\n|---|---:|---|---|\n" + "\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
