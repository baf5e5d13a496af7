"""Boilerplate removal: precision and recall of removed headers, footers, navigation and page
numbers, counted over occurrences.

Positives are the truth's boilerplate spans (one per page it appears on); the extraction removed
``max(0, m - k)`` of the ``m`` spans with a given text when it still has ``k`` occurrences of
that text (whitespace-normalised, case-sensitive substring count). Negatives are the truth's body
blocks: a body block counts as wrongly removed when the reading-order locator
(``order.locate_blocks``: rapidfuzz alignment of its opening, score >= 80) cannot find it.
Precision = removed boilerplate / (removed boilerplate + removed body blocks); recall =
removed boilerplate / boilerplate spans. The arithmetic is ours: no library scores boilerplate
removal this way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from bench.ingest.metrics._deps import normalise_ws
from bench.ingest.metrics.order import locate_blocks


def boilerplate_pr(extracted: str, truth: Mapping[str, Any]) -> dict[str, float]:
    """``boilerplate_precision``, ``boilerplate_recall``, ``boilerplate_true``,
    ``boilerplate_removed`` and ``body_removed`` of one document; ``{}`` when the truth has no
    boilerplate span (nothing to remove). Precision is 1.0 when nothing at all was removed
    (no removal is wrong) — recall then says it is 0."""
    spans = [normalise_ws(str(b["text"])) for b in truth.get("boilerplate", [])]
    spans = [s for s in spans if s]
    if not spans:
        return {}
    text = normalise_ws(extracted)
    removed = 0
    for span, m in Counter(spans).items():
        removed += max(0, m - text.count(span))
    blocks = [str(b["text"]) for b in truth.get("blocks", [])]
    body_removed = sum(1 for s in locate_blocks(extracted, blocks) if s is None)
    denom = removed + body_removed
    return {"boilerplate_precision": removed / denom if denom else 1.0,
            "boilerplate_recall": removed / len(spans),
            "boilerplate_true": float(len(spans)), "boilerplate_removed": float(removed),
            "body_removed": float(body_removed)}
