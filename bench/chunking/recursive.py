"""LangChain-style recursive splitting, by characters or by embedder tokens.

The text is split on the first separator that occurs in it (the separator stays at the start
of the piece that follows it), pieces still longer than ``size`` are split again with the next
separators, and adjacent short pieces are merged back up to ``size`` with ``overlap``, exactly
as ``RecursiveCharacterTextSplitter`` does. Unlike LangChain, pieces are character spans of the
source rather than strings, so every chunk's offsets are exact.

Two classes because ``uses_tokenizer`` is a class property: ``RecursiveCharacterChunker``
counts characters (boundaries do not depend on the embedder), ``RecursiveTokenChunker``
counts embedder tokens.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from itertools import pairwise
from typing import ClassVar

from bench.chunking.base import ChunkTable, Tokenizer
from bench.chunking.sentence import Span, TableBuilder, TokenIndex, tokenized, trim
from bench.config.build import OptionError
from bench.data.base import Document

DEFAULT_SEPARATORS = ("\n\n", "\n", " ", "")


class RecursiveCharacterChunker:
    """Recursive separator splitting with chunks of at most ``size`` characters.

    ``separators`` are literal strings tried in order; "" (last, if present) splits between
    characters, so no chunk exceeds ``size``. Without "" a piece that no separator splits is
    kept whole, however long. Chunks are trimmed of surrounding whitespace; blank chunks and
    chunks contained in the previous one are dropped.
    """

    uses_tokenizer: ClassVar[bool] = False
    unit: ClassVar[str] = "characters"

    def __init__(
        self,
        *,
        size: int = 512,
        overlap: int = 64,
        separators: Sequence[str] = DEFAULT_SEPARATORS,
    ) -> None:
        if size < 1:
            raise OptionError("size", f"must be >= 1 {self.unit}, got {size}")
        if not 0 <= overlap < size:
            raise OptionError("overlap", f"must be in [0, size={size}) {self.unit}, got {overlap}")
        if isinstance(separators, str) or not separators:
            raise OptionError("separators", f"must be a non-empty list, got {separators!r}")
        seps = list(separators)
        if len(set(seps)) != len(seps):
            raise OptionError("separators", f"has duplicates: {seps!r}")
        if "" in seps[:-1]:
            # "" matches everywhere, so separators after it would never be used.
            raise OptionError("separators", f'"" may only be the last separator: {seps!r}')
        self.size = size
        self.overlap = overlap
        self.separators = tuple(seps)

    def cache_params(self) -> dict[str, object]:
        return {"size": self.size, "overlap": self.overlap, "separators": list(self.separators)}

    def chunk(self, documents: Sequence[Document], *, tokenizer: Tokenizer) -> ChunkTable:
        """One row per chunk; ``n_tokens`` is always in embedder tokens (whatever ``size`` is)."""
        rows = TableBuilder()
        for i, text, tokens in tokenized(documents, tokenizer):
            last_end = -1
            for raw in _Splitter(self, text, tokens).split(0, len(text), self.separators):
                s, e = trim(text, *raw)
                if s < e and e > last_end:
                    rows.add(i, text, tokens, (s, e))
                    last_end = e
        return rows.build()

    def _length(self, text: str, tokens: TokenIndex, start: int, end: int) -> int:
        return end - start


class RecursiveTokenChunker(RecursiveCharacterChunker):
    """``RecursiveCharacterChunker`` with ``size`` and ``overlap`` in embedder tokens."""

    uses_tokenizer: ClassVar[bool] = True
    unit: ClassVar[str] = "tokens"

    def __init__(
        self,
        *,
        size: int = 128,
        overlap: int = 16,
        separators: Sequence[str] = DEFAULT_SEPARATORS,
    ) -> None:
        super().__init__(size=size, overlap=overlap, separators=separators)

    def _length(self, text: str, tokens: TokenIndex, start: int, end: int) -> int:
        return tokens.count(start, end)


class _Splitter:
    """The recursion over one document; returns untrimmed chunk spans in document order."""

    def __init__(self, chunker: RecursiveCharacterChunker, text: str, tokens: TokenIndex) -> None:
        self.text = text
        self.size = chunker.size
        self.overlap = chunker.overlap
        self.length = lambda s, e: chunker._length(text, tokens, s, e)

    def split(self, start: int, end: int, separators: Sequence[str]) -> list[Span]:
        text = self.text
        k = next(
            (k for k, sep in enumerate(separators) if sep == "" or text.find(sep, start, end) >= 0),
            None,
        )
        if k is None:
            return [(start, end)]  # no separator left applies: keep the piece whole
        sep, rest = separators[k], separators[k + 1 :]
        out: list[Span] = []
        short: list[Span] = []
        for piece in _pieces(text, start, end, sep):
            if self.length(*piece) <= self.size:
                short.append(piece)
                continue
            # Merge only runs of short pieces: a chunk never straddles a long piece.
            out += self.merge(short)
            short = []
            out += self.split(*piece, rest) if rest else [piece]
        return out + self.merge(short)

    def merge(self, pieces: list[Span]) -> list[Span]:
        """Adjacent pieces joined up to ``size``; each chunk restarts with <= ``overlap`` of
        the previous one (LangChain's ``_merge_splits``, measured on the real span)."""
        out: list[Span] = []
        window: deque[Span] = deque()
        for piece in pieces:
            if window and self.length(window[0][0], piece[1]) > self.size:
                out.append((window[0][0], window[-1][1]))
                while window and (
                    self.length(window[0][0], window[-1][1]) > self.overlap
                    or self.length(window[0][0], piece[1]) > self.size
                ):
                    window.popleft()
            window.append(piece)
        if window:
            out.append((window[0][0], window[-1][1]))
        return out


def _pieces(text: str, start: int, end: int, sep: str) -> list[Span]:
    """``text[start:end]`` cut before every occurrence of ``sep``; empty pieces dropped."""
    if sep == "":
        return [(i, i + 1) for i in range(start, end)]
    cuts = [start]
    pos = text.find(sep, start, end)
    while pos != -1:
        if pos > start:
            cuts.append(pos)
        pos = text.find(sep, pos + len(sep), end)
    cuts.append(end)
    return [(a, b) for a, b in pairwise(cuts) if a < b]
