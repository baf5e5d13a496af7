"""Records and Protocol of the `embedding` stage.

Adding an embedder: implement ``Embedder`` (keyword-only options; the pipeline passes the
resolved ``device``), add ``conf/embedder/<name>.yaml``. ``cache_params`` must name every
option that changes the vectors (model identity, max length, precision, prefixes), and none
that does not (batch size), so that tuning throughput does not invalidate the cache.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from bench.chunking.base import Tokenizer


@dataclass(frozen=True)
class EmbeddingStats:
    """Throughput of one encode pass (measured by the run that computed it)."""

    n_texts: int
    n_tokens: int  # tokens the model saw (each text's count capped at ``max_tokens``)
    wall_s: float
    n_truncated: int  # texts longer than ``max_tokens``
    #: tokens past the limit, not embedded, and the limit (content tokens the model sees: its
    #: max length minus special tokens); None in a cache entry written before they were kept
    n_truncated_tokens: int | None = None
    max_tokens: int | None = None
    #: the other artifact the same forward pass produced (``bench.embedding.shared``): then
    #: ``wall_s`` is that pass's, which did both; None for a pass of its own
    shared_with: str | None = None
    #: a sharded pass (``embedding=ray``, bench.embedding.engine): its workers, shards, the
    #: shards an earlier (killed) run had finished, and the shards whose first attempt died
    #: (a worker killed or crashed) and were encoded again; None for a pass in one process
    workers: int | None = None
    shards: int | None = None
    shards_reused: int | None = None
    shards_redone: int | None = None

    def truncation(self) -> str:
        """One computed sentence: what the embedder's maximum length cut off (run.json)."""
        limit = "" if self.max_tokens is None else f" ({self.max_tokens} tokens of text)"
        if not self.n_truncated:
            return f"no passage is longer than the embedder's maximum length{limit}"
        out = (f"{self.n_truncated} of {self.n_texts} passages "
               f"({self.n_truncated / self.n_texts:.1%}) are longer than the embedder's maximum "
               f"length{limit} and were embedded truncated")
        if self.n_truncated_tokens is None:
            return out + " (tokens cut not recorded: the embeddings came from an older cache)"
        total = self.n_tokens + self.n_truncated_tokens
        return (out + f"; {self.n_truncated_tokens} of {total} passage tokens "
                f"({self.n_truncated_tokens / total:.1%}) are not embedded")

    @property
    def texts_per_s(self) -> float:
        return self.n_texts / self.wall_s if self.wall_s > 0 else float("nan")

    @property
    def tokens_per_s(self) -> float:
        return self.n_tokens / self.wall_s if self.wall_s > 0 else float("nan")


class Embedder(Protocol):
    @property
    def dim(self) -> int: ...

    @property
    def tokenizer(self) -> Tokenizer: ...

    def cache_params(self) -> dict[str, object]: ...

    def encode(
        self, texts: Sequence[str], *, kind: str, out: np.ndarray
    ) -> EmbeddingStats:
        """Encode ``texts`` into ``out`` (float32 [len(texts), dim], may be a memmap).

        ``kind`` is "document" or "query" (models with asymmetric prefixes use it). Rows are
        written in input order, L2-normalised when the embedder normalises.
        """
        ...


@runtime_checkable
class QueryEncoder(Embedder, Protocol):
    """An embedder with its own per-request path for one query (no batching statistics or
    progress bar around the model call), as a serving system calls it."""

    def encode_query(self, text: str) -> np.ndarray:
        """One query's vector, float32 [1, dim]."""
        ...


@runtime_checkable
class PartialEncoder(Embedder, Protocol):
    """An embedder whose requests can fail one batch at a time (a remote server): the query
    pass goes on past a failed batch, and the queries in it get a status instead of a
    vector (index-time passes still need every vector and call ``encode``)."""

    def encode_partial(self, texts: Sequence[str], *, kind: str, out: np.ndarray
                       ) -> tuple[EmbeddingStats, dict[int, str]]:
        """``encode``, except that the rows of a batch whose request still failed are left
        zero and returned by row with their status (``failed`` / ``timeout`` /
        ``invalid``)."""
        ...


@runtime_checkable
class ShardableEmbedder(Protocol):
    """Optional capability of an in-process embedder: a sharded pass (``embedding=ray``,
    bench.embedding.engine) can split it with the single pass's vectors, bit for bit; it says
    how its ``encode`` orders the rows into batches of ``batch_size``. Not an ``Embedder``
    subprotocol on purpose: a runtime check reads every member, and ``dim`` loads a model."""

    @property
    def batch_size(self) -> int: ...

    def shard_order(self, texts: Sequence[str], *, kind: str) -> np.ndarray | None:
        """The row order ``encode`` batches ``texts`` in (``encode_by_length``'s stable
        longest-first order), so that shards cut from it in whole batches form the same
        batches; None when a row's vector does not depend on the rest of its batch (any
        contiguous shard gives the same bits)."""
        ...


class EmbeddingEngine(Protocol):
    """Where the corpus pass runs (``conf/embedding``, bench.embedding.engine): in this
    process or over workers. Whatever it is, the vectors are ``embedder.encode``'s, bit for
    bit (which is why the engine is not in the artifact key)."""

    @property
    def label(self) -> str:
        """One phrase for logs: ``local``, ``ray, 2 workers``."""
        ...

    def check(self, embedder: Embedder) -> None:
        """Raise a ``ConfigError`` naming ``embedding`` when this engine cannot run
        ``embedder``'s pass with the single pass's vectors (called before any work)."""
        ...

    def encode_documents(self, embedder: Embedder, texts: Sequence[str], *,
                         out: np.ndarray) -> EmbeddingStats:
        """``embedder.encode(texts, kind="document", out=out)``, wherever it runs."""
        ...


class SizedEmbedder(Embedder, Protocol):
    """An embedder that knows the size of its weights on disk (for cost reports)."""

    @property
    def model_bytes(self) -> int: ...


@dataclass(frozen=True)
class EncoderIdentity:
    """What fixes a transformer encoder's token states: two components with equal identities
    run the same weights on the same (untruncated or equally truncated, unprefixed) input, so
    one forward pass can serve both (``TokenStateEmbedder``)."""

    model: str
    max_seq_length: int | None
    precision: str  # resolved: fp32 | fp16 | bf16
    device: str


#: per text of a batch: (its token states [padded length, dim] as the framework's tensor, its
#: input ids and attention mask [padded length]) -> what the caller keeps of them
TokenRows = Callable[[Any, np.ndarray, np.ndarray], np.ndarray]


@runtime_checkable
class TokenStateEmbedder(Embedder, Protocol):
    """Optional capability: the pooled vectors AND each text's token states from one forward
    pass, for a late-interaction reranker over the same encoder (``bench.embedding.shared``).
    The pooled vectors are bit-identical to ``encode``'s (same batches, same model call)."""

    def token_encoder(self, kind: str) -> EncoderIdentity | None:
        """The encoder ``kind`` texts go through; None when they are not the bare texts (a
        prefix), so no other component's encoding of the same texts can be shared."""
        ...

    def encode_with_tokens(self, texts: Sequence[str], *, kind: str, out: np.ndarray,
                           token_rows: TokenRows) -> tuple[EmbeddingStats, list[np.ndarray]]:
        """``encode(texts, kind=kind, out=out)``, bit for bit, and per text (input order) what
        ``token_rows`` keeps of its token states in the same pass."""
        ...
