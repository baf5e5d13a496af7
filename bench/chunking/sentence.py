"""Whole sentences packed up to N embedder tokens, with the last sentences repeated as overlap.

Also home of the span helpers the other text-aware chunkers share (``recursive``,
``structural``): a rule-based sentence splitter, a token index over one document, sentence
packing and the ``ChunkTable`` assembly. Everything works on (start, end) character spans of
``chunk_text_field(doc)`` so chunk offsets are exact by construction: text is only ever sliced
from the source, never rebuilt.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from itertools import pairwise
from typing import ClassVar

import numpy as np
from tqdm.auto import tqdm

from bench.chunking.base import ChunkTable, Tokenizer, chunk_text_field
from bench.config.build import OptionError
from bench.data.base import Document

Span = tuple[int, int]

# --------------------------------------------------------------------------- sentence splitting

# Sentence-final punctuation, then closing quotes/brackets, then whitespace or the end.
# Decimal numbers ("3.14") and dotted words ("e.g" inside "e.g.") never match: the lookahead
# wants whitespace right after the punctuation.
_BREAK = re.compile(r"""(?P<punct>(?:[.!?]+|…)["'”’)\]]*)(?=\s|$)|(?P<nl>\n)""")
# Abbreviations after which a capitalised word does NOT start a sentence ("Dr. Smith",
# "e.g. Python", "vs. Java"). Words that often do end sentences ("etc.", "Inc.") are not here:
# they only avoid a break when the next word is lower-case, like any other word.
_NEVER_FINAL = frozenset({
    "mr", "mrs", "ms", "dr", "prof", "sr", "st", "mt", "gen", "gov", "rev", "capt", "lt", "col",
    "sgt", "hon", "messrs", "e.g", "i.e", "cf", "vs", "viz", "resp",
})
# Abbreviations that precede a number ("No. 5", "Fig. 3", "approx. 12"); "no." before a word
# can well end a sentence.
_BEFORE_NUMBER = frozenset({
    "no", "nos", "vol", "vols", "p", "pp", "fig", "figs", "eq", "eqs", "ch", "sec", "art", "ref",
    "approx", "ca",
})
_DOTTED = re.compile(r"(?:\w\.)+\w")  # U.S, e.g, i.e (the final dot is the match itself)
_OPENERS = "([{\"'“‘"


def split_sentences(text: str, start: int = 0, end: int | None = None) -> list[Span]:
    """Sentence spans of ``text[start:end]``, in absolute offsets, trimmed of whitespace.

    Breaks after ``.``/``!``/``?``/``…`` (plus closing quotes) when the next word is not
    lower-case and the word before is not an abbreviation, an initial ("J. Smith") or a dotted
    acronym ("U.S."); at every blank line; and at a single newline unless the next line starts
    lower-case (wrapped prose continues). Whitespace-only input gives no spans.
    """
    end = len(text) if end is None else end
    cuts = [start]
    for m in _BREAK.finditer(text, start, end):
        nxt = _next_visible(text, m.end(), end)
        if m.group("nl") is not None:
            # A newline directly followed by another (blank line) always breaks.
            if nxt < end and text[nxt].islower() and "\n" not in text[m.end() : nxt]:
                continue
            cuts.append(m.start())
            continue
        if nxt < end and (text[nxt].islower() or _is_abbreviation(text, m.start(), nxt, end)):
            continue
        cuts.append(m.end())
    cuts.append(end)
    spans = (trim(text, a, b) for a, b in pairwise(cuts))
    return [s for s in spans if s[0] < s[1]]


def _next_visible(text: str, pos: int, end: int) -> int:
    while pos < end and text[pos].isspace():
        pos += 1
    return pos


def _is_abbreviation(text: str, punct: int, nxt: int, end: int) -> bool:
    """Whether the word ending at ``punct`` (where a single "." sits) is not sentence-final."""
    if text[punct] != "." or (punct + 1 < end and text[punct + 1] == "."):
        return False  # "!", "?" and "..." are always final when a capital follows
    i = punct
    while i > 0 and not text[i - 1].isspace() and text[i - 1] not in _OPENERS:
        i -= 1
    word = text[i:punct]
    key = word.lower()
    if key in _NEVER_FINAL or (len(word) == 1 and word.isupper()) or _DOTTED.fullmatch(word):
        return True
    return key in _BEFORE_NUMBER and text[nxt].isdigit()


def trim(text: str, start: int, end: int) -> Span:
    """``(start, end)`` shrunk past leading and trailing whitespace (empty span stays empty)."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


# --------------------------------------------------------------------------- tokens of one doc


class TokenIndex:
    """The embedder tokens of one text, for counting and windowing by character span.

    A token counts towards a span when it overlaps it, so a token cut by a span boundary is
    counted on both sides (lengths are never under-estimated).
    """

    def __init__(self, offsets: np.ndarray) -> None:
        offs = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
        # searchsorted needs monotone columns; tokenizers that emit overlapping offsets
        # (byte-level pieces of one character) are made monotone without changing the count.
        self.starts = np.maximum.accumulate(offs[:, 0]) if len(offs) else offs[:, 0]
        self.ends = np.maximum.accumulate(offs[:, 1]) if len(offs) else offs[:, 1]

    def __len__(self) -> int:
        return len(self.starts)

    def count(self, start: int, end: int) -> int:
        """Number of tokens overlapping ``[start, end)``."""
        first = int(np.searchsorted(self.ends, start, side="right"))
        stop = int(np.searchsorted(self.starts, end, side="left"))
        return max(0, stop - first)

    def windows(self, text: str, start: int, end: int, size: int) -> list[Span]:
        """``[start, end)`` cut before every ``size``-th token; spans trimmed, none empty.

        The text between two tokens goes with the earlier window, so the windows tile the span.
        """
        first = int(np.searchsorted(self.ends, start, side="right"))
        stop = int(np.searchsorted(self.starts, end, side="left"))
        cuts = [start]
        cuts += [max(start, int(self.starts[k])) for k in range(first + size, stop, size)]
        cuts.append(end)
        spans = (trim(text, a, b) for a, b in pairwise(cuts))
        return [s for s in spans if s[0] < s[1]]


# --------------------------------------------------------------------------- packing


def pack(
    text: str, units: Sequence[Span], tokens: TokenIndex, max_tokens: int, overlap_units: int
) -> list[Span]:
    """Chunk spans made of whole consecutive ``units`` (sentences) of <= ``max_tokens`` tokens.

    The next chunk starts with the last ``overlap_units`` units of the previous one, fewer when
    they would not leave room for a new unit. A unit longer than ``max_tokens`` on its own is
    cut into token windows and never shares a chunk.
    """
    out: list[Span] = []
    lo = 0  # first unit of the open chunk; units[lo:hi] are in it
    hi = 0
    n = len(units)
    while hi < n:
        s, e = units[hi]
        if tokens.count(s, e) > max_tokens:
            if hi > lo:
                out.append((units[lo][0], units[hi - 1][1]))
            out.extend(tokens.windows(text, s, e, max_tokens))
            hi += 1
            lo = hi  # overlap would repeat a fragment of the long unit: start clean
            continue
        if hi > lo and tokens.count(units[lo][0], e) > max_tokens:
            out.append((units[lo][0], units[hi - 1][1]))
            # Repeat the last units, but always leave room for units[hi] (progress).
            lo = max(hi - overlap_units, lo + 1)
            while lo < hi and tokens.count(units[lo][0], e) > max_tokens:
                lo += 1
        hi += 1
    if hi > lo:
        out.append((units[lo][0], units[hi - 1][1]))
    return out


# --------------------------------------------------------------------------- table assembly


def tokenized(
    documents: Sequence[Document], tokenizer: Tokenizer, *, batch: int = 256
) -> Iterator[tuple[int, str, TokenIndex]]:
    """Yield ``(doc_idx, chunk_text_field(doc), TokenIndex)``, tokenizing in batches."""
    with tqdm(total=len(documents), desc="chunk", unit="doc", leave=False) as bar:
        for b0 in range(0, len(documents), batch):
            docs = documents[b0 : b0 + batch]
            full = [chunk_text_field(d) for d in docs]
            for j, (text, offs) in enumerate(zip(full, tokenizer.offsets(full), strict=True)):
                yield b0 + j, text, TokenIndex(offs)
            bar.update(len(docs))


class TableBuilder:
    """Accumulates chunks as source spans; ``add`` slices the text, so offsets cannot drift."""

    def __init__(self) -> None:
        self.doc_idx: list[int] = []
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.n_tokens: list[int] = []
        self.sections: list[str] = []
        self.texts: list[str] = []

    def add(
        self, doc_idx: int, text: str, tokens: TokenIndex, span: Span, section: str = ""
    ) -> None:
        s, e = span
        self.doc_idx.append(doc_idx)
        self.starts.append(s)
        self.ends.append(e)
        self.n_tokens.append(tokens.count(s, e))
        self.sections.append(section)
        self.texts.append(text[s:e])

    def build(self) -> ChunkTable:
        return ChunkTable(
            doc_idx=np.asarray(self.doc_idx, dtype=np.int32),
            start_char=np.asarray(self.starts, dtype=np.int32),
            end_char=np.asarray(self.ends, dtype=np.int32),
            n_tokens=np.asarray(self.n_tokens, dtype=np.int32),
            section=tuple(self.sections),
            text=tuple(self.texts),
        )


# --------------------------------------------------------------------------- the chunker


class SentenceChunker:
    """Whole sentences packed into chunks of at most ``max_tokens`` embedder tokens.

    Consecutive chunks share their last/first ``overlap_sentences`` sentences. A sentence longer
    than ``max_tokens`` becomes its own chunks, cut at token windows. ``section`` is "".
    """

    uses_tokenizer: ClassVar[bool] = True

    def __init__(self, *, max_tokens: int = 128, overlap_sentences: int = 1) -> None:
        if max_tokens < 1:
            raise OptionError("max_tokens", f"must be >= 1 token, got {max_tokens}")
        if overlap_sentences < 0:
            raise OptionError("overlap_sentences", f"must be >= 0, got {overlap_sentences}")
        self.max_tokens = max_tokens
        self.overlap_sentences = overlap_sentences

    def cache_params(self) -> dict[str, object]:
        return {"max_tokens": self.max_tokens, "overlap_sentences": self.overlap_sentences}

    def chunk(self, documents: Sequence[Document], *, tokenizer: Tokenizer) -> ChunkTable:
        """One row per chunk; a document whose text is blank yields no chunk."""
        rows = TableBuilder()
        for i, text, tokens in tokenized(documents, tokenizer):
            units = split_sentences(text)
            for span in pack(text, units, tokens, self.max_tokens, self.overlap_sentences):
                rows.add(i, text, tokens, span)
        return rows.build()
