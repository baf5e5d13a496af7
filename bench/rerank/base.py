"""Records and Protocol of the `rerank` stage.

A reranker scores (query, passage) pairs; higher = more relevant. Scoring is POINTWISE: a
pair's score does not depend on the other candidates of the query. The pipeline therefore
scores each query's pool once at the deepest swept depth (a cached node keyed by the pool and
the reranker) and derives every shallower depth from those scores; rerank latency per depth
is measured on its own (timed calls on exactly ``depth`` passages), never extrapolated.

Passages are the chunk texts that produced each pool hit (``Hits.chunk_idx``).

Adding a reranker: implement ``Reranker`` in a module here (keyword-only constructor options,
``OptionError`` for bad values, heavy imports inside the module), add
``conf/reranker/<name>.yaml``. ``conf/reranker/none.yaml`` (``_target_: null``) disables the
stage. An LLM pointwise reranker fits the same Protocol through a generation backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from bench.embedding.base import EncoderIdentity


class Reranker(Protocol):
    #: short name used in config labels ("maxsim", "cross_encoder", ...)
    name: str
    #: candidates scoring below this are dropped after reranking (per model; None: keep all)
    score_threshold: float | None

    def cache_params(self) -> dict[str, object]:
        """Every option that changes scores (model identity, max length, precision), none
        that does not (batch size)."""
        ...

    def depths(self) -> list[int]:
        """Rerank depths to sweep on one candidate pool (unique, >= 1)."""
        ...

    def score(self, queries: Sequence[str], passages: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Batch-first: ``passages[i]`` are query i's candidates; returns one float32 array of
        scores per query, same order and length as ``passages[i]``."""
        ...


@runtime_checkable
class IndexedReranker(Protocol):
    """Optional capability: passages are encoded ONCE, at index time, and only the query is
    encoded per request — how late-interaction (token vectors) and bi-encoder rerankers are
    deployed. The pipeline caches the passage index as its own node (keyed by the chunks and
    the reranker's ``cache_params``) and times only the query-time work."""

    def index_passages(self, texts: Sequence[str], directory: Path) -> None:
        """Encode every passage (row i = text i) into files in ``directory``."""
        ...

    def load_index(self, directory: Path) -> Any:
        """The passage index ``index_passages`` wrote (memory-mapped where large)."""
        ...

    def score_indexed(self, queries: Sequence[str], index: Any,
                      rows: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Like ``score``, with query i's candidates given as passage rows of ``index``
        (int64); equal rows get equal scores."""
        ...


@runtime_checkable
class TokenIndexReranker(Reranker, IndexedReranker, Protocol):
    """Optional capability: a passage index made of an encoder's per-token states (MaxSim),
    which one forward pass shared with a dense embedder of the same encoder can fill
    (``bench.embedding.shared``) instead of a second pass over the chunks."""

    def token_encoder(self) -> EncoderIdentity:
        """The encoder whose token states the index holds (texts go in bare)."""
        ...

    def index_rows(self, states: Any, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """One passage's index rows from its token states [padded length, dim] (the encoder
        framework's tensor), input ids and attention mask."""
        ...

    def write_index_rows(self, rows: Sequence[np.ndarray], directory: Path) -> None:
        """The index files of every passage's ``index_rows`` (row i = passage i), as
        ``index_passages`` writes them; ``load_index`` reads them."""
        ...
