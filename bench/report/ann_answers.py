""""What ANN recall costs in answers": per generated config, its pool's ANN recall@10 and
nDCG@10 next to its answers' token F1 and faithfulness, each answer metric paired per query
against the EXACT reference's answers (``generation.exact_reference``: the exact flat pool's
generated config, first in the run).

In a run report the deltas are the run's own comparisons (``comparisons.parquet``: paired
bootstrap CI, sign-flip p, Holm across the run's configs). In a sweep report every job's
generated configs are paired, on query ids, against the exact reference's per-query values
(its config id is the same in every job; it is computed once) with the same code
(``bench.pipeline.scoring.compare``), Holm across every config of the sweep.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from bench.pipeline.scoring import compare
from bench.report.base import RunReport
from bench.report.fmt import num
from bench.report.load import ConfigView, load_run
from bench.report.manifest import RunManifest, read_manifest
from bench.results.records import Comparison, SummaryRow
from bench.results.scores import ConfigScores, scores_from_long

#: the answer metrics paired against the exact reference
ANSWER_METRICS = ("token_f1", "faithfulness")
TITLE = "What ANN recall costs in answers"

SWEEP_ANN_ANSWERS = pa.schema([
    pa.field("schema_version", pa.int32(), nullable=False),
    pa.field("jobs", pa.string(), nullable=False),
    pa.field("config_id", pa.string(), nullable=False),
    pa.field("label", pa.string(), nullable=False),
    pa.field("reference_config_id", pa.string(), nullable=False),
    pa.field("is_reference", pa.bool_(), nullable=False),
    pa.field("ann_recall_at_10", pa.float64(), nullable=True),
    pa.field("ann_recall_at_10_answered", pa.float64(), nullable=True),
    pa.field("ndcg_at_10", pa.float64(), nullable=True),
    pa.field("ndcg_at_10_ci_low", pa.float64(), nullable=True),
    pa.field("ndcg_at_10_ci_high", pa.float64(), nullable=True),
    *(f for m in ANSWER_METRICS for f in (
        pa.field(f"{m}", pa.float64(), nullable=True),
        pa.field(f"{m}_ci_low", pa.float64(), nullable=True),
        pa.field(f"{m}_ci_high", pa.float64(), nullable=True),
        pa.field(f"{m}_n", pa.int64(), nullable=False),
        pa.field(f"{m}_delta", pa.float64(), nullable=True),
        pa.field(f"{m}_delta_ci_low", pa.float64(), nullable=True),
        pa.field(f"{m}_delta_ci_high", pa.float64(), nullable=True),
        pa.field(f"{m}_n_paired", pa.int64(), nullable=True),
        pa.field(f"{m}_p_holm", pa.float64(), nullable=True))),
    pa.field("faithfulness_no_claims", pa.int64(), nullable=False),
    pa.field("faithfulness_invalid", pa.int64(), nullable=False),
])


@dataclass(frozen=True)
class Mean:
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n: int


@dataclass(frozen=True)
class AnswerCostRow:
    """One generated config of the table."""

    jobs: str
    config_id: str
    label: str
    is_reference: bool
    ann_recall: float | None
    #: ANN recall@10 over the answered queries only (sweep report; None in a run report)
    ann_recall_answered: float | None
    ndcg: Mean
    answers: dict[str, Mean]
    deltas: dict[str, Comparison | None]
    no_claims: int
    #: faithfulness verdicts that failed the judge's schema after its retries
    invalid: int = 0


def _mean(rows: Sequence[SummaryRow], metric: str) -> Mean:
    r = next((x for x in rows if x.metric == metric and x.scope == "all"), None)
    return Mean(None, None, None, 0) if r is None else Mean(r.mean, r.ci_low, r.ci_high, r.n)


def _cell(m: Mean) -> str:
    if m.mean is None:
        return "-"
    ci = "" if m.ci_low is None else f" [{m.ci_low:.3f}, {m.ci_high:.3f}]"
    return f"{m.mean:.3f}{ci}"


def _delta(c: Comparison | None, reference: bool) -> tuple[str, str]:
    if reference:
        return "reference", "-"
    if c is None:
        return "-", "-"
    return (f"{c.delta:+.3f} [{c.ci_low:+.3f}, {c.ci_high:+.3f}] (n={c.n})",
            f"{c.p_holm:.3f}")


def table(rows: Sequence[AnswerCostRow], *, with_jobs: bool) -> list[str]:
    head = ["job(s)"] if with_jobs else []
    answered = any(r.ann_recall_answered is not None for r in rows)
    head += ["config", "ANN recall@10"] + (["ANN recall@10 (answered)"] if answered else [])
    head += ["nDCG@10 [95 % CI]", "token F1 [95 % CI] (n)", "Δ token F1 vs exact [95 % CI]",
             "p Holm", "faithfulness [95 % CI] (n, no_claims, invalid)", "Δ faithfulness vs exact "
             "[95 % CI]", "p Holm"]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---" if i < (2 if with_jobs else 1) else "---:"
                            for i in range(len(head))) + "|"]
    for r in rows:
        cells = [r.jobs] if with_jobs else []
        ann = ("1 (exact)" if r.is_reference and r.ann_recall is None
               else num(r.ann_recall, 3))
        cells += [f"{r.label} `{r.config_id}`", ann]
        if answered:
            cells.append(num(r.ann_recall_answered, 3))
        f1, fa = r.answers["token_f1"], r.answers["faithfulness"]
        d_f1, p_f1 = _delta(r.deltas.get("token_f1"), r.is_reference)
        d_fa, p_fa = _delta(r.deltas.get("faithfulness"), r.is_reference)
        cells += [_cell(r.ndcg), f"{_cell(f1)} (n={f1.n})", d_f1, p_f1,
                  f"{_cell(fa)} (n={fa.n}, no_claims={r.no_claims}, invalid={r.invalid})",
                  d_fa, p_fa]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


NOTE = ("Δ = config − exact reference, paired per query on the answered queries both have a "
        "value for (95 % paired bootstrap percentile CI, sign-flip p, Holm across the configs "
        "compared with the reference). Faithfulness leaves out answers with no claims "
        "(no_claims) and verdicts that failed the judge's schema after its retries (invalid): "
        "both counted, never scored. ANN recall@10 is tie-tolerant, vs the exact top-10 chunks "
        "(docs/metrics.md); ANN recall@10 and nDCG@10 are over every query with a relevant "
        "document, not only the answered subset.")


def run_section(r: RunReport) -> list[str]:
    """The run report's table; empty unless the run answered from ANN pools."""
    if not r.generation:
        return []
    by_id = {c.config_id: c for c in r.configs}
    gens = [g for g in r.generation if g.config_id in by_id]
    if not any(_mean(by_id[g.config_id].summary, "ann_recall@10").mean is not None
               for g in gens):
        return []
    ref = gens[0]
    is_exact = bool(by_id[ref.config_id].query_params.get("exact_reference"))
    rows = []
    for g in gens:
        c = by_id[g.config_id]
        deltas = {m: next((x for x in r.comparisons if x.baseline_config_id == ref.config_id
                           and x.config_id == g.config_id and x.scope == "all"
                           and x.metric == m), None) for m in ANSWER_METRICS}
        no_claims = sum(nc for m, _n, nc, _i, _f in g.judge_counts if m == "faithfulness")
        invalid = sum(i for m, _n, _nc, i, _f in g.judge_counts if m == "faithfulness")
        rows.append(AnswerCostRow(
            "", g.config_id, g.label, g is ref, _mean(c.summary, "ann_recall@10").mean, None,
            _mean(c.summary, "ndcg@10"), {m: _mean(c.summary, m) for m in ANSWER_METRICS},
            deltas, no_claims, invalid))
    lines = [f"## {TITLE}", ""]
    if not is_exact:
        lines += [f"(The baseline `{ref.label}` is the run's first generated config, not an "
                  "exact reference: set `generation.exact_reference=true`.)", ""]
    lines += table(rows, with_jobs=False)
    lines += ["", NOTE, ""]
    memo = [(g.label, g.memo) for g in gens if g.memo is not None]
    if memo:
        lines += ["Prompt memo (`generation.memo`; identical greedy prompts answered once): "
                  + "; ".join(f"{label}: answers {m[0]} reused / {m[1]} generated, "
                              f"judge calls {m[2]} reused / {m[3]} generated"
                              for label, m in memo)
                  + " (0 / 0: answers and verdicts loaded from the cache).", ""]
    return lines


# -- sweep ----------------------------------------------------------------------------------
def _summary_mean(view: ConfigView, metric: str) -> Mean:
    r = view.summary.get(("all", metric))
    return Mean(None, None, None, 0) if r is None else Mean(r.mean, r.ci_low, r.ci_high, r.n)


def sweep_rows(sweep_dir: Path, jobs: Sequence[str]) -> list[AnswerCostRow]:
    """The sweep's table rows (empty when no job answered with an exact reference): each
    distinct generated config once (the jobs that ran it listed), the reference first. Every
    job is read through the typed loader (run.json as ``RunManifest``, the tables as
    ``ConfigView``)."""
    runs: list[tuple[str, Path, RunManifest, str]] = []
    for job in jobs:
        d = sweep_dir / job
        manifest = read_manifest(d)
        ref = (manifest.section("generation") or {}).get("exact_reference")
        if ref is None:
            continue
        runs.append((job, d, manifest, ref))
    if not runs:
        return []
    refs = sorted({ref for *_, ref in runs})
    reference = refs[0]
    metrics_cfg = runs[0][2].config.get("metrics", {})
    resamples = int(metrics_cfg.get("bootstrap_resamples", 1000))
    confidence = float(metrics_cfg.get("confidence", 0.95))
    seed = int(runs[0][2].config.get("seed", 0))
    seen: dict[str, tuple[list[str], ConfigView]] = {}
    for job, d, _m, ref in runs:
        if ref != reference:
            continue  # a job with another reference (other embeddings) is not paired here
        for view in load_run(d, name=job).configs:
            if view.kind != "generated":
                continue
            if view.config_id in seen:
                seen[view.config_id][0].append(job)
                continue
            seen[view.config_id] = ([job], view)
    if reference not in seen:
        return []
    order = [reference, *(cid for cid in seen if cid != reference)]
    scores = {cid: seen[cid][1].scores or scores_from_long(cid, [], [], [], [], [])
              for cid in order}
    comparisons = compare([scores[cid] for cid in order], list(ANSWER_METRICS),
                          resamples=resamples, confidence=confidence, seed=seed)
    rows = []
    for cid in order:
        jobs_of, view = seen[cid]
        s = scores[cid]
        deltas = {m: next((x for x in comparisons if x.config_id == cid and x.scope == "all"
                           and x.metric == m), None) for m in ANSWER_METRICS}
        rows.append(AnswerCostRow(
            ", ".join(jobs_of), cid, view.label, cid == reference,
            _summary_mean(view, "ann_recall@10").mean, _answered_recall(s),
            _summary_mean(view, "ndcg@10"),
            {m: _summary_mean(view, m) for m in ANSWER_METRICS}, deltas,
            _count(s, "faithfulness", "no_claims"), _count(s, "faithfulness", "invalid")))
    return rows


def _answered_recall(s: ConfigScores) -> float | None:
    """Mean ANN recall@10 over the queries the config answered (token F1 or faithfulness
    expected there)."""
    if "ann_recall@10" not in s.values:
        return None
    answered = np.zeros(len(s.query_ids), bool)
    for m in ANSWER_METRICS:
        if m in s.values:
            answered |= s.expects(m)
    mask = answered & s.valued("ann_recall@10")
    return float(np.mean(s.values["ann_recall@10"][mask])) if mask.any() else None


def _count(s: ConfigScores, metric: str, status: str) -> int:
    if metric not in s.statuses:
        return 0
    return int(sum(st == status and e for st, e in zip(s.statuses[metric], s.expects(metric),
                                                         strict=True)))


def sweep_section(rows: Sequence[AnswerCostRow]) -> list[str]:
    if not rows:
        return []
    return ["", f"## {TITLE}", "", "Each generated config once (the exact reference "
            f"`{rows[0].config_id}` is the same config in every job, computed once); paired "
            "across jobs on query ids against its per-query values.", "",
            *table(rows, with_jobs=True), "", NOTE + " \"ANN recall@10 (answered)\": over the "
            "answered queries only.", ""]


def sweep_records(rows: Sequence[AnswerCostRow]) -> list[dict[str, Any]]:
    """``sweep_ann_answers.parquet`` rows (schema :data:`SWEEP_ANN_ANSWERS`)."""
    out = []
    ref = rows[0].config_id if rows else ""
    for r in rows:
        rec: dict[str, Any] = {
            "jobs": r.jobs, "config_id": r.config_id, "label": r.label,
            "reference_config_id": ref, "is_reference": r.is_reference,
            "ann_recall_at_10": r.ann_recall, "ann_recall_at_10_answered": r.ann_recall_answered,
            "ndcg_at_10": r.ndcg.mean, "ndcg_at_10_ci_low": r.ndcg.ci_low,
            "ndcg_at_10_ci_high": r.ndcg.ci_high, "faithfulness_no_claims": r.no_claims,
            "faithfulness_invalid": r.invalid}
        for m in ANSWER_METRICS:
            a, c = r.answers[m], r.deltas.get(m)
            rec.update({m: a.mean, f"{m}_ci_low": a.ci_low, f"{m}_ci_high": a.ci_high,
                        f"{m}_n": a.n, f"{m}_delta": None if c is None else c.delta,
                        f"{m}_delta_ci_low": None if c is None else c.ci_low,
                        f"{m}_delta_ci_high": None if c is None else c.ci_high,
                        f"{m}_n_paired": None if c is None else c.n,
                        f"{m}_p_holm": None if c is None else c.p_holm})
        out.append(rec)
    return out
