"""Markdown as blocks: what the Markdown-emitting parsers (markitdown, Docling) share.

A converter's Markdown is split at blank lines; a ``#`` heading line becomes a heading block
without its marks, a pipe table a table block (its rows, cells joined by a space, as the DOCX
parser writes one) and a :class:`ParsedTable` of its cells, anything else a paragraph. With
``plain`` the inline markup a page does not show is dropped (link targets, emphasis marks,
code backticks, image references), so the text compares with what a reader sees; without
it the blocks keep the converter's Markdown as a user would index it. A table's blank header
row (the filler a converter writes for a table that has none) is dropped.
"""

from __future__ import annotations

import re

from bench.parsing.base import Block, ParsedTable

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_TABLE_RULE = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?$")
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\((?:[^()]|\([^)]*\))*\)")
# an escaped mark (``\*args``, ``2\*3``) is text, not markup
_EMPHASIS = re.compile(r"(?<!\\)(\*\*|__|(?<![\w*\\])\*(?=\S)|(?<=[^\s\\])\*(?![\w*]))")
_CODE = re.compile(r"(?<!\\)`+")
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|>])")


def strip_inline(text: str) -> str:
    """Markdown inline markup removed: ``[text](url)`` is ``text``, images their alt text,
    ``**b**``/``*i*``/`` `c` `` their text, backslash escapes their character."""
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _CODE.sub("", text)
    text = _EMPHASIS.sub("", text)
    return _ESCAPE.sub(r"\1", text)


def _is_table(lines: list[str]) -> bool:
    return (len(lines) >= 2 and all(ln.lstrip().startswith("|") for ln in lines)
            and any(_TABLE_RULE.match(ln.strip()) for ln in lines[:3]))


def _row(line: str) -> tuple[str, ...]:
    line = line.strip()
    line = line.removeprefix("|").removesuffix("|")
    return tuple(c.strip() for c in re.split(r"(?<!\\)\|", line))


def markdown_blocks(markdown: str, *, page: int, start: int = 0, plain: bool = True
                    ) -> tuple[list[Block], list[ParsedTable]]:
    """One page's (or a page-less file's) Markdown as blocks numbered from ``start``, and its
    pipe tables."""
    blocks: list[Block] = []
    tables: list[ParsedTable] = []

    def clean(s: str) -> str:
        return strip_inline(s) if plain else s

    for part in re.split(r"\n\s*\n", markdown.replace("\r\n", "\n")):
        lines = [ln for ln in part.split("\n") if ln.strip()]
        if not lines:
            continue
        # a heading line glued to the paragraph under it (no blank line): two blocks
        while lines and (m := _HEADING.match(lines[0].strip())) is not None:
            blocks.append(Block(clean(m.group(2)), page, start + len(blocks), "heading"))
            lines = lines[1:]
        if not lines:
            continue
        if _is_table(lines):
            cells = tuple(tuple(clean(c) for c in _row(ln)) for ln in lines
                          if not _TABLE_RULE.match(ln.strip()))
            if cells and not any(cells[0]):  # Markdown needs a header row: a blank one is
                cells = cells[1:]            # the converter's filler for a table without one
            tables.append(ParsedTable(cells, page))
            blocks.append(Block("\n".join(" ".join(r) for r in cells), page,
                                start + len(blocks), "table"))
        else:
            blocks.append(Block(clean("\n".join(lines)), page, start + len(blocks)))
    return blocks, tables
