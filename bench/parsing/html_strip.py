"""The naive HTML baseline: every text node outside <script>/<style>/<head>, block-level
elements starting a new block — navigation, footers and all (stdlib ``html.parser``)."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import ClassVar

from bench.parsing.base import Block, ParsedDocument, ParserBase, RawFile, from_blocks
from bench.parsing.encoding import decode_text

_SKIP = {"script", "style", "head", "noscript", "template"}
_BLOCK = {"p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "li", "ul", "ol", "table", "tr",
          "section", "article", "nav", "header", "footer", "aside", "main", "blockquote",
          "pre", "br", "hr", "dd", "dt", "dl", "figcaption", "caption", "title", "body"}
_CELL = {"td", "th"}


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[tuple[str, str]] = []
        self.current: list[str] = []
        self.skip = 0
        self.tag = "p"

    def flush(self) -> None:
        text = " ".join("".join(self.current).split())
        if text:
            kind = "heading" if self.tag[:1] == "h" and self.tag[1:].isdigit() else "paragraph"
            self.blocks.append((kind, text))
        self.current = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self.skip += 1
        elif tag in _BLOCK:
            self.flush()
            self.tag = tag
        elif tag in _CELL:
            self.current.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self.skip = max(0, self.skip - 1)
        elif tag in _BLOCK:
            self.flush()

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.current.append(data)


class HtmlStripParser(ParserBase):
    """No options: the baseline every main-content extractor should beat."""

    name: ClassVar[str] = "html_strip"
    types: ClassVar[tuple[str, ...]] = ("html",)

    def parse_one(self, f: RawFile) -> ParsedDocument:
        c = _Collector()
        c.feed(decode_text(f.path.read_bytes(), html=True))
        c.close()
        c.flush()
        blocks = [Block(text, 0, i, kind) for i, (kind, text) in enumerate(c.blocks)]
        return from_blocks(f, self.name, blocks, pages=1,
                           empty_reason="the page has no text outside scripts and styles")
