"""Chunk quality: chunks that cut a sentence or a table, token IoU of retrieved text against the
relevant excerpt (independent of chunk boundaries), metadata (title, date) accuracy.

All ours (arithmetic over strings and character ranges); the IoU is the token-level measure of
Chroma's chunking evaluation (Smith & Troynikov, 2024), written from its definition.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from bench.ingest.metrics._deps import normalise_ws

#: a chunk ending like this ends a sentence (closing quotes / brackets may follow the mark)
_SENTENCE_END = re.compile(r"""[.!?…:;]["'”’)\]]*$""")
_TOKEN = re.compile(r"\S+")
#: characters of a block's end compared with a chunk's end ("the chunk ends a block")
_TAIL = 30


def chunk_cuts(chunks: Sequence[str], truth: Mapping[str, Any]) -> dict[str, float]:
    """Sentence and table cuts of one document's chunks (in document order).

    A boundary (the end of every chunk but the last) cuts a sentence when the chunk neither
    ends with sentence-final punctuation nor ends a truth block (its last characters equal a
    block's last characters: headings and table rows end without a full stop). A truth table
    is ``cut`` when every non-empty cell text is in some chunk but no one chunk has them all,
    ``lost`` when some cell text is in no chunk."""
    norm = [normalise_ws(c) for c in chunks]
    tails = {normalise_ws(str(b["text"]))[-_TAIL:] for b in truth.get("blocks", [])}
    tails.discard("")
    boundaries = max(0, len(norm) - 1)
    cut = 0
    for c in norm[:-1]:
        if not c or _SENTENCE_END.search(c):
            continue
        if any(c.endswith(t) for t in tails):
            continue
        cut += 1
    out = {"boundaries": float(boundaries), "sentence_cuts": float(cut),
           "sentence_cut_rate": cut / boundaries if boundaries else 0.0}
    tables = truth.get("tables", [])
    if tables:
        t_cut = t_lost = 0
        for t in tables:
            cells = {normalise_ws(c) for row in t["cells"] for c in row if normalise_ws(c)}
            if not cells:
                continue
            if any(not any(cell in c for c in norm) for cell in cells):
                t_lost += 1
            elif not any(all(cell in c for cell in cells) for c in norm):
                t_cut += 1
        out |= {"tables_true": float(len(tables)), "tables_cut": float(t_cut),
                "tables_lost": float(t_lost), "table_cut_rate": t_cut / len(tables)}
    return out


def locate_spans(text: str, pieces: Sequence[str]) -> list[tuple[int, int] | None]:
    """Character range of each piece in ``text`` (pieces in document order, overlap allowed:
    searched from the previous piece's start, then anywhere), None where absent."""
    out: list[tuple[int, int] | None] = []
    cursor = 0
    for p in pieces:
        i = text.find(p, cursor) if p else -1
        if i < 0 and p:
            i = text.find(p)
        if i < 0:
            out.append(None)
            continue
        out.append((i, i + len(p)))
        cursor = i
    return out


def _token_ids(text: str, spans: Sequence[tuple[int, int]]) -> set[int]:
    ids: set[int] = set()
    for k, m in enumerate(_TOKEN.finditer(text)):
        if any(m.start() < end and start < m.end() for start, end in spans):
            ids.add(k)
    return ids


def token_iou(text: str, retrieved: Sequence[tuple[int, int]],
              relevant: Sequence[tuple[int, int]]) -> dict[str, float]:
    """Token IoU, precision and recall of the retrieved character ranges of ``text`` against the
    relevant ones (a whitespace token counts when any of its characters is in a range)."""
    r, e = _token_ids(text, retrieved), _token_ids(text, relevant)
    union = r | e
    inter = len(r & e)
    return {"token_iou": inter / len(union) if union else 0.0,
            "token_precision": inter / len(r) if r else 0.0,
            "token_recall": inter / len(e) if e else 0.0}


def metadata_accuracy(title: str | None, date: str | None,
                      truth: Mapping[str, Any]) -> dict[str, float]:
    """``title_match`` (case- and whitespace-insensitive equality) and, when the truth has a
    date, ``date_match`` (exact string equality; dates are ISO 8601 in truth files)."""
    out = {"title_match": float(normalise_ws(title or "").casefold()
                                == normalise_ws(str(truth.get("title", ""))).casefold())}
    if truth.get("date"):
        out["date_match"] = float((date or "").strip() == str(truth["date"]))
    return out
