"""Recursive, sentence and structural chunkers: exact offsets, sizes, splitting rules, options."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from bench.chunking.base import Chunker, ChunkTable, chunk_text_field
from bench.chunking.fixed_tokens import FixedTokenChunker
from bench.chunking.recursive import RecursiveCharacterChunker, RecursiveTokenChunker
from bench.chunking.sentence import SentenceChunker, split_sentences
from bench.chunking.stage import ChunkInputs, ChunkOp
from bench.chunking.structural import StructuralChunker, sections
from bench.chunking.whole_document import WholeDocumentChunker
from bench.config.build import OptionError
from bench.data.base import Corpus, Document
from bench.telemetry.base import TimingLog


class WhitespaceTokenizer:
    name = "whitespace"

    def offsets(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [np.array([[m.start(), m.end()] for m in re.finditer(r"\S+", t)],
                         dtype=np.int64).reshape(-1, 2) for t in texts]


TOK = WhitespaceTokenizer()


def tricky_docs() -> list[Document]:
    return [
        Document("unicode", "Ça coûte 3.50 €. Naïve café 😀👍🏽 ok.\nΕλληνικά κείμενα εδώ. "
                 "日本語の文。 e\u0301 combining", title="Tîtle ✓"),
        Document("blank-lines", "first para\n\n\n\n\nsecond para after blanks\n\n \n\t\nthird"),
        Document("long-word", "start " + "x" * 95 + " end"),
        Document("empty", ""),
        Document("whitespace", " \n\n\t "),
        Document("title-only", "", title="Only a title"),
        Document("markdown", "# Top\nIntro sentence one. Intro two.\n\n## Sub\n\nBody of sub "
                 "with several words here. And more.\n\n# Next\nLast words."),
    ]


CHUNKERS: list[Chunker] = [
    RecursiveCharacterChunker(size=20, overlap=5),
    RecursiveCharacterChunker(size=7, overlap=0, separators=[" "]),
    RecursiveTokenChunker(size=4, overlap=1),
    SentenceChunker(max_tokens=4, overlap_sentences=1),
    SentenceChunker(max_tokens=6, overlap_sentences=0),
    StructuralChunker(max_tokens=5),
    StructuralChunker(max_tokens=1000),
]


def rows(table: ChunkTable, doc: int) -> list[str]:
    return [t for t, d in zip(table.text, table.doc_idx, strict=True) if d == doc]


@pytest.mark.parametrize("chunker", CHUNKERS, ids=lambda c: type(c).__name__)
def test_offsets_exact_and_text_covered(chunker: Chunker) -> None:
    docs = tricky_docs()
    table = chunker.chunk(docs, tokenizer=TOK)
    assert list(table.doc_idx) == sorted(table.doc_idx)
    covered = [np.zeros(len(chunk_text_field(d)), dtype=bool) for d in docs]
    for i, text in enumerate(table.text):
        d, s, e = int(table.doc_idx[i]), int(table.start_char[i]), int(table.end_char[i])
        src = chunk_text_field(docs[d])
        assert src[s:e] == text
        assert text and text == text.strip()
        assert table.n_tokens[i] == len(text.split())
        covered[d][s:e] = True
    # Nothing but whitespace is ever left out, and blank documents give no chunk.
    for d, doc in enumerate(docs):
        src = chunk_text_field(doc)
        lost = "".join(c for c, seen in zip(src, covered[d], strict=True) if not seen)
        assert not lost.strip(), (doc.doc_id, lost)
        assert bool(rows(table, d)) == bool(src.strip())


@pytest.mark.parametrize("chunker", CHUNKERS, ids=lambda c: type(c).__name__)
def test_sizes_respected(chunker: Chunker) -> None:
    table = chunker.chunk(tricky_docs(), tokenizer=TOK)
    for text, n in zip(table.text, table.n_tokens, strict=True):
        if isinstance(chunker, RecursiveTokenChunker):
            assert n <= chunker.size
        elif isinstance(chunker, RecursiveCharacterChunker):
            # Without the "" separator a word longer than size stays whole.
            assert len(text) <= chunker.size or " " not in text
        else:
            assert isinstance(chunker, SentenceChunker | StructuralChunker)
            assert n <= chunker.max_tokens


# --------------------------------------------------------------------------- recursive


def test_recursive_merges_with_overlap_like_langchain() -> None:
    # Pieces "aaa", " bbb", " ccc"...: 4 chars each but the first; merged up to 8 chars and the
    # next chunk restarts with the trailing pieces of <= 4 chars.
    doc = Document("d", "aaa bbb ccc ddd eee")
    table = RecursiveCharacterChunker(size=8, overlap=4).chunk([doc], tokenizer=TOK)
    assert table.text == ("aaa bbb", "bbb ccc", "ccc ddd", "ddd eee")


def test_recursive_prefers_paragraphs_then_cuts_long_words() -> None:
    doc = Document("d", "para one is here\n\npara two\n\n" + "y" * 25)
    table = RecursiveCharacterChunker(size=20, overlap=0).chunk([doc], tokenizer=TOK)
    # The separator stays at the start of the piece after it (LangChain's keep_separator), so
    # the first character window is "\n" + 19 y before trimming.
    assert table.text == ("para one is here", "para two", "y" * 19, "y" * 6)


def test_recursive_tokens_counts_embedder_tokens() -> None:
    doc = Document("d", "a b c d e f g")  # 7 tokens, 13 chars
    table = RecursiveTokenChunker(size=3, overlap=0).chunk([doc], tokenizer=TOK)
    assert table.text == ("a b c", "d e f", "g")
    assert list(table.n_tokens) == [3, 3, 1]
    assert RecursiveTokenChunker.uses_tokenizer and not RecursiveCharacterChunker.uses_tokenizer


# --------------------------------------------------------------------------- sentences


def sentences(text: str) -> list[str]:
    return [text[s:e] for s, e in split_sentences(text)]


def test_sentence_splitter_handles_abbreviations() -> None:
    text = ("Dr. Smith met J. R. R. Tolkien, e.g. in the U.S. Army. Pi is 3.14, i.e. about "
            "three. See Fig. 2 and apples, pears etc. which rot. Done etc. Wow! Really? "
            '"Quoted." Yes...\nNext line\nwrapped here.\n\nnew para')
    assert sentences(text) == [
        "Dr. Smith met J. R. R. Tolkien, e.g. in the U.S. Army.",
        "Pi is 3.14, i.e. about three.",
        "See Fig. 2 and apples, pears etc. which rot.",
        "Done etc.",
        "Wow!",
        "Really?",
        '"Quoted."',
        "Yes...",
        "Next line\nwrapped here.",
        "new para",
    ]
    assert sentences(" \n ") == []


def test_sentence_packing_repeats_last_sentence() -> None:
    doc = Document("d", "A a. B b. C c. D d.")  # four sentences of 2 tokens
    table = SentenceChunker(max_tokens=4, overlap_sentences=1).chunk([doc], tokenizer=TOK)
    assert table.text == ("A a. B b.", "B b. C c.", "C c. D d.")
    table = SentenceChunker(max_tokens=4, overlap_sentences=0).chunk([doc], tokenizer=TOK)
    assert table.text == ("A a. B b.", "C c. D d.")


def test_long_sentence_is_cut_at_token_windows() -> None:
    words = " ".join(f"w{i}" for i in range(10))
    doc = Document("d", f"Short one. Now {words}. Tail.")
    table = SentenceChunker(max_tokens=4, overlap_sentences=1).chunk([doc], tokenizer=TOK)
    # 11 words -> windows of 4 + 4 + 3; the long sentence is never used as overlap.
    assert table.text == ("Short one.", "Now w0 w1 w2", "w3 w4 w5 w6", "w7 w8 w9.", "Tail.")
    assert list(table.n_tokens) == [2, 4, 4, 3, 1]


# --------------------------------------------------------------------------- structure


MARKDOWN = """# Intro
Intro text.

## Setup

Install it.

Usage
-----
Run it.

```sh
# not a heading
```

# Reference
## API
### Calls
Call it."""


def test_markdown_section_paths() -> None:
    found = [(s.path, MARKDOWN[s.start : s.end].strip()) for s in sections(MARKDOWN)]
    assert found == [
        ("Intro", "# Intro\nIntro text."),
        ("Intro > Setup", "## Setup\n\nInstall it."),
        ("Intro > Usage", "Usage\n-----\nRun it.\n\n```sh\n# not a heading\n```"),
        # Headings without a body join the next section.
        ("Reference > API > Calls", "# Reference\n## API\n### Calls\nCall it."),
    ]


def test_plain_headings_and_title_line() -> None:
    doc = Document("d", "Preface words.\n\nOverview\n\nFirst part.\n\nDetails Here\n\nLast part.",
                   title="My Title")
    table = StructuralChunker(max_tokens=100).chunk([doc], tokenizer=TOK)
    # The title line is not a heading; it stays in the preamble.
    assert table.section == ("", "Overview", "Details Here")
    assert table.text == ("My Title\nPreface words.", "Overview\n\nFirst part.",
                          "Details Here\n\nLast part.")


def test_unstructured_doc_is_one_section_split_by_sentences() -> None:
    doc = Document("d", "One two three. Four five six. Seven eight.")
    assert StructuralChunker(max_tokens=100).chunk([doc], tokenizer=TOK).text == (doc.text,)
    table = StructuralChunker(max_tokens=6).chunk([Document("e", MARKDOWN)], tokenizer=TOK)
    assert table.section[:2] == ("Intro", "Intro > Setup")
    table = StructuralChunker(max_tokens=3).chunk([doc], tokenizer=TOK)
    assert table.text == ("One two three.", "Four five six.", "Seven eight.")
    assert table.section == ("", "", "")


def test_long_section_keeps_its_path() -> None:
    body = " ".join(f"Word{i} w." for i in range(6))  # six sentences of 2 tokens
    doc = Document("d", f"# Head\n{body}")
    table = StructuralChunker(max_tokens=4).chunk([doc], tokenizer=TOK)
    # The heading line is one unit of 2 tokens, packed with the first sentence.
    assert table.text[:2] == ("# Head\nWord0 w.", "Word1 w. Word2 w.")
    assert set(table.section) == {"Head"}
    assert all(n <= 4 for n in table.n_tokens)


# --------------------------------------------------------------------------- options


@pytest.mark.parametrize(
    ("cls", "kwargs", "option"),
    [
        (RecursiveCharacterChunker, {"size": 0}, "size"),
        (RecursiveCharacterChunker, {"size": 10, "overlap": 10}, "overlap"),
        (RecursiveCharacterChunker, {"overlap": -1}, "overlap"),
        (RecursiveCharacterChunker, {"separators": []}, "separators"),
        (RecursiveCharacterChunker, {"separators": "\n"}, "separators"),
        (RecursiveCharacterChunker, {"separators": ["", " "]}, "separators"),
        (RecursiveCharacterChunker, {"separators": [" ", " "]}, "separators"),
        (RecursiveTokenChunker, {"size": 4, "overlap": 4}, "overlap"),
        (SentenceChunker, {"max_tokens": 0}, "max_tokens"),
        (SentenceChunker, {"overlap_sentences": -1}, "overlap_sentences"),
        (StructuralChunker, {"max_tokens": 0}, "max_tokens"),
    ],
)
def test_bad_options(cls: type, kwargs: dict[str, Any], option: str) -> None:
    with pytest.raises(OptionError) as err:
        cls(**kwargs)
    assert err.value.option == option


@pytest.mark.parametrize("chunker", [*CHUNKERS, FixedTokenChunker(size=4, overlap=1),
                                     WholeDocumentChunker()], ids=lambda c: type(c).__name__)
def test_the_stage_writes_the_one_call_table_block_by_block(chunker: Chunker,
                                                           tmp_path: Path) -> None:
    # the chunk stage chunks the corpus CHUNK_BLOCK documents at a time (one row group each):
    # blocks that cut the corpus anywhere, empty documents at a block's edge included, give
    # the table of one call over every document, doc_idx counted over the whole corpus
    docs = tuple(tricky_docs() * 3)
    corpus = Corpus("t", docs, "f")
    whole = chunker.chunk(docs, tokenizer=TOK)
    for block in (1, 2, 4, 5, len(docs), 10_000):
        folder = tmp_path / str(block)
        folder.mkdir()
        op = ChunkOp(chunker, TOK, block=block)
        op.write(ChunkInputs(corpus), folder, TimingLog("chunk"))
        got = op.load(folder, ChunkInputs(corpus))
        assert got.text == whole.text and got.section == whole.section
        for col in ("doc_idx", "start_char", "end_char", "n_tokens"):
            assert np.array_equal(getattr(got, col), getattr(whole, col)), (block, col)
        assert pq.ParquetFile(folder / "chunks.parquet").num_row_groups == \
            -(-len(docs) // block)


def test_the_artifact_loads_memory_mapped_or_from_parquet_alike(tmp_path: Path) -> None:
    # the stage writes chunks.parquet and its Arrow IPC twin; load maps the twin (texts as a
    # TextColumn, off the heap) and falls back to the Parquet file (an artifact written
    # before the twin existed): the same table either way
    from bench.chunking.base import ARROW_NAME
    from bench.data.table import TextColumn

    docs = tuple(tricky_docs() * 2)
    op = ChunkOp(SentenceChunker(max_tokens=4, overlap_sentences=1), TOK, block=3)
    op.write(ChunkInputs(Corpus("t", docs, "f")), tmp_path, TimingLog("chunk"))
    mapped = op.load(tmp_path, ChunkInputs(Corpus("t", docs, "f")))
    assert isinstance(mapped.text, TextColumn) and isinstance(mapped.section, TextColumn)
    (tmp_path / ARROW_NAME).unlink()
    plain = op.load(tmp_path, ChunkInputs(Corpus("t", docs, "f")))
    assert isinstance(plain.text, tuple) and len(plain) == len(mapped) > 0
    assert mapped.text == plain.text and mapped.section == plain.section
    for col in ("doc_idx", "start_char", "end_char", "n_tokens"):
        assert np.array_equal(getattr(mapped, col), getattr(plain, col))
