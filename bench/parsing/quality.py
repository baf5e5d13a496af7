"""What a parse did to the chunks and to the evidence a generator would read: per document,
chunk quality against the truth; per query, the extractive answer bound of the top passages.

Per (config, document) — ``parsing_chunks.parquet``, the chunks of the config's chunking
node grouped by document:

- ``sentence_cut_rate`` / ``tables_cut`` / ``tables_lost``: ``bench.ingest.metrics.chunk_cuts``
  (a chunk boundary inside a sentence; a truth table split across chunks or missing);
- ``heading_match``: the share of the document's chunks whose carried heading (the last
  component of ``ChunkTable.section``; "" when the chunker keeps none) equals the truth
  heading the chunk sits under — the chunk placed in the truth text by its first characters,
  under the last truth heading block before that place ("" before the first one);
  ``heading_placed``: the share of chunks that could be placed (a garbled start cannot).
  Headings are compared case- and whitespace-insensitively; truth headings are flat (no
  levels), so the path's last component is what can be checked;
- ``title_match`` / ``date_match``: ``bench.ingest.metrics.metadata_accuracy`` on the
  metadata the parse carries (:func:`parsed_metadata`: the first heading block's text, else
  the first line of the first block when it is short; the first ISO date in the text). No
  parser here reads document properties (HTML ``<meta>``, DOCX core properties, PDF info),
  so a date the truth takes from them is not in the parsed output.

Per (config, query) — ``parsing_answers.parquet``, queries with reference answers:
``answer_in_top_k``: 1 when some reference answer, SQuAD-normalised
(``bench.metrics.answer.normalize_answer``), occurs as a token sequence in the normalised
text of the pool's top ``TOP_K`` passages (the chunk behind each hit; the document's text
where the pool does not know the chunk) — the best an extractive reader could do from that
context, DPR's ``has_answer`` check, independent of any generator; and ``gold_in_top_k``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from bench.parsing.base import ParsedDocument, ParseStatus

if TYPE_CHECKING:
    from bench.chunking.base import ChunkTable
    from bench.parsing.dataset import ParseOutcome
    from bench.pipeline.view import RunView

CHUNK_TABLE = "parsing_chunks.parquet"
ANSWER_TABLE = "parsing_answers.parquet"
#: passages an extractive reader is given (the context stage's default top_k)
TOP_K = 5
#: a first line longer than this is a paragraph, not a title
_TITLE_CHARS = 120
_ISO_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
#: characters of a chunk's start that place it in the truth text (and the fewest that may)
_ANCHOR = 40
_MIN_ANCHOR = 12

CHUNK_COLUMNS = ("chunks", "boundaries", "sentence_cuts", "sentence_cut_rate", "tables_true",
                 "tables_cut", "tables_lost", "heading_match", "heading_placed", "title_match",
                 "date_match")
CHUNK_SCHEMA = pa.schema([
    pa.field("schema_version", pa.int32(), nullable=False),
    pa.field("config", pa.string(), nullable=False),
    pa.field("doc_id", pa.string(), nullable=False),
    pa.field("type", pa.string(), nullable=False),
    pa.field("layout", pa.string(), nullable=False),
    pa.field("parser", pa.string(), nullable=False),
    pa.field("status", pa.string(), nullable=False),
    *(pa.field(c, pa.float64(), nullable=True) for c in CHUNK_COLUMNS),
])
ANSWER_SCHEMA = pa.schema([
    pa.field("schema_version", pa.int32(), nullable=False),
    pa.field("config", pa.string(), nullable=False),
    pa.field("query_id", pa.string(), nullable=False),
    pa.field("category", pa.string(), nullable=False),
    pa.field("k", pa.int32(), nullable=False),
    pa.field("answer_in_top_k", pa.float64(), nullable=False),
    pa.field("gold_in_top_k", pa.float64(), nullable=False),
])


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def parsed_metadata(doc: ParsedDocument) -> tuple[str, str | None]:
    """(title, date) as the parse carries them: the first heading block's text, else the
    first line of the first block when it is at most ``_TITLE_CHARS`` long, else ""; the
    first ISO-8601 date (YYYY-MM-DD) in the text, else None."""
    if doc.status is not ParseStatus.OK:
        return "", None
    heading = next((b.text for b in doc.blocks if b.kind == "heading"), None)
    if heading is None and doc.blocks:
        first = doc.blocks[0].text.strip().split("\n", 1)[0]
        heading = first if len(first) <= _TITLE_CHARS else ""
    m = _ISO_DATE.search(doc.text)
    return (heading or "").strip(), (m.group(1) if m else None)


def heading_match(chunks: Sequence[str], sections: Sequence[str],
                  truth: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(share of the placed chunks whose carried heading is the truth heading they sit under,
    share of chunks placed); (None, None) for a document without chunks.

    A chunk is placed by its first ``_ANCHOR`` characters (whitespace-normalised, case-folded)
    found in the truth text; it sits under the last truth heading block that starts at or
    before that place ("" before the first). The truth decides where a chunk belongs, so a
    parser that dropped a heading does not thereby make its chunks "right" to carry none; a
    chunk whose start the parse garbled (OCR errors) cannot be placed and is left out."""
    if not chunks:
        return None, None
    from bench.chunking.structural import SECTION_SEPARATOR

    parts, heads, pos = [], [], 0
    for b in truth.get("blocks", []):
        t = _norm(str(b["text"]))
        if b.get("kind") == "heading":
            heads.append((pos, t))
        parts.append(t)
        pos += len(t) + 1
    text = " ".join(parts)
    placed = ok = 0
    for chunk, section in zip(chunks, sections, strict=True):
        anchor = _norm(chunk)[:_ANCHOR]
        at = text.find(anchor) if len(anchor) >= _MIN_ANCHOR else -1
        if at < 0:
            continue
        placed += 1
        expected = ""
        for start, h in heads:
            if start <= at:
                expected = h
        carried = section.rsplit(SECTION_SEPARATOR, 1)[-1] if section else ""
        ok += _norm(carried) == expected
    return (ok / placed if placed else None), placed / len(chunks)


def chunk_rows(label: str, chunks: ChunkTable, outcome: ParseOutcome,
               truths: Sequence[Mapping[str, Any] | None]) -> list[dict[str, Any]]:
    """One row per document with a truth: its chunks' quality (module docstring)."""
    from bench.ingest.metrics import chunk_cuts, metadata_accuracy

    by_doc: dict[int, list[int]] = {}
    for i, d in enumerate(chunks.doc_idx.tolist()):
        by_doc.setdefault(int(d), []).append(i)
    out = []
    for d, (f, rec, truth) in enumerate(zip(outcome.files, outcome.records, truths,
                                            strict=True)):
        if truth is None:
            continue
        idx = sorted(by_doc.get(d, []), key=lambda i: int(chunks.start_char[i]))
        texts = [chunks.text[i] for i in idx]
        got: dict[str, Any] = {"chunks": float(len(idx))}
        if idx:
            got |= chunk_cuts(texts, truth)
        got["heading_match"], got["heading_placed"] = heading_match(
            texts, [chunks.section[i] for i in idx], truth)
        title, date = parsed_metadata(rec)
        got |= metadata_accuracy(title, date, truth)
        out.append({"config": label, "doc_id": f.doc_id, "type": f.type, "layout": f.layout,
                    "parser": rec.parser, "status": str(rec.status),
                    **{c: (None if got.get(c) is None else float(got[c]))
                       for c in CHUNK_COLUMNS}})
    return out


def answer_in(passages: Sequence[str], references: Sequence[str]) -> bool:
    """Some reference's normalised tokens occur contiguously in a normalised passage."""
    from bench.metrics.answer import normalize_answer

    refs = [f" {r} " for r in (normalize_answer(x) for x in references) if r]
    texts = [f" {normalize_answer(p)} " for p in passages]
    return any(r in t for r in refs for t in texts)


def answer_rows(done: RunView, label: str, pool: Any, chunks: ChunkTable | None,
                k: int = TOP_K) -> list[dict[str, Any]]:
    """One row per query with reference answers: the extractive bound of its top ``k``."""
    docs = done.dataset.documents
    hits = pool.hits
    chunk_of = hits.chunks()
    out = []
    for qi, q in enumerate(done.dataset.queries):
        if not q.references or qi >= hits.n_queries:
            continue
        s, e = int(hits.offsets[qi]), int(hits.offsets[qi + 1])
        top = range(s, min(e, s + k))
        passages = []
        for h in top:
            c = int(chunk_of[h])
            passages.append(chunks.text[c] if chunks is not None and c >= 0
                            else docs[int(hits.doc_idx[h])].text)
        gold = {d for d, g in q.qrels if g >= 1}
        out.append({"config": label, "query_id": q.query_id, "category": q.category, "k": k,
                    "answer_in_top_k": float(answer_in(passages, q.references)),
                    "gold_in_top_k": float(any(docs[int(hits.doc_idx[h])].doc_id in gold
                                               for h in top))})
    return out


def tables(done: RunView, outcome: ParseOutcome,
           truths: Sequence[Mapping[str, Any] | None]
           ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(chunk rows, answer rows) of every config of the run with a pool of its own."""
    from bench.chunking.base import ChunkTable

    chunk_out: list[dict[str, Any]] = []
    answer_out: list[dict[str, Any]] = []
    seen: set[int] = set()
    for cr in done.configs:
        # a generated config answers from its parent's pool: that pool is counted once
        if cr.pool is None or id(cr.pool.hits) in seen:
            continue
        seen.add(id(cr.pool.hits))
        label = cr.spec.label
        node = cr.node("chunk")
        chunks = node.value if node is not None and isinstance(node.value, ChunkTable) else None
        if chunks is not None:
            chunk_out += chunk_rows(label, chunks, outcome, truths)
        answer_out += answer_rows(done, label, cr.pool, chunks)
    return chunk_out, answer_out
