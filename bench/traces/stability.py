"""Nearest-neighbour stability of a fixed probe set across embedder versions (drift, part 5).

A fixed set of probe queries is embedded by two embedders (``conf/embedder/NAME.yaml``: e.g.
``minilm``, torch fp32, against ``onnx_minilm_int8``, the same model quantised, or against
another model), each ranks the whole corpus by cosine similarity (exact search over the
documents' ``title + text``, cut at the embedder's max sequence length; documents, not the
pipeline's chunks, so no index or chunker choice enters), and the two top-k lists of every
probe are compared: overlap@k (shared ids / k) and rank-biased overlap (p = 0.9, the
extrapolated form, ``bench.traces.replay.rbo``). Means with bootstrap 95 % CIs over probes
(``bench.metrics.stats.bootstrap_ci``). An embedder swap that keeps overlap@10 near 1 leaves
the retrieved evidence, and so golden-set results, nearly unchanged; a low value says the
golden set must be re-run (and caches re-keyed) before comparing windows across the swap.

``python -m bench.traces stability PROBES --corpus CORPUS --from A --to B [--to C ...]``;
bad input (an unknown embedder, k larger than the corpus, too few probes, a probe row
without a query) is one line and exit 2 before any embedding.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from bench.errors import ConfigError, InputError

MIN_PROBES = 10


@dataclass(frozen=True)
class Stability:
    reference: str
    candidate: str
    k: int
    n_probes: int
    overlap: float
    overlap_ci: tuple[float, float]
    rbo: float
    rbo_ci: tuple[float, float]
    top1_agreement: float
    per_probe_overlap: tuple[float, ...]
    per_probe_rbo: tuple[float, ...]


def top_k(queries: np.ndarray, docs: np.ndarray, k: int) -> np.ndarray:
    """Indices of each query's k nearest documents by inner product (normalised vectors:
    cosine), best first; ties by lower index (a stable sort of the negated scores)."""
    scores = queries.astype(np.float32) @ docs.astype(np.float32).T
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, part, axis=1), axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1)


def compare(ref_top: np.ndarray, cand_top: np.ndarray, *, reference: str, candidate: str,
            p: float = 0.9, resamples: int = 2000, seed: int = 0) -> Stability:
    from bench.metrics.stats import bootstrap_ci
    from bench.traces.replay import overlap_at_k, rbo

    k = ref_top.shape[1]
    a = [[str(i) for i in row] for row in ref_top]
    b = [[str(i) for i in row] for row in cand_top]
    ov = np.array([overlap_at_k(x, y, k) for x, y in zip(a, b, strict=True)])
    rb = np.array([rbo(x, y, p) for x, y in zip(a, b, strict=True)])
    ov_ci = bootstrap_ci(ov, resamples=resamples, seed=seed)
    rb_ci = bootstrap_ci(rb, resamples=resamples, seed=seed)
    return Stability(reference, candidate, k, len(ov), ov_ci.mean, (ov_ci.ci_low, ov_ci.ci_high),
                     rb_ci.mean, (rb_ci.ci_low, rb_ci.ci_high),
                     float(np.mean(ref_top[:, 0] == cand_top[:, 0])),
                     tuple(float(x) for x in ov), tuple(float(x) for x in rb))


def _embedder_conf(name: str, key: str) -> Path:
    from bench.app import CONF_DIR

    path = Path(CONF_DIR) / "embedder" / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise ConfigError(key, f"no embedder {name!r} (conf/embedder: {', '.join(known)})")
    return path


def _encode(name: str, texts: Sequence[str], kind: str) -> np.ndarray:
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    model = instantiate(OmegaConf.load(_embedder_conf(name, "--from")))
    out = np.zeros((len(texts), model.dim), dtype=np.float32)
    model.encode(list(texts), kind=kind, out=out)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1.0, norms)


def cli(a: argparse.Namespace) -> int:
    from bench.data.golden import read_corpus
    from bench.traces.drift import _texts

    _embedder_conf(a.reference, "--from")
    for c in a.candidate:
        _embedder_conf(c, "--to")
    probes = _texts(a.probes)
    if len(probes) < MIN_PROBES:
        raise InputError(a.probes, 0, f"{len(probes)} probe queries: the CIs need at least "
                                      f"{MIN_PROBES}")
    if a.limit:
        probes = probes[: a.limit]
    docs = read_corpus(a.corpus)
    if not 1 <= a.k <= len(docs):
        raise ConfigError("--k", f"must be in [1, {len(docs)}] (the corpus size), got {a.k}")
    texts = [f"{d.title} {d.text}".strip() if d.title and not d.title_in_text else d.text
             for d in docs]
    tops: dict[str, np.ndarray] = {}
    seconds: dict[str, float] = {}
    for name in [a.reference, *a.candidate]:
        if name in tops:
            continue
        t0 = time.perf_counter()
        d_emb = _encode(name, texts, "document")
        q_emb = _encode(name, probes, "query")
        tops[name] = top_k(q_emb, d_emb, a.k)
        seconds[name] = time.perf_counter() - t0
        print(f"{name}: {len(docs)} documents and {len(probes)} probes embedded in "
              f"{seconds[name]:.1f} s")
    rows = [compare(tops[a.reference], tops[c], reference=a.reference, candidate=c,
                    seed=a.seed) for c in a.candidate]
    print(f"| reference | candidate | probes | overlap@{a.k} | RBO (p=0.9) | top-1 agreement |")
    print("|---|---|---:|---|---|---:|")
    for r in rows:
        print(f"| {r.reference} | {r.candidate} | {r.n_probes} | {r.overlap:.3f} "
              f"[{r.overlap_ci[0]:.3f}, {r.overlap_ci[1]:.3f}] | {r.rbo:.3f} "
              f"[{r.rbo_ci[0]:.3f}, {r.rbo_ci[1]:.3f}] | {r.top1_agreement:.3f} |")
    if a.out is not None:
        from bench.results.write import atomic_write_bytes

        atomic_write_bytes(a.out, json.dumps({
            "probes": str(a.probes), "corpus": str(a.corpus), "documents": len(docs),
            "embed_seconds": seconds, "rows": [asdict(r) for r in rows]}, indent=2).encode())
    return 0
