"""Reading order: the order in which the extraction has the truth's body blocks.

Each truth block is located in the extracted text (whitespace-normalised) by rapidfuzz's
``partial_ratio_alignment`` (the best-matching window, on the block's first ``anchor_chars``
characters); a block whose best window scores under ``min_score`` is not found. Blocks are
looked for after the previous block's match first, then anywhere: a text that occurs twice
(a heading repeated in a paragraph, two identical short blocks) is matched in order, so an
extraction identical to the truth scores 0. The found
blocks, sorted by where the extraction has them, give a permutation of the truth order, and
``order_distance`` is the Levenshtein distance between that sequence and the truth sequence
(rapidfuzz, over block indices) divided by the number of found blocks: 0 for the right order,
up to 1. A two-column page read across the columns scores both low ``blocks_found`` (the
blocks are interleaved line by line) and a high distance.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.ingest.metrics._deps import need, normalise_ws

#: characters of a block used to locate it (long blocks: their start is enough)
ANCHOR_CHARS = 160
#: rapidfuzz similarity (0-100) under which a block counts as not found
MIN_SCORE = 80.0


def locate_blocks(extracted: str, blocks: list[str], *, anchor_chars: int = ANCHOR_CHARS,
                  min_score: float = MIN_SCORE) -> list[int | None]:
    """The start offset in ``normalise_ws(extracted)`` of each block's best match, or None."""
    fuzz = need("rapidfuzz.fuzz", "rapidfuzz", "the ingestion metric reading_order")
    text = normalise_ws(extracted)
    out: list[int | None] = []
    cursor = 0  # where the previous block's match ended: a repeated text is taken in order
    for block in blocks:
        needle = normalise_ws(block)[:anchor_chars]
        if not needle or not text:
            out.append(None)
            continue
        at = _find(fuzz, text, needle, cursor, min_score)
        if at is None and cursor:
            at = _find(fuzz, text, needle, 0, min_score)  # earlier in the text: out of order
        out.append(at)
        if at is not None:
            cursor = at + len(needle)
    return out


def _find(fuzz: Any, text: str, needle: str, start: int, min_score: float) -> int | None:
    exact = text.find(needle, start)
    if exact >= 0:
        return exact
    al = fuzz.partial_ratio_alignment(needle, text[start:])
    return start + al.dest_start if al is not None and al.score >= min_score else None


def reading_order(extracted: str, truth: Mapping[str, Any], *,
                  anchor_chars: int = ANCHOR_CHARS,
                  min_score: float = MIN_SCORE) -> dict[str, float]:
    """``order_distance`` (normalised Levenshtein over the found blocks' order, 0 = right),
    ``blocks_found`` (share of truth blocks located) and ``blocks_true``; ``{}`` when the truth
    has fewer than two blocks (no order to get wrong)."""
    lev = need("rapidfuzz.distance.Levenshtein", "rapidfuzz", "the ingestion metric reading_order")
    blocks = [str(b["text"]) for b in truth.get("blocks", [])]
    if len(blocks) < 2:
        return {}
    starts = locate_blocks(extracted, blocks, anchor_chars=anchor_chars, min_score=min_score)
    found = [(s, i) for i, s in enumerate(starts) if s is not None]
    order = [i for _, i in sorted(found)]
    expected = sorted(order)
    dist = lev.distance(order, expected) / len(order) if order else 1.0
    return {"order_distance": float(dist), "blocks_found": len(found) / len(blocks),
            "blocks_true": float(len(blocks))}
