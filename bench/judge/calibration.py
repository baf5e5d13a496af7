"""The calibration loop: verdicts out for labelling, human labels in, agreement, records, gates.

1. Every run with an LLM judge writes ``judge_labelling.jsonl`` in its run dir
   (``bench.judge.labelling``, through the ``judge_files`` stage writer): one row per (config,
   query, judge metric) with the query, the answer, the context passages, the verdict's
   score on the rubric's scale, whether it approves (the rubric's ``approve_at``), its
   rationale, the rubric hash, the query's split and category, and ``human: null``.
2. Labellers fill in ``human`` — ``true`` / ``false`` (approve or reject), a number on the
   rubric's scale (a 1-5 rating, a share in [0, 1]) or ``"a"`` / ``"b"`` / ``"tie"`` for a
   pairwise preference — and give back a labels file of ``{"item_id", "human"}`` rows (the
   labelling file itself, filled in, is one).
3. ``python -m bench.calibrate LABELS LABELLING --records DIR`` (:func:`agreement_table`)
   compares them on the ``calibration`` split, per judge metric and category: Cohen's kappa
   on approve / reject, false-approval and false-rejection rates, and for graded labels
   quadratic-weighted kappa and Spearman's rho, each with a percentile bootstrap CI over the
   items; it writes one calibration record per judge (:class:`CalibrationRecord`).
4. A release gate on an LLM-judge metric is refused before any work unless a record of that
   judge, with the run's rubric hash and dataset, measured on the calibration split (not the
   split the run evaluates), clears ``judge.calibration.floor``
   (``bench.judge.gating``);
   ``judge.calibration.uncalibrated: allow`` lets it through, and the report says so at the
   top of its judge section.

Statistics come from scikit-learn (``cohen_kappa_score``, weights ``quadratic``) and SciPy
(``spearmanr``); the bootstrap and the rates are written here.
"""
from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import InputError
from bench.judge.agreement import Boot, Stat, approves, bootstrap, higher_is_better
from bench.judge.labelling import Item
from bench.judge.rubric import Rubric, ScoreDef, rubric

RECORD_SCHEMA = 1
#: the split calibration is measured on (bench.data.splits.SPLITS)
CALIBRATION_SPLIT = "calibration"
#: statistics a floor may name
STATISTICS = ("kappa", "weighted_kappa", "spearman")


def _kappa(a: Sequence[Any], b: Sequence[Any], weights: str | None = None) -> float | None:
    from sklearn.metrics import cohen_kappa_score

    if len(set(a) | set(b)) < 2:
        return None
    k = float(cohen_kappa_score(list(a), list(b), weights=weights))
    return None if math.isnan(k) else k


def _spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    from scipy.stats import spearmanr

    if len(set(a)) < 2 or len(set(b)) < 2:
        return None
    rho = float(spearmanr(a, b).statistic)
    return None if math.isnan(rho) else rho


def _rate(pairs: Sequence[tuple[bool, bool]], human: bool) -> float | None:
    """Judge disagrees with the human / items the human labelled ``human`` (False: the
    false-approval rate, True: the false-rejection rate)."""
    sel = [j for h, j in pairs if h == human]
    return sum(j != human for j in sel) / len(sel) if sel else None


@dataclass(frozen=True)
class MetricAgreement:
    """Agreement of one judge metric with human labels over one scope."""

    judge: str
    metric: str
    scope: str
    n: int
    n_unusable: int  # labelled, verdict not ok
    kappa: Stat
    false_approval: Stat
    false_rejection: Stat
    weighted_kappa: Stat | None  # graded labels only
    spearman: Stat | None  # numeric labels only
    agreement: float | None


def _human_approve(label: object, sd: ScoreDef, hib: bool) -> bool | str:
    if isinstance(label, bool):
        return label
    if isinstance(label, str):
        return label.lower()  # pairwise: a / b / tie
    return approves(sd, hib, float(label))  # type: ignore[arg-type]


def _judge_pref(score: float) -> str:
    return "a" if score > 0.5 else "b" if score < 0.5 else "tie"


def _agreement(judge: str, metric: str, scope: str, sd: ScoreDef,
               pairs: Sequence[tuple[Item, object]], boot: Boot) -> MetricAgreement:
    hib = higher_is_better(metric)
    ok = [(it, lab) for it, lab in pairs if it.status == "ok" and it.score is not None]
    if sd.kind == "preference":
        cats = [(str(_human_approve(lab, sd, hib)), _judge_pref(float(it.score or 0.0)))
                for it, lab in ok]
        kappa = bootstrap(lambda xs: _kappa([h for h, _ in xs], [j for _, j in xs]), cats,
                          boot)
        none = Stat(None, None, None, 0)
        agree = sum(h == j for h, j in cats) / len(cats) if cats else None
        return MetricAgreement(judge, metric, scope, len(ok), len(pairs) - len(ok), kappa,
                               none, none, None, None, agree)
    binary = [(bool(_human_approve(lab, sd, hib)), bool(it.approve)) for it, lab in ok]
    kappa = bootstrap(lambda xs: _kappa([h for h, _ in xs], [j for _, j in xs]), binary,
                      boot)
    fa = bootstrap(lambda xs: _rate(xs, False), binary, boot)
    fr = bootstrap(lambda xs: _rate(xs, True), binary, boot)
    numeric = [(float(lab), float(it.score or 0.0)) for it, lab in ok  # type: ignore[arg-type]
               if not isinstance(lab, bool | str)]
    wk = sp = None
    if numeric:
        sp = bootstrap(lambda xs: _spearman([h for h, _ in xs], [j for _, j in xs]), numeric,
                       boot)
        if sd.kind in ("graded", "binary"):
            wk = bootstrap(lambda xs: _kappa([round(h) for h, _ in xs],
                                             [round(j) for _, j in xs], "quadratic"),
                           numeric, boot)
    agree = sum(h == j for h, j in binary) / len(binary) if binary else None
    return MetricAgreement(judge, metric, scope, len(ok), len(pairs) - len(ok), kappa, fa, fr,
                           wk, sp, agree)


@dataclass(frozen=True)
class Calibration:
    """What ``bench.calibrate`` measured on one labels file."""

    split: str
    n_labelled: int
    n_other_split: int  # labelled items outside the calibration split (not compared)
    results: tuple[MetricAgreement, ...]
    items: tuple[Item, ...]


def agreement_table(items: Sequence[Item], human: Mapping[str, tuple[object, int]], *,
                    labels_path: str | Path, split: str = CALIBRATION_SPLIT,
                    resamples: int = 1000, seed: int = 0, confidence: float = 0.95,
                    rubric_of: Callable[[str], Rubric] = rubric) -> Calibration:
    """Per judge metric (``all``, then each category): agreement on ``split``. A labels file
    whose ids match no item, or whose items are all outside ``split``, is an InputError."""
    by_id = {it.item_id: it for it in items}
    unknown = [(iid, n) for iid, (_, n) in human.items() if iid not in by_id]
    if len(unknown) == len(human):
        iid, n = unknown[0]
        raise InputError(labels_path, n, f"item_id {iid!r}: no labelled id matches a verdict "
                                          f"of the labelling file")
    if unknown:
        iid, n = unknown[0]
        raise InputError(labels_path, n, f"item_id {iid!r} matches no verdict of the "
                                          f"labelling file ({len(unknown)} such rows)")
    joined = [(by_id[iid], lab) for iid, (lab, _) in human.items()]
    in_split = [(it, lab) for it, lab in joined if it.split == split]
    if not in_split:
        raise InputError(labels_path, 0, f"no labelled item is on the {split!r} split "
                                         f"(splits: {sorted({it.split for it, _ in joined})})")
    for it, lab in in_split:
        sd = rubric_of(it.scored_as).score(it.metric)
        if isinstance(lab, str) != (sd.kind == "preference"):
            raise InputError(labels_path, human[it.item_id][1],
                             f"item {it.item_id!r}: label {lab!r} does not fit a "
                             f"{sd.kind} score (true/false or a number; a/b/tie for a "
                             f"preference)")
    out = []
    for judge, metric in sorted({(it.judge, it.metric) for it, _ in in_split}):
        sd = rubric_of(next(it.scored_as for it, _ in in_split if it.judge == judge)
                       ).score(metric)
        mine = [(it, lab) for it, lab in in_split if (it.judge, it.metric) == (judge, metric)]
        boot = Boot(resamples, seed, confidence)
        out.append(_agreement(judge, metric, "all", sd, mine, boot))
        for cat in sorted({it.category for it, _ in mine}):
            out.append(_agreement(judge, metric, f"category:{cat}", sd,
                                  [(it, lab) for it, lab in mine if it.category == cat], boot))
    return Calibration(split, len(joined), len(joined) - len(in_split), tuple(out),
                       tuple(it for it, _ in in_split))


@dataclass(frozen=True)
class CalibrationRecord:
    """``<records>/<judge>.json``: what a judge's gates are checked against."""

    judge: str
    rubric: str
    dataset: str
    split: str
    labels_sha256: str
    confidence: float
    #: metric -> {statistic: [value, ci_low, ci_high], "n": n}
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    schema: int = RECORD_SCHEMA


def records_of(cal: Calibration, labels_path: str | Path, confidence: float
               ) -> list[CalibrationRecord]:
    """One record per judge of ``cal`` (``all`` scope). Items of one judge must share one
    rubric hash and one dataset (else InputError: the labels mix two rubrics)."""
    digest = hashlib.sha256(Path(labels_path).read_bytes()).hexdigest()
    out = []
    for judge in sorted({it.judge for it in cal.items}):
        mine = [it for it in cal.items if it.judge == judge]
        for what in ("rubric", "dataset"):
            seen = sorted({getattr(it, what) for it in mine})
            if len(seen) > 1:
                raise InputError(labels_path, 0, f"judge {judge}: labelled items of "
                                                 f"{len(seen)} {what}s {seen}: one per record")
        metrics: dict[str, dict[str, Any]] = {}
        for a in cal.results:
            if a.judge != judge or a.scope != "all":
                continue
            entry: dict[str, Any] = {"n": a.n}
            for name in ("kappa", "weighted_kappa", "spearman", "false_approval",
                         "false_rejection"):
                s = getattr(a, name)
                if s is not None and s.value is not None:
                    entry[name] = [s.value, s.ci_low, s.ci_high]
            metrics[a.metric] = entry
        out.append(CalibrationRecord(judge, mine[0].rubric, mine[0].dataset, cal.split, digest,
                                     confidence, metrics))
    return out


def write_records(records: Sequence[CalibrationRecord], directory: str | Path) -> list[Path]:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in records:
        p = directory / f"{r.judge}.json"
        p.write_text(json.dumps(asdict(r), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        paths.append(p)
    return paths


def read_record(path: Path) -> CalibrationRecord:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
        rec = CalibrationRecord(**obj)
    except (ValueError, TypeError) as exc:
        raise InputError(path, 0, f"not a calibration record: {exc}") from None
    if rec.schema != RECORD_SCHEMA:
        raise InputError(path, 0, f"record schema {rec.schema}, this bench reads {RECORD_SCHEMA}")
    return rec
