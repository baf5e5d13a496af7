"""The oracle parser: the truth text written beside each file (``truth/<doc_id>.json``), as
if a parser had read the file perfectly. The reference every parser is paired against."""

from __future__ import annotations

import json
from typing import ClassVar

from bench.parsing.base import (
    FILE_TYPES,
    Block,
    ParsedDocument,
    ParsedTable,
    ParserBase,
    RawFile,
    from_blocks,
)


class OracleParser(ParserBase):
    """Needs a truth file for every manifest row (checked before any work)."""

    name: ClassVar[str] = "oracle"
    types: ClassVar[tuple[str, ...]] = FILE_TYPES
    needs_truth: ClassVar[bool] = True

    def parse_one(self, f: RawFile) -> ParsedDocument:
        assert f.truth is not None  # the loader refuses a row without truth before work
        truth = json.loads(f.truth.read_text(encoding="utf-8"))
        blocks = [Block(b["text"], int(b.get("page", 0)), i, b.get("kind", "paragraph"))
                  for i, b in enumerate(truth.get("blocks") or [])]
        if not blocks:
            blocks = [Block(truth["text"], 0, 0)]
        tables = [ParsedTable(tuple(tuple(r) for r in t["cells"]), int(t.get("page", 0)))
                  for t in truth.get("tables") or []]
        doc = from_blocks(f, self.name, blocks, pages=int(truth.get("pages") or 1),
                          tables=tables, empty_reason="the truth text is empty")
        # the corpus text is the truth text itself, not a re-join of its blocks
        return doc if not doc.text else _with_text(doc, truth["text"])


def _with_text(doc: ParsedDocument, text: str) -> ParsedDocument:
    from dataclasses import replace

    return replace(doc, text=text)
