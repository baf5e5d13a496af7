"""The result of ``+experiment=traffic`` (bench.traces.traffic) and its one-page report.

``LoopResult`` is what ``traffic.json`` holds: the steps with their status, the figures of
each step that ran, the expectations checked. ``report_md`` renders ``traffic.md``: it opens
with **FAILED** (the failed step and why; the later steps are not run and their sections are
missing), or with the expectations missed, or **Complete**.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Step:
    name: str
    status: str = "not run"  # ok | failed | not run
    seconds: float = 0.0
    detail: str = ""


@dataclass
class LoopResult:
    """What ``traffic.json`` holds; ``traffic.md`` is its rendering."""

    settings: dict[str, Any]
    sizes: dict[str, int] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    served: dict[str, Any] = field(default_factory=dict)
    traffic: dict[str, Any] = field(default_factory=dict)
    imported: dict[str, Any] = field(default_factory=dict)
    evaluations: dict[str, Any] = field(default_factory=dict)
    sample: dict[str, Any] = field(default_factory=dict)
    drift: dict[str, Any] = field(default_factory=dict)
    guardrails: dict[str, Any] = field(default_factory=dict)
    replay: list[dict[str, Any]] = field(default_factory=list)
    quality: list[dict[str, Any]] = field(default_factory=list)
    judged: dict[str, Any] = field(default_factory=dict)
    review: dict[str, Any] = field(default_factory=dict)
    labelled: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    loop_s: float = 0.0
    run_s: float | None = None

    @property
    def failed(self) -> Step | None:
        return next((s for s in self.steps if s.status == "failed"), None)

    @property
    def missed(self) -> list[dict[str, Any]]:
        return [c for c in self.checks if not c["ok"]]

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else (3 if self.missed else 0)


def _ci(m: Mapping[str, Any] | None, fmt: str = ".3f", key: str = "mean") -> str:
    if m is None:
        return "-"
    return f"{m[key]:{fmt}} [{m['ci_low']:{fmt}}, {m['ci_high']:{fmt}}]"


def report_md(res: LoopResult) -> str:
    s = res.settings
    failed = res.failed
    if failed:
        head = (f"**FAILED** at step `{failed.name}`: {_cell(failed.detail)}. The sections of the "
                "steps after it are missing; this report is not a complete run.")
    elif res.missed:
        head = (f"**Ran, {len(res.missed)} expectation(s) missed** (exit 3): "
                + "; ".join(c["check"] for c in res.missed) + ".")
    else:
        head = "**Complete**: every step ran and every expectation held."
    lines = ["# Production-traffic loop (`+experiment=traffic`)", "", head, ""]
    wall = (f"{res.run_s:.0f} s for the whole run (the config's evaluation and the loop), "
            if res.run_s is not None else "")
    lines += [f"Wall time: {wall}{res.loop_s:.0f} s for the loop (time.perf_counter in the "
              "run's process).", ""]
    z = res.sizes
    lines += [f"Sizes: windows of {s['per_window']} requests (reference {z.get('reference')}, "
              f"clean {z.get('clean')}, injected {z.get('injected')} of which "
              f"{z.get('injected_absent')} of category `{s['absent_category']}`), Poisson "
              f"arrivals at {s['rate_rps']:g} req/s, k = {s['k']}, corpus "
              f"{z.get('corpus_documents')} documents; regenerate rate "
              f"{s['regenerated_rate']:g} (injected {s['injected_regenerated_rate']:g}); "
              f"{s['pii_requests']} reference requests carry an e-mail address.", ""]
    lines += ["| step | status | s | detail |", "|---|---|---:|---|"]
    lines += [f"| {x.name} | {x.status} | {x.seconds:.1f} | {_cell(x.detail)} |"
              for x in res.steps]
    lines.append("")
    if res.served:
        lines += ["## Served", "", "| server | config | start s | overrides |",
                  "|---|---|---:|---|"]
        for name, v in res.served.items():
            lines.append(f"| {name} | {v.get('config_id')} {v.get('label', '')} | "
                         f"{(v.get('start_s') or 0):.1f} | "
                         f"{' '.join(v.get('overrides', [])) or '(the run config)'} |")
        t = res.traffic
        if t:
            lines += ["", f"Traffic: {t['requests']} requests, failed {t['failed'] or 0}; "
                          f"latency from the intended send p50 {t['p50_ms']:.1f} ms, p95 "
                          f"{t['p95_ms']:.1f} ms; latest send {t['max_late_ms']:.1f} ms after "
                          "its schedule.", ""]
    if res.imported:
        i = res.imported
        lines += ["## Import", "", "| spans | traces | records | skipped (by reason) | "
                  "partial (by reason) | documents resolved | unknown | fingerprint mismatch "
                  "| PII replacements (records) |", "|---:|---:|---:|---|---|---:|---:|---:|---:|",
                  f"| {i['spans']} | {i['traces']} | {i['records']} | "
                  f"{_counts(i['skipped'])} | {_counts(i['partial'])} | {i['docs_resolved']} | "
                  f"{i['docs_unknown']} | {i['fingerprint_mismatch']} | "
                  f"{i['pii_replacements']} ({i['records_with_pii']}) |", ""]
    if res.evaluations:
        e = res.evaluations
        lines += ["## Evaluation events", "",
                  f"hit@{s['k']} of every answerable request as `gen_ai.evaluation.result` "
                  f"events: {e['written']} written, {e['read_back']} read back, "
                  f"{e['identical']} identical, {e['on_imported_spans']} on imported spans. "
                  "Mean by window: " + ", ".join(
                      f"{w} {v:.3f}" if v is not None else f"{w} -"
                      for w, v in e["mean_by_window"].items()) + ".", ""]
    if res.sample:
        m = res.sample
        lines += ["## Sample", "", f"{m['sampled']} of {m['records']} records "
                  f"({m['uniform']} in the uniform {s['sample_rate']:g} sample); by design "
                  f"{_counts(m['by_design'])}; by window {_counts(m['by_window'])}.", ""]
    if res.drift:
        lines += ["## Drift (reference vs window)", "",
                  f"Alarm: either test's p below alpha / 2 = {s['alpha'] / 2:g}.", "",
                  "| window | test | n ref / cur | statistic | p | alarm |",
                  "|---|---|---|---:|---:|---|"]
        for w, d in res.drift.items():
            for t in d["tests"]:
                lines.append(f"| {w} | {t['test']} | {t['n_reference']} / {t['n_current']} "
                             f"| {t['statistic']:.4f} | {t['p_value']:.4f} | "
                             f"{'ALARM' if d['alarm'] else 'no'} |")
        lines.append("")
    if res.quality:
        lines += ["## Expected quality from the slice mix", "",
                  f"The golden set's per-category `{res.quality[0]['metric']}` (this run's "
                  "evaluation) re-weighted to each window's route mix: the expected value under "
                  "the window's mix, and its change against the golden set's own mix with a "
                  "bootstrap 95 % CI (window requests and each slice's golden queries "
                  "resampled). Traffic in a slice the golden set cannot score is listed, not "
                  "guessed.", "", "| window | requests | golden mix | window's mix | expected "
                  "change [95 % CI] | traffic the golden set scores | not scored (share) |",
                  "|---|---:|---:|---:|---|---:|---|"]
        for q in res.quality:
            miss = ", ".join(f"{x['slice']} {x['traffic_share']:.2f}" for x in q["slices"]
                             if x["golden_mean"] is None and x["traffic_share"] > 0) or "none"
            lines.append(f"| {q['window']} | {q['requests']} | {q['golden']:.3f} | "
                         f"{q['expected']:.3f} | {q['delta']:+.3f} [{q['ci_low']:+.3f}, "
                         f"{q['ci_high']:+.3f}] | {q['covered_share']:.2f} | {miss} |")
        lines.append("")
    if res.guardrails:
        lines += ["## Guardrails", "", "| window | rule | status | value | bound | n | "
                  "deploy in window | triage |", "|---|---|---|---:|---|---:|---|---|"]
        for w, outs in res.guardrails.items():
            for o in outs:
                v = "-" if o["value"] is None else f"{o['value']:.4g}"
                lines.append(f"| {w} | {o['rule']} | {o['status']} | {v} | {o['bound']} | "
                             f"{o['n']} | {', '.join(o['deploys']) or 'no'} | "
                             f"{o['triage']} |")
        lines.append("")
    if res.replay:
        lines += ["## Shadow replay of the sample", "",
                  "Agreement with production's retrieved list: overlap@k and RBO (p = 0.9), "
                  "mean with bootstrap 95 % CI; the candidate's server-side latency (p50 / p95 "
                  "with bootstrap CIs).", "",
                  "| candidate | n | failed | overlap@k | RBO | p50 ms | p95 ms |",
                  "|---|---:|---:|---|---|---|---|"]
        for r in res.replay:
            lines.append(f"| {r['candidate']} | {r['n']} | {sum(r['failed'].values())} | "
                         f"{_ci(r['overlap'])} | {_ci(r['rbo'])} | "
                         f"{_ci(r['p50_ms'], '.1f', 'value')} | "
                         f"{_ci(r['p95_ms'], '.1f', 'value')} |")
        lines.append("")
    if res.judged:
        j = res.judged
        lines += ["## Shadow replay: judge metrics, candidate vs production", "",
                  f"**Plumbing check**: the judge model is `{j['judge_model']}` on the CPU; a "
                  "135M model's verdicts show that generation, judging and pairing work end to "
                  "end, not which config answers better. Production's answers are its traced "
                  f"answers to {s.get('answers')} questions it answered after the windows; each "
                  "candidate answered the same questions under replay with the same generator "
                  "config. Each answer is judged against its own context (its first "
                  f"{s.get('context_k')} retrieved documents). Delta = candidate - production "
                  "over the requests both sides scored, bootstrap 95 % CI and sign-flip p. "
                  "An answer identical to one judged before (same question, answer and "
                  "context) is judged once and its verdict repeated"
                  + (f" (verdicts repeated: "
                        f"{_counts({k: v for k, v in j['reused'].items() if v})})."
                     if any(j.get("reused", {}).values()) else "."), "",
                  "| candidate | metric | requests | paired | production | candidate | delta "
                  "[95 % CI] | not scored: production / candidate |",
                  "|---|---|---:|---:|---|---|---|---|"]
        for p in j["pairs"]:
            d = p["delta"]
            dd = "-" if d is None else (f"{d['delta']:+.3f} [{d['ci_low']:+.3f}, "
                                        f"{d['ci_high']:+.3f}] (p {d['p_value']:.3f})")
            lines.append(f"| {p['candidate']} | {p['metric']} | {p['requests']} | {p['n']} | "
                         f"{_ci(p['production'])} | {_ci(p['candidate_mean'])} | {dd} | "
                         f"{_counts(p['not_scored_production']) or '0'} / "
                         f"{_counts(p['not_scored_candidate']) or '0'} |")
        lines.append("")
    if res.labelled:
        v = res.review
        lines += ["## Shadow replay: labelled metrics on reviewed rows", "",
                  f"The sample's {v['queued']} records through the review queue (the reviewer "
                  "simulated by the golden judgements of each question), merged as golden rows "
                  f"of the monitoring split ({v['merged']} merged, {v['must_abstain']} "
                  "must-abstain without a ranking metric). Production's traced top "
                  f"{s['k']} against each replayed candidate's, paired per query "
                  "(candidate - production, bootstrap 95 % CI, sign-flip p).", "",
                  "| candidate | metric | reviewed queries | production | candidate | delta "
                  "[95 % CI] | p |", "|---|---|---:|---:|---:|---|---:|"]
        for r in res.labelled:
            c = r["comparison"]
            if c is None:
                lines.append(f"| {r['candidate']} | {r['metric']} | 0 | - | - | - | - |")
                continue
            lines.append(f"| {r['candidate']} | {r['metric']} | {r['n']} | {c['mean_a']:.3f} "
                         f"| {c['mean_b']:.3f} | {c['delta']:+.3f} [{c['ci_low']:+.3f}, "
                         f"{c['ci_high']:+.3f}] | {c['p_value']:.3f} |")
        lines.append("")
    if res.checks:
        lines += ["## Expectations", "", "| check | held | got |", "|---|---|---|"]
        lines += [f"| {c['check']} | {'yes' if c['ok'] else '**no**'} | {c['got']} |"
                  for c in res.checks]
        lines.append("")
    return "\n".join(lines)


def _cell(text: str) -> str:
    """One table cell: a server's log tail may hold newlines and pipes."""
    return " ".join(text.split()).replace("|", "\\|")


def _counts(d: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items()) or "none"


def write_report(res: LoopResult, out: Path) -> Path:
    data = asdict(res)
    data["exit_code"] = res.exit_code
    (out / "traffic.json").write_text(json.dumps(data, indent=2, default=str))
    path = out / "traffic.md"
    path.write_text(report_md(res))
    return path
