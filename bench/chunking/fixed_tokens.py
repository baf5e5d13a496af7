"""Fixed windows of N embedder tokens with an overlap of M tokens."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
from tqdm.auto import tqdm

from bench.chunking.base import ChunkTable, Tokenizer, chunk_text_field
from bench.config.build import OptionError
from bench.data.base import Document


class FixedTokenChunker:
    """Windows of ``size`` tokens advancing by ``size - overlap``; the last window may be short.

    ``overlap`` may be given as tokens (int >= 1) or as a fraction of ``size`` (0 <= x < 1).
    Windows never extend past the document; a document shorter than ``size`` is one chunk.
    """

    uses_tokenizer: ClassVar[bool] = True

    def __init__(self, *, size: int = 128, overlap: int | float = 16) -> None:
        if size < 1:
            raise OptionError("size", f"must be >= 1 token, got {size}")
        if isinstance(overlap, float) and not isinstance(overlap, bool):
            if not 0.0 <= overlap < 1.0:
                raise OptionError("overlap", f"a fraction must be in [0, 1), got {overlap}")
            overlap_tokens = round(overlap * size)
        else:
            overlap_tokens = int(overlap)
        if not 0 <= overlap_tokens < size:
            raise OptionError("overlap", f"must be in [0, size={size}) tokens, got {overlap}")
        self.size = size
        self.overlap = overlap_tokens

    def cache_params(self) -> dict[str, object]:
        return {"size": self.size, "overlap": self.overlap}

    def chunk(self, documents: Sequence[Document], *, tokenizer: Tokenizer) -> ChunkTable:
        doc_idx: list[int] = []
        starts: list[int] = []
        ends: list[int] = []
        n_tok: list[int] = []
        texts: list[str] = []
        stride = self.size - self.overlap
        batch = 256
        with tqdm(total=len(documents), desc="chunk", unit="doc", leave=False) as bar:
            for b0 in range(0, len(documents), batch):
                docs = documents[b0 : b0 + batch]
                full = [chunk_text_field(d) for d in docs]
                for j, (text, offs) in enumerate(zip(full, tokenizer.offsets(full), strict=True)):
                    if len(offs) == 0:
                        continue
                    n = len(offs)
                    for w0 in range(0, n, stride):
                        w1 = min(w0 + self.size, n)
                        s, e = int(offs[w0, 0]), int(offs[w1 - 1, 1])
                        doc_idx.append(b0 + j)
                        starts.append(s)
                        ends.append(e)
                        n_tok.append(w1 - w0)
                        texts.append(text[s:e])
                        if w1 == n:
                            break
                bar.update(len(docs))
        return ChunkTable(
            doc_idx=np.asarray(doc_idx, dtype=np.int32),
            start_char=np.asarray(starts, dtype=np.int32),
            end_char=np.asarray(ends, dtype=np.int32),
            n_tokens=np.asarray(n_tok, dtype=np.int32),
            section=("",) * len(texts),
            text=tuple(texts),
        )
