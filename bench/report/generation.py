"""The report's "Answers and judges" section: answer metrics, judge metrics with their
no-claims / invalid counts, abstention, generation latency and judge schema validity."""

from __future__ import annotations

from collections.abc import Sequence

from bench.report.base import ConfigReport, RunReport
from bench.results.records import GenerationSummary, SummaryRow

#: answer-check metrics shown (in this order) when the run has them
ANSWER_ROWS = ("exact_match", "token_f1", "claims_coverage", "answer_correct", "abstained")
#: models this small judge for plumbing only
SMALL_MODELS = ("135m", "360m")


def _f(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


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
    if any(s in judge_model for s in SMALL_MODELS) or any(
            s in g0.generator.lower() for s in SMALL_MODELS):
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
    lines += ["", "Judge metrics (no_claims and invalid answers are excluded from the mean and "
              "counted here; never scored, never NaN):", "",
              "| config | metric | mean [CI] (n) | no_claims | invalid | failed |",
              "|---|---|---:|---:|---:|---:|"]
    for g in r.generation:
        rows = by_id[g.config_id].summary if g.config_id in by_id else ()
        for metric, _n, n_nc, n_inv, n_fail in g.judge_counts:
            lines.append(f"| {g.label} | {metric} | {_cell(_row(rows, metric))} | {n_nc} | "
                         f"{n_inv} | {n_fail} |")
    lines += ["", "| config | abstention P | abstention R | coverage | answered accuracy | "
              "must-abstain | abstained | TTFT p50/p95 ms | TPOT p50/p95 ms | ITL p50/p95 ms | "
              "E2E p50/p95 ms | judge schema-valid (first try) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for g in r.generation:
        lines.append(
            f"| {g.label} | {_f(g.abstention_precision)} | {_f(g.abstention_recall)} | "
            f"{_f(g.coverage)} | {_f(g.answered_accuracy)} | {g.n_must_abstain} | "
            f"{g.n_abstained} | {_f(g.ttft_p50_ms, 0)} / {_f(g.ttft_p95_ms, 0)} | "
            f"{_f(g.tpot_p50_ms, 1)} / {_f(g.tpot_p95_ms, 1)} | {_f(g.itl_p50_ms, 1)} / "
            f"{_f(g.itl_p95_ms, 1)} | {_f(g.e2e_p50_ms, 0)} / {_f(g.e2e_p95_ms, 0)} | "
            f"{_validity(g)} |")
    lines += ["", "Latencies are per answer as the backend served it (on a batched CPU "
              "backend a request's TTFT is its batch's prefill); generation failures: "
              + ", ".join(f"{g.label}: {g.n_failed} failed, {g.n_timeout} timed out"
                          for g in r.generation) + ".", ""]
    return lines


def _validity(g: GenerationSummary) -> str:
    if not g.judge_calls:
        return "-"
    return f"{_f(g.judge_schema_validity)} ({g.judge_schema_valid}/{g.judge_calls})"
