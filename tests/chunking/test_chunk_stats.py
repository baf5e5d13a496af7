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


def _lsh_reference(t: ChunkTable, *, threshold: float = 0.9, num_perm: int = 128,
                   max_examples: int = 5) -> tuple:
    """The report as datasketch's ``MinHashLSH`` index gives it (an insert per chunk, a
    query per chunk): the oracle of ``near_duplicates``' sorted bands."""
    from datasketch import MinHash, MinHashLSH

    from bench.chunking.stats import shingles

    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    sig = {}
    for i, text in enumerate(t.text):
        g = shingles(text, 5)
        if g:
            mh = MinHash(num_perm=num_perm, seed=1)
            mh.update_batch(g)
            lsh.insert(i, mh, check_duplication=False)
            sig[i] = mh
    doc = np.asarray(t.doc_idx)
    cross, within, found = set(), set(), []
    for i, mh in sig.items():
        cand = [j for j in lsh.query(mh) if j != i]
        jac = [float((sig[j].hashvalues == mh.hashvalues).mean()) for j in cand]
        for same_doc in (False, True):
            best = None
            for j, jj in zip(cand, jac, strict=True):
                if jj >= threshold and bool(doc[j] == doc[i]) == same_doc:
                    (within if same_doc else cross).add(i)
                    if j > i and (best is None or jj > best[1]):
                        best = (j, jj)
            if best is not None:
                found.append((i, best[0], best[1], same_doc))
    found.sort(key=lambda p: (p[3], -p[2], p[0], p[1]))
    return len(cross), len(within), found[:max_examples]


def test_near_duplicates_equal_datasketch_lsh_with_ties() -> None:
    """Sorted bands give MinHashLSH's candidates in its order: the same counts and the same
    examples, ties between exact copies included (several copies of one chunk far apart,
    near-copies that share only some bands)."""
    rng = random.Random(11)
    base = [random_text(rng, 60) for _ in range(400)]
    rows = [(i % 97, 0, 0, 0, t) for i, t in enumerate(base)]
    for k in range(40):  # exact copies (ties at 1.0) and near copies, scattered
        src = base[(k * 37) % 400].split()
        if k % 3 == 0:
            src[rng.randrange(len(src))] = "edited"
        rows.insert(rng.randrange(len(rows)), ((k * 13) % 97, 0, 0, 0, " ".join(src)))
    rows += [(3, 0, 0, 0, base[10])] * 5  # five copies at the end: a five-way tie
    t = table(rows)
    report = near_duplicates(t, max_examples=50)
    n_cross, n_within, examples = _lsh_reference(t, max_examples=50)
    assert (report.n_cross_doc, report.n_within_doc) == (n_cross, n_within)
    assert report.n_cross_doc > 20 and report.n_within_doc > 0
    assert [(p.chunk_a, p.chunk_b, p.jaccard, p.same_doc) for p in report.examples] == examples


def test_near_duplicates_signatures_on_disk_give_the_same_report(tmp_path) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(3)
    texts = [random_text(rng, 80) for _ in range(50)]
    t = table([(i % 7, 0, 0, 0, x) for i, x in enumerate(texts + texts[:10])])
    assert near_duplicates(t, scratch=tmp_path) == near_duplicates(t)
    assert (tmp_path / "signatures.npy").is_file()


@pytest.mark.parametrize("block", [1, 2, 3, 65_536])
def test_traceability_is_checked_block_by_block_in_any_row_order(
        block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # the check reads each block of documents once (a DocumentTable builds Documents per
    # slice) and visits chunks in document order: the rows' own order, rows naming no
    # document (past the end) and bad offsets must not change what it counts
    import bench.chunking.stats as stats_mod
    from bench.data.table import DocumentTable

    monkeypatch.setattr(stats_mod, "TRACE_BLOCK", block)
    rows = [(2, 0, 5, 1, "seven"), (0, 8, 18, 3, "three four"), (9, 0, 1, 1, "o"),
            (1, 0, 8, 2, "five six"), (0, 0, 3, 1, "xyz"), (4, 0, 1, 1, "x"),
            (3, 6, 13, 1, "chunked"), (0, 0, 7, 2, "one two"), (1, 5, 2, 1, ""),
            (3, 0, 5, 1, "never")]
    plain = [Document(d.doc_id, d.text, title=d.title) for d in DOCS]
    for docs in (DOCS, DocumentTable.of(plain)):
        s = chunk_stats(table(rows), docs)
        assert s.traceability_pct == pytest.approx(100 * 6 / 10), block
