"""The judge stage's own results (stage list entry ``judge_files``): the labelling file of the
calibration loop, the verifiers' per-config rates, and the gates on uncalibrated LLM-judge
metrics a run let through (``judge.calibration.uncalibrated: allow``), printed first."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.judge.gating import check_calibrated_gates, gated_metrics
from bench.judge.labelling import LABELLING_FILE, labelling_rows
from bench.report.base import StageReport
from bench.results.records import Comparison

if TYPE_CHECKING:
    from bench.pipeline.latency import LatencyRun
    from bench.pipeline.view import RunView

log = logging.getLogger(__name__)
#: verifier metrics (bench.judge.verifiers) the section tabulates when a config has them
VERIFIER_METRICS = ("unsupported_numbers", "quantity_consistency", "structured_match",
                    "nli_support")


def uncalibrated(done: RunView) -> list[Any]:
    """The gates let through uncalibrated (the check ``prepare`` made, made again)."""
    block = (done.settings.resolved.get("judge") or {}).get("calibration")
    return check_calibrated_gates(gated_metrics(done.settings), done.judge, block,
                                  dataset=done.dataset.name,
                                  evaluated={q.split for q in done.dataset.queries})


def _verifier_rows(done: RunView) -> list[tuple[str, str, float | None, int, int]]:
    out = []
    for c, s in zip(done.configs, done.scores, strict=True):
        for m in VERIFIER_METRICS:
            if m not in s.values:
                continue
            a = s.accounting(m)
            valued = s.valued(m)
            mean = float(s.values[m][valued].mean()) if valued.any() else None
            out.append((c.spec.label, m, mean, a.n_scored, a.n_expected))
    return out


def write(done: RunView, run_dir: Path, comparisons: Sequence[Comparison],
          latency: LatencyRun) -> StageReport | None:
    if done.judge is None:
        return None
    lines: list[str] = ["## Judges: calibration and verifiers", ""]
    manifest: dict[str, Any] = {}
    tables: list[str] = []
    loose = uncalibrated(done)
    if loose:
        lines += ["**UNCALIBRATED JUDGE GATES** — allowed by "
                  "`judge.calibration.uncalibrated: allow`; these gates rest on a judge whose "
                  "agreement with humans is not on file:", ""]
        lines += [f"- `{u.key}` {u.metric} ({u.judge}): {u.reason}" for u in loose]
        lines.append("")
        for u in loose:
            log.warning("UNCALIBRATED judge gate %s %s: %s", u.key, u.metric, u.reason)
    manifest["uncalibrated_gates"] = [{"gate": u.key, "metric": u.metric, "judge": u.judge,
                                       "reason": u.reason} for u in loose]
    rows = labelling_rows(done)
    if rows:
        path = run_dir / LABELLING_FILE
        with open(path, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")
        tables.append(LABELLING_FILE)
        lines += [f"Verdicts for labelling: `{LABELLING_FILE}` ({len(rows)} items: query, "
                  "answer, context, score on the rubric's scale, rationale, rubric hash). "
                  "Fill in `human` and run `python -m bench.calibrate LABELS "
                  f"{LABELLING_FILE} --records conf/judge/calibration` "
                  "(docs/judges-calibration.md).", ""]
        manifest["labelling_items"] = len(rows)
    vrows = _verifier_rows(done)
    if vrows:
        lines += ["| config | verifier | mean | scored | expected |", "|---|---|---|---|---|"]
        lines += [f"| {c} | {m} | {'-' if x is None else f'{x:.3f}'} | {n} | {e} |"
                  for c, m, x, n, e in vrows]
        lines += ["", "`unsupported_numbers`: share of answers stating a number, date or "
                  "identifier found nowhere in their context or question (lower is better). "
                  "`nli_support` with `model: lexical` is a plumbing check, not inference.", ""]
        manifest["verifiers"] = [{"config": c, "metric": m, "mean": x, "n_scored": n,
                                  "n_expected": e} for c, m, x, n, e in vrows]
    elines, emanifest = _ensemble_section(done)
    if elines:
        lines += elines
        manifest["ensemble"] = emanifest
    if len(lines) == 2:
        return None
    return StageReport("judge_files", tuple(tables), tuple(lines), manifest)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _ensemble_section(done: RunView) -> tuple[list[str], list[dict[str, Any]]]:
    """Per generated config: the members' agreement and each one's score distribution."""
    from bench.judge.agreement import Stat
    from bench.judge.ensemble import as_dict, ensemble_of, summary_rows
    from bench.pipeline.answers import answered
    from bench.pipeline.lanes import ConfigKind

    ens = ensemble_of(done.judge)
    if ens is None:
        return [], []

    def ci(s: Stat) -> str:
        if s.value is None:
            return "-"
        if s.ci_low is None or s.ci_high is None:
            return f"{s.value:.3f}"
        return f"{s.value:.3f} [{s.ci_low:.3f}, {s.ci_high:.3f}]"

    lines = ["### Judge ensemble", "",
             f"{len(ens.members)} members ({', '.join(ens.labels)}), aggregate "
             f"{ens.aggregate}, quorum {ens.quorum}. Agreement between members: "
             "Krippendorff's alpha on approve/reject and on the scores (95 % bootstrap CI "
             "over answers); `-`: undefined (one value only).", "",
             "| config | metric | members | answers | alpha approve | alpha score | "
             "unanimous |", "|---|---|---|---|---|---|---|"]
    dist_lines = ["", "Score distribution per member (ceiling: share at the top of the "
                  "scale, floor: at the bottom):", "",
                  "| config | member | metric | n | mean | ceiling | floor | counts |",
                  "|---|---|---|---|---|---|---|---|"]
    manifest: list[dict[str, Any]] = []
    for c in done.configs:
        if c.spec.kind is not ConfigKind.GENERATED or c.pool is None:
            continue
        verdicts = [v for v in answered(c.spec, done).verdicts if v.repeat == 0]
        agree, dists = summary_rows(ens, verdicts)
        for a in agree:
            lines.append(f"| {c.spec.label} | {a.metric} | {a.members} | {a.n} | "
                         f"{ci(a.alpha_approve)} | {ci(a.alpha_score)} | "
                         f"{_fmt(a.unanimous)} |")
        for d in dists:
            counts = " ".join(f"{k}:{n}" for k, n in d.counts)
            dist_lines.append(f"| {c.spec.label} | {d.member} | {d.metric} | {d.n} | "
                              f"{_fmt(d.mean)} | {_fmt(d.ceiling)} | {_fmt(d.floor)} | "
                              f"{counts} |")
        manifest.append({"config": c.spec.label,
                         "agreement": [as_dict(a) for a in agree],
                         "distribution": [as_dict(d) for d in dists]})
    return [*lines, *dist_lines, ""], manifest
