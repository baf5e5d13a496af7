"""Per-document ingestion metrics of a parse against its truth, through
``bench.ingest.metrics`` (the ingestion benchmark's metric functions, a package of its own).

Where that package is not installed, :func:`available` is False, the metric columns stay
null and the report says so in one line; nothing is computed here by other means.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from bench.parsing.base import ParsedDocument

#: the metric columns of parsing.parquet (float, null where not computed / not applicable)
METRIC_COLUMNS = ("cer", "wer", "length_ratio", "empty_pages", "near_empty_pages",
                  "order_distance", "blocks_found", "teds", "teds_struct", "cell_accuracy",
                  "boilerplate_precision", "boilerplate_recall", "nfkc_disagree_rate",
                  "invisible_rate", "mixed_script_rate", "language_match")


@cache
def _module() -> ModuleType | None:
    try:
        return importlib.import_module("bench.ingest.metrics")
    except ModuleNotFoundError as exc:
        if exc.name is not None and "bench.ingest".startswith(exc.name):
            return None  # the package is absent; a missing import INSIDE it is its error
        raise


def available() -> bool:
    return _module() is not None


def read_truth(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    return dict(json.loads(path.read_text(encoding="utf-8")))


def document_metrics(doc: ParsedDocument, truth: Mapping[str, Any]) -> dict[str, float]:
    """The metric columns this document has: a document that did not parse is scored on
    the empty text (it lost everything), not left out."""
    m = _module()
    if m is None:
        return {}
    text = doc.text if doc.status == "ok" else ""
    out: dict[str, Any] = {}
    out |= m.text_fidelity(text, truth)
    if doc.pages > 1 or any(b.page > 0 for b in doc.blocks):
        pages = [""] * max(doc.pages, 1)
        for b in doc.blocks:
            if 1 <= b.page <= len(pages):
                pages[b.page - 1] += b.text
        out |= m.page_emptiness(pages)
    out |= m.reading_order(text, truth)
    out |= m.boilerplate_pr(text, truth)
    out |= m.table_scores([list(map(list, t.cells)) for t in doc.tables], truth)
    out |= m.unicode_counts(text)
    out |= m.language_match(text, truth) if text.strip() else {}
    return {k: float(out[k]) for k in METRIC_COLUMNS if isinstance(out.get(k), int | float)}
