"""``chunker=none``: one chunk per document, whole, traceable, with its full token count."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from bench.chunking.base import chunk_text_field
from bench.chunking.stats import chunk_stats
from bench.chunking.whole_document import WholeDocumentChunker
from bench.data.base import Document


class WhitespaceTokenizer:
    name = "whitespace"

    def offsets(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [np.array([[m.start(), m.end()] for m in re.finditer(r"\S+", t)],
                         dtype=np.int64).reshape(-1, 2) for t in texts]


DOCS = [
    Document("a", "one two three", title="T"),
    Document("b", "   "),  # blank: no chunk
    Document("c", "Title body words", title="Title", title_in_text=True),
]


def test_one_chunk_per_non_blank_document() -> None:
    table = WholeDocumentChunker().chunk(DOCS, tokenizer=WhitespaceTokenizer())
    assert table.doc_idx.tolist() == [0, 2]
    assert table.text == ("T\none two three", "Title body words")
    assert table.n_tokens.tolist() == [1 + 3, 3]
    assert table.start_char.tolist() == [0, 0]
    assert table.end_char.tolist() == [len("T\none two three"), len("Title body words")]
    assert all(chunk_text_field(DOCS[d])[s:e] == t for d, s, e, t in
               zip(table.doc_idx, table.start_char, table.end_char, table.text, strict=True))
    assert chunk_stats(table, DOCS).traceability_pct == 100.0


def test_token_counts_are_the_same_when_counted_in_blocks(monkeypatch) -> None:
    import bench.chunking.whole_document as wd

    docs = [Document(f"d{i}", " ".join(["w"] * (i + 1))) for i in range(7)] + DOCS
    whole = wd.WholeDocumentChunker().chunk(docs, tokenizer=WhitespaceTokenizer())
    monkeypatch.setattr(wd, "COUNT_BLOCK", 2)
    blocked = wd.WholeDocumentChunker().chunk(docs, tokenizer=WhitespaceTokenizer())
    assert blocked.n_tokens.tolist() == whole.n_tokens.tolist() == [1, 2, 3, 4, 5, 6, 7, 4, 3]
    assert blocked.doc_idx.tolist() == whole.doc_idx.tolist()
