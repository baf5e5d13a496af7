"""``python -m bench.calibrate LABELS VERDICTS``: judge agreement with human labels.

The calibration loop (``bench.judge.calibration``): VERDICTS is a run's
``judge_labelling.jsonl`` and LABELS its filled-in ``{"item_id", "human"}`` rows; per judge
metric and category, on the ``calibration`` split (``--split``): Cohen's kappa, false-approval
and false-rejection rates, weighted kappa and Spearman's rho for graded labels, each with a
bootstrap CI; ``--records DIR`` writes the calibration records release gates check. A labels
id that matches no verdict, a label that does not fit its rubric's score kind, a rubric
missing a score definition: one line naming the file, exit 2.

The older flat form compares labels as strings; both files are JSONL, one object per line:

- LABELS (human verdicts): ``query_id``, ``judge``, ``label``, ``category``;
- VERDICTS (the judge's): ``query_id``, ``judge``, ``label`` and optionally ``status``
  (default ``ok``; any other status — invalid, error, no_claims — is counted, not compared).
  :func:`verdict_rows` writes them from ``Verdict`` records.

Labels are compared as strings (``true``/``false`` for JSON booleans). Per judge, overall and
per category: n compared, raw agreement, Cohen's kappa (None when undefined: both raters used
one single label) and the confusion matrix (rows: human label, columns: judge label), plus the
human-labelled items without a usable verdict. A malformed line stops with ``file:line: what
is wrong`` and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.docs import GENERATION
from bench.errors import InputError
from bench.judge.base import OK, Verdict
from bench.judge.calibration import (
    CALIBRATION_SPLIT,
    Calibration,
    Stat,
    agreement_table,
    records_of,
    write_records,
)
from bench.judge.labelling import read_human, read_jsonl, read_labelling
from bench.metrics.cli import OneLineParser, format_table, run_cli


@dataclass(frozen=True)
class LabelRow:
    query_id: str
    judge: str
    label: str
    category: str  # "" in verdict files
    status: str
    line: int


def _label(value: object) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    return None


def read_rows(path: str | Path, *, human: bool) -> list[LabelRow]:
    """Rows of a labels (``human``) or verdicts file; InputError names file:line."""
    rows: list[LabelRow] = []
    seen: dict[tuple[str, str], int] = {}
    for n, obj in read_jsonl(path):
        need = ("query_id", "judge", "label", "category") if human else ("query_id", "judge")
        for key in need:
            if key not in obj:
                raise InputError(path, n, f"missing field {key!r}")
        for key in ("query_id", "judge", "category", "status"):
            if key in obj and not isinstance(obj[key], str):
                raise InputError(path, n, f"field {key!r} must be a string")
        status = obj.get("status", OK)
        label = _label(obj.get("label"))
        if label is None and (human or status == OK):
            raise InputError(path, n, "field 'label' must be a string, integer or boolean")
        ident = (str(obj["query_id"]), str(obj["judge"]))
        if ident in seen:
            raise InputError(path, n, f"query {ident[0]!r} judge {ident[1]!r} repeats "
                                      f"line {seen[ident]}")
        seen[ident] = n
        rows.append(LabelRow(obj["query_id"], obj["judge"], label or "",
                             obj.get("category", ""), status, n))
    if not rows:
        raise InputError(path, 0, "no rows")
    return rows


@dataclass(frozen=True)
class Agreement:
    """Agreement of one judge with human labels over one scope (``all`` or a category)."""

    judge: str
    scope: str
    n: int  # pairs compared (human label and an ok verdict)
    n_no_verdict: int  # labelled, but no verdict row
    n_not_ok: int  # labelled, verdict not ok (invalid, error, no_claims...)
    agreement: float | None
    kappa: float | None
    labels: tuple[str, ...]
    confusion: tuple[tuple[int, ...], ...]  # [human][judge]


def cohen_kappa(confusion: Sequence[Sequence[int]]) -> float | None:
    """Cohen's kappa of a square confusion matrix: (p_o - p_e) / (1 - p_e); None when there
    is no pair or p_e = 1 (both raters used one single label)."""
    n = sum(map(sum, confusion))
    if n == 0:
        return None
    k = len(confusion)
    p_o = sum(confusion[i][i] for i in range(k)) / n
    rows = [sum(confusion[i]) / n for i in range(k)]
    cols = [sum(confusion[i][j] for i in range(k)) / n for j in range(k)]
    p_e = sum(r * c for r, c in zip(rows, cols, strict=True))
    if p_e >= 1.0:
        return None
    return (p_o - p_e) / (1 - p_e)


def _agreement(judge: str, scope: str, pairs: list[tuple[LabelRow, LabelRow | None]]
               ) -> Agreement:
    compared = [(h, v) for h, v in pairs if v is not None and v.status == OK]
    labels = tuple(sorted({h.label for h, _ in compared} | {v.label for _, v in compared}))
    index = {lab: i for i, lab in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for h, v in compared:
        matrix[index[h.label]][index[v.label]] += 1
    n = len(compared)
    agree = sum(matrix[i][i] for i in range(len(labels)))
    return Agreement(
        judge=judge, scope=scope, n=n,
        n_no_verdict=sum(v is None for _, v in pairs),
        n_not_ok=sum(v is not None and v.status != OK for _, v in pairs),
        agreement=agree / n if n else None, kappa=cohen_kappa(matrix), labels=labels,
        confusion=tuple(tuple(r) for r in matrix),
    )


def calibrate(labels: Sequence[LabelRow], verdicts: Sequence[LabelRow]) -> list[Agreement]:
    """Per judge: the ``all`` scope, then each category (sorted)."""
    by_key = {(v.query_id, v.judge): v for v in verdicts}
    out = []
    for judge in sorted({h.judge for h in labels}):
        pairs = [(h, by_key.get((h.query_id, h.judge))) for h in labels if h.judge == judge]
        out.append(_agreement(judge, "all", pairs))
        for cat in sorted({h.category for h, _ in pairs}):
            out.append(_agreement(judge, f"category:{cat}",
                                  [(h, v) for h, v in pairs if h.category == cat]))
    return out


def verdict_rows(verdicts: Iterable[Verdict], metric: str, *, threshold: float = 0.5,
                 labels: tuple[str, str] = ("true", "false")) -> list[dict[str, object]]:
    """Verdict-file rows: ``labels[0]`` when the verdict's ``metric`` >= ``threshold``, else
    ``labels[1]``; verdicts that are not ok (or lack the metric) keep their status."""
    rows: list[dict[str, object]] = []
    for v in verdicts:
        score = v.score(metric) if v.status == OK else None
        status = v.status if v.status != OK or score is not None else "not_applicable"
        label = None if score is None else labels[0] if score >= threshold else labels[1]
        rows.append({"query_id": v.query_id, "judge": v.judge, "label": label,
                     "status": status})
    return rows


def _parser() -> OneLineParser:
    p = OneLineParser(prog="python -m bench.calibrate", description=__doc__.splitlines()[0],
                      epilog=GENERATION.help_line())
    p.add_argument("labels", type=Path, help="human labels JSONL (query_id, judge, label, "
                                             "category)")
    p.add_argument("verdicts", type=Path, help="judge verdicts JSONL (query_id, judge, label, "
                                               "[status])")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--split", default=CALIBRATION_SPLIT,
                   help="the split agreement is measured on (labelling files only)")
    p.add_argument("--records", type=Path, default=None,
                   help="write one calibration record per judge here (e.g. "
                        "conf/judge/calibration), for release gates")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    p.add_argument("--confidence", type=float, default=0.95, help="CI level")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    return p


def _is_labelling(path: Path) -> bool:
    # a file this cannot read is not taken for a labelling file: the reader of the other
    # form then names its bad line (invalid UTF-8 included)
    try:
        with open(path, encoding="utf-8-sig") as f:
            for line in f:
                if line.strip():
                    obj = json.loads(line)
                    return isinstance(obj, dict) and "item_id" in obj
    except (UnicodeDecodeError, ValueError, OSError):
        return False
    return False


def _stat(s: Stat | None) -> str:
    if s is None or s.value is None:
        return "-"
    if s.ci_low is None or s.ci_high is None:
        return f"{s.value:.3f}"
    return f"{s.value:.3f} [{s.ci_low:.3f}, {s.ci_high:.3f}]"


def calibration_table(cal: Calibration, confidence: float) -> str:
    """The agreement table: one row per judge metric and scope, statistics with CIs."""
    head = (f"split {cal.split}: {cal.n_labelled - cal.n_other_split} labelled items compared "
            f"({cal.n_other_split} labelled items on other splits left out); "
            f"{100 * confidence:g} % percentile bootstrap CIs over items")
    return head + "\n" + format_table(
        ["judge", "metric", "scope", "n", "not_ok", "agreement", "kappa", "false_approval",
         "false_rejection", "weighted_kappa", "spearman"],
        [[a.judge, a.metric, a.scope, a.n, a.n_unusable, a.agreement, _stat(a.kappa),
          _stat(a.false_approval), _stat(a.false_rejection), _stat(a.weighted_kappa),
          _stat(a.spearman)] for a in cal.results])


def _loop(args: argparse.Namespace) -> int:
    items = read_labelling(args.verdicts)
    human = read_human(args.labels)
    if args.resamples < 1:
        raise InputError(args.labels, 0, "--resamples must be >= 1")
    cal = agreement_table(items, human, labels_path=args.labels, split=args.split,
                          resamples=args.resamples, seed=args.seed,
                          confidence=args.confidence)
    if args.format == "json":
        print(json.dumps([asdict(a) for a in cal.results], indent=2))
    else:
        print(calibration_table(cal, args.confidence))
    if args.records is not None:
        for path in write_records(records_of(cal, args.labels, args.confidence), args.records):
            print(f"wrote {path}", file=sys.stderr)
    return 0


def _table(results: Sequence[Agreement]) -> str:
    parts = [format_table(
        ["judge", "scope", "n", "agreement", "kappa", "no_verdict", "not_ok"],
        [[a.judge, a.scope, a.n, a.agreement, a.kappa, a.n_no_verdict, a.n_not_ok]
         for a in results])]
    for a in results:
        if a.labels:
            parts.append(f"{a.judge} {a.scope}: rows human label, columns judge label\n"
                         + format_table(["human \\ judge", *a.labels],
                                        [[lab, *row] for lab, row in zip(a.labels, a.confusion,
                                                                         strict=True)]))
    return "\n\n".join(parts)


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    if _is_labelling(args.verdicts):
        return _loop(args)
    labels = read_rows(args.labels, human=True)
    verdicts = read_rows(args.verdicts, human=False)
    results = calibrate(labels, verdicts)
    if all(a.n == 0 for a in results if a.scope == "all"):
        raise InputError(args.verdicts, 0, "no labelled (query_id, judge) has an ok verdict")
    if args.format == "json":
        print(json.dumps([a.__dict__ for a in results], indent=2))
    else:
        print(_table(results))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (0, or 2 on any input or usage error)."""
    return run_cli(_main, argv)


if __name__ == "__main__":
    raise SystemExit(main())
