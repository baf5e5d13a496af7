"""One chunk per document: the whole ``chunk_text_field(doc)`` (``chunker=none``).

How BEIR and MTEB score retrieval: each document is one passage. The embedder truncates a
passage longer than its maximum sequence length; ``n_tokens`` holds the full count, so the
truncation is visible in the chunk report rather than hidden.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from bench.chunking.base import ChunkTable, Tokenizer, chunk_text_field
from bench.data.base import Document

#: documents tokenised per call when counting tokens
COUNT_BLOCK = 4096


class WholeDocumentChunker:
    """Every document with non-blank text becomes exactly one chunk covering all of it."""

    uses_tokenizer: ClassVar[bool] = True  # only to count tokens, never to cut

    def __init__(self) -> None:
        pass

    def cache_params(self) -> dict[str, object]:
        return {"whole_document": True}

    def chunk(self, documents: Sequence[Document], *, tokenizer: Tokenizer) -> ChunkTable:
        texts = [chunk_text_field(d) for d in documents]
        keep = [i for i, t in enumerate(texts) if t.strip()]
        # tokenised in blocks: offsets of every text at once would hold one token array per
        # document (GBs at 1M documents) just to count them
        counts: list[int] = []
        for b0 in range(0, len(keep), COUNT_BLOCK):
            block = [texts[i] for i in keep[b0 : b0 + COUNT_BLOCK]]
            counts += [len(o) for o in tokenizer.offsets(block)]
        return ChunkTable(
            doc_idx=np.asarray(keep, dtype=np.int32),
            start_char=np.zeros(len(keep), dtype=np.int32),
            end_char=np.asarray([len(texts[i]) for i in keep], dtype=np.int32),
            n_tokens=np.asarray(counts, dtype=np.int32),
            section=("",) * len(keep),
            text=tuple(texts[i] for i in keep),
        )
