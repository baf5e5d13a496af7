"""Extraction fidelity: CER / WER against the truth text, length ratio, empty pages.

Both texts are whitespace-normalised first (a line break where the page had one is not an
error). CER and WER are jiwer's (``jiwer.cer`` / ``jiwer.wer``: edit operations over the
reference length); they are not capped at 1 (an extraction full of extra text scores > 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.ingest.metrics._deps import need, normalise_ws

#: a page with fewer non-space characters than this (but some) is "near-empty"
NEAR_EMPTY_CHARS = 20


def text_fidelity(extracted: str, truth: Mapping[str, Any]) -> dict[str, float]:
    """``cer``, ``wer`` (jiwer) and ``length_ratio`` (extracted / expected characters) of one
    document. An empty truth text makes all three undefined: ValueError (a truth-file error)."""
    ref = normalise_ws(str(truth["text"]))
    hyp = normalise_ws(extracted)
    if not ref:
        raise ValueError(f"truth of {truth.get('doc_id', '?')!r} has an empty text")
    if not hyp:  # jiwer rejects an empty hypothesis string: everything was deleted
        return {"cer": 1.0, "wer": 1.0, "length_ratio": 0.0}
    jiwer = need("jiwer", "jiwer", "the ingestion metric text_fidelity")
    return {"cer": float(jiwer.cer(ref, hyp)), "wer": float(jiwer.wer(ref, hyp)),
            "length_ratio": len(hyp) / len(ref)}


def page_emptiness(page_texts: Sequence[str], *,
                   near_empty_chars: int = NEAR_EMPTY_CHARS) -> dict[str, float]:
    """Empty pages (no non-space character) and near-empty ones (1 to ``near_empty_chars`` - 1
    non-space characters) among a document's extracted pages: counts and rates."""
    sizes = [len("".join(t.split())) for t in page_texts]
    n = len(sizes)
    empty = sum(1 for s in sizes if s == 0)
    near = sum(1 for s in sizes if 0 < s < near_empty_chars)
    return {"pages": float(n), "empty_pages": float(empty), "near_empty_pages": float(near),
            "empty_rate": empty / n if n else 0.0, "near_empty_rate": near / n if n else 0.0}
