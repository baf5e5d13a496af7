"""The report's "Query rewriting" section: the adopt/reject table and the recall-vs-latency
front (``bench.rewrite.decide``)."""

from __future__ import annotations

from bench.report.fmt import num
from bench.rewrite.decide import RewriteOutcome, RewriteReport, SliceCheck


def _cell(c: SliceCheck | None) -> str:
    if c is None or c.delta is None or c.ci_low is None or c.ci_high is None:
        return "-"
    return f"{c.delta:+.4f} [{c.ci_low:+.4f}, {c.ci_high:+.4f}]"


def rewrite_section(r: RewriteReport | None) -> list[str]:
    if r is None or not r.outcomes:
        return []
    level = f"{100 * r.confidence:g} %"
    mg = r.min_gain
    rule = ("no `rewriter.min_gain` was pre-registered: deltas are shown, no verdict"
            if mg is None else
            f"pre-registered `rewriter.min_gain`: {mg.metric} at `{mg.scope}`, delta "
            f"{mg.delta:+g} — ADOPT when the paired {level} CI's lower bound of the gain "
            f">= {mg.delta:+g}, REJECT when its upper bound < {mg.delta:+g}, else "
            "INCONCLUSIVE")
    metrics = list(dict.fromkeys(c.metric for o in r.outcomes for c in o.checks))
    lines = ["## Query rewriting", "",
             f"Each rewrite is paired per query with the raw query on the same lane; {rule}. "
             "Slices: categories, `low_confidence` / `high_confidence` (the raw config's top-1 "
             f"score at or below / above its {r.low_confidence_quantile:g} quantile), "
             "`in_domain` / `out_of_domain` where configured. Added latency: the rewrite's "
             "e2e p50 minus the raw config's (interleaved pass: first search, rewrite and "
             "second search all count).", "",
             "| rewriter | config | over | slice | n | "
             + " | ".join(f"Δ {m} ({level} CI)" for m in metrics) + " | verdict |",
             "|---|---|---|---|---:|" + "---|" * len(metrics) + "---|"]
    for o in r.outcomes:
        slices = list(dict.fromkeys(c.slice for c in o.checks))
        for s in slices:
            by_m = {c.metric: c for c in o.checks if c.slice == s}
            n = max((c.n for c in by_m.values()), default=0)
            v = by_m.get(mg.metric) if mg is not None else None
            verdict = "-" if v is None or v.verdict is None else v.verdict.upper()
            if mg is not None and s == mg.scope:
                verdict = f"**{verdict}**"
            lines.append(f"| {o.rewriter} | {o.label} | {o.baseline_label} | {s} | {n} | "
                         + " | ".join(_cell(by_m.get(m)) for m in metrics) + f" | {verdict} |")
    main = mg.metric if mg is not None else "ndcg@10"
    lines += ["", f"Cost and the front ({main} vs added e2e p50; a config is on the front "
              "when no other, nor the raw query at +0 ms, is at least as good on both and "
              "better on one):", "",
              f"| config | verdict | {main} | raw {main} | e2e p50 ms | added p50 ms | "
              "prompt tok/q | output tok/q | failed generations | front |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for o in r.outcomes:
        lines.append(_cost_row(o))
    return [*lines, ""]


def _cost_row(o: RewriteOutcome) -> str:
    def f(v: float | None, fmt: str = ".4f") -> str:
        return "-" if v is None else format(v, fmt)

    return (f"| {o.label} | {(o.verdict or '-').upper()} | {f(o.mean)} | {f(o.baseline_mean)} "
            f"| {f(o.e2e_p50_ms, '.1f')} | {num(o.added_p50_ms, 1, '+')} | "
            f"{f(o.prompt_tokens_per_query, '.1f')} | {f(o.output_tokens_per_query, '.1f')} | "
            f"{o.failed_generations} | {'yes' if o.on_front else ''} |")
