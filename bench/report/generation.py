"""The report's "Answers and judges" section: answer metrics, judge metrics with their
no-claims / invalid counts, abstention, generation latency and judge schema validity; and the
"Lost in the middle" section (context=gold_position): answer accuracy per gold position."""

from __future__ import annotations

from collections.abc import Sequence

from bench.context.metrics import CONTEXT_METRICS, JUDGED_DIAGNOSTICS, ContextDiagnosis
from bench.judge.pairing import Estimate
from bench.report.base import ConfigReport, RunReport
from bench.report.fmt import num
from bench.results.records import GenerationSummary, GoldProbeSummary, SummaryRow

#: answer-check metrics shown (in this order) when the run has them
ANSWER_ROWS = ("exact_match", "token_f1", "claims_coverage", "answer_correct", "abstained")
#: models this small judge for plumbing only
SMALL_MODELS = ("135m", "360m")


def _row(rows: Sequence[SummaryRow], metric: str) -> SummaryRow | None:
    return next((r for r in rows if r.metric == metric and r.scope == "all"), None)


def _cell(r: SummaryRow | None) -> str:
    if r is None or r.mean is None:
        return "-"
    ci = "" if r.ci_low is None else f" [{r.ci_low:.3f}, {r.ci_high:.3f}]"
    return f"{r.mean:.3f}{ci} (n={r.n})"


def generation_section(r: RunReport) -> list[str]:
    if not r.generation:
        return []
    by_id: dict[str, ConfigReport] = {c.config_id: c for c in r.configs}
    g0 = r.generation[0]
    lines = ["## Answers and judges", "",
             f"{g0.n_queries} queries answered per config (a seeded subset, round robin over "
             "categories). Answer metrics are over the answered queries they apply to; "
             "retrieval metrics above stay over the queries with a relevant document.", ""]
    judge_model = (g0.judge_model or "").lower()
    small_generator = any(s in g0.generator.lower() for s in SMALL_MODELS)
    if g0.judge_model is None and small_generator:
        lines += [f"**The generator ({g0.generator}) here is a tiny local model: the answer "
                  "figures are a plumbing check of the pipeline, not a measurement of what a "
                  "real generator would answer.** Run the same experiment with a real model "
                  "(README: on a GPU box with vLLM).", ""]
    elif any(s in judge_model for s in SMALL_MODELS) or small_generator:
        lines += [f"**The generator ({g0.generator}) and judge ({g0.judge_model or 'none'}) "
                  "here are tiny local models: the judge figures are a plumbing check of the "
                  "pipeline, not a trustworthy judgement of the answers.** Use a real judge "
                  "model (README: the same experiment on a GPU box with vLLM) and calibrate "
                  "it against human labels (`python -m bench.calibrate`) before trusting it.",
                  ""]
    else:
        lines += ["Judge figures are only as good as the judge model: calibrate it against "
                  "human labels (`python -m bench.calibrate`) before trusting them.", ""]
    lines += ["| config | " + " | ".join(ANSWER_ROWS) + " |",
              "|---|" + "---:|" * len(ANSWER_ROWS)]
    for g in r.generation:
        rows = by_id[g.config_id].summary if g.config_id in by_id else ()
        lines.append(f"| {g.label} | " + " | ".join(_cell(_row(rows, m)) for m in ANSWER_ROWS)
                     + " |")
    lines += context_table(r, by_id)
    lines += ["", "Judge metrics (no_claims and invalid answers are excluded from the mean and "
              "counted here; never scored, never NaN):", "",
              "| config | metric | mean [CI] (n) | no_claims | invalid | failed |",
              "|---|---|---:|---:|---:|---:|"]
    for g in r.generation:
        rows = by_id[g.config_id].summary if g.config_id in by_id else ()
        for metric, _n, n_nc, n_inv, n_fail in g.judge_counts:
            lines.append(f"| {g.label} | {metric} | {_cell(_row(rows, metric))} | {n_nc} | "
                         f"{n_inv} | {n_fail} |")
    lines += _judge_noise(r)
    lines += judge_warnings(r) + pairwise_lines(r)
    lines += ["", "| config | abstention P | abstention R | coverage | answered accuracy | "
              "must-abstain | abstained | TTFT p50/p95 ms | TPOT p50/p95 ms | ITL p50/p95 ms | "
              "E2E p50/p95 ms | judge schema-valid (first try) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for g in r.generation:
        lines.append(
            f"| {g.label} | {num(g.abstention_precision, 3)} | {num(g.abstention_recall, 3)} | "
            f"{num(g.coverage, 3)} | {num(g.answered_accuracy, 3)} | {g.n_must_abstain} | "
            f"{g.n_abstained} | {num(g.ttft_p50_ms, 0)} / {num(g.ttft_p95_ms, 0)} | "
            f"{num(g.tpot_p50_ms, 1)} / {num(g.tpot_p95_ms, 1)} | {num(g.itl_p50_ms, 1)} / "
            f"{num(g.itl_p95_ms, 1)} | {num(g.e2e_p50_ms, 0)} / {num(g.e2e_p95_ms, 0)} | "
            f"{_validity(g)} |")
    lines += ["", "Latencies are per answer as the backend served it (on a batched CPU "
              "backend a request's TTFT is its batch's prefill); generation failures: "
              + ", ".join(f"{g.label}: {g.n_failed} failed, {g.n_timeout} timed out"
                          for g in r.generation) + ".", ""]
    return lines


def _judge_noise(r: RunReport) -> list[str]:
    """Query variation vs judge noise per judge metric (``judge.repeats`` >= 2)."""
    rows = [(g, n) for g in r.generation for n in g.judge_noise]
    if not rows:
        return []
    reps = rows[0][1].repeats
    out = ["", f"Judge noise: every answer judged {reps} times (repeat r with the judge's "
           "seed + 1000 r, its configured temperature). Query variation = variance of the "
           "per-query means across queries; judge noise = mean variance between the repeats "
           "of one answer; the judge-noise share is judge / (query + judge). The judge "
           "metrics' CIs above are two-level bootstraps (queries, then each query's "
           "repeats), so they include the judge noise; the queries-only CI is shown for "
           "comparison.", "",
           "| config | metric | n | mean | query variation | judge noise | judge-noise share | "
           "mean CV | CI (queries only) | CI (two-level) |",
           "|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for g, n in rows:
        if n.mean is None:
            out.append(f"| {g.label} | {n.metric} | {n.n_queries} | - | - | - | - | - | "
                       "fewer than 2 queries with 2 scored repeats | - |")
            continue
        q_ci = "-" if n.ci_queries is None else f"[{n.ci_queries[0]:.4f}, {n.ci_queries[1]:.4f}]"
        t_ci = ("-" if n.ci_two_level is None
                else f"[{n.ci_two_level[0]:.4f}, {n.ci_two_level[1]:.4f}]")
        out.append(f"| {g.label} | {n.metric} | {n.n_queries} | {num(n.mean, 3)} | "
                   f"{num(n.query_variance, 3)} | {num(n.judge_variance, 3)} | "
                   f"{num(n.judge_share, 3)} | "
                   f"{num(n.mean_cv, 3)} | {q_ci} | {t_ci} |")
    if all(n.judge_variance == 0 for _, n in rows if n.judge_variance is not None):
        out += ["", "Every repeat gave the same verdict (a deterministic judge, e.g. "
                "temperature 0 on a greedy backend): all of the variance is query variation."]
    return out
def context_table(r: RunReport, by_id: dict[str, ConfigReport]) -> list[str]:
    """The context metrics beside the answer table: the evidence at the k the generator got,
    not the pool's recall@100; then each config's diagnostic matrix."""
    lines = ["", "Evidence in the context the generator saw (its own passage count, document "
             "level: several chunks of one document count once; claims matched as "
             "`claims_coverage` matches them; docs/metrics.md \"Evidence at the k the "
             "generator gets\"):", "",
             "| config | passages | documents | " + " | ".join(CONTEXT_METRICS) + " |",
             "|---|---:|---:|" + "---:|" * len(CONTEXT_METRICS)]
    for g in r.generation:
        rows = by_id[g.config_id].summary if g.config_id in by_id else ()
        lines.append(f"| {g.label} | {num(g.context_passages_mean, 2)} | "
                     f"{num(g.context_docs_mean, 2)} | "
                     + " | ".join(_cell(_row(rows, m)) for m in CONTEXT_METRICS) + " |")
    judged = {m for g in r.generation for m, *_ in g.judge_counts}
    missing = [m for m in JUDGED_DIAGNOSTICS if m not in judged]
    if missing:
        lines += ["", "RAGChecker's " + ", ".join(f"`{m}`" for m in missing) + ": unscored "
                  "— they need an LLM judge's claim-level entailment (add `diagnostics` to "
                  "`judge.judges`)."]
    for g in r.generation:
        if g.diagnosis is not None:
            lines += diagnosis_lines(g.label, g.diagnosis)
    return lines


def _ids(ids: Sequence[str], limit: int = 12) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f", … (+{len(ids) - limit})" if len(ids) > limit else "") or "-"


def diagnosis_lines(label: str, d: ContextDiagnosis) -> list[str]:
    """One config's context x answer matrix: counts, query ids and the layer to fix."""
    lines = ["", f"Diagnosis of {label}: context good = {d.context_rule}, answer good = "
             f"{d.answer_rule}, per answerable query.", "",
             "| context | answer | queries | layer to fix | query ids |",
             "|---|---|---:|---|---|"]
    for c in d.cells:
        lines.append(f"| {'good' if c.context_good else 'bad'} | "
                     f"{'good' if c.answer_good else 'bad'} | {len(c.query_ids)} | {c.layer} | "
                     f"{_ids(c.query_ids)} |")
    if d.abstain_refused or d.abstain_answered:
        lines.append(f"| (must abstain) | refused | {len(d.abstain_refused)} | none | "
                     f"{_ids(d.abstain_refused)} |")
        lines.append(f"| (must abstain) | answered | {len(d.abstain_answered)} | generation | "
                     f"{_ids(d.abstain_answered)} |")
    if d.unplaced:
        lines += ["", "Not placed (no value to place them by): "
                  + "; ".join(f"{q} ({why})" for q, why in d.unplaced) + "."]
    return lines


def judge_warnings(r: RunReport) -> list[str]:
    """A judge that is the run's own generator grades its own answers (self-preference)."""
    same = sorted({g.generator for g in r.generation
                   if g.judge_model is not None and g.judge_model == g.generator})
    if not same:
        return []
    return ["", f"**Warning: the judge is the run's own generator ({', '.join(same)}): it "
            "grades its own answers, and LLM judges favour their own outputs "
            "(self-preference). Use a judge of another family "
            "(`+generator@judge.generator=...`) for figures you publish.**"]


def _est(e: Estimate | None, digits: int = 3) -> str:
    if e is None or e.value is None:
        return "-"
    ci = "" if e.ci_low is None else f" [{e.ci_low:+.{digits}f}, {e.ci_high:+.{digits}f}]"
    return f"{e.value:+.{digits}f}{ci} (n={e.n})"


def pairwise_lines(r: RunReport) -> list[str]:
    """judge=pairwise: each candidate against the baseline, with the judge's biases."""
    ps = [g.pairwise for g in r.generation if g.pairwise is not None]
    if not ps:
        return []
    p0 = ps[0]
    lines = ["", f"Pairwise judge ({p0.judge}; orders: {p0.orders}, aggregation: "
             f"{p0.aggregate}) — each config against `{p0.baseline}`. Preference: 1 win, "
             "0.5 tie, 0 loss of the config, mean with its 95 % bootstrap CI. Position "
             "consistency: verdicts that agree in both presentation orders. Verbosity bias: "
             "slope of the preference per 10 words of length advantage and Pearson r, with "
             "bootstrap CIs over the pairs (a CI holding 0: no bias measured).", "",
             "| config | pairs ok/asked | win / tie / loss | preference | position "
             "consistency | verbosity slope /10 words | verbosity r | longer answer won | "
             "self-preference |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for p in ps:
        pc = p.position_consistency
        cons = "-" if pc.rate is None else f"{pc.rate:.3f} ({pc.numerator}/{pc.denominator})"
        lw = f"{p.longer_wins[0]}/{p.longer_wins[1]}" if p.longer_wins[1] else "-"
        sp = (_est(p.self_preference) if p.self_preference is not None
              else f"not measurable: {p.self_preference_note}")
        lines.append(f"| {p.candidate} | {p.n_ok}/{p.n_pairs} | {p.wins} / {p.ties} / "
                     f"{p.losses} | {_est(p.preference)} | {cons} | "
                     f"{_est(p.verbosity_slope)} | {_est(p.verbosity_r)} | {lw} | {sp} |")
        if p.cross_judge is not None and p.judge_agreement is not None:
            a = p.judge_agreement
            lines.append(f"| ↳ cross judge {p.cross_judge} | agreement with {p.judge}: "
                         + ("-" if a.rate is None else f"{a.rate:.3f} ({a.numerator}/"
                            f"{a.denominator})") + " | | | | | | | |")
    return lines


def _validity(g: GenerationSummary) -> str:
    if not g.judge_calls:
        return "-"
    return f"{num(g.judge_schema_validity, 3)} ({g.judge_schema_valid}/{g.judge_calls})"


#: the answer metrics of the lost-in-the-middle table: (metric, column name)
PROBE_METRICS = (("answer_correct", "accuracy"), ("token_f1", "token F1"))


def _delta(r: RunReport, base: str, config_id: str, metric: str) -> tuple[str, str]:
    """(Δ [CI], Holm p) of ``config_id`` vs ``base`` on ``metric`` over all queries."""
    if config_id == base:
        return "(baseline)", "-"
    cmp = next((c for c in r.comparisons if c.baseline_config_id == base
                and c.config_id == config_id and c.metric == metric and c.scope == "all"), None)
    if cmp is None:
        return "-", "-"
    return (f"{cmp.delta:+.3f} [{cmp.ci_low:+.3f}, {cmp.ci_high:+.3f}] (n={cmp.n})",
            f"{cmp.p_holm:.3f}")


def lost_in_middle_section(r: RunReport) -> list[str]:
    """Accuracy and token F1 per gold position, each position paired with the first one."""
    if not r.gold_probes:
        return []
    by_id = {c.config_id: c for c in r.configs}
    groups: dict[str | None, list[GoldProbeSummary]] = {}
    for p in r.gold_probes:
        parent = by_id[p.config_id].ops.parent_config_id if p.config_id in by_id else None
        groups.setdefault(parent, []).append(p)
    p0 = r.gold_probes[0]
    n = p0.n_distractors
    base_pos = groups[next(iter(groups))][0].position
    lines = ["## Lost in the middle", "",
             f"The gold passage (the best-ranked pool passage of the query's relevant document) "
             f"at position first / middle / last (index 0, {n // 2}, {n}) among {n} hard "
             "distractors: the best-ranked pool passages of non-relevant documents, the same "
             "passages in the same order at every position, so only the gold moves. Accuracy "
             "is the answer checks' `answer_correct` flag, token F1 is SQuAD-normalised; "
             "means over the probed queries with n and 95 % bootstrap percentile CIs. "
             f"Δ = position − {base_pos}, paired per query on the "
             "same queries: 95 % bootstrap CI of the mean difference, sign-flip randomization "
             "p, Holm-adjusted across the positions.", "",
             "| config | position | gold at | n | " + " | ".join(
                 f"{name} (95 % CI)" for _, name in PROBE_METRICS) + " | " + " | ".join(
                 f"Δ {name} vs {base_pos} (95 % CI) | p Holm" for _, name in PROBE_METRICS)
             + " | gold injected |",
             "|---|---|---:|---:|" + "---|" * len(PROBE_METRICS)
             + "---|---:|" * len(PROBE_METRICS) + "---:|"]
    for members in groups.values():
        base = members[0].config_id
        for p in members:
            rows = by_id[p.config_id].summary if p.config_id in by_id else ()
            cells = [_cell(_row(rows, m)) for m, _ in PROBE_METRICS]
            deltas = [x for m, _ in PROBE_METRICS for x in _delta(r, base, p.config_id, m)]
            lines.append(f"| {p.label} | {p.position} | {p.gold_index} | {p.n_probed} | "
                         + " | ".join(cells) + " | " + " | ".join(deltas)
                         + f" | {p.n_injected} |")
    before = [(k, c) for k, c in p0.excluded if k in ("must_abstain", "no_gold", "multi_gold")]
    after = [(k, c) for k, c in p0.excluded if (k, c) not in before]
    lines += ["", f"Queries: {p0.n_dataset_queries} in the dataset; not probe-able from the "
              "judgments, so never drawn: "
              + (", ".join(f"{c} {k}" for k, c in before) or "none")
              + f"; {p0.n_eligible} probe-able, {p0.n_drawn} drawn (seeded, round robin over "
              "categories); left out on the pool: "
              + (", ".join(f"{c} {k}" for k, c in after) or "none")
              + f"; {p0.n_probed} probed at every position. Gold injected: the pool held no "
              "passage of the relevant document, so its first chunk was placed.", ""]
    gen = next((g.generator for g in r.generation if g.config_id == p0.config_id), "")
    size = next((s for s in SMALL_MODELS if s in gen.lower()), None)
    if size is not None:
        lines += [f"**A {size.upper()}-parameter model ({gen}) answers here: these figures are "
                  "a plumbing check of the experiment, not a measurement of positional "
                  "bias.**", ""]
    return lines
