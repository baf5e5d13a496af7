"""chunk_stats on a hand-computed table; near_duplicates finds planted duplicates only."""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Sequence

import numpy as np
import pytest

from bench.chunking.base import ChunkTable
from bench.chunking.sentence import SentenceChunker
from bench.chunking.stats import chunk_stats, near_duplicates
from bench.config.build import OptionError
from bench.data.base import Document
from bench.errors import MissingDependencyError


class WhitespaceTokenizer:
    name = "whitespace"

    def offsets(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [np.array([[m.start(), m.end()] for m in re.finditer(r"\S+", t)],
                         dtype=np.int64).reshape(-1, 2) for t in texts]


def table(rows: list[tuple[int, int, int, int, str]]) -> ChunkTable:
    """rows: (doc_idx, start, end, n_tokens, text)."""
    return ChunkTable(
        doc_idx=np.array([r[0] for r in rows], dtype=np.int32),
        start_char=np.array([r[1] for r in rows], dtype=np.int32),
        end_char=np.array([r[2] for r in rows], dtype=np.int32),
        n_tokens=np.array([r[3] for r in rows], dtype=np.int32),
        section=("",) * len(rows),
        text=tuple(r[4] for r in rows),
    )


DOCS = [
    Document("a", "three four", title="one two"),  # chunk text field "one two\nthree four"
    Document("b", "five six"),
    Document("c", "seven"),
    Document("d", "never chunked"),
]


def test_stats_hand_computed() -> None:
    t = table([
        (0, 0, 7, 2, "one two"),
        (0, 8, 18, 3, "three four"),
        (0, 0, 3, 1, "xyz"),  # wrong text for its offsets: not traceable
        (1, 0, 8, 2, "five six"),
        (2, 5, 5, 0, ""),  # empty but traceable
    ])
    s = chunk_stats(t, DOCS)
    assert (s.n_chunks, s.n_docs, s.n_docs_without_chunks) == (5, 4, 1)
    assert s.chunks_per_doc_mean == pytest.approx(5 / 4)
    assert s.chunks_per_doc_max == 3
    # n_tokens sorted: [0, 1, 2, 2, 3]; p95 sits at rank 0.95 * 4 = 3.8, between 2 and 3.
    assert (s.tokens_min, s.tokens_max) == (0, 3)
    assert s.tokens_p50 == 2.0
    assert s.tokens_p95 == pytest.approx(2 + 0.8 * (3 - 2))
    assert s.tokens_mean == pytest.approx((0 + 1 + 2 + 2 + 3) / 5)
    assert s.traceability_pct == pytest.approx(100 * 4 / 5)
    assert s.n_empty == 1


def test_stats_out_of_range_rows_and_empty_table() -> None:
    t = table([(9, 0, 1, 1, "x"), (1, 4, 99, 1, "six")])  # no such doc; end past the text
    assert chunk_stats(t, DOCS).traceability_pct == 0.0
    s = chunk_stats(table([]), DOCS)
    assert (s.n_chunks, s.tokens_max, s.traceability_pct, s.chunks_per_doc_mean) == (0, 0, 100.0, 0)


def test_chunker_output_is_fully_traceable() -> None:
    docs = [Document("x", "Ünïcode ✓ text. Second one!\n\n\nThird.", title="T"), Document("y", "")]
    t = SentenceChunker(max_tokens=3).chunk(docs, tokenizer=WhitespaceTokenizer())
    s = chunk_stats(t, docs)
    assert s.traceability_pct == 100.0 and s.n_empty == 0 and s.n_docs_without_chunks == 1


def random_text(rng: random.Random, n_words: int) -> str:
    return " ".join(f"w{rng.randrange(5000)}" for _ in range(n_words))


def test_near_duplicates_finds_planted_pairs_only() -> None:
    rng = random.Random(7)
    texts = [random_text(rng, 200) for _ in range(20)]
    planted = texts[3].split()
    planted[-1] = "changed"  # 1 of 200 words: 191 of 201 distinct 5-shingles shared (J ~ 0.95)
    rows = [(i, 0, 0, 0, t) for i, t in enumerate(texts)]  # chunk i in doc i
    rows.append((17, 0, 0, 0, " ".join(planted)))  # chunk 20: near-copy of chunk 3, doc 17
    rows.append((5, 0, 0, 0, texts[5]))  # chunk 21: exact copy of chunk 5 in the same doc
    rows.append((6, 0, 0, 0, "   "))  # chunk 22: blank, never a duplicate
    report = near_duplicates(table(rows))
    assert report.n_chunks == 23
    assert report.n_cross_doc == 2  # chunks 3 and 20
    assert report.n_within_doc == 2  # chunks 5 and 21
    assert report.cross_doc_rate == pytest.approx(2 / 23)
    assert report.within_doc_rate == pytest.approx(2 / 23)
    pairs = [(p.chunk_a, p.chunk_b, p.same_doc) for p in report.examples]
    assert pairs == [(3, 20, False), (5, 21, True)]  # cross-document pairs first
    assert 0.9 <= report.examples[0].jaccard < 1.0
    assert report.examples[1].jaccard == 1.0
    assert near_duplicates(table(rows), max_examples=1).examples[0].chunk_b == 20


def test_near_duplicates_short_and_empty_inputs() -> None:
    assert near_duplicates(table([])).n_chunks == 0
    # Texts shorter than a shingle are one shingle each: equal words -> duplicates.
    report = near_duplicates(table([(0, 0, 0, 0, "Hello, world"), (1, 0, 0, 0, "hello world")]))
    assert report.n_cross_doc == 2


@pytest.mark.parametrize(("kwargs", "option"), [({"threshold": 0.0}, "threshold"),
                                                ({"threshold": 1.5}, "threshold"),
                                                ({"num_perm": 1}, "num_perm"),
                                                ({"shingle": 0}, "shingle")])
def test_near_duplicates_bad_options(kwargs: dict[str, float], option: str) -> None:
    with pytest.raises(OptionError) as err:
        near_duplicates(table([]), **kwargs)  # type: ignore[arg-type]
    assert err.value.option == option


def test_missing_datasketch_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "datasketch", None)  # makes the import fail
    with pytest.raises(MissingDependencyError, match=r"datasketch.*\[cpu\]"):
        near_duplicates(table([]))
