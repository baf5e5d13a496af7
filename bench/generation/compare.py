"""Generators compared on the same contexts (``generator=sweep``): the run's section writer.

Stage list entry ``generator_compare`` (``bench.pipeline.stages``). With a generator sweep
every context node is answered by each member (``bench.generation.sweep``); this writes:

- **the pairwise table** (``judge=pairwise``, ``generator_pairs.parquet``): per context, each
  member against the first, asked in both presentation orders — wins / ties / losses of the
  candidate with Wilson intervals over the ok pairs (scipy), its mean preference with the
  bootstrap CI of ``bench.judge.pairing``, position consistency, and self-preference two ways:

  * *cross-judge* (``judge.cross_generator``): the same-family judge's preference for its
    family's answers minus a cross-family judge's, paired per query (``bench.judge.pairing``);
  * *reference-anchored* (no second judge needed): when the judge's family is that of exactly
    one of the two generators, per pair the judge's preference for its own family's answer
    minus the reference's — 1 / 0.5 / 0 as that answer's quality is above / equal to / below
    the other's, quality being ``token_f1`` against the reference answers, else
    ``claims_coverage`` of the required claims (answerable queries), or ``abstained``
    (must-abstain queries). Mean with a bootstrap CI: > 0 is a judge
    favouring its own family beyond what the references support. Also counted: pairs the
    reference decides, and how often the judge sided with the better answer when it was its
    own family's and when it was the other's (the equal-opportunity view of Wataoka et al.
    2024, "Self-preference bias in LLM-as-a-judge").

- **the diagnosis across generators** (``generator_diagnosis.parquet``), the seed's
  question on each fixed context: per query, whether its answer is good for every member,
  bad for every member (*context at fault*: the same context fails whichever model reads
  it), or bad for some (*model at fault*, naming them); with the context's evidence
  (``gold_in_context``) beside it, so "context at fault with the evidence present" (an
  unusable passage or question) is told from "evidence missing". An answer is good as in the
  per-config diagnostic matrix (``answer_correct`` = 1; must-abstain: ``abstained`` = 1); a
  query with an unscored value for some member (failed generation, no reference) is
  ``unplaced`` with why, never counted as a failure.

On CPU with the packaged 135M model these figures are a plumbing check of the comparison,
not a finding about models.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.judge.base import OK, PairVerdict
from bench.judge.pairing import Estimate, _bootstrap, _mean
from bench.report.base import StageReport

if TYPE_CHECKING:
    from bench.judge.pairing import PairwiseSummary
    from bench.pipeline.latency import LatencyRun
    from bench.pipeline.view import RunView
    from bench.results.records import Comparison
    from bench.results.scores import ConfigScores

PAIRS_TABLE = "generator_pairs.parquet"
DIAGNOSIS_TABLE = "generator_diagnosis.parquet"
SCHEMA_VERSION = 1
#: diagnosis classes per (query, context)
ALL_GOOD, CONTEXT, MODEL, UNPLACED = "all_good", "context", "model", "unplaced"
CLASSES = (ALL_GOOD, MODEL, CONTEXT, UNPLACED)
_LAYER = {ALL_GOOD: "none", MODEL: "generation (the model)",
          CONTEXT: "context (fails across every generator)", UNPLACED: "-"}


@dataclass(frozen=True)
class Proportion:
    k: int
    n: int
    low: float | None
    high: float | None

    @property
    def rate(self) -> float | None:
        return self.k / self.n if self.n else None


def wilson(k: int, n: int, confidence: float) -> Proportion:
    """``k`` of ``n`` with its Wilson score interval (scipy's ``binomtest``)."""
    if n == 0:
        return Proportion(0, 0, None, None)
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return Proportion(k, n, float(ci.low), float(ci.high))


@dataclass(frozen=True)
class RefSelfPreference:
    """Reference-anchored self-preference of one pair (module docstring). ``own``: which
    side is the judge's family (candidate | baseline), None with why in ``note``."""

    own: str | None
    estimate: Estimate | None
    decided: int = 0
    #: (judge picked the better answer, pairs) when the better one is its own family's /
    #: the other's
    own_better: tuple[int, int] = (0, 0)
    other_better: tuple[int, int] = (0, 0)
    note: str = ""


#: an answerable query's quality: the first of these scored (``answer_correct``'s default
#: ``answers.correct_metrics`` order, graded instead of thresholded)
QUALITY_METRICS = ("token_f1", "claims_coverage")


def quality(scores: ConfigScores, must_abstain: Mapping[str, bool]) -> dict[str, float]:
    """Per query the reference's view of an answer: on an answerable query the first scored
    of ``QUALITY_METRICS``; on a must-abstain query ``abstained`` (1 = refused). A query
    without such a value has none (it is left out of the paired figure)."""
    out: dict[str, float] = {}
    for metric in ("abstained", *QUALITY_METRICS):
        if metric not in scores.values:
            continue
        valued = scores.valued(metric)
        vals = scores.values[metric]
        for i, q in enumerate(scores.query_ids):
            if not valued[i] or q in out or must_abstain.get(q, False) != (
                    metric == "abstained"):
                continue
            out[q] = float(vals[i])
    return out


def ref_self_preference(verdicts: Sequence[PairVerdict], cand_quality: Mapping[str, float],
                        base_quality: Mapping[str, float], *, judge_family: str,
                        candidate_family: str, baseline_family: str, resamples: int,
                        seed: int, confidence: float) -> RefSelfPreference:
    """The judge's preference for its own family's answer minus the reference's, per ok
    pair with a quality on both sides (module docstring)."""
    if candidate_family == baseline_family:
        return RefSelfPreference(None, None, note=f"both generators are of the "
                                 f"{candidate_family} family: no own answer to prefer")
    if judge_family not in (candidate_family, baseline_family):
        return RefSelfPreference(None, None, note=f"the judge ({judge_family}) shares no "
                                 "family with either generator")
    own = "candidate" if judge_family == candidate_family else "baseline"
    diffs: list[float] = []
    ob = [0, 0]
    oth = [0, 0]
    for v in verdicts:
        pa_ = v.preference_a
        if v.status != OK or pa_ is None:
            continue
        qc, qb = cand_quality.get(v.query_id), base_quality.get(v.query_id)
        if qc is None or qb is None:
            continue
        judge_own = pa_ if own == "candidate" else 1.0 - pa_
        q_own, q_other = (qc, qb) if own == "candidate" else (qb, qc)
        ref_own = 1.0 if q_own > q_other else 0.5 if q_own == q_other else 0.0
        diffs.append(judge_own - ref_own)
        if ref_own != 0.5:
            side = ob if ref_own == 1.0 else oth
            side[1] += 1
            side[0] += int(judge_own == ref_own)  # a tie or the worse answer is a miss
    est = _bootstrap(_mean, (np.asarray(diffs, dtype=np.float64),), resamples, seed,
                     confidence)
    return RefSelfPreference(own, est, ob[1] + oth[1], (ob[0], ob[1]), (oth[0], oth[1]))


@dataclass(frozen=True)
class DiagnosedQuery:
    context: str
    query_id: str
    klass: str
    failed: tuple[str, ...]
    gold_in_context: float | None
    why: str = ""


def _good(scores: ConfigScores, must_abstain: Mapping[str, bool]
          ) -> dict[str, tuple[bool | None, str]]:
    """Per answered query: (answer good, "") or (None, why it cannot be placed)."""
    out: dict[str, tuple[bool | None, str]] = {}
    for metric, which in (("answer_correct", False), ("abstained", True)):
        if metric not in scores.values:
            continue
        expects = scores.expects(metric)
        valued = scores.valued(metric)
        for i, q in enumerate(scores.query_ids):
            if must_abstain.get(q, False) != which or not expects[i]:
                continue
            out[q] = ((bool(scores.values[metric][i] == 1.0), "") if valued[i]
                      else (None, f"{metric} {scores.statuses[metric][i]}"))
    return out


def diagnose_across(context: str, members: Sequence[tuple[str, ConfigScores]],
                    must_abstain: Mapping[str, bool]) -> list[DiagnosedQuery]:
    """One context's queries classified over its generators (module docstring)."""
    goods = [(name, _good(s, must_abstain)) for name, s in members]
    evidence: dict[str, float] = {}
    first = members[0][1]
    if "gold_in_context" in first.values:
        valued = first.valued("gold_in_context")
        evidence = {q: float(first.values["gold_in_context"][i])
                    for i, q in enumerate(first.query_ids) if valued[i]}
    queries = list(dict.fromkeys(q for _, g in goods for q in g))
    out = []
    for q in queries:
        got = [(name, g.get(q, (None, "not answered"))) for name, g in goods]
        why = [f"{name}: {w}" for name, (ok, w) in got if ok is None]
        ev = evidence.get(q)
        if why:
            out.append(DiagnosedQuery(context, q, UNPLACED, (), ev, "; ".join(why)))
            continue
        failed = tuple(name for name, (ok, _) in got if not ok)
        klass = ALL_GOOD if not failed else CONTEXT if len(failed) == len(got) else MODEL
        out.append(DiagnosedQuery(context, q, klass, failed, ev))
    return out


_PAIR_SCHEMA = pa.schema([
    pa.field("schema_version", pa.int32()), pa.field("context", pa.string()),
    pa.field("candidate_id", pa.string()), pa.field("candidate", pa.string()),
    pa.field("baseline_id", pa.string()), pa.field("baseline", pa.string()),
    pa.field("judge", pa.string()), pa.field("orders", pa.string()),
    pa.field("n_pairs", pa.int64()), pa.field("n_ok", pa.int64()),
    pa.field("wins", pa.int64()), pa.field("ties", pa.int64()), pa.field("losses", pa.int64()),
    *(pa.field(f"{k}_{b}", pa.float64()) for k in ("win", "tie", "loss")
      for b in ("ci_low", "ci_high")),
    pa.field("preference", pa.float64()), pa.field("preference_ci_low", pa.float64()),
    pa.field("preference_ci_high", pa.float64()),
    pa.field("position_consistent", pa.int64()), pa.field("position_asked", pa.int64()),
    pa.field("self_preference_ref", pa.float64()),
    pa.field("self_preference_ref_ci_low", pa.float64()),
    pa.field("self_preference_ref_ci_high", pa.float64()),
    pa.field("self_preference_ref_n", pa.int64()), pa.field("judge_own_side", pa.string()),
    pa.field("self_preference_cross", pa.float64()),
    pa.field("self_preference_cross_ci_low", pa.float64()),
    pa.field("self_preference_cross_ci_high", pa.float64()),
])
_DIAG_SCHEMA = pa.schema([
    pa.field("schema_version", pa.int32()), pa.field("context", pa.string()),
    pa.field("query_id", pa.string()), pa.field("class", pa.string()),
    pa.field("failed", pa.list_(pa.string())), pa.field("gold_in_context", pa.float64()),
    pa.field("why", pa.string()),
])


@dataclass(frozen=True)
class PairRow:
    context: str
    summary: PairwiseSummary
    wins: Proportion
    ties: Proportion
    losses: Proportion
    ref: RefSelfPreference


def _f(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _p(p: Proportion) -> str:
    if p.rate is None:
        return "-"
    return f"{p.k} ({p.rate:.2f} [{p.low:.2f}, {p.high:.2f}])"


def _e(e: Estimate | None) -> str:
    if e is None or e.value is None:
        return "-"
    ci = "" if e.ci_low is None else f" [{e.ci_low:+.3f}, {e.ci_high:+.3f}]"
    return f"{e.value:+.3f}{ci}"


def pair_lines(rows: Sequence[PairRow]) -> list[str]:
    lines = ["Pairwise, each generator against the first on the same context (both "
             "presentation orders; wins / ties / losses of the candidate with Wilson "
             "intervals over the ok pairs; preference 1 win / 0.5 tie / 0 loss with its "
             "bootstrap CI):", "",
             "| context | candidate | baseline | judge | ok / pairs | wins | ties | losses | "
             "preference | position consistency | self-preference (reference) | "
             "self-preference (cross-judge) |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    notes: list[str] = []
    for r in rows:
        s = r.summary
        pc = s.position_consistency
        pcs = ("-" if pc.rate is None else
               f"{pc.rate:.2f} ({pc.numerator}/{pc.denominator})")
        ref = "-" if r.ref.estimate is None else (
            f"{_e(r.ref.estimate)} (n={r.ref.estimate.n}, judge's own: {r.ref.own})")
        if r.ref.note:
            notes.append(f"{s.candidate}: reference-anchored self-preference not measurable "
                         f"— {r.ref.note}.")
        if s.self_preference_note:
            notes.append(f"{s.candidate}: cross-judge self-preference not measurable — "
                         f"{s.self_preference_note}.")
        lines.append(
            f"| {r.context} | {s.candidate} | {s.baseline} | {s.judge} | {s.n_ok} / "
            f"{s.n_pairs} | {_p(r.wins)} | {_p(r.ties)} | {_p(r.losses)} | "
            f"{_e(s.preference)} | {pcs} | {ref} | {_e(s.self_preference)} |")
    for r in rows:
        if r.ref.own is not None and r.ref.decided:
            (a, n1), (b, n2) = r.ref.own_better, r.ref.other_better
            lines += ["", f"{r.summary.candidate}: of {r.ref.decided} pairs the reference "
                      f"decides, the judge sided with the better answer {a} of {n1} times "
                      f"when it was its own family's and {b} of {n2} when it was the "
                      "other's."]
    if notes:
        lines += ["", *notes]
    return lines


def diagnosis_lines(diag: Sequence[DiagnosedQuery], members: Sequence[str]) -> list[str]:
    lines = ["", "Diagnosis across generators on each fixed context (answer good = "
             "`answer_correct` = 1, must-abstain: `abstained` = 1): the same context failing "
             "for every generator points at the context, failing for some at the model.", "",
             "| context | class | layer to fix | queries | evidence in context | query ids |",
             "|---|---|---|---:|---:|---|"]
    for ctx in dict.fromkeys(d.context for d in diag):
        mine = [d for d in diag if d.context == ctx]
        for k in CLASSES:
            got = [d for d in mine if d.klass == k]
            if not got and k == UNPLACED:
                continue
            ev = [d.gold_in_context for d in got if d.gold_in_context is not None]
            evs = "-" if not ev else f"{int(sum(e == 1.0 for e in ev))}/{len(ev)}"
            ids = ", ".join(d.query_id for d in got[:12]) + (
                f", … (+{len(got) - 12})" if len(got) > 12 else "")
            lines.append(f"| {ctx} | {k} | {_LAYER[k]} | {len(got)} | {evs} | {ids or '-'} |")
        alone = {m: sum(d.failed == (m,) for d in mine) for m in members}
        lines += ["", f"{ctx}: failing for one generator only — "
                  + ", ".join(f"{m} {n}" for m, n in alone.items()) + "."]
        unplaced = [d for d in mine if d.klass == UNPLACED]
        if unplaced:
            lines.append("Not placed: " + "; ".join(f"{d.query_id} ({d.why})"
                                                      for d in unplaced) + ".")
        lines.append("")
    return lines


def _identity(generator: Any) -> str:
    """A generator's identity (its cache parameters; a memo wrapper adds none)."""
    import json

    return json.dumps(generator.cache_params(), sort_keys=True, default=str)


def _context_key(spec: Any) -> str:
    return str(spec.answers.input("contexts").ident)


def write(done: RunView, run_dir: Path, comparisons: Sequence[Comparison],
          latency: LatencyRun) -> StageReport | None:
    sweep = done.generator_sweep
    if sweep is None:
        return None
    from bench.judge.pairing import family
    from bench.judge.pairwise import PairwisePreferenceJudge
    from bench.pipeline.lanes import ConfigKind

    s = done.settings.metrics
    resamples, seed, confidence = s.bootstrap_resamples, done.settings.seed, s.confidence
    gen = [(c, sc) for c, sc in zip(done.configs, done.scores, strict=True)
           if c.spec.kind is ConfigKind.GENERATED and c.spec.answers is not None
           and "generator_family" in c.spec.params]
    by_id = {c.spec.config_id: (c, sc) for c, sc in gen}
    ctx_label: dict[str, str] = {}  # a context node's label (its pool's, with the variant)
    groups: dict[str, list[tuple[str, ConfigScores]]] = {}
    for c, sc in gen:
        key = _context_key(c.spec)
        ctx_label.setdefault(key, str(c.spec.params["context"]))
        groups.setdefault(key, []).append((str(c.spec.params["generator"]), sc))
    must = {q.query_id: q.must_abstain for q in done.dataset.queries}
    diag = [d for key, members in groups.items()
            for d in diagnose_across(ctx_label[key], members, must)]
    judge = done.judge
    rows: list[PairRow] = []
    for cid, g in done.generation.items():
        if g.pairwise is None or cid not in by_id:
            continue
        c, sc = by_id[cid]
        base = by_id.get(g.pairwise.baseline_id)
        if base is None:
            continue
        ok = g.pairwise.n_ok
        judge_fam = (judge.family if isinstance(judge, PairwisePreferenceJudge)
                     and judge.family else family(g.pairwise.judge))
        got = done.value(c.spec.leaf)
        ref = ref_self_preference(
            got.primary, quality(sc, must), quality(base[1], must), judge_family=judge_fam,
            candidate_family=str(c.spec.params["generator_family"]),
            baseline_family=str(base[0].spec.params["generator_family"]),
            resamples=resamples, seed=seed, confidence=confidence)
        rows.append(PairRow(ctx_label[_context_key(c.spec)], g.pairwise,
                            wilson(g.pairwise.wins, ok, confidence),
                            wilson(g.pairwise.ties, ok, confidence),
                            wilson(g.pairwise.losses, ok, confidence), ref))
    names = [m.name for m in sweep.members]
    lines = ["## Generators compared on the same contexts", "",
             "Generators: " + ", ".join(f"{m.name} (family {m.family}"
                                        f"{'' if m.declared else ', by name'})"
                                        for m in sweep.members)
             + f"; each context is built once (fitted to {names[0]}'s tokenizer) and "
             "answered by every generator.", ""]
    from bench.judge.stage import judge_generator

    judge_model = None if judge is None else judge_generator(judge)
    same = [m.name for m in sweep.members if judge_model is not None
            and _identity(m.generator) == _identity(judge_model)]
    if same:
        lines += [f"The judge model is the generator of {', '.join(same)}: it grades its own "
                  "answers (self-preference is measured below, not assumed away).", ""]
    tables = []
    if rows:
        lines += pair_lines(rows)
        _write_pairs(rows, run_dir / PAIRS_TABLE)
        tables.append(PAIRS_TABLE)
    lines += diagnosis_lines(diag, names)
    _write_diagnosis(diag, run_dir / DIAGNOSIS_TABLE)
    tables.append(DIAGNOSIS_TABLE)
    counts = {k: sum(d.klass == k for d in diag) for k in CLASSES}
    manifest: dict[str, Any] = {
        "generators": [{"name": m.name, "family": m.family, "declared": m.declared}
                       for m in sweep.members],
        "diagnosis": counts, "pairs": len(rows)}
    return StageReport("generator_compare", tuple(tables), tuple(lines), manifest)


def _write_pairs(rows: Sequence[PairRow], path: Path) -> None:
    out = []
    for r in rows:
        s, ref = r.summary, r.ref
        cross = s.self_preference
        out.append({
            "schema_version": SCHEMA_VERSION, "context": r.context,
            "candidate_id": s.candidate_id, "candidate": s.candidate,
            "baseline_id": s.baseline_id, "baseline": s.baseline, "judge": s.judge,
            "orders": s.orders, "n_pairs": s.n_pairs, "n_ok": s.n_ok, "wins": s.wins,
            "ties": s.ties, "losses": s.losses,
            **{f"{k}_ci_low": p.low for k, p in (("win", r.wins), ("tie", r.ties),
                                                 ("loss", r.losses))},
            **{f"{k}_ci_high": p.high for k, p in (("win", r.wins), ("tie", r.ties),
                                                   ("loss", r.losses))},
            "preference": s.preference.value, "preference_ci_low": s.preference.ci_low,
            "preference_ci_high": s.preference.ci_high,
            "position_consistent": s.position_consistency.numerator,
            "position_asked": s.position_consistency.denominator,
            "self_preference_ref": None if ref.estimate is None else ref.estimate.value,
            "self_preference_ref_ci_low": None if ref.estimate is None else ref.estimate.ci_low,
            "self_preference_ref_ci_high": (None if ref.estimate is None
                                            else ref.estimate.ci_high),
            "self_preference_ref_n": 0 if ref.estimate is None else ref.estimate.n,
            "judge_own_side": ref.own,
            "self_preference_cross": None if cross is None else cross.value,
            "self_preference_cross_ci_low": None if cross is None else cross.ci_low,
            "self_preference_cross_ci_high": None if cross is None else cross.ci_high,
        })
    pq.write_table(pa.Table.from_pylist(out, schema=_PAIR_SCHEMA), path)


def _write_diagnosis(diag: Sequence[DiagnosedQuery], path: Path) -> None:
    pq.write_table(pa.Table.from_pylist([
        {"schema_version": SCHEMA_VERSION, "context": d.context, "query_id": d.query_id,
         "class": d.klass, "failed": list(d.failed), "gold_in_context": d.gold_in_context,
         "why": d.why} for d in diag], schema=_DIAG_SCHEMA), path)
