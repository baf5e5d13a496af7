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
    from bench.pipeline.outcome import Executed

log = logging.getLogger(__name__)
#: verifier metrics (bench.judge.verifiers) the section tabulates when a config has them
VERIFIER_METRICS = ("unsupported_numbers", "quantity_consistency", "structured_match",
                    "nli_support")


def uncalibrated(done: Executed) -> list[Any]:
    """The gates let through uncalibrated (the check ``prepare`` made, made again)."""
    block = (done.settings.resolved.get("judge") or {}).get("calibration")
    return check_calibrated_gates(gated_metrics(done.settings), done.comps.judge, block,
                                  dataset=done.dataset.name,
                                  evaluated={q.split for q in done.dataset.queries})


def _verifier_rows(done: Executed) -> list[tuple[str, str, float | None, int, int]]:
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


def write(done: Executed, run_dir: Path, comparisons: Sequence[Comparison],
          latency: LatencyRun) -> StageReport | None:
    if done.comps.judge is None:
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
    if len(lines) == 2:
        return None
    return StageReport("judge_files", tuple(tables), tuple(lines), manifest)
