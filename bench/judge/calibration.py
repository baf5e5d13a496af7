"""The calibration loop: verdicts out for labelling, human labels in, agreement, records, gates.

1. Every run with an LLM judge writes ``judge_labelling.jsonl`` in its run dir
   (:func:`labelling_rows`, through the ``judge_files`` stage writer): one row per (config,
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
   split the run evaluates), clears ``judge.calibration.floor`` (:func:`check_calibrated_gates`);
   ``judge.calibration.uncalibrated: allow`` lets it through, and the report says so at the
   top of its judge section.

Statistics come from scikit-learn (``cohen_kappa_score``, weights ``quadratic``) and SciPy
(``spearmanr``); the bootstrap and the rates are written here.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.errors import ConfigError, InputError
from bench.judge.rubric import Rubric, ScoreDef, rubric

if TYPE_CHECKING:
    from bench.judge.base import Judge

LABELLING_FILE = "judge_labelling.jsonl"
RECORD_SCHEMA = 1
#: the split calibration is measured on (bench.data.splits.SPLITS)
CALIBRATION_SPLIT = "calibration"
#: statistics a floor may name
STATISTICS = ("kappa", "weighted_kappa", "spearman")
REPO = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- labelling file


def item_id(config_id: str, query_id: str, metric: str) -> str:
    return f"{config_id}:{query_id}:{metric}"


def approves(sd: ScoreDef, higher_is_better: bool, value: float) -> bool:
    """Whether ``value`` (on the rubric's scale) is an approval under ``sd.approve_at``."""
    return value >= sd.approve_at if higher_is_better else value <= sd.approve_at


def _hib(metric: str) -> bool:
    from bench.metrics.registry import find_metric

    spec = find_metric(metric)
    return True if spec is None else spec.higher_is_better


def labelling_rows(done: Any) -> list[dict[str, Any]]:
    """``judge_labelling.jsonl`` rows of a finished run (``Executed``): every verdict of every
    LLM judge metric of every generated config; nothing without an LLM judge."""
    from bench.judge.base import failure_mode
    from bench.judge.llm import LLMJudge
    from bench.judge.stage import _members
    from bench.pipeline.answers import answered
    from bench.pipeline.lanes import ConfigKind

    judge = done.comps.judge
    if judge is None:
        return []
    llm = {j.name: j for j in _members(judge) if isinstance(j, LLMJudge)}
    if not llm:
        return []
    by_id = {q.query_id: q for q in done.dataset.queries}
    rows: list[dict[str, Any]] = []
    baseline: dict[str, str] | None = None  # the pairwise baseline's answers (first config)
    for c in done.configs:
        if c.spec.kind is not ConfigKind.GENERATED or c.pool is None:
            continue
        a = answered(c.spec, done.executor)
        answers = {g.request_id: g for g in a.generations}
        contexts = {x.query_id: x for x in a.contexts}
        if baseline is None:
            baseline = {g.request_id: g.text for g in a.generations if g.status == "ok"}
        if a.pairs is not None and "pairwise" in llm:
            rows += _pair_rows(done, c, llm["pairwise"].rubric, a, baseline, by_id)
        for v in a.verdicts:
            j = llm.get(v.judge)
            if j is None or v.repeat != 0:
                continue
            q, gen, ctx = by_id[v.query_id], answers.get(v.query_id), contexts.get(v.query_id)
            _, why = failure_mode(v)
            for metric in j.metrics:
                sd = j.rubric.score(metric)
                score = v.score(metric) if v.status == "ok" else None
                scaled = None if score is None else sd.to_scale(score)
                rows.append({
                    "item_id": item_id(c.spec.config_id, v.query_id, metric),
                    "config_id": c.spec.config_id, "config": c.spec.label,
                    "query_id": v.query_id, "category": q.category, "split": q.split,
                    "dataset": done.dataset.name, "judge": v.judge, "metric": metric,
                    "kind": sd.kind, "rubric": j.rubric.digest, "status": v.status,
                    "score": scaled, "approve": (None if scaled is None
                                                 else approves(sd, _hib(metric), scaled)),
                    "rationale": why, "query": q.text,
                    "answer": gen.text if gen is not None else None,
                    "context": [{"doc_id": p.doc_id, "text": p.text}
                                for p in (ctx.passages if ctx is not None else ())],
                    "human": None,
                })
    return rows


def _pair_rows(done: Any, c: Any, rub: Rubric, a: Any, baseline: Mapping[str, str],
               by_id: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Labelling rows of a candidate's pairwise verdicts: answer A is the candidate's, answer
    B the baseline's (the first generated config); ``score`` is A's preference."""
    from bench.judge.base import pair_failure_mode

    metric = "pairwise_preference"
    sd = rub.score(metric)
    answers = {g.request_id: g.text for g in a.generations}
    rows = []
    for pv in a.pairs.primary:
        q = by_id[pv.query_id]
        rows.append({
            "item_id": item_id(c.spec.config_id, pv.query_id, metric),
            "config_id": c.spec.config_id, "config": c.spec.label, "query_id": pv.query_id,
            "category": q.category, "split": q.split, "dataset": done.dataset.name,
            "judge": "pairwise", "metric": metric, "kind": sd.kind, "rubric": rub.digest,
            "status": pv.status, "score": pv.preference_a, "approve": None,
            "rationale": pair_failure_mode(pv)[1], "query": q.text,
            "answer": answers.get(pv.query_id), "answer_b": baseline.get(pv.query_id),
            "context": [], "human": None,
        })
    return rows


@dataclass(frozen=True)
class Item:
    """One judged item of a labelling file, with its human label once joined."""

    item_id: str
    judge: str
    metric: str
    kind: str
    category: str
    split: str
    dataset: str
    rubric: str
    status: str
    score: float | None
    approve: bool | None


def read_labelling(path: str | Path) -> list[Item]:
    """A run's ``judge_labelling.jsonl``; InputError names file:line."""
    out: list[Item] = []
    need = ("item_id", "judge", "metric", "kind", "category", "split", "dataset", "rubric",
            "status", "score", "approve")
    for n, obj in _jsonl(path):
        missing = [k for k in need if k not in obj]
        if missing:
            raise InputError(path, n, f"missing field {missing[0]!r} (not a labelling file "
                                      f"written by a run: {LABELLING_FILE})")
        out.append(Item(*(obj[k] for k in need)))
    if not out:
        raise InputError(path, 0, "no rows")
    return out


def _jsonl(path: str | Path) -> Iterable[tuple[int, dict[str, Any]]]:
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(path, n, f"not valid JSON: {exc.msg}") from None
            if not isinstance(obj, dict):
                raise InputError(path, n, "expected a JSON object")
            yield n, obj


def read_human(path: str | Path) -> dict[str, tuple[object, int]]:
    """``{"item_id", "human"}`` rows (rows with ``human: null`` are not labelled yet and
    skipped): item id -> (label, line)."""
    out: dict[str, tuple[object, int]] = {}
    for n, obj in _jsonl(path):
        if "item_id" not in obj or not isinstance(obj["item_id"], str):
            raise InputError(path, n, "missing string field 'item_id'")
        if "human" not in obj:
            raise InputError(path, n, "missing field 'human' (true/false, a number on the "
                                      "rubric's scale, or a/b/tie)")
        label = obj["human"]
        if label is None:
            continue
        if not isinstance(label, bool | int | float | str) or (
                isinstance(label, str) and label.lower() not in ("a", "b", "tie")):
            raise InputError(path, n, f"field 'human' must be true/false, a number or "
                                      f"a/b/tie, got {label!r}")
        if obj["item_id"] in out:
            raise InputError(path, n, f"item {obj['item_id']!r} repeats line "
                                      f"{out[obj['item_id']][1]}")
        out[obj["item_id"]] = (label, n)
    if not out:
        raise InputError(path, 0, "no labelled row (every 'human' is null)")
    return out


# --------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class Stat:
    """A statistic with its percentile bootstrap CI (None: undefined on this sample, e.g.
    kappa when both raters used one label; ``n_boot``: resamples where it was defined)."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    n_boot: int


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
class Boot:
    """How CIs are drawn: percentile bootstrap over the items."""

    resamples: int = 1000
    seed: int = 0
    confidence: float = 0.95


def bootstrap(fn: Callable[[Sequence[Any]], float | None], items: Sequence[Any],
              boot: Boot) -> Stat:
    """``fn`` on ``items`` and the percentile CI of ``fn`` over resamples of the items."""
    resamples, seed, confidence = boot.resamples, boot.seed, boot.confidence
    value = fn(items)
    if value is None or not items:
        return Stat(value, None, None, 0)
    rng = np.random.default_rng(seed)
    got = []
    for _ in range(resamples):
        idx = rng.integers(0, len(items), len(items))
        x = fn([items[i] for i in idx])
        if x is not None:
            got.append(x)
    if not got:
        return Stat(value, None, None, 0)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(got, [tail, 100 - tail])
    return Stat(value, float(lo), float(hi), len(got))


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
    hib = _hib(metric)
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
        sd = rubric_of(it.judge).score(it.metric)
        if isinstance(lab, str) != (sd.kind == "preference"):
            raise InputError(labels_path, human[it.item_id][1],
                             f"item {it.item_id!r}: label {lab!r} does not fit a "
                             f"{sd.kind} score (true/false or a number; a/b/tie for a "
                             f"preference)")
    out = []
    for judge, metric in sorted({(it.judge, it.metric) for it, _ in in_split}):
        sd = rubric_of(judge).score(metric)
        mine = [(it, lab) for it, lab in in_split if (it.judge, it.metric) == (judge, metric)]
        boot = Boot(resamples, seed, confidence)
        out.append(_agreement(judge, metric, "all", sd, mine, boot))
        for cat in sorted({it.category for it, _ in mine}):
            out.append(_agreement(judge, metric, f"category:{cat}", sd,
                                  [(it, lab) for it, lab in mine if it.category == cat], boot))
    return Calibration(split, len(joined), len(joined) - len(in_split), tuple(out),
                       tuple(it for it, _ in in_split))


# --------------------------------------------------------------------------- records


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


# --------------------------------------------------------------------------- gates


@dataclass(frozen=True)
class CalibrationPolicy:
    """``judge.calibration``: where records live (relative to the repository root), the
    statistic and floor a judge metric's record must reach to be gated (``bound``: the
    point estimate or the CI's lower end), and what an uncalibrated gate does."""

    records: str = "conf/judge/calibration"
    statistic: str = "kappa"
    floor: float = 0.4
    bound: str = "value"
    split: str = CALIBRATION_SPLIT
    uncalibrated: str = "refuse"

    @classmethod
    def of(cls, block: Mapping[str, Any] | None) -> CalibrationPolicy:
        block = dict(block or {})
        unknown = sorted(set(block) - set(cls.__dataclass_fields__))
        if unknown:
            raise ConfigError(f"judge.calibration.{unknown[0]}",
                              f"unknown key; keys: {', '.join(cls.__dataclass_fields__)}")
        p = cls(**block)
        if p.statistic not in STATISTICS:
            raise ConfigError("judge.calibration.statistic",
                              f"must be one of {', '.join(STATISTICS)}, got {p.statistic!r}")
        if p.bound not in ("value", "ci_low"):
            raise ConfigError("judge.calibration.bound", f"value | ci_low, got {p.bound!r}")
        if p.uncalibrated not in ("refuse", "allow"):
            raise ConfigError("judge.calibration.uncalibrated",
                              f"refuse | allow, got {p.uncalibrated!r}")
        return p

    def directory(self) -> Path:
        d = Path(self.records).expanduser()
        return d if d.is_absolute() else REPO / d


def _why_uncalibrated(policy: CalibrationPolicy, judge: str, digest: str, metric: str,
                      dataset: str, evaluated: Collection[str]) -> str | None:
    """Why ``judge``'s ``metric`` may not be gated (None: its record clears the floor)."""
    path = policy.directory() / f"{judge}.json"
    if not path.is_file():
        return f"no calibration record {path}"
    rec = read_record(path)
    if rec.judge != judge:
        return f"{path} is a record of judge {rec.judge!r}"
    if rec.rubric != digest:
        return (f"{path} was measured with rubric {rec.rubric[:12]}, this run's "
                f"conf/judge/rubrics/{judge}.yaml is {digest[:12]}: recalibrate")
    if rec.dataset != dataset:
        return f"{path} was measured on dataset {rec.dataset!r}, this run's is {dataset!r}"
    if rec.split != policy.split:
        return f"{path} was measured on split {rec.split!r}, not {policy.split!r}"
    if rec.split in evaluated:
        return f"this run evaluates queries of the {rec.split!r} split the judge was calibrated on"
    entry = rec.metrics.get(metric)
    stat = None if entry is None else entry.get(policy.statistic)
    if stat is None:
        return f"{path} has no {policy.statistic} for {metric}"
    value = stat[0] if policy.bound == "value" else stat[1]
    if value is None or value < policy.floor:
        what = "" if policy.bound == "value" else " CI lower bound"
        return (f"{metric} {policy.statistic}{what} {value if value is None else f'{value:.3f}'}"
                f" < floor {policy.floor:g} ({path})")
    return None


@dataclass(frozen=True)
class UncalibratedGate:
    """A gate on an LLM-judge metric let through by ``uncalibrated: allow``, and why it
    would otherwise have been refused."""

    key: str  # the gate's config key (gates[0].metric)
    metric: str
    judge: str
    reason: str


def gated_metrics(settings: Any) -> list[tuple[str, str]]:
    """(config key, metric) of every release gate of a run's settings (``RunSettings``): the
    ``gates`` and the ``regression`` gates against a baseline."""
    out = [(f"gates[{i}].metric", g.metric) for i, g in enumerate(settings.gates)]
    reg = settings.regression
    if reg is not None:
        out += [(f"regression.gates[{i}].metric", r.metric) for i, r in enumerate(reg.rules)]
    return out


def check_calibrated_gates(gates: Sequence[tuple[str, str]], judge: Judge | None,
                           block: Mapping[str, Any] | None, *, dataset: str,
                           evaluated: Collection[str]) -> list[UncalibratedGate]:
    """Before any work: each gate (config key, metric; :func:`gated_metrics`) on an LLM
    judge's metric needs a calibration record that clears the floor (ConfigError naming the
    gate's key otherwise), unless the policy allows uncalibrated gates: then they are
    returned, for the report to print. ``evaluated``: the splits of the queries the run
    evaluates."""
    from bench.judge.llm import LLMJudge
    from bench.judge.stage import _members

    if judge is None:
        return []
    emits = {m: j for j in _members(judge) if isinstance(j, LLMJudge) for m in j.metrics}
    if not any(metric in emits for _, metric in gates):
        return []
    policy = CalibrationPolicy.of(block)
    out = []
    for key, metric in gates:
        j = emits.get(metric)
        if j is None:
            continue
        why = _why_uncalibrated(policy, j.name, j.rubric.digest, metric, dataset, evaluated)
        if why is None:
            continue
        if policy.uncalibrated != "allow":
            raise ConfigError(key,
                              f"{metric} is an LLM-judge metric without a calibration "
                              f"clearing the floor: {why}; calibrate it (python -m "
                              f"bench.calibrate LABELS judge_labelling.jsonl --records "
                              f"{policy.records}) or set judge.calibration.uncalibrated=allow")
        out.append(UncalibratedGate(key, metric, j.name, why))
    return out
