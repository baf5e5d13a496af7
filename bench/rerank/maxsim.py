"""Late-interaction MaxSim (ColBERT's scoring) over a bi-encoder's TOKEN vectors.

score(q, p) = sum over query tokens i of max over passage tokens j of cos(q_i, p_j), with the
tokens the tokenizer adds ([CLS], [SEP], padding) left out. Works with any
sentence-transformers model, including the packaged MiniLM: no training, no download. It is
not ColBERT (MiniLM's token vectors were never trained for this), so measure before trusting.

Cost: one encoder pass per DISTINCT passage text of the call (pools overlap across queries),
one per query, then a [passage tokens x query tokens] float32 product per distinct passage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import numpy as np

from bench.config.build import OptionError
from bench.embedding.base import EncoderIdentity
from bench.errors import ConfigError, MissingDependencyError
from bench.precision import PrecisionChoice, autocast, log_choice, resolve_precision
from bench.rerank.common import (
    DEFAULT_DEPTHS,
    check_depths,
    check_device,
    check_pools,
    check_positive,
    dedupe,
)


class MaxSimReranker:
    """model: ``packaged:all-MiniLM-L6-v2`` (offline), a local folder or a hub name.
    max_seq_length: token limit per text (None = the model's own). precision: fp32 | bf16 |
    auto | fp16 (``bench.precision``; the token vectors are float32 either way). Scores lie in
    [-n, n] for a query of n tokens; ``score_threshold`` is in that scale."""

    name = "maxsim"

    def __init__(
        self,
        *,
        model: str = "packaged:all-MiniLM-L6-v2",
        batch_size: int = 64,
        max_seq_length: int | None = None,
        depths: Sequence[int] = DEFAULT_DEPTHS,
        score_threshold: float | None = None,
        precision: str = "fp32",
        device: str = "cpu",
    ) -> None:
        self.model_name = model
        self.batch_size = check_positive("batch_size", batch_size)
        if max_seq_length is not None and max_seq_length < 8:
            raise OptionError("max_seq_length", f"must be >= 8 tokens, got {max_seq_length}")
        self.max_seq_length = max_seq_length
        self._depths = check_depths(depths)
        self.score_threshold = score_threshold
        self.device = check_device(device)
        self.precision_choice: PrecisionChoice = resolve_precision(precision, self.device)
        log_choice("reranker (maxsim)", self.precision_choice)

    def cache_params(self) -> dict[str, object]:
        params: dict[str, object] = {"model": self.model_name,
                                     "max_seq_length": self.max_seq_length}
        if self.precision_choice.resolved != "fp32":
            # named only when not fp32: token indexes cached before the option existed keep
            # their keys
            params["precision"] = self.precision_choice.resolved
        return params

    def depths(self) -> list[int]:
        return list(self._depths)

    def token_encoder(self) -> EncoderIdentity:
        """The encoder of its token vectors (texts go in bare: MaxSim has no prefixes)."""
        return EncoderIdentity(self.model_name, self.max_seq_length,
                               self.precision_choice.resolved, self.device)

    @cached_property
    def _model(self) -> Any:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise MissingDependencyError("sentence-transformers", "cpu",
                                         "the maxsim reranker") from None
        from bench.embedding.sentence_transformers import resolve_model_path

        try:
            model = SentenceTransformer(resolve_model_path(self.model_name), device=self.device)
        except (OSError, ValueError) as exc:  # missing folder, offline hub, not a model
            raise ConfigError("reranker.model", f"cannot load {self.model_name!r}: "
                              f"{' '.join(str(exc).split())}") from None
        if self.max_seq_length is not None:
            model.max_seq_length = self.max_seq_length
        if self.precision_choice.resolved == "fp16":
            model.half()
        elif self.precision_choice.resolved == "bf16" and self.device == "cuda":
            model.bfloat16()
        # fp32, and bf16 on CPU (autocast over float32 weights), run the weights as saved
        model.eval()
        return model

    @cached_property
    def _added_ids(self) -> np.ndarray:
        tok = self._model.tokenizer
        # [UNK] stands for real text, so it stays
        return np.array(sorted(set(tok.all_special_ids) - {tok.unk_token_id}), dtype=np.int64)

    def token_vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Per text: its L2-normalised token vectors [n_tokens, dim] (float32), tokens the
        tokenizer added left out; n_tokens may be 0 (empty text)."""
        import torch

        model = self._model
        out: list[np.ndarray] = [np.zeros((0, 0), dtype=np.float32)] * len(texts)
        lengths = np.array([len(t) for t in texts])
        order = np.argsort(-lengths, kind="stable")  # similar lengths share a batch: less padding
        for b0 in range(0, len(texts), self.batch_size):
            idx = order[b0:b0 + self.batch_size]
            features = model.preprocess([texts[i] for i in idx])
            with torch.inference_mode(), autocast(self.precision_choice, self.device):
                features = {k: v.to(model.device) if isinstance(v, torch.Tensor) else v
                            for k, v in features.items()}
                result = model(features)
                vecs = torch.nn.functional.normalize(result["token_embeddings"].float(), dim=-1)
            vecs_np = vecs.cpu().numpy()
            keep = self._kept(features["input_ids"].cpu().numpy(),
                              features["attention_mask"].cpu().numpy())
            for row, i in enumerate(idx):
                out[i] = np.ascontiguousarray(vecs_np[row][keep[row]])
        return out

    def _kept(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Which positions are the text's own tokens: attended, not added by the tokenizer."""
        return mask.astype(bool) & ~np.isin(ids, self._added_ids)

    def index_rows(self, states: Any, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """One passage's index rows from an encoder pass shared with the dense embedder
        (``bench.embedding.shared``): its token states [padded length, dim] normalised and
        kept as ``token_vectors`` keeps them, as float16 like ``index_passages``."""
        import torch

        vecs = torch.nn.functional.normalize(states.float(), dim=-1).cpu().numpy()
        return np.ascontiguousarray(vecs[self._kept(ids, mask)], dtype=np.float16)

    def score(self, queries: Sequence[str], passages: Sequence[Sequence[str]]) -> list[np.ndarray]:
        check_pools(queries, passages)
        texts, where = dedupe(passages)
        p_vecs = self.token_vectors(texts)
        q_vecs = self.token_vectors(list(queries))
        p_len = np.array([len(v) for v in p_vecs], dtype=np.int64)
        out = []
        for q, w in zip(q_vecs, where, strict=True):
            # each distinct text once: equal texts get equal scores, and no repeated work
            u, inv = np.unique(w, return_inverse=True)
            out.append(maxsim(q, [p_vecs[j] for j in u], p_len[u])[inv])
        return out

    # --- IndexedReranker: token vectors of every passage once, at index time (ColBERT-style)
    def index_passages(self, texts: Sequence[str], directory: Path) -> None:
        rows: list[np.ndarray] = []
        for b0 in range(0, len(texts), 1024):  # float32 vectors of one block alive at a time
            rows.extend(v.astype(np.float16)
                        for v in self.token_vectors(list(texts[b0:b0 + 1024])))
        write_token_index(rows, directory)

    def write_index_rows(self, rows: Sequence[np.ndarray], directory: Path) -> None:
        write_token_index(rows, directory)

    def load_index(self, directory: Path) -> TokenIndex:
        return TokenIndex(np.load(directory / "token_vectors.npy", mmap_mode="r"),
                          np.load(directory / "token_offsets.npy", allow_pickle=False))

    def score_indexed(self, queries: Sequence[str], index: TokenIndex,
                      rows: Sequence[np.ndarray]) -> list[np.ndarray]:
        q_vecs = self.token_vectors(list(queries))
        out = []
        for q, r in zip(q_vecs, rows, strict=True):
            u, inv = np.unique(np.asarray(r, dtype=np.int64), return_inverse=True)
            pool = [np.asarray(index.vectors[index.offsets[j]:index.offsets[j + 1]],
                               dtype=np.float32) for j in u]
            lengths = np.asarray([len(p) for p in pool], dtype=np.int64)
            out.append(maxsim(q, pool, lengths)[inv])
        return out


@dataclass(frozen=True)
class TokenIndex:
    """Every passage's token vectors: rows ``offsets[i]:offsets[i+1]`` of ``vectors``
    (float16, L2-normalised before rounding), memory-mapped."""

    vectors: np.ndarray
    offsets: np.ndarray


def write_token_index(rows: Sequence[np.ndarray], directory: Path) -> None:
    """``TokenIndex`` files of every passage's float16 token rows (row i = passage i)."""
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(v) for v in rows], out=offsets[1:])
    parts = [v for v in rows if len(v)]
    dim = parts[0].shape[1] if parts else 0
    flat = np.concatenate(parts) if parts else np.zeros((0, dim), np.float16)
    np.save(directory / "token_vectors.npy", flat, allow_pickle=False)
    np.save(directory / "token_offsets.npy", offsets, allow_pickle=False)


def maxsim(q: np.ndarray, pool: Sequence[np.ndarray], lengths: np.ndarray) -> np.ndarray:
    """Per passage of ``pool`` (``lengths[k]`` = its token count): sum over rows of ``q`` of
    the max dot product with its rows.

    A passage without tokens scores ``-len(q)``, the lowest a sum of cosines can reach, so it
    ranks last rather than above passages with negative similarity; a query without tokens
    scores 0 everywhere."""
    if len(q) == 0:
        return np.zeros(len(pool), dtype=np.float32)
    qt = np.ascontiguousarray(q.T, dtype=np.float32)
    # one small product per passage: measured 3x faster than one product over the
    # concatenated pool (no copy, and max runs along contiguous rows). On one BLAS thread:
    # numpy's OpenBLAS would spread these tiny products over its own threads, which then
    # spin after each call and take the cores from the torch encoder that runs next (the
    # next query's MiniLM pass measured 2.2x slower, 21 vs 9.5 ms, on the 2-core box). The
    # split is over rows, never over the summed dimension, so the scores are the same bits.
    with one_blas_thread():
        return np.fromiter(((p @ qt).max(axis=0).sum() if n else -float(len(q))
                            for p, n in zip(pool, lengths, strict=True)),
                           dtype=np.float32, count=len(pool))


@cache
def _blas_threads() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()  # scans the loaded libraries once, not per call


def one_blas_thread() -> Any:
    """A context in which numpy's BLAS runs on one thread (restored on exit)."""
    return _blas_threads().limit(limits=1, user_api="blas")
