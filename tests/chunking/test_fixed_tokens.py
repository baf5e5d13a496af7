from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pytest

from bench.chunking.base import chunk_text_field
from bench.chunking.fixed_tokens import FixedTokenChunker
from bench.config.build import OptionError
from bench.data.base import Document


class WhitespaceTokenizer:
    name = "whitespace"

    def offsets(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [np.array([[m.start(), m.end()] for m in re.finditer(r"\S+", t)],
                         dtype=np.int64).reshape(-1, 2) for t in texts]


def docs() -> list[Document]:
    words = " ".join(f"w{i}" for i in range(10))  # 10 tokens
    return [Document("d1", words), Document("d2", "one two", title="T"), Document("d3", "")]


def test_windows_with_overlap() -> None:
    table = FixedTokenChunker(size=4, overlap=1).chunk(docs(), tokenizer=WhitespaceTokenizer())
    # d1: 10 tokens, stride 3 -> windows starting at 0, 3, 6 (the last one, 6..9, reaches the end)
    d1 = [t for t, d in zip(table.text, table.doc_idx, strict=True) if d == 0]
    assert d1 == ["w0 w1 w2 w3", "w3 w4 w5 w6", "w6 w7 w8 w9"]
    # d2 is shorter than a window: one chunk with the title line
    d2 = [t for t, d in zip(table.text, table.doc_idx, strict=True) if d == 1]
    assert d2 == ["T\none two"]
    assert list(table.n_tokens) == [4, 4, 4, 3]


def test_offsets_trace_back_to_source() -> None:
    ds = docs()
    table = FixedTokenChunker(size=3, overlap=0).chunk(ds, tokenizer=WhitespaceTokenizer())
    for i, text in enumerate(table.text):
        src = chunk_text_field(ds[table.doc_idx[i]])
        assert src[table.start_char[i] : table.end_char[i]] == text


def test_fractional_overlap() -> None:
    assert FixedTokenChunker(size=100, overlap=0.2).overlap == 20


@pytest.mark.parametrize(
    ("size", "overlap", "option"),
    [(0, 0, "size"), (4, 4, "overlap"), (4, 1.5, "overlap"), (4, -1, "overlap")],
)
def test_bad_options(size: int, overlap: float, option: str) -> None:
    with pytest.raises(OptionError) as err:
        FixedTokenChunker(size=size, overlap=overlap)
    assert err.value.option == option
