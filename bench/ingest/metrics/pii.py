"""PII: detection / scrubbing precision, recall and F-beta on planted PII, and the gold answers
a scrubber destroyed.

The detector is presidio-analyzer's pattern recognisers (e-mail, phone via ``phonenumbers``,
URL, IP, credit card, US SSN, IBAN, date), run one by one on the text without presidio's
NLP engine: its default engine loads a spaCy model, which cannot be downloaded offline, so
PERSON (an NER entity) is not detected — its recall is 0 by construction, and the figures say
so per type. tldextract (the e-mail recogniser's domain check) is pointed at the public-suffix
snapshot inside its wheel instead of fetching the list.

Scoring is ours, span-based and type-agnostic (a scrubber removes a span whatever it calls
it): the gold spans are every occurrence of each planted PII string in the text; a gold span is
found when a detected span overlaps it, a detected span is correct when it overlaps a gold
span. F-beta uses beta = 2.5 (presidio-evaluator's default, recall-weighted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from bench.ingest.metrics._deps import need

BETA = 2.5
#: presidio recognisers used (class names in presidio_analyzer.predefined_recognizers)
RECOGNIZERS = ("EmailRecognizer", "PhoneRecognizer", "UrlRecognizer", "IpRecognizer",
               "CreditCardRecognizer", "UsSsnRecognizer", "IbanRecognizer", "DateRecognizer")
#: presidio's own default score threshold is 0; phone matches score 0.4 without context words
MIN_SCORE = 0.3


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    entity: str
    score: float


@lru_cache(maxsize=1)
def _recognizers() -> tuple[Any, ...]:
    tld = need("tldextract", "tldextract", "the PII scrubber")
    tld.tldextract.TLD_EXTRACTOR.suffix_list_urls = ()  # the bundled snapshot, no fetch
    pr = need("presidio_analyzer.predefined_recognizers", "presidio-analyzer",
              "the PII scrubber")
    return tuple(getattr(pr, name)() for name in RECOGNIZERS)


def detect_pii(text: str, *, min_score: float = MIN_SCORE) -> list[Span]:
    """PII spans of ``text`` (overlapping detections merged into one span, the entity of the
    highest-scoring one), in text order."""
    found: list[Span] = []
    for r in _recognizers():
        for res in r.analyze(text, r.supported_entities, None) or ():
            if res.score >= min_score:
                found.append(Span(res.start, res.end, res.entity_type, float(res.score)))
    found.sort(key=lambda s: (s.start, -s.end))
    merged: list[Span] = []
    for s in found:
        if merged and s.start < merged[-1].end:
            m = merged[-1]
            top = m if m.score >= s.score else s
            merged[-1] = Span(m.start, max(m.end, s.end), top.entity, top.score)
        else:
            merged.append(s)
    return merged


def scrub_pii(text: str, *, min_score: float = MIN_SCORE) -> tuple[str, list[Span]]:
    """``text`` with each detected span replaced by ``<ENTITY>``, and the spans."""
    spans = detect_pii(text, min_score=min_score)
    out, cursor = [], 0
    for s in spans:
        out += [text[cursor:s.start], f"<{s.entity}>"]
        cursor = s.end
    out.append(text[cursor:])
    return "".join(out), spans


def occurrences(text: str, needle: str) -> list[tuple[int, int]]:
    spans, i = [], text.find(needle)
    while needle and i >= 0:
        spans.append((i, i + len(needle)))
        i = text.find(needle, i + 1)
    return spans


def fbeta(precision: float, recall: float, beta: float = BETA) -> float:
    b2 = beta * beta
    denom = b2 * precision + recall
    return (1 + b2) * precision * recall / denom if denom else 0.0


def pii_scores(text: str, detected: Sequence[Span], truth: Mapping[str, Any], *,
               beta: float = BETA) -> dict[str, float]:
    """``pii_precision``, ``pii_recall``, ``pii_fbeta``, counts, and ``recall_<TYPE>`` per
    planted type, for the spans ``detected`` in ``text`` (a parser's output); planted PII the
    parser lost is not in ``text`` and counts in neither (``pii_planted`` vs ``pii_in_text``).
    Precision is over detections, so it is defined (1.0 when nothing was detected and nothing
    was planted; 0.0 when something was detected on a document without planted PII)."""
    gold: list[tuple[int, int, str]] = []
    planted = truth.get("pii", [])
    for item in planted:
        gold += [(a, b, str(item["type"])) for a, b in occurrences(text, str(item["text"]))]

    def overlaps(a: int, b: int, c: int, d: int) -> bool:
        return a < d and c < b

    tp_det = sum(1 for s in detected if any(overlaps(s.start, s.end, a, b) for a, b, _ in gold))
    hit = [any(overlaps(s.start, s.end, a, b) for s in detected) for a, b, _ in gold]
    precision = tp_det / len(detected) if detected else (1.0 if not gold else 0.0)
    recall = sum(hit) / len(gold) if gold else 1.0
    out = {"pii_planted": float(len(planted)), "pii_in_text": float(len(gold)),
           "pii_detected": float(len(detected)), "pii_precision": precision,
           "pii_recall": recall, "pii_fbeta": fbeta(precision, recall, beta)}
    for kind in sorted({t for _, _, t in gold}):
        ks = [h for h, (_, _, t) in zip(hit, gold, strict=True) if t == kind]
        out[f"recall_{kind}"] = sum(ks) / len(ks)
    return out


def destroyed_answers(text: str, scrubbed: str, answers: Sequence[str]) -> int:
    """Gold answers present in ``text`` (case-insensitive) that the scrubbed text lost."""
    t, s = text.casefold(), scrubbed.casefold()
    return sum(1 for a in answers if a.strip() and a.casefold() in t and a.casefold() not in s)
