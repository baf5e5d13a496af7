"""report.md (tables with n and CIs, completion accounting, latency percentiles) + a PNG plot."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.capacity.base import CapacityRun
from bench.config.build import OptionError
from bench.metrics.pairing import paired
from bench.metrics.stats import paired_compare
from bench.pipeline.lanes import ConfigKind
from bench.report.ann_answers import run_section as ann_answers_section
from bench.report.base import ConfigReport, RunReport
from bench.report.fmt import common_value, num
from bench.report.generation import generation_section, lost_in_middle_section
from bench.report.pareto import FrontInput, pareto_front, quality_cost_front
from bench.results.records import Comparison, ConfigRow, SummaryRow
from bench.results.write import atomic_write_bytes
from bench.rewrite.report import rewrite_section
from bench.telemetry.base import ResourceSample, StageTiming

#: p99 from fewer samples than this is flagged (docs/metrics.md)
MIN_P99_SAMPLES = 100


class MarkdownReport:
    """primary_metrics: metrics shown per category and plotted (must be in metrics.names)."""

    def __init__(
        self, *, primary_metrics: list[str] | None = None, plot: bool = True, title: str = ""
    ) -> None:
        self.primary = primary_metrics or ["ndcg@10", "recall@100"]
        if not self.primary:
            raise OptionError("primary_metrics", "must name at least one metric")
        self.plot = plot
        self.title = title

    def write(self, report: RunReport) -> list[Path]:
        out = [report.run_dir / "report.md"]
        text = self.render(report)
        atomic_write_bytes(out[0], text.encode())
        # nothing to plot when every config was pruned (the report says why)
        if self.plot and any(c.pruned_reason is None for c in report.configs):
            out.append(self._plot(report, report.run_dir / "report.png"))
        if self.plot and any(p[3] is not None for p in _rerank_points(report, self.primary[0])):
            out.append(self._rerank_plot(report, report.run_dir / "rerank.png"))
        return out

    def render(self, r: RunReport) -> str:
        lines = [
            f"# {self.title or 'bench report'}: {r.experiment}",
            "",
            f"run `{r.run_id}` · device `{r.device}` · dataset `{r.dataset_name}` "
            f"(fingerprint `{r.dataset_fingerprint[:12]}`): {r.n_documents} documents, "
            f"{r.n_chunks} chunks, {r.n_queries} queries ({r.n_without_relevant} without a "
            f"relevant document) · wall {r.wall_s:.1f} s",
            "",
            *_header_notes(r),
            "Retrieval metrics are document-level (chunks folded into their parent document, "
            "first occurrence keeps its rank) and follow trec_eval conventions: ties broken "
            "by doc id descending, float32 scores, mean over queries with >= 1 relevant "
            "document; a missing run counts as an empty ranking. Intervals are 95 % "
            "bootstrap percentile CIs over queries.",
            "",
        ]
        lines += self._overview(r)
        lines += _capacity(r)
        lines += _registered(r)
        lines += rewrite_section(r.rewrite)
        lines += self._comparisons(r)
        lines += generation_section(r)
        lines += lost_in_middle_section(r)
        lines += ann_answers_section(r)
        for sr in r.stage_reports:  # stages' own sections (Stage.writer)
            lines += list(sr.markdown)
        lines += self._reranking(r)
        lines += self._decisions(r)
        for c in r.configs:
            lines += self._config_section(c)
        lines += self._chunks(r)
        lines += ["## Cache", "", "| stage | cache |", "|---|---|"]
        lines += [f"| {k} | {'hit' if v else 'miss'} |" for k, v in r.cache_hits.items()]
        lines += ["", "## Resources", "",
                  "| stage | peak RSS (MiB) | peak heap (MiB) | peak VRAM (MiB) |",
                  "|---|---:|---:|---:|"]
        for stage, rss, heap_bytes, vram_bytes in _resources_by_stage(r.resources):
            heap = "-" if heap_bytes is None else f"{heap_bytes / 2**20:.0f}"
            vram = "-" if vram_bytes is None else f"{vram_bytes / 2**20:.0f}"
            lines.append(f"| {stage} | {rss / 2**20:.0f} | {heap} | {vram} |")
        lines += ["", "Peak RSS counts the pages of memory-mapped files (vectors, the chunk "
                  "table, on-disk index lists), which the kernel takes back under pressure; "
                  "peak heap (RssAnon) is what the process allocated itself.", ""]
        if r.regression is not None:
            lines += r.regression.markdown()
        lines += _cost_section(r)
        if r.failed_gates:
            lines += ["## Release gates: FAILED", ""] + [f"- {g}" for g in r.failed_gates]
        if r.passed_gates:
            lines += ["", "## Release gates: passed" if not r.failed_gates else "Passed:", ""]
            lines += [f"- {g}" for g in r.passed_gates]
        lines.append("")
        return "\n".join(lines)

    def _overview(self, r: RunReport) -> list[str]:
        kept = [c for c in r.configs if c.pruned_reason is None]
        extra = [m for m in ("ann_recall@10",)
                 if any(_find(c.summary, "all", m) for c in kept)]
        metrics = [*self.primary, *extra]
        front = self._front(kept)
        lines = ["## Configs", "",
                 "| config | lane | " + " | ".join(f"{m} (95 % CI)" for m in metrics)
                 + " | QPS | p95 ms | e2e p95 ms | index MiB | unauthorized hits | Pareto |",
                 "|---|---|" + "---|" * len(metrics) + "---:|---:|---:|---:|---:|---|"]
        for c in r.configs:
            if c.pruned_reason is not None:
                lines.append(f"| `{c.config_id}` | {c.label} | pruned: {c.pruned_reason} |")
                continue
            if c.failed_reason is not None:
                lines.append(f"| `{c.config_id}` | {c.label} | FAILED: {c.failed_reason} |")
                continue
            cells = []
            for m in metrics:
                row = _find(c.summary, "all", m)
                cells.append("-" if row is None else f"{num(row.mean, 4)} {_ci(row)}")
            ops = c.ops
            size = ops.index_bytes
            lines.append(
                f"| `{c.config_id}` | {c.label} | " + " | ".join(cells)
                + f" | {num(ops.qps, 0)} | {num(ops.p95_ms, 2)} | {_e2e(ops)} | "
                f"{'-' if size is None else f'{size / 2**20:.1f}'} | "
                f"{ops.unauthorized_hits if r.filters_enabled else 'not enforced'} | "
                f"{_MARK.get(front.get(c.config_id, ''), '')} |")
        lines += ["", f"Pareto (★): no other config has at least as high {self.primary[0]} "
                  "and at least as low end-to-end p95 latency, and is strictly better on one; "
                  "≈: off that front but not resolved from it (statistically tied: the best "
                  "front config costing no more is neither better by the paired per-query "
                  "95 % CI of the quality delta nor faster by separated p95 CIs). e2e p95 "
                  "[95 % CI]: bootstrap over the requests it rests on. "
                  "QPS and p95: the first-stage search (batch mode; single-query mode); e2e "
                  "p95: per query, the sum of the query-time stages along the config's chain "
                  "(the query's own encoding for a dense lane, search, the shares of fusion "
                  "and filters, reranking; for a generated config also its share of context "
                  "assembly and the answer's generation, TTFT included: the whole request, "
                  "over its answered queries) — fused lanes add "
                  "their inputs' latencies. Unauthorized hits: retrieved documents the "
                  "query's caller may not see (checked independently of any filter)"
                  + ("." if r.filters_enabled else _not_enforced(r)),
                  ""]
        return lines

    def _front(self, kept: Sequence[ConfigReport]) -> dict[str, str]:
        """config id -> front | tied | dominated on the primary metric vs e2e p95 (the paired
        rule of bench.report.pareto: dominated only where paired quality or the p95 CIs
        resolve it)."""
        metric = self.primary[0]
        items, scores = [], {}
        for c in kept:
            row = _find(c.summary, "all", metric)
            e2e = c.ops.e2e_p95_ms is not None
            p95 = c.ops.e2e_p95_ms if e2e else c.ops.p95_ms
            items.append(FrontInput(
                c.config_id, None if row is None else row.mean,
                None if row is None else row.ci_low, None if row is None else row.ci_high, p95,
                cost_ci_low=c.ops.e2e_p95_ci_low if e2e else None,
                cost_ci_high=c.ops.e2e_p95_ci_high if e2e else None))
            if c.scores is not None:
                scores[c.config_id] = c.scores
        hib = next((r.higher_is_better for c in kept for r in c.summary if r.metric == metric),
                   True)

        def paired_ci(ref: str, key: str) -> tuple[float, float] | None:
            if ref not in scores or key not in scores:
                return None
            va, vb, _ = paired(scores[key], scores[ref], metric)
            if not va.size:
                return None
            cmp = paired_compare(va, vb, resamples=1000, seed=0)
            return cmp.ci_low, cmp.ci_high

        points = quality_cost_front(items, higher_is_better=hib, paired=paired_ci)
        return {p.key: p.status for p in points}

    def _comparisons(self, r: RunReport) -> list[str]:
        rows = [c for c in r.comparisons if c.scope == "all" and c.metric in self.primary]
        if not rows:
            return []
        label = {c.config_id: c.label for c in r.configs}
        base = rows[0].baseline_config_id
        lines = [f"## Paired comparisons vs `{base}` ({label.get(base, base)})", "",
                 "Per-query paired differences on the same queries: delta = config − baseline, "
                 "95 % bootstrap CI, sign-flip randomization p, Holm-adjusted across configs. "
                 "MDE: the smallest true |delta| this comparison detects with 80 % power "
                 "(normal approximation from the deltas' SD, at the Bonferroni level "
                 "α / m over the m configs compared — conservative for Holm). Where the CI "
                 "holds 0, read it as: no difference as large as the MDE was seen (smaller "
                 "ones could go unseen).",
                 "", "| config | metric | baseline | config | delta (95 % CI) | MDE | p | "
                 "p Holm | n |",
                 "|---|---|---:|---:|---|---:|---:|---:|---:|"]
        for c in rows:
            lines.append(
                f"| {label.get(c.config_id, c.config_id)} | {c.metric} | "
                f"{c.mean_baseline:.4f} | {c.mean_config:.4f} | {c.delta:+.4f} "
                f"[{c.ci_low:+.4f}, {c.ci_high:+.4f}] | {num(c.mde, 4)} | {c.p_value:.4f} | "
                f"{c.p_holm:.4f} | {c.n} |")
        return [*lines, ""]

    def _reranking(self, r: RunReport) -> list[str]:
        points = _rerank_points(r, self.primary[0])
        if not points:
            return []
        wanted = [m for m in ("ndcg@10", "mrr", "precision@1") if any(
            c.metric == m for c in r.comparisons)]
        label = {c.config_id: c.label for c in r.configs}
        lines = ["## Reranking", "",
                 "Each reranked config against its own candidate pool without reranking "
                 "(paired per query: delta, 95 % bootstrap CI, Holm-adjusted p). The reranker "
                 "scored each pool once at the deepest depth; latency is the reranker's own, "
                 "per query at that depth (a seeded sample of queries timed on exactly "
                 "`depth` passages), per pair = per query / depth.", "",
                 "| config | depth | " + " | ".join(f"Δ {m} (95 % CI) p_holm" for m in wanted)
                 + " | rerank p50 / p95 / p99 ms | per pair p95 ms | pairs/s | added p95 ms |",
                 "|---|---:|" + "---|" * len(wanted) + "---|---:|---:|---:|"]
        for c, depth, _gain, added in points:
            cells = []
            for m in wanted:
                cmp = next((x for x in r.comparisons if x.config_id == c.config_id
                            and x.metric == m and x.scope == "all"
                            and x.baseline_config_id == c.ops.parent_config_id), None)
                cells.append("-" if cmp is None else
                             f"{cmp.delta:+.4f} [{cmp.ci_low:+.4f}, {cmp.ci_high:+.4f}] "
                             f"{cmp.p_holm:.3f}")
            o = c.ops
            per_pair = None if o.rerank_p95_ms is None else o.rerank_p95_ms / max(depth, 1)
            lines.append(
                f"| {label[c.config_id]} | {depth} | " + " | ".join(cells)
                + f" | {num(o.rerank_p50_ms, 1)} / {num(o.rerank_p95_ms, 1)} / "
                f"{num(o.rerank_p99_ms, 1)} | {num(per_pair, 3)} | "
                f"{num(o.rerank_pairs_per_s, 0)} | {num(added, 1)} |")
        vram = [s for s in r.resources if s.stage.startswith("rerank")
                and s.peak_vram_bytes is not None]
        lines += ["", "Peak VRAM while reranking: " + (
            ", ".join(f"{s.stage} {s.peak_vram_bytes / 2**20:.0f} MiB" for s in vram
                      if s.peak_vram_bytes is not None)
            if vram else "not measured (no GPU, or telemetry without NVML)") + ".", ""]
        return lines

    def _rerank_plot(self, r: RunReport, path: Path) -> Path:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        metric = self.primary[0]
        points = [p for p in _rerank_points(r, metric) if p[3] is not None]
        front = pareto_front([(gain.delta, float(added or 0.0)) for _, _, gain, added in points],
                             (True, False))
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        for (c, _depth, gain, added), on in zip(points, front, strict=True):
            err = [[max(gain.delta - gain.ci_low, 0.0)], [max(gain.ci_high - gain.delta, 0.0)]]
            ax.errorbar([float(added or 0.0)], [gain.delta], yerr=err, fmt="*" if on else "o",
                        capsize=3, markersize=10 if on else 6, color="C1" if on else "C0")
            ax.annotate(c.label.split(">")[-1], (float(added or 0.0), gain.delta), fontsize=7,
                        xytext=(4, 4), textcoords="offset points")
        ax.axhline(0.0, color="grey", linewidth=0.8)
        ax.set_xlabel("added p95 latency per query (ms, reranker)")
        ax.set_ylabel(f"Δ {metric} vs the same pool (95 % CI)")
        ax.set_title("Reranking: quality gain vs added latency (★ Pareto front)")
        fig.tight_layout()
        tmp = path.with_name(f".{path.name}.tmp.png")
        fig.savefig(tmp, dpi=110)
        plt.close(fig)
        tmp.replace(path)
        return path

    def _chunks(self, r: RunReport) -> list[str]:
        if r.chunk_report is None:
            return []
        st = r.chunk_report.stats
        nd = r.chunk_report.near_duplicates
        lines = [
            "## Chunks", "",
            f"{st.n_chunks} chunks from {st.n_docs} documents "
            f"({st.n_docs_without_chunks} without a chunk); chunks per document mean "
            f"{st.chunks_per_doc_mean:.2f}, max {st.chunks_per_doc_max}; embedder tokens "
            f"min {st.tokens_min}, p50 {st.tokens_p50:.0f}, p95 {st.tokens_p95:.0f}, max "
            f"{st.tokens_max}, mean {st.tokens_mean:.1f}; traceable to their source "
            f"{st.traceability_pct:.1f} %; empty {st.n_empty}.", "",
            f"Near-duplicates (MinHash/LSH, Jaccard >= {nd.threshold}): "
            f"{100 * nd.cross_doc_rate:.2f} % of chunks have one in another document, "
            f"{100 * nd.within_doc_rate:.2f} % within their own document.", ""]
        for ex in r.chunk_report.examples[:3]:
            p = ex.pair
            lines.append(f"- chunks {p.chunk_a} / {p.chunk_b} (Jaccard ≈ "
                         f"{p.jaccard:.2f}{', same doc' if p.same_doc else ''}): "
                         f"“{ex.text_a[:80]}…” / “{ex.text_b[:80]}…”")
        return [*lines, ""]

    def _decisions(self, r: RunReport) -> list[str]:
        if not r.decisions:
            return []
        k = r.decisions[0].k
        at = "" if k is None else f"@{k}"
        lines = ["## Hard filter or soft boost?", "",
                 f"Pre-registered rule (docs/metrics.md): hard only when the paired lower CI "
                 f"bound of the precision{at} gain (hard − soft) reaches the minimum AND the "
                 "hard filter's false-exclusion rate (eligible gold its predicate rules out of "
                 f"the corpus, before retrieval) is within epsilon AND the recall{at} loss is "
                 "within bound. In brackets after the rate: the pool-relative figure (gold "
                 "that reached the pool and was removed).",
                 "", f"| lane | choice | precision{at} gain (95 % CI) | false-exclusion rate | "
                 f"recall{at} hard / soft | why |", "|---|---|---|---:|---|---|"]
        for d in r.decisions:
            if d.error is not None:
                lines.append(f"| {d.lane} | undecided | - | - | - | {d.error} |")
                continue
            why = "; ".join(d.reasons) or "every condition met"
            lines.append(
                f"| {d.lane} | **{d.choice}** | {num(d.precision_gain, 4, '+')} "
                f"[{num(d.gain_ci_low, 4, '+')}, {num(d.gain_ci_high, 4, '+')}] (min "
                f"{d.min_precision_gain}) | {num(d.exclusion_rate, 4)} "
                f"[pool {num(d.pool_exclusion_rate, 4)}] (max "
                f"{d.max_exclusion_rate}) | {num(d.recall_hard, 4)} / "
                f"{num(d.recall_soft, 4)} (max loss {d.max_recall_loss}) | {why} |")
        d0 = r.decisions[0]
        if d0.predicate_precision is not None or d0.predicate_recall is not None:
            source = d0.predicate_labels or "gold docs' tags"
            lines += ["", f"Extracted predicates vs labelled ({source}): precision "
                      f"{num(d0.predicate_precision, 3)}, recall "
                      f"{num(d0.predicate_recall, 3)} "
                      f"({d0.predicates_extracted} extracted, "
                      f"{d0.predicates_labelled} labelled)."]
        return [*lines, ""]

    def _config_section(self, c: ConfigReport) -> list[str]:
        qp = ", ".join(f"{k}={v}" for k, v in c.query_params.items()) or "defaults"
        acc = c.accounting
        lines = [
            f"## Config `{c.config_id}`: {c.label} (params: {qp})",
            "",
            f"Completion: expected {acc.expected}, scored {acc.scored}, missing run "
            f"{acc.missing}, timeout {acc.timeout}, invalid {acc.invalid}, no-claims "
            f"{acc.no_claims}, pruned {acc.pruned}.",
            "",
        ]
        if c.pruned_reason is not None:
            return [*lines, f"**Pruned by budget:** {c.pruned_reason}", ""]
        lines += ["### Overall", "", "| metric | mean | 95 % CI | n |", "|---|---:|---|---:|"]
        for row in c.summary:
            if row.scope == "all":
                lines.append(f"| {row.metric} | {num(row.mean, 4)} | {_ci(row)} | {row.n} |")
        scopes = [s for s in dict.fromkeys(row.scope for row in c.summary) if s != "all"]
        lines += ["", "### Per category", "",
                  "| scope | " + " | ".join(f"{m} (95 % CI)" for m in self.primary) + " | n |",
                  "|---|" + "---|" * len(self.primary) + "---:|"]
        for scope in scopes:
            cells, n = [], 0
            for m in self.primary:
                found = _find(c.summary, scope, m)
                cells.append("-" if found is None else f"{num(found.mean, 4)} {_ci(found)}")
                n = found.n if found is not None else n
            lines.append(f"| {scope} | " + " | ".join(cells) + f" | {n} |")
        lines += ["", "Queries with no relevant document (the unanswerable slice) are not in "
                  "these means; they are scored by abstention metrics once generation runs.", ""]
        lines += ["### Latency", "", "| stage | kind | samples | p50 ms | p95 ms | p99 ms | "
                  "items/s | measured |", "|---|---|---:|---:|---:|---:|---:|---|"]
        lines += _latency_rows(c.timings)
        lines.append("")
        return lines

    def _plot(self, r: RunReport, path: Path) -> Path:
        """Every kept config in the figure: groups of PER_ROW configs on facet rows (never a
        cut); value axis zoomed to the data with CI bars; a metric equal for every config
        (e.g. Recall@100 = 1.0) is named in the facet instead of drawn as equal bars."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        kept = [c for c in r.configs if c.pruned_reason is None]
        groups = [kept[i:i + PER_ROW] for i in range(0, len(kept), PER_ROW)] or [[]]
        fig, axes = plt.subplots(len(groups), len(self.primary),
                                 figsize=(5.5 * len(self.primary), 4 * len(groups)),
                                 squeeze=False)
        scopes = [s for s in dict.fromkeys(row.scope for c in kept for row in c.summary)
                  if s.startswith("category:") or s == "all"]
        for col, metric in enumerate(self.primary):
            flat = _saturated(kept, metric)
            for g, group in enumerate(groups):
                ax = axes[g][col]
                if flat is not None:
                    ax.text(0.5, 0.5, f"{metric} = {flat:.4f} for all {len(kept)} configs\n"
                            "(saturated: cannot tell them apart)", ha="center", va="center",
                            transform=ax.transAxes)
                    ax.set_axis_off()
                    continue
                _bars(ax, group, scopes, metric, offset=g * PER_ROW)
                if len(groups) > 1:
                    # rows share one value axis so they can be compared by eye
                    ax.set_ylim(*_limits(kept, scopes, metric))
                first = g * PER_ROW + 1
                ax.set_title(f"{metric} (95 % CI), configs {first}-{first + len(group) - 1}"
                             f" of {len(kept)}", fontsize=9)
                ax.legend(fontsize="x-small")
        fig.tight_layout()
        tmp = path.with_name(f".{path.name}.tmp.png")
        fig.savefig(tmp, dpi=110)
        plt.close(fig)
        tmp.replace(path)
        return path


def _header_notes(r: RunReport) -> list[str]:
    """Warnings that change how every number below reads: the queries evaluated (a split, a
    subset), contamination, truncated passages, dropped queries (each a line, only when there
    is something to say)."""
    out = [line for note in r.data_notes for line in (note, "")]
    if r.n_truncated_chunks:
        said = r.truncation or (f"{r.n_truncated_chunks} of {r.n_chunks} passages are longer "
                                "than the embedder's maximum length and were embedded truncated")
        out += [f"⚠ {said}. The text past it is not seen by the dense lanes (a shorter "
                "chunker, or a longer max length, avoids it).", ""]
    if r.n_dropped_queries:
        out += [f"{r.n_dropped_queries} queries of the source were left out: "
                f"{r.dropped_reason or 'no positive judgement'}.", ""]
    return out


def _rerank_points(r: RunReport, metric: str
                   ) -> list[tuple[ConfigReport, int, Comparison, float | None]]:
    """(config, depth, its comparison with its own pool on ``metric``, added p95 ms) for every
    reranked config that ran and was compared with its parent."""
    out = []
    for c in r.configs:
        if c.ops.kind != ConfigKind.RERANKED or c.pruned_reason is not None:
            continue
        cmp = next((x for x in r.comparisons if x.config_id == c.config_id and x.metric == metric
                    and x.scope == "all" and x.baseline_config_id == c.ops.parent_config_id),
                   None)
        if cmp is None:
            continue
        depth = int(c.query_params.get("depth", 0))
        out.append((c, depth, cmp, c.ops.rerank_p95_ms))
    return out


#: configs per facet row of report.png
PER_ROW = 8


def _saturated(kept: Sequence[ConfigReport], metric: str) -> float | None:
    return common_value(row.mean for c in kept for row in [_find(c.summary, "all", metric)]
                        if row is not None and row.mean is not None)


def _limits(kept: Sequence[ConfigReport], scopes: list[str], metric: str) -> tuple[float, float]:
    lows = [r.ci_low if r.ci_low is not None else r.mean for c in kept for s in scopes
            for r in [_find(c.summary, s, metric)] if r is not None and r.mean is not None]
    highs = [r.ci_high if r.ci_high is not None else r.mean for c in kept for s in scopes
             for r in [_find(c.summary, s, metric)] if r is not None and r.mean is not None]
    lo, hi = min(lows, default=0.0), max(highs, default=1.0)
    pad = (hi - lo) * 0.08 if hi > lo else 0.01
    return lo - pad, hi + pad


def _bars(ax: Any, group: Sequence[ConfigReport], scopes: list[str], metric: str,
          offset: int = 0) -> None:
    width = 0.8 / max(len(group), 1)
    lows, highs = [], []
    for j, c in enumerate(group):
        rows = [_find(c.summary, s, metric) for s in scopes]
        xs = np.arange(len(scopes)) + j * width
        means = [row.mean if row and row.mean is not None else np.nan for row in rows]
        err = np.array([[m - (row.ci_low if row.ci_low is not None else m),
                         (row.ci_high if row.ci_high is not None else m) - m]
                        if row and row.mean is not None else [0.0, 0.0]
                        for m, row in zip(means, rows, strict=True)]).T
        # a percentile CI need not contain the mean exactly (float rounding, skew)
        err = np.clip(err, 0.0, None)
        # one colour per config across facet rows (the 10-colour cycle repeats past 10)
        ax.errorbar(xs, means, yerr=err, fmt="o", capsize=3, label=c.label,
                    color=f"C{(offset + j) % 10}")
        fin = [(m, e0, e1) for m, e0, e1 in zip(means, err[0], err[1], strict=True)
               if not np.isnan(m)]
        lows += [m - e0 for m, e0, _ in fin]
        highs += [m + e1 for m, _, e1 in fin]
    ax.set_xticks(np.arange(len(scopes)) + width * (len(group) - 1) / 2)
    ax.set_xticklabels([s.removeprefix("category:") for s in scopes], rotation=20)
    if lows:
        lo, hi = min(lows), max(highs)
        pad = (hi - lo) * 0.08 if hi > lo else 0.01
        ax.set_ylim(lo - pad, hi + pad)
    ax.grid(axis="y", alpha=0.3)


#: the configs table's Pareto column per front status
_MARK = {"front": "★", "tied": "≈"}


def _e2e(ops: ConfigRow) -> str:
    """e2e p95 with its CI and how many requests it rests on (``-`` when not measured)."""
    if ops.e2e_p95_ms is None:
        return "-"
    if ops.e2e_p95_ci_low is None or ops.e2e_p95_ci_high is None:
        return num(ops.e2e_p95_ms, 2)
    return (f"{ops.e2e_p95_ms:.2f} [{ops.e2e_p95_ci_low:.2f}, {ops.e2e_p95_ci_high:.2f}] "
            f"n={ops.n_e2e_samples}")


def _find(rows: Sequence[SummaryRow], scope: str, metric: str) -> SummaryRow | None:
    return next((r for r in rows if r.scope == scope and r.metric == metric), None)


def _ci(row: SummaryRow) -> str:
    if row.ci_low is None or row.ci_high is None:
        return "-"
    return f"[{row.ci_low:.4f}, {row.ci_high:.4f}]"


def _registered(r: RunReport) -> list[str]:
    """The experiment's pre-registered rules, each verdict with its reasons and rule hash."""
    if not r.registered:
        return []
    lines = ["## Pre-registered decisions", "",
             "Each rule was written in the experiment before the run; its hash (rule, "
             "confidence, power) shows if it changed after the results.", "",
             "| rule | candidate over baseline | verdict | reasons | rule hash |",
             "|---|---|---|---|---|"]
    for d in r.registered:
        lines.append(f"| {d.name} | `{d.candidate}` over `{d.baseline}` | "
                     f"**{d.verdict.upper()}** | {'; '.join(d.reasons)} | "
                     f"`{d.rule_hash[:12]}` |")
    return [*lines, ""]


def _capacity(r: RunReport) -> list[str]:
    return capacity_section(r.capacity) if r.capacity is not None else list(r.capacity_lines)


def capacity_section(cap: CapacityRun) -> list[str]:
    """The sizing answer of a capacity run (its levels, plot and JSON: ``capacity/``)."""
    from bench.capacity.loadgen import capacity_lines

    if cap.load == "open":
        return ["## Capacity", "", f"Config `{cap.config_id}` ({cap.label}); a request is "
                f"{cap.request}. Open loop: requests are sent on a schedule fixed in advance "
                "and latency counts from the intended send. Plot, JSON and vLLM-format "
                "levels: `capacity/`.", "", *cap.lines]
    return ["## Capacity", "", f"Config `{cap.config_id}` ({cap.label}); a request is "
            f"{cap.request}. Closed loop: each user waits for its answer before sending the "
            "next. Plot and JSON: `capacity/`.", "",
            *capacity_lines(cap.levels, cap.slo, cap.answer)]


def _not_enforced(r: RunReport) -> str:
    hits = sorted({c.ops.unauthorized_hits for c in r.configs if c.pruned_reason is None})
    if not hits or hits == [0]:
        return " — no filter ran in this experiment (none was needed: no config retrieved a "\
               "document outside its caller's roles)."
    counts = ", ".join(str(h) for h in hits)
    return (" — no filter ran in this experiment, so entitlement was not enforced: the "
            f"rankings hold {counts} documents restricted to roles other than the caller's "
            "(configs.parquet `unauthorized_hits`). Run with `filters=entitlement` to enforce "
            "it (and gate `unauthorized_hits` at max 0).")


def _resources_by_stage(samples: Sequence[ResourceSample]
                        ) -> list[tuple[str, int, int | None, int | None]]:
    """One row per stage, in first-seen order: the highest peak RSS, heap and VRAM of its
    samples (a stage watched twice — the dataset load and its plan node — is one row; None:
    never read, as heap off Linux and VRAM without a GPU)."""
    def top(a: int | None, b: int | None) -> int | None:
        return a if b is None else b if a is None else max(a, b)

    rows: dict[str, tuple[int, int | None, int | None]] = {}
    for s in samples:
        rss, heap, vram = rows.get(s.stage, (0, None, None))
        rows[s.stage] = (max(rss, s.peak_rss_bytes), top(heap, s.heap_peak_bytes),
                         top(vram, s.peak_vram_bytes))
    return [(stage, *vals) for stage, vals in rows.items()]


def _latency_rows(timings: Sequence[StageTiming]) -> list[str]:
    groups: dict[tuple[str, str], list[StageTiming]] = {}
    for t in timings:
        groups.setdefault((t.stage, t.sample_kind), []).append(t)
    out = []
    for (stage, kind), ts in groups.items():
        ms = np.asarray([t.wall_ms for t in ts])
        items = sum(t.n_items for t in ts)
        rate = items / (ms.sum() / 1000.0) if ms.sum() > 0 else float("nan")
        when = "cached run" if all(t.from_cache for t in ts) else "this run"
        if len(ms) == 1:  # one whole-stage time: no distribution to take percentiles of
            out.append(f"| {stage} | {kind} | 1 | {ms[0]:.2f} | - | - | {rate:.1f} | {when} |")
            continue
        p50, p95, p99 = np.percentile(ms, [50, 95, 99])
        flag = "" if len(ms) >= MIN_P99_SAMPLES else " ⚠"
        out.append(f"| {stage} | {kind} | {len(ms)} | {p50:.2f} | {p95:.2f} | "
                   f"{p99:.2f}{flag} | {rate:.1f} | {when} |")
    out.append("")
    out.append(f"A stage timed once (a whole-stage total) shows its time under p50. ⚠ p99 "
               f"from fewer than {MIN_P99_SAMPLES} samples is not reliable.")
    return out


def _cost_section(r: RunReport) -> list[str]:
    """Cost per query by component (mean, p50, p99) and what each config leaves unpriced."""
    if not r.costs:
        return []
    lines = ["## Cost per query", "",
             "| config | component | mean | p50 | p99 |", "|---|---|---:|---:|---:|"]
    for c in r.costs:
        for name, mean, p50, p99 in c.rows:
            lines.append(f"| {c.label} | {name} | {mean:.3g} | {p50:.3g} | {p99:.3g} |")
    lines += ["", "In the configured prices' currency, over each config's end-to-end queries "
              "(a generated config: its answered queries): query-time stages at the worker's "
              "price, generation by tokens or by time, index storage amortised over the "
              "month's queries (bench.cost.prices)."]
    for c in r.costs:
        if c.unpriced:
            lines.append(f"Not priced for {c.label}: {'; '.join(c.unpriced)}.")
    lines.append("")
    return lines

