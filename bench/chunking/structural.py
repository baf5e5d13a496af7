"""One chunk per section (heading + body), sections over budget packed sentence by sentence.

Headings recognised in ``chunk_text_field(doc)`` (the title line itself is never one):

- markdown ATX ``#`` .. ``######`` (outside ``` / ~~~ code fences), levels 1-6;
- setext: a line underlined with ``===`` (level 1) or ``---`` (level 2), at least 3 marks;
- plain, only in documents without the two kinds above (in markdown a short paragraph is just
  a paragraph): a line of <= 80 chars between blank lines, starting with a capital or a digit,
  not ending like a sentence or a lead-in (``.,;:!``), not a list item or table row, with
  content after it. Plain headings have no levels: each one replaces the previous.

``section`` is the heading path joined with " > ". Text before the first heading has path "";
a section with no body (a heading directly followed by a sub-heading) is merged into the next
one so no chunk is a bare heading.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from bench.chunking.base import ChunkTable, Tokenizer
from bench.chunking.sentence import (
    Span,
    TableBuilder,
    TokenIndex,
    pack,
    split_sentences,
    tokenized,
    trim,
)
from bench.config.build import OptionError
from bench.data.base import Document

SECTION_SEPARATOR = " > "
_MAX_HEADING_CHARS = 80
_PLAIN_LEVEL = 1

_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))??(?:[ \t]+#+)?[ \t]*")
_UNDERLINE = re.compile(r" {0,3}(={3,}|-{3,})[ \t]*")
_FENCE = re.compile(r" {0,3}(```|~~~)")
_LIST_OR_TABLE = re.compile(r"\s*(?:[-*+•]\s|\d+[.)]\s|\|)")
_NOT_HEADING_END = tuple(".,;:!")


@dataclass(frozen=True)
class Heading:
    """A recognised heading: its line span (setext: both lines), nesting level and text."""

    start: int  # first char of the heading line(s)
    end: int  # end of the heading line(s), before the newline
    level: int
    name: str


@dataclass(frozen=True)
class Section:
    """``[start, end)`` of the source; ``[start, head_end)`` holds the heading lines (for the
    preamble: the title line; empty when there is neither)."""

    start: int
    head_end: int
    end: int
    path: str


def _lines(text: str) -> list[Span]:
    out: list[Span] = []
    pos = 0
    for line in text.split("\n"):
        out.append((pos, pos + len(line)))
        pos += len(line) + 1
    return out


def find_headings(text: str, body_start: int = 0) -> list[Heading]:
    """Headings of ``text`` that start at or after ``body_start``, in order."""
    lines = _lines(text)
    blank = [not text[s:e].strip() for s, e in lines]
    out: list[Heading] = []
    plain: list[Heading] = []
    in_fence = False
    i = 0
    while i < len(lines):
        s, e = lines[i]
        line = text[s:e]
        fence = _FENCE.match(line) is not None
        in_fence ^= fence
        if fence or in_fence or s < body_start or blank[i]:
            i += 1
            continue
        atx = _ATX.fullmatch(line)
        if atx:
            out.append(Heading(s, e, len(atx.group(1)), (atx.group(2) or "").strip()))
            i += 1
            continue
        first = i == 0 or blank[i - 1] or lines[i - 1][1] <= body_start
        nxt = text[lines[i + 1][0] : lines[i + 1][1]] if i + 1 < len(lines) else ""
        under = _UNDERLINE.fullmatch(nxt)
        if first and under and len(line.strip()) <= _MAX_HEADING_CHARS:
            level = 1 if under.group(1)[0] == "=" else 2
            out.append(Heading(s, lines[i + 1][1], level, line.strip()))
            i += 2
            continue
        if first and _looks_plain(line) and _content_follows(blank, i):
            plain.append(Heading(s, e, _PLAIN_LEVEL, line.strip()))
        i += 1
    return out or plain


def _looks_plain(line: str) -> bool:
    name = line.strip()
    return (
        len(name) <= _MAX_HEADING_CHARS
        and (name[0].isupper() or name[0].isdigit())
        and not name.endswith(_NOT_HEADING_END)
        and not _LIST_OR_TABLE.match(line)
    )


def _content_follows(blank: list[bool], i: int) -> bool:
    """A blank line right after line ``i``, and a non-blank one somewhere after that."""
    return i + 1 < len(blank) and blank[i + 1] and not all(blank[i + 2 :])


def sections(text: str, body_start: int = 0) -> list[Section]:
    """The sections of ``text`` in order, tiling it; [Section(0, 0, len, "")] without headings."""
    heads = find_headings(text, body_start)
    out: list[Section] = []
    if not heads or heads[0].start > 0:
        # The title line plays the preamble's heading: a preamble of just the title is merged.
        end = heads[0].start if heads else len(text)
        out.append(Section(0, min(body_start, end), end, ""))
    stack: list[Heading] = []
    for k, h in enumerate(heads):
        while stack and stack[-1].level >= h.level:
            stack.pop()
        stack.append(h)
        path = SECTION_SEPARATOR.join(x.name for x in stack if x.name)
        end = heads[k + 1].start if k + 1 < len(heads) else len(text)
        out.append(Section(h.start, h.end, end, path))
    # A section without body text (a heading right before a sub-heading; a preamble that is
    # only the title line) joins the next section, keeping the next one's path.
    merged: list[Section] = []
    carry: int | None = None
    for k, sec in enumerate(out):
        start = sec.start if carry is None else carry
        if k + 1 < len(out) and not text[sec.head_end : sec.end].strip():
            carry = start
            continue
        carry = None
        merged.append(Section(start, sec.head_end, sec.end, sec.path))
    return merged


class StructuralChunker:
    """Sections (heading path in ``section``) of at most ``max_tokens`` embedder tokens.

    A longer section is packed sentence by sentence (its heading line counts as one sentence),
    without overlap: sections do not overlap each other, so neither do their parts.
    """

    uses_tokenizer: ClassVar[bool] = True

    def __init__(self, *, max_tokens: int = 256) -> None:
        if max_tokens < 1:
            raise OptionError("max_tokens", f"must be >= 1 token, got {max_tokens}")
        self.max_tokens = max_tokens

    def cache_params(self) -> dict[str, object]:
        return {"max_tokens": self.max_tokens}

    def chunk(self, documents: Sequence[Document], *, tokenizer: Tokenizer) -> ChunkTable:
        """One row per chunk; a document whose text is blank yields no chunk."""
        rows = TableBuilder()
        for i, text, tokens in tokenized(documents, tokenizer):
            doc = documents[i]
            # BEIR passages join "title body" with one space: the body starts at the same place
            body_start = len(doc.title) + 1 if doc.title else 0
            for sec in sections(text, body_start):
                for span in self._split(text, tokens, sec):
                    rows.add(i, text, tokens, span, sec.path)
        return rows.build()

    def _split(self, text: str, tokens: TokenIndex, sec: Section) -> list[Span]:
        whole = trim(text, sec.start, sec.end)
        if whole[0] == whole[1]:
            return []
        if tokens.count(*whole) <= self.max_tokens:
            return [whole]
        # The heading lines (with any merged empty sections before them) stay one unit.
        head = trim(text, sec.start, sec.head_end)
        units = [head] if head[0] < head[1] else []
        units += split_sentences(text, sec.head_end, sec.end)
        return pack(text, units, tokens, self.max_tokens, 0)
