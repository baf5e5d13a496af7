"""The PII scrubber on the ingestion benchmark's truth text: how well it finds the planted PII
and which gold answers it destroys.

``python -m bench.ingest.pii_figures DIR [--source squad2] [--out FILE.json]`` reads a built
benchmark folder (docs/ingestion-benchmark.md): every truth file of the selected source(s)
goes through ``bench.ingest.metrics.scrub_pii`` (presidio-analyzer's pattern recognisers, no
NLP engine offline), and the spans are scored against the truth's planted PII
(``pii_scores``'s span matching: a gold span — each occurrence of a planted string — is found
when a detection overlaps it, a detection is right when it overlaps a gold span):

- per entity type: planted occurrences, found, recall; detections labelled with that type,
  right, precision (presidio labels each detection with its recogniser's entity);
- overall: micro precision, recall and F-beta (beta 2.5) over every span of the documents,
  each with a bootstrap 95 % CI over documents (1000 resamples, seed 0);
- destroyed answers: for each query with reference answers whose gold document is scrubbed, a
  reference is destroyed when it occurs in the truth text and every occurrence overlaps a
  redaction (``by`` names the entity types of those redactions); a query's answer is
  destroyed when every reference it had in the text is.

The text scored is the truth text (what a perfect parser gives: the oracle), so the figures
are the scrubber's alone, not a parser's.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.ingest.metrics.pii import MIN_SCORE, occurrences
from bench.report.fmt import num

#: the bootstrap of the overall figures (resamples, seed)
RESAMPLES = 1000
SEED = 0


@dataclass(frozen=True)
class TypeFigures:
    """One entity type: gold occurrences and how many a detection found; detections
    labelled with this type and how many overlap some gold span (of any type)."""

    entity: str
    gold: int
    found: int
    detected: int
    right: int

    @property
    def recall(self) -> float | None:
        return self.found / self.gold if self.gold else None

    @property
    def precision(self) -> float | None:
        return self.right / self.detected if self.detected else None


@dataclass(frozen=True)
class Destroyed:
    """A query whose gold answer the scrubbing destroyed."""

    query_id: str
    doc_id: str
    answer: str
    by: tuple[str, ...]


@dataclass(frozen=True)
class PiiFigures:
    documents: int
    documents_with_pii: int
    precision: float
    recall: float
    fbeta: float
    #: bootstrap 95 % CIs over documents: (low, high)
    precision_ci: tuple[float, float]
    recall_ci: tuple[float, float]
    fbeta_ci: tuple[float, float]
    types: tuple[TypeFigures, ...]
    #: queries with reference answers whose gold document was scrubbed
    queries: int
    #: of them, queries with some reference in the truth text
    answers_in_text: int
    references_destroyed: int
    destroyed: tuple[Destroyed, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["types"] = [asdict(t) | {"recall": t.recall, "precision": t.precision}
                        for t in self.types]
        return out


def _overlaps(a: int, b: int, c: int, d: int) -> bool:
    return a < d and c < b


def _doc_counts(text: str, spans: Sequence[Any], truth: Mapping[str, Any]
                ) -> dict[str, dict[str, int]]:
    """Per entity type: gold, found, detected, right (type "" holds the totals)."""
    gold = [(a, b, str(p["type"])) for p in truth.get("pii", [])
            for a, b in occurrences(text, str(p["text"]))]
    out: dict[str, dict[str, int]] = {}

    def bump(kind: str, key: str) -> None:
        for k in (kind, ""):
            out.setdefault(k, {"gold": 0, "found": 0, "detected": 0, "right": 0})[key] += 1

    for a, b, kind in gold:
        bump(kind, "gold")
        if any(_overlaps(s.start, s.end, a, b) for s in spans):
            bump(kind, "found")
    for s in spans:
        bump(s.entity, "detected")
        if any(_overlaps(s.start, s.end, a, b) for a, b, _ in gold):
            bump(s.entity, "right")
    out.setdefault("", {"gold": 0, "found": 0, "detected": 0, "right": 0})
    return out


def _micro(rows: Sequence[Mapping[str, int]]) -> tuple[float, float, float]:
    from bench.ingest.metrics.pii import fbeta

    det = sum(r["detected"] for r in rows)
    gold = sum(r["gold"] for r in rows)
    p = sum(r["right"] for r in rows) / det if det else (1.0 if not gold else 0.0)
    r = sum(r["found"] for r in rows) / gold if gold else 1.0
    return p, r, fbeta(p, r)


def destroyed_references(text: str, spans: Sequence[Any], answer: str
                         ) -> tuple[bool, tuple[str, ...]] | None:
    """None when ``answer`` is not in ``text`` (case-insensitive); else (every occurrence
    overlaps a redaction, the entity types of the redactions it overlaps)."""
    occ = occurrences(text.casefold(), answer.strip().casefold()) if answer.strip() else []
    if not occ:
        return None
    hit = [[s for s in spans if _overlaps(s.start, s.end, a, b)] for a, b in occ]
    gone = all(hit)
    return gone, tuple(sorted({s.entity for h in hit for s in h})) if gone else ()


def pii_figures(folder: Path, *, sources: Sequence[str] | None = None,
                min_score: float = MIN_SCORE) -> PiiFigures:
    """The figures of the module docstring over ``folder``'s truth files (of ``sources``:
    the manifest's ``source`` values; None: all), detections scoring >= ``min_score``."""
    from bench.data.jsonl import iter_jsonl
    from bench.ingest.metrics import scrub_pii

    docs: dict[str, tuple[str, list[Any]]] = {}
    rows: list[dict[str, dict[str, int]]] = []
    for _, m in iter_jsonl(folder / "manifest.jsonl"):
        if m.get("truth") is None or (sources is not None and m.get("source") not in sources):
            continue
        truth = json.loads((folder / m["truth"]).read_text(encoding="utf-8"))
        text = truth["text"]
        _, spans = scrub_pii(text, min_score=min_score)
        docs[str(m["doc_id"])] = (text, spans)
        rows.append(_doc_counts(text, spans, truth))
    types = sorted({k for r in rows for k in r if k})
    figures = [TypeFigures(t, *(sum(r.get(t, {}).get(k, 0) for r in rows)
                                for k in ("gold", "found", "detected", "right")))
               for t in types]
    totals = [r[""] for r in rows]
    p, r, f = _micro(totals)
    rng = np.random.default_rng(SEED)
    boot = np.asarray([_micro([totals[i] for i in rng.integers(0, len(totals), len(totals))])
                       for _ in range(RESAMPLES)]) if totals else np.zeros((1, 3))
    lo, hi = np.percentile(boot, [2.5, 97.5], axis=0)
    queries = answered = refs_gone = 0
    destroyed: list[Destroyed] = []
    for _, q in iter_jsonl(folder / "queries.jsonl"):
        answers = [str(a) for a in q.get("expected_answers") or []]
        gold = [d["id"] if isinstance(d, dict) else d for d in q.get("relevant_document_ids", [])]
        scrubbed = [g for g in gold if g in docs]
        if not answers or not scrubbed:
            continue
        queries += 1
        verdicts = [v for g in scrubbed for a in answers
                    if (v := destroyed_references(docs[g][0], docs[g][1], a)) is not None]
        if not verdicts:
            continue
        answered += 1
        refs_gone += sum(1 for gone, _ in verdicts if gone)
        if all(gone for gone, _ in verdicts):
            by = tuple(sorted({e for _, es in verdicts for e in es}))
            destroyed.append(Destroyed(str(q["query_id"]), scrubbed[0], answers[0], by))
    return PiiFigures(len(rows), sum(1 for r in rows if r[""]["gold"]), p, r, f,
                      (float(lo[0]), float(hi[0])), (float(lo[1]), float(hi[1])),
                      (float(lo[2]), float(hi[2])), tuple(figures), queries, answered,
                      refs_gone, tuple(destroyed))


def render(fig: PiiFigures) -> list[str]:
    lines = [f"PII scrubber on the truth text: {fig.documents} documents, "
             f"{fig.documents_with_pii} with planted PII. Micro over spans, bootstrap 95 % CI "
             "over documents:", "",
             "| precision | recall | F2.5 |", "|---|---|---|",
             f"| {fig.precision:.3f} [{fig.precision_ci[0]:.3f}, {fig.precision_ci[1]:.3f}] | "
             f"{fig.recall:.3f} [{fig.recall_ci[0]:.3f}, {fig.recall_ci[1]:.3f}] | "
             f"{fig.fbeta:.3f} [{fig.fbeta_ci[0]:.3f}, {fig.fbeta_ci[1]:.3f}] |", "",
             "| entity type | planted occurrences | found | recall | detections | right | "
             "precision |", "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {t.entity} | {t.gold} | {t.found} | {num(t.recall, 3)} | {t.detected} | "
              f"{t.right} | {num(t.precision, 3)} |" for t in fig.types]
    lines += ["", f"Gold answers: {fig.queries} queries with reference answers on these "
              f"documents, {fig.answers_in_text} with a reference in the truth text; "
              f"{len(fig.destroyed)} answers destroyed (every reference occurrence under a "
              f"redaction), {fig.references_destroyed} reference strings destroyed.", ""]
    if fig.destroyed:
        lines += ["| query | gold doc | answer | redacted as |", "|---|---|---|---|"]
        lines += [f"| {d.query_id} | {d.doc_id} | {d.answer} | {', '.join(d.by)} |"
                  for d in fig.destroyed]
    return lines


def _main(argv: Sequence[str] | None) -> int:
    from bench.docs import INGESTION_BENCHMARK
    from bench.metrics.cli import OneLineParser

    ap = OneLineParser(prog="python -m bench.ingest.pii_figures",
                       description="the PII scrubber's figures on a built ingestion "
                                   "benchmark (its truth text)",
                       epilog=INGESTION_BENCHMARK.help_line())
    ap.add_argument("folder", type=Path)
    ap.add_argument("--source", action="append", default=None,
                    help="only documents of this manifest source (repeatable; default all)")
    ap.add_argument("--min-score", type=float, default=MIN_SCORE,
                    help=f"detections scoring below it are dropped (default {MIN_SCORE}; "
                         "presidio's own default is 0)")
    ap.add_argument("--out", type=Path, default=None, help="also write the figures as JSON")
    a = ap.parse_args(argv)
    for need in ("manifest.jsonl", "queries.jsonl"):
        if not (a.folder / need).is_file():
            print(f"bench: error: {a.folder / need}: no such file (a built ingestion "
                  "benchmark: python -m bench.ingest.build)", file=sys.stderr)
            return 2
    if not 0.0 <= a.min_score <= 1.0:
        print(f"bench: error: --min-score must be between 0 and 1, got {a.min_score}",
              file=sys.stderr)
        return 2
    fig = pii_figures(a.folder, sources=a.source, min_score=a.min_score)
    print("\n".join(render(fig)))
    if a.out is not None:
        a.out.write_text(json.dumps(fig.to_json(), indent=1), encoding="utf-8")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: exit 0, or 2 on a bad argument (one line)."""
    from bench.metrics.cli import run_cli

    return run_cli(_main, argv)


if __name__ == "__main__":
    raise SystemExit(main())
