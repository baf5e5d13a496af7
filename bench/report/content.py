"""What a merged report says, as data: sections of tables, notes and PNG figures.

``build(merged, options)`` decides the content once; ``bench.report.html`` and
:func:`render_markdown` only lay it out, so report.md and report.html never disagree.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bench.report import plots
from bench.report.drilldown import Drilldown, all_drilldowns, all_pairs, dataset_lookup
from bench.report.evidence import decisions_section, power_section
from bench.report.fmt import cell
from bench.report.load import Merged, RunData
from bench.report.sections import Cell, Figure, Section, Table
from bench.report.views import CostAxis, Front, cost_axes, front, saturated, scopes
from bench.results.records import SummaryRow


@dataclass(frozen=True)
class Options:
    #: quality metrics shown; None = ndcg@10 and recall@100 when present, else the first two
    metrics: tuple[str, ...] | None = None
    #: the metric of the Pareto fronts and the drill-down (default: the first shown)
    front_metric: str | None = None
    all_pairs: bool = False
    price_per_hour: float | None = None
    drill_n: int = 5
    drill_depth: int = 5
    per_page: int = plots.PER_PAGE
    title: str = "bench report"


@dataclass(frozen=True)
class Report:
    title: str
    header: tuple[str, ...]
    sections: tuple[Section, ...]


def _ci(row: SummaryRow | None) -> Cell:
    if row is None or row.mean is None:
        return ("-", None)
    if row.ci_low is None or row.ci_high is None:
        return (f"{row.mean:.4f}", row.mean)
    return (f"{row.mean:.4f} [{row.ci_low:.4f}, {row.ci_high:.4f}]", row.mean)


def choose_metrics(merged: Merged, wanted: tuple[str, ...] | None) -> list[str]:
    have = merged.metrics()
    if wanted:
        return [m for m in wanted if m in have]
    pref: list[str] = [m for m in ("ndcg@10", "recall@100") if m in have]
    return pref or have[:2]


def build(merged: Merged, opt: Options = Options()) -> Report:
    metrics = choose_metrics(merged, opt.metrics)
    fm = opt.front_metric or (metrics[0] if metrics else None)
    numbers = {c.key: i + 1 for i, c in enumerate(merged.configs)}
    header = _header(merged)
    sections: list[Section] = []
    axes = cost_axes(opt.price_per_hour)
    fronts = [front(merged, fm, a) for a in axes] if fm else []
    sections.append(_configs_section(merged, metrics, fronts, numbers, axes))
    sections.append(_metric_plots(merged, metrics, numbers, opt))
    if fronts:
        sections.append(_fronts_section(fronts, numbers))
    sections += _comparisons(merged, metrics, numbers)
    sections += [s for s in (power_section(merged, metrics), decisions_section(merged))
                 if s is not None]
    if opt.all_pairs and fm:
        sections.append(_all_pairs(merged, fm))
    if fm:
        sections.append(_drill(merged, fm, opt))
    sections.append(_pruning(merged))
    sections.append(_resources(merged))
    return Report(opt.title, tuple(header), tuple(s for s in sections if s is not None))


def _header(merged: Merged) -> list[str]:
    out = []
    for r in merged.runs:
        m = r.manifest
        ds = m.get("dataset") or {}
        tel = m.get("telemetry") or {}
        gpu = tel.get("sampler") if isinstance(tel, dict) else None
        vram = any(c.peak_vram_bytes is not None for c in r.configs)
        out.append(
            f"{r.name}: experiment `{m.get('experiment', '?')}`, run `{m.get('run_id', '?')}`, "
            f"device `{m.get('device', '?')}`, dataset `{ds.get('name', '?')}` "
            f"({ds.get('documents', '?')} documents, {ds.get('queries', '?')} queries), "
            f"{len(r.configs)} configs"
            + (f"; GPU sampler: {gpu}" if gpu else
               "" if vram else "; no GPU telemetry in this run (no VRAM figures)"))
        emb = m.get("embedding") or {}
        if emb.get("truncated_chunks"):
            total = emb.get("chunks_embedded") or ds.get("chunks", "?")
            out.append(f"⚠ {r.name}: {emb['truncated_chunks']} of {total} passages are longer "
                       "than the embedder's maximum length and were embedded truncated (the "
                       "text past it is not seen by the dense lanes)")
        if ds.get("dropped_queries"):
            out.append(f"{r.name}: {ds['dropped_queries']} queries of the source were left "
                       f"out: {ds.get('dropped_reason') or 'no positive judgement'}")
    if merged.missing_jobs:
        out.append(f"Missing (failed or unfinished) multirun jobs: {len(merged.missing_jobs)} "
                   f"({', '.join(merged.missing_jobs)})")
    return out


def _configs_section(merged: Merged, metrics: list[str], fronts: list[Front],
                     numbers: dict[str, int], axes: list[CostAxis]) -> Section:
    status = {(f.axis.name, p.key): p.status for f in fronts for p in f.points}
    heads = ["#", "run", "config", "lane", "status",
             *(f"{m} (95 % CI)" for m in metrics), "p50 ms", "p95 ms", "p99 ms",
             "latency from", "QPS", "peak VRAM MiB", "cost / 1M queries",
             *(f"front vs {f.axis.name}" for f in fronts if f.measured)]
    rows: list[tuple[Cell, ...]] = []
    for c in merged.configs:
        vram = None if c.peak_vram_bytes is None else c.peak_vram_bytes / 2**20
        cost = axes[2].value(c)
        rows.append((
            (str(numbers[c.key]), numbers[c.key]), (c.run_name, c.run_name),
            (c.label, c.label), (c.kind, c.kind),
            (c.status if c.kept else f"pruned: {c.pruned_reason or ''}".strip(), c.status),
            *(_ci(c.mean(m)) for m in metrics),
            cell(c.latency.p50_ms, 3), cell(c.latency.p95_ms, 3), cell(c.latency.p99_ms, 3),
            (c.latency.source, c.latency.source), cell(c.qps, 0), cell(vram, 0),
            # per million queries: a CPU query costs ~1e-8 of an hourly price, invisible at 6 dp
            cell(None if cost is None else cost * 1e6, 4),
            *((status.get((f.axis.name, c.key), "-"), status.get((f.axis.name, c.key)))
              for f in fronts if f.measured)))
    numeric = (True, False, False, False, False, *(True for _ in metrics), True, True, True,
               False, True, True, True, *(False for f in fronts if f.measured))
    notes = [
        "Every config of every run is listed (pruned ones with their reason). Click a header "
        "to sort (HTML).",
        "Latency (single-query mode; 'latency from' says which figure): 'e2e: sum along "
        "the chain' — per query, the query-time stages of the config's chain added up "
        "(the query's own encoding for a dense lane, search, the shares of fusion and "
        "filters, reranking), so a fused lane shows the sum of its inputs and a reranked "
        "config includes its reranker; runs recorded "
        "before e2e columns existed show 'search only' (the first-stage search) and, for "
        "fused lanes, 'sum of inputs' rebuilt from the input lanes' samples.",
        "Front status (quality metric "
        + (fronts[0].metric if fronts else "-") + "): front = not dominated; dominated = the "
        "best front config costing no more is better beyond doubt on one axis (the paired "
        "per-query 95 % CI of the quality delta excludes 0, or its p95 latency CI lies below "
        "this config's); tied = off the front but not resolved from it; pruned; no data = "
        "that cost was not measured. Where two configs' queries do not pair, quality falls "
        "back to the overlap of their marginal CIs (see Pareto fronts).",
    ]
    for f in fronts:
        if not f.measured:
            notes.append(f"No config measured {f.axis.name}: that front is not drawn.")
    for m in metrics:
        v = saturated(merged, m)
        if v is not None:
            notes.append(f"⚠ {m} is saturated: every config scores {v:.4f}; it cannot tell "
                         "these configs apart (not plotted).")
    return Section("Configs", notes, [Table(tuple(heads), tuple(rows), numeric)])


def _metric_plots(merged: Merged, metrics: list[str], numbers: dict[str, int],
                  opt: Options) -> Section:
    sec = Section("Quality per config and category")
    kept = [c for c in merged.configs if c.kept]
    pruned = len(merged.configs) - len(kept)
    if pruned:
        sec.notes.append(f"{pruned} pruned configs have no quality values (listed in Configs).")
    for m in metrics:
        v = saturated(merged, m)
        if v is not None:
            sec.notes.append(f"⚠ {m}: saturated at {v:.4f} for all {len(kept)} configs — not "
                             "plotted (a wall of equal bars says nothing).")
            continue
        pages = plots.metric_pages(kept, numbers, m, scopes(merged, m), opt.per_page)
        for i, png in enumerate(pages):
            sec.figures.append(Figure(
                f"{_slug(m)}_{i + 1}.png", png,
                f"{m}: all {len(kept)} kept configs"
                + (f", page {i + 1} of {len(pages)}" if len(pages) > 1 else "")))
    return sec


def _fronts_section(fronts: list[Front], numbers: dict[str, int]) -> Section:
    sec = Section("Pareto fronts", ["p95 latency: the Configs table's p95 (see its 'latency "
                                    "from' column: end to end along each config's chain "
                                    "where the run recorded it)."])
    for f in fronts:
        if not f.measured:
            sec.notes.append(f"{f.metric} vs {f.axis.name}: no config measured it.")
            continue
        sec.figures.append(Figure(f"front_{_slug(f.metric)}_{_slug(f.axis.name)}.png",
                                  plots.front_plot(f, numbers),
                                  f"{f.metric} vs {f.axis.name}"))
        counts = {s: sum(1 for p in f.points if p.status == s)
                  for s in ("front", "tied", "dominated", "pruned", "no data")}
        sec.notes.append(f"{f.metric} vs {f.axis.name}: "
                         + ", ".join(f"{v} {k}" for k, v in counts.items()))
        moved = [p for p in f.points if p.screen is not None and p.screen != p.status]
        by_overlap = sum(1 for p in f.points if p.basis == "ci overlap")
        sec.notes.append(
            "  paired evidence vs the marginal-CI-overlap screen: "
            + ("no config moves" if not moved else "; ".join(
                f"#{numbers[p.key]} {p.screen} → {p.status} (vs #{numbers[p.reference]})"
                for p in moved if p.reference is not None))
            + (f"; {by_overlap} decided by CI overlap (no paired values)" if by_overlap
               else ""))
    return sec


def _comparisons(merged: Merged, metrics: list[str], numbers: dict[str, int]) -> list[Section]:
    out = []
    for r in merged.runs:
        rows = [c for c in r.comparisons if c.scope == "all" and c.metric in metrics]
        if not rows:
            continue
        label = {c.config_id: c for c in r.configs}
        base = label.get(rows[0].baseline_config_id)
        body = []
        for c in rows:
            cv = label.get(c.config_id)
            body.append((
                (f"#{numbers[cv.key]} {cv.label}" if cv else c.config_id, c.config_id),
                (c.metric, c.metric), cell(c.mean_baseline, 4), cell(c.mean_config, 4),
                (f"{c.delta:+.4f} [{c.ci_low:+.4f}, {c.ci_high:+.4f}]", c.delta),
                cell(c.mde, 4), cell(c.p_value, 4), cell(c.p_holm, 4), (str(c.n), c.n)))
        notes = ["delta = config − baseline per query, 95 % bootstrap CI, sign-flip p, Holm over "
                 "the configs compared with the baseline. MDE: the smallest true |delta| the "
                 "comparison detects with 80 % power (Bonferroni level α / m over the m configs "
                 "compared, conservative for Holm); where the CI holds 0, no difference as large "
                 "as the MDE was seen."]
        if any(c.mde is None for c in rows):
            notes.append("A '-' MDE: deltas without spread, or a file written before schema 3.")
        out.append(Section(
            f"Paired comparisons vs baseline ({r.name}: {base.label if base else '?'})", notes,
            [Table(("config", "metric", "baseline", "config mean", "delta (95 % CI)", "MDE", "p",
                    "p Holm", "n"), tuple(body),
                   (False, False, True, True, True, True, True, True, True))]))
    return out


def _all_pairs(merged: Merged, metric: str) -> Section:
    sec = Section(f"All-pairs comparisons ({metric})",
                  ["Every pair of kept configs of runs on the same dataset (same fingerprint), "
                   "paired per query on the queries both scored (delta = B − A, 95 % bootstrap "
                   "CI, sign-flip p); Holm-adjusted over all pairs of the group."])
    groups: dict[str, list[RunData]] = {}
    for r in merged.runs:
        if r.per_query is None:
            sec.notes.append(f"{r.name}: no per_query.parquet, not compared.")
            continue
        fp = (r.manifest.get("dataset") or {}).get("fingerprint") or r.name
        groups.setdefault(str(fp), []).append(r)
    for runs in groups.values():
        rows = all_pairs(runs, metric)
        name = ", ".join(r.name for r in runs)
        if not rows:
            sec.notes.append(f"{name}: fewer than two configs, no pairs.")
            continue
        sec.tables.append(Table(
            ("runs", "A", "B", "mean A", "mean B", "delta B−A (95 % CI)", "p", "p Holm", "n"),
            tuple(((name, name), (x["a_label"], x["a_label"]), (x["b_label"], x["b_label"]),
                   cell(x["mean_a"], 4), cell(x["mean_b"], 4),
                   (f"{x['delta']:+.4f} [{x['ci_low']:+.4f}, {x['ci_high']:+.4f}]", x["delta"]),
                   cell(x["p_value"], 4), cell(x["p_holm"], 4), (str(x["n"]), x["n"]))
                  for x in rows),
            (False, False, False, True, True, True, True, True, True)))
    return sec


def _drill(merged: Merged, metric: str, opt: Options) -> Section:
    hib = merged.higher_is_better(metric)
    sec = Section(f"Per-query drill-down ({metric})")
    for r in merged.runs:
        if r.per_query is None:
            sec.notes.append(f"{r.name}: no per_query.parquet — no drill-down.")
            continue
        lookup = dataset_lookup(r)
        sec.notes.append(f"{r.name}: query texts and titles from {lookup.source}.")
        for d in all_drilldowns(r, metric, lookup, higher_is_better=hib, n=opt.drill_n,
                                depth=opt.drill_depth):
            sec.children.append(_drill_section(d, merged, metric))
    return sec


def _drill_section(d: Drilldown, merged: Merged, metric: str) -> Section:
    c = next(x for x in merged.configs if x.key == d.config_key)
    sec = Section(f"{c.display}")
    heads = ("query", "category", metric, "baseline", "query text", "gold ids",
             "top retrieved (✓ = gold)")
    for name, rows in (("worst queries", d.worst), ("largest wins vs baseline", d.wins),
                       ("largest losses vs baseline", d.losses)):
        if not rows:
            sec.notes.append(f"{name}: none")
            continue
        sec.children.append(Section(name, tables=[Table(heads, tuple((
            (q.query_id, q.query_id), (q.category, q.category), cell(q.value, 4),
            cell(q.baseline, 4), (q.text, q.text), (", ".join(q.gold_ids), None),
            ("; ".join(f"{'✓ ' if t.relevant else ''}{t.doc_id}"
                       + (f" ({t.title})" if t.title else "") for t in q.top), None))
            for q in rows), (False, False, True, True, False, False, False))]))
    return sec


def _pruning(merged: Merged) -> Section:
    """What the budget pruned and the work that saved (run.json ``budget.work_saved``)."""
    sec = Section("Budget pruning")
    rows = []
    for r in merged.runs:
        b = r.manifest.get("budget")
        w = b.get("work_saved") if isinstance(b, dict) else None
        if not isinstance(b, dict) or not isinstance(w, dict):
            continue
        stages = ", ".join(f"{k} {v}" for k, v in (w.get("skipped_by_stage") or {}).items())
        rows.append(((r.name, r.name), _cell(b.get("budget")),
                     _cell(f"{w.get('configs_pruned')} of {w.get('configs')}"),
                     _cell(f"{w.get('nodes_skipped')} of {w.get('nodes_total')}"),
                     _cell(stages or "-"), cell(w.get("seconds_saved_estimate"), 1),
                     cell(w.get("seconds_all_query_time_estimate"), 1),
                     cell(w.get("probe_wall_s"), 1)))
        if not sec.notes and w.get("how"):
            sec.notes.append(f"Work saved against running every config: {w['how']}.")
    if rows:
        sec.tables.append(Table(("run", "budget", "configs pruned", "plan nodes skipped",
                                 "skipped stage computations", "seconds saved (est.)",
                                 "seconds, all query-time nodes (est.)", "probe s"),
                                tuple(rows), (False, False, False, False, False, True, True,
                                              True)))
    else:
        sec.notes.append("No budget in these runs: nothing was probed or pruned.")
    stage_rows = []
    for r in merged.runs:
        b = r.manifest.get("budget")
        sp = b.get("stage_probes") if isinstance(b, dict) else None
        if not isinstance(sp, dict):
            continue
        kinds = ", ".join(f"{k} {v:.1f}" for k, v in (sp.get("seconds_saved_by_kind") or {})
                          .items() if isinstance(v, int | float))
        st_raw = sp.get("stated")
        st: dict[str, Any] = st_raw if isinstance(st_raw, dict) else {}
        stage_rows.append(((r.name, r.name), _cell(sp.get("configs_pruned")),
                           cell(sp.get("seconds_saved_predicted"), 1), _cell(kinds or "-"),
                           cell(sp.get("probe_cost_s"), 1), _cell(st.get("machine") or "-"),
                           cell(st.get("seconds_saved"), 2),
                           cell(st.get("embed_probe_cost_s"), 2)))
    if stage_rows:
        sec.children.append(Section("Probed before paying (budget=stages)", tables=[Table(
            ("run", "configs pruned", "seconds saved (pred.)", "by kind", "probe s",
             "stated machine", "corpus passes saved there s", "embedding probe there s"),
            tuple(stage_rows), (False, True, True, False, True, False, True, True))],
            notes=["Seconds saved: the probes' predictions of the pruned nodes on this "
                   "machine (budget_probes.json). On the stated machine (budget.stated): the "
                   "pruned corpus passes' chunks at its stated embedding rate; index builds and "
                   "generation have no stated rate and are not converted."]))
    return sec


def _resources(merged: Merged) -> Section:
    sec = Section("Resources per stage")
    for r in merged.runs:
        tel = r.manifest.get("telemetry")
        recs = tel.get("stages") if isinstance(tel, dict) else None
        if recs:
            keys = [k for k in recs[0] if k != "stage"]
            sec.tables.append(Table(("run", "stage", *keys), tuple(
                ((r.name, r.name), (s["stage"], s["stage"]),
                 *(_cell(s.get(k)) for k in keys)) for s in recs)))
            continue
        res = r.manifest.get("resources") or []
        if res:
            sec.tables.append(Table(
                ("run", "stage", "peak RSS MiB", "peak heap MiB", "peak VRAM MiB"), tuple(
                    ((r.name, r.name), (s["stage"], s["stage"]),
                     _mib(s.get("peak_rss_bytes", 0)), _mib(s.get("heap_peak_bytes")),
                     _mib(s.get("peak_vram_bytes"))) for s in res),
                (False, False, True, True, True)))
    return sec


def _mib(v: Any) -> Cell:
    return cell(None if v is None else v / 2**20, 0)


def _cell(v: Any) -> Cell:
    if v is None:
        return ("-", None)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return (v if isinstance(v, str) else json.dumps(v), str(v))
    return (f"{v:.4g}", float(v))


def _slug(s: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in s).strip("_")


def render_markdown(rep: Report, figure_dir: str = "") -> str:
    """Markdown with figures referenced as files next to it (written by the caller)."""
    lines = [f"# {rep.title}", "", *(f"- {h}" for h in rep.header), ""]

    def table(t: Table) -> list[str]:
        out = ["| " + " | ".join(t.headers) + " |",
               "|" + "|".join("---:" if (i < len(t.numeric) and t.numeric[i]) else "---"
                              for i in range(len(t.headers))) + "|"]
        out += ["| " + " | ".join(c[0].replace("|", "\\|") for c in row) + " |"
                for row in t.rows]
        return [*out, ""]

    def section(s: Section, level: int) -> list[str]:
        out = ["#" * level + " " + s.title, ""]
        out += [f"{n}" + "\n" for n in s.notes]
        for t in s.tables:
            out += table(t)
        for f in s.figures:
            out += [f"![{f.caption}]({figure_dir}{f.name})", ""]
        for ch in s.children:
            out += section(ch, level + 1)
        return out

    for s in rep.sections:
        lines += section(s, 2)
    return "\n".join(lines)
