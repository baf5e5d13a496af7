"""Markdown and plain text: UTF-8 (or a byte-order mark's) text split at blank lines; a
Markdown heading line (``# ...``) becomes a heading block without its marks."""

from __future__ import annotations

from typing import ClassVar

from bench.parsing.base import Block, ParsedDocument, ParserBase, RawFile, from_blocks
from bench.parsing.encoding import decode_text


class TextParser(ParserBase):
    name: ClassVar[str] = "text"
    types: ClassVar[tuple[str, ...]] = ("md", "txt")

    def parse_one(self, f: RawFile) -> ParsedDocument:
        text = decode_text(f.path.read_bytes(), html=False).replace("\r\n", "\n")
        blocks: list[Block] = []
        for part in text.split("\n\n"):
            part = part.strip()
            if not part:
                continue
            if f.type == "md" and part.startswith("#") and "\n" not in part:
                blocks.append(Block(part.lstrip("#").strip(), 0, len(blocks), "heading"))
            else:
                blocks.append(Block(part, 0, len(blocks)))
        return from_blocks(f, self.name, blocks, pages=1, empty_reason="the file is blank")
