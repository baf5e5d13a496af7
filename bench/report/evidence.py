"""Report sections on the strength of the evidence: power of the golden set, and the run's
pre-registered decisions, both computed from the run's files (per_query.parquet, run.json).

Power: per run, metric and scope (all, then each category), the minimum detectable paired
effect at the run's n (bench.metrics.power, at the Bonferroni level over the configs compared
with the baseline and 80 % power), from the SD of the per-query deltas between the baseline
(the run's first config) and each other kept config — the median over them is shown, with
their range — or, in a run of one config, from its per-query SD and an assumed correlation of
0.5 between configs (sd_delta = sd). ``n for X``: queries of that scope needed for an effect X;
the golden set at the run's category mix that holds them in brackets.

Decisions: ``bench.metrics.decisions.evaluate_decisions`` on the rules of the run's config, at
the run's confidence, resamples and seed; each verdict with its reasons and the rule's hash.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from bench.compare.runs import manifest_rules, run_settings
from bench.errors import BenchError
from bench.metrics.decisions import evaluate_decisions, rules_from_config
from bench.metrics.pairing import paired
from bench.metrics.power import assumed_delta_sd, mde, n_needed
from bench.report.fmt import cell
from bench.report.load import Merged, RunData
from bench.report.sections import Cell, Section, Table
from bench.results.scores import ConfigScores

#: power of the MDE and of the n needed (the comparisons' ``mde`` column uses the same)
POWER = 0.8
#: effects (metric units) the power table sizes the golden set for
TARGET_EFFECTS = (0.01, 0.02)
#: correlation between two configs' per-query values assumed when a run has one config
ASSUMED_CORRELATION = 0.5


def _kept_scores(r: RunData) -> list[ConfigScores]:
    return [c.scores for c in r.configs if c.kept and c.scores is not None]


def _power_rows(r: RunData, metrics: Sequence[str]) -> list[tuple[Cell, ...]]:
    kept = _kept_scores(r)
    if not kept:
        return []
    base, others = kept[0], kept[1:]
    confidence, _, _ = run_settings(r.manifest)
    alpha, m = 1.0 - confidence, max(1, len(others))
    rows: list[tuple[Cell, ...]] = []
    for metric in metrics:
        if metric not in base.values:
            continue
        mask = base.valued(metric)
        cats = np.asarray(base.categories, dtype=object)[mask]
        vals = np.asarray(base.values[metric])[mask]
        pairs = [paired(base, o, metric) for o in others]
        pairs = [p for p in pairs if p[0].size > 1]
        n_all = int(vals.size)
        for scope in ["all", *(f"category:{c}" for c in dict.fromkeys(cats.tolist()))]:
            sel = np.ones(n_all, bool) if scope == "all" else cats == scope[9:]
            n = int(sel.sum())
            if n < 2:
                continue
            if pairs:
                sds = [float(np.std(b[s] - a[s], ddof=1)) for a, b, c in pairs
                       for s in [np.ones(c.size, bool) if scope == "all" else c == scope[9:]]
                       if s.sum() > 1]
                if not sds:
                    continue
                sd = float(np.median(sds))
                basis = (f"observed, median of {len(sds)} configs (SD {min(sds):.3f}–"
                         f"{max(sds):.3f})")
            else:
                sd = assumed_delta_sd(vals[sel], correlation=ASSUMED_CORRELATION)
                basis = f"assumed, correlation {ASSUMED_CORRELATION}"
            cells: list[Cell] = [(r.name, r.name), (metric, metric), (scope, scope),
                                 (str(n), n), (basis, basis), cell(sd, 4),
                                 cell(mde(sd, n, alpha=alpha, power=POWER, comparisons=m), 4)]
            for t in TARGET_EFFECTS:
                if sd == 0:
                    cells.append(("-", None))
                    continue
                need = n_needed(sd, t, alpha=alpha, power=POWER, comparisons=m)
                total = math.ceil(need * n_all / n)
                cells.append((f"{need}" if scope == "all" else f"{need} [{total}]", need))
            rows.append(tuple(cells))
    return rows


def power_section(merged: Merged, metrics: Sequence[str]) -> Section | None:
    """Minimum detectable effects per run, metric and scope (see the module docstring)."""
    rows: list[tuple[Cell, ...]] = []
    notes: list[str] = []
    for r in merged.runs:
        if r.per_query is None:
            notes.append(f"{r.name}: no per_query.parquet, no power figures.")
            continue
        rows += _power_rows(r, metrics)
    if not rows:
        return None
    notes.insert(0, "Minimum detectable effect (MDE): the true paired mean delta a comparison "
                    f"with the baseline detects with {100 * POWER:g} % power at the run's n, "
                    "two-sided at the Bonferroni level α / m over the m configs compared with "
                    "the baseline (conservative for Holm), normal approximation; '-' where the "
                    "deltas have no spread (e.g. every query at the ceiling). SD of the "
                    "per-query deltas: observed against the run's other configs, or assumed "
                    f"from the baseline's per-query SD at correlation {ASSUMED_CORRELATION} "
                    "when the run has one config. n for Δ: queries of the scope needed to "
                    "detect Δ; [golden set at this category mix].")
    headers = ("run", "metric", "scope", "n", "SD basis", "SD of deltas", "MDE",
               *(f"n for Δ = {t:g}" for t in TARGET_EFFECTS))
    numeric = (False, False, False, True, False, True, True, *(True for _ in TARGET_EFFECTS))
    return Section("Power: what this golden set can see", notes,
                   [Table(headers, tuple(rows), numeric)])


def decisions_section(merged: Merged) -> Section | None:
    """The pre-registered decisions of every run that has some (None when no run has)."""
    sec = Section("Pre-registered decisions",
                  ["Rules fixed in the experiment config before the results "
                   "(bench.metrics.decisions): adopt when every scope's paired CI lower bound "
                   "of the gain clears the minimum gain and every guardrail's clears its "
                   "budget; reject when an upper bound falls below; otherwise inconclusive, "
                   "with the golden set that would tell (80 % power at the observed gain). "
                   "The rule's SHA-256 (with confidence and power) shows a rule edited after "
                   "the results."])
    rows: list[tuple[Cell, ...]] = []
    for r in merged.runs:
        items = manifest_rules(r.manifest)
        if not items:
            continue
        if r.per_query is None:
            sec.notes.append(f"{r.name}: decisions configured but no per_query.parquet.")
            continue
        confidence, resamples, seed = run_settings(r.manifest)
        kept = _kept_scores(r)
        by_name: dict[str, ConfigScores] = {s.config_id: s for s in kept}
        labels = [c.label for c in r.configs if c.kept]
        for c in r.configs:
            if c.kept and labels.count(c.label) == 1 and c.config_id in by_name:
                by_name.setdefault(c.label, by_name[c.config_id])
        try:
            records = evaluate_decisions(rules_from_config(items), by_name, resamples=resamples,
                                         confidence=confidence, seed=seed)
        except (BenchError, ValueError) as err:
            sec.notes.append(f"{r.name}: decisions not evaluated: {err}")
            continue
        label = {c.config_id: c.label for c in r.configs}
        for d in records:
            reasons = "; ".join(d.reasons)
            need = "-" if d.n_needed is None else str(d.n_needed)
            rows.append(((r.name, r.name), (d.name, d.name), (d.verdict.upper(), d.verdict),
                         (label.get(d.candidate, d.candidate), d.candidate),
                         (label.get(d.baseline, d.baseline), d.baseline), (reasons, reasons),
                         (need, d.n_needed), (d.rule_hash[:16], d.rule_hash)))
    if not rows and not sec.notes[1:]:
        return None
    sec.tables.append(Table(("run", "rule", "verdict", "candidate", "baseline", "reasons",
                             "golden set needed", "rule sha256"), tuple(rows),
                            (False, False, False, False, False, False, True, False)))
    return sec
