"""A capacity study's files: ``study.json`` (everything), ``vllm/<level>.json`` (each level
as a ``vllm bench serve --save-result`` file), ``capacity.md`` and ``capacity.png``
(achieved vs offered rate, latency percentiles and goodput vs rate, the knee marked)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path

from bench.capacity.components import plan_lines
from bench.capacity.faults import fault_table
from bench.capacity.metrics import LevelMetrics, table
from bench.capacity.study import Study, study_record
from bench.results.write import atomic_write_bytes


def one_replica_levels(st: Study) -> list[LevelMetrics]:
    """Every open-loop level on one replica (knee probes and sweep), by offered rate."""
    seen: dict[str, LevelMetrics] = {}
    for p in st.knee.probes:
        for i, m in enumerate(p.runs):
            seen[f"{m.label}#{i}"] = m
    for m in st.sweep:
        seen[m.label] = m
    return sorted(seen.values(), key=lambda m: m.offered_rps)


def plot(st: Study, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lv = one_replica_levels(st)
    x = [m.offered_rps for m in lv]
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(15, 4.2))
    a1.plot(x, [m.achieved_rps for m in lv], "o", label="achieved")
    if x:
        a1.plot([0, max(x)], [0, max(x)], "k:", lw=0.8, label="achieved = offered")
    a1.set_xlabel("offered rate (req/s, open loop)")
    a1.set_ylabel("achieved rate (req/s)")
    for name in ("p50", "p95", "p99"):
        a2.plot(x, [m.e2el.percentiles[name] for m in lv], "o", label=f"E2EL {name}")
    if all(m.ttft.n for m in lv) and lv:
        a2.plot(x, [m.ttft.percentiles["p95"] for m in lv], "x", label="TTFT p95")
    for slo, v in st.settings.slo_ms.items():
        a2.axhline(v, color="k", ls="--", lw=0.8, label=f"SLO {slo} {v:g} ms")
    a2.set_yscale("log")
    a2.set_xlabel("offered rate (req/s)")
    a2.set_ylabel("latency from intended send (ms)")
    a3.plot(x, [m.goodput_fraction for m in lv], "o", label="goodput share")
    if all(m.quality_goodput_fraction is not None for m in lv) and lv:
        a3.plot(x, [m.quality_goodput_fraction for m in lv], "x", label="quality-goodput share")
    a3.axhline(st.settings.attainment, color="k", ls="--", lw=0.8, label="attainment target")
    a3.set_xlabel("offered rate (req/s)")
    a3.set_ylabel("share of requests")
    k = st.knee
    for ax in (a1, a2, a3):
        if k.rate_rps is not None:
            ax.axvline(k.rate_rps, color="C3", lw=1.0, label=f"knee {k.rate_rps:.2f}")
            if k.ci_low_rps is not None:
                ax.axvspan(k.ci_low_rps, k.ci_high_rps if k.ci_high_rps is not None
                           else max(x or [k.ci_low_rps]), color="C3", alpha=0.12)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(f"{st.backend}: {k.text}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _f(v: float | None, fmt: str = ".1f") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


def lines(st: Study) -> list[str]:
    s = st.settings
    out = [f"**{st.sizing}.**", "",
           f"Target: {st.backend} ({st.kind}). Study wall time {st.wall_s:.0f} s"
           + (f", {st.resumed_levels} levels resumed from an earlier run" if st.resumed_levels
              else "") + ".", ""]
    if st.ceiling is not None:
        out += [f"- Generator: {st.ceiling.text}; levels above it are refused.", ""]
    c, o = st.closed, st.open_same_load
    out += ["### Closed loop vs open loop at the same mean load", "",
            "| load | achieved req/s | E2EL p50 / p95 / p99 ms |", "|---|---:|---|"]
    for m in (c, o):
        if m is not None:
            out.append(f"| {m.label} | {m.achieved_rps:.2f} | {_f(m.e2el.percentiles['p50'])} / "
                       f"{_f(m.e2el.percentiles['p95'])} / {_f(m.e2el.percentiles['p99'])} |")
    out += ["", "The closed loop's users wait for their answers before sending the next, so "
            "it never sees a queue; the open loop sends on schedule and counts the wait "
            "(coordinated omission).", "", "### Knee", "", f"{st.knee.text}.", "",
            "| rate req/s | runs | goodput share mean | CI | verdict |", "|---:|---:|---:|---|---|"]
    for p in st.knee.probes:
        out.append(f"| {p.rate_rps:.2f} | {len(p.runs)} | {p.mean:.1%} | {p.ci_low:.1%} - "
                   f"{p.ci_high:.1%} | {p.verdict} |")
    qk = st.quality_knee
    if qk is not None:
        qtext = qk.text.replace("knee", "knee of the quality-goodput share", 1)
        out += ["", f"Quality-goodput (within the SLOs **and** correct): {qtext}, from the "
                "same level runs.", "",
                "| rate req/s | quality-goodput share mean | CI | verdict |", "|---:|---:|---|---|"]
        out += [f"| {p.rate_rps:.2f} | {p.mean:.1%} | {p.ci_low:.1%} - {p.ci_high:.1%} | "
                f"{p.verdict} |" for p in qk.probes]
    out += ["", "### Levels (vLLM's metric names; latency from the intended send)", "",
            *table([st.unloaded, *st.sweep]), ""]
    out += streams_table([st.unloaded, st.closed, *one_replica_levels(st)])
    if st.quality:
        out += ["### Quality under load (paired per query against the unloaded run; a request "
                "without an answer scores 0)", "",
                "| offered req/s | answer metric mean | paired: unloaded -> loaded | "
                "delta [95 % CI] | queries | timeouts | failed | rate limited |",
                "|---:|---:|---|---|---:|---:|---:|---:|"]
        for q in st.quality:
            out.append(f"| {q.offered_rps:.2f} | {_f(q.quality_mean, '.3f')} | "
                       f"{_f(q.paired_unloaded, '.3f')} -> {_f(q.paired_loaded, '.3f')} | "
                       f"{_f(q.delta_vs_unloaded, '+.3f')} [{_f(q.ci_low, '+.3f')}, "
                       f"{_f(q.ci_high, '+.3f')}] | {q.n_queries} | {q.timeouts} | {q.failed} | "
                       f"{q.rate_limited} |")
        out.append("")
    sc = st.scale_out
    if sc is not None:
        # a search stopped by the generator's ceiling measured a lower bound, not the knee
        capped = " (>=, at the ceiling)" if sc.knee_n is not None and (
            sc.knee_n.stopped_by == "ceiling") else ""
        out += [f"### Scale-out to {sc.replicas} replicas, checked", "",
                "| quantity | predicted (linear) | measured | error |", "|---|---:|---:|---:|",
                f"| knee req/s | {_f(sc.knee_predicted, '.2f')} | {_f(sc.knee_measured, '.2f')}"
                f"{capped} | {_f(sc.knee_error, '+.0%')}{capped} |",
                f"| E2EL p95 ms at {_f(sc.fixed_rps, '.2f')} req/s | {_f(sc.p95_predicted_ms)} | "
                f"{_f(sc.p95_measured_ms)} | {_f(sc.p95_error, '+.0%')} |", "",
                f"Predicted p95: one replica at {_f(sc.fixed_rps, '.2f')} / {sc.replicas} req/s "
                f"(round-robin splits the traffic). "
                + ("" if sc.knee_n is None else f"{sc.replicas}-replica search: "
                   f"{sc.knee_n.text}."), ""]
    if st.plan is not None:
        out += plan_lines(st.components, st.plan)
    if st.faults:
        out += ["### Faults", "", *fault_table(list(st.faults)), ""]
    if st.cost.get("per_1m_queries") is not None:
        out += [f"Cost at the knee ({s.worker_kind} at {st.cost['price_per_hour']:g} / h): "
                f"{st.cost['per_1m_queries']:.2f} per 1M queries, "
                f"{_f(st.cost['per_1m_correct'], '.2f')} per 1M correct answers.", ""]
    for r in st.refused:
        out.append(f"- refused: {r}")
    for n in st.notes:
        out.append(f"- note: {n}")
    return [*out, ""]


def _ci(t: dict[str, float | None] | None) -> str:
    if t is None:
        return "- (too few samples)"
    hi = "open" if t.get("ci_high") is None else _f(t["ci_high"])
    return f"{_f(t['value'])} [{_f(t.get('ci_low'))}, {hi}]"


def streams_table(levels: Sequence[LevelMetrics]) -> list[str]:
    """Fresh vs repeated queries per level (a server cache shows as the gap), the tail with
    its CI where the level has the samples, and the quality-goodput share's CI."""
    out = ["### Honest streams: first-seen vs repeated queries, tail latency", "",
           "| level | requests | repeats | E2EL first-seen p50 / p99 ms | E2EL repeated p50 / "
           "p99 ms | E2EL p99 [95 % CI] | E2EL p99.9 [95 % CI] | quality-goodput share "
           "[95 % CI] |", "|---|---:|---:|---|---|---|---|---|"]
    for m in levels:
        fr, rp = m.e2el_fresh, m.e2el_repeat
        qg = ("-" if m.quality_goodput_ci is None or m.quality_goodput_fraction is None else
              f"{m.quality_goodput_fraction:.1%} [{m.quality_goodput_ci[0]:.1%}, "
              f"{m.quality_goodput_ci[1]:.1%}]")
        out.append(f"| {m.label} | {m.n_requests} | {m.repeats} | "
                   f"{_f(fr.percentiles['p50'])} / {_f(fr.percentiles['p99'])} | "
                   f"{_f(rp.percentiles['p50'])} / {_f(rp.percentiles['p99'])} | "
                   f"{_ci(m.tail.get('p99'))} | {_ci(m.tail.get('p99.9'))} | {qg} |")
    return [*out, ""]


def _name(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_")[:80] or "level"


def write_study(st: Study, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    js = out_dir / "study.json"
    atomic_write_bytes(js, json.dumps(study_record(st), default=str, indent=1).encode())
    vdir = out_dir / "vllm"
    vdir.mkdir(exist_ok=True)
    levels: Sequence[LevelMetrics] = [st.unloaded, st.closed, *one_replica_levels(st)]
    for i, m in enumerate(levels):
        atomic_write_bytes(vdir / f"{i:02d}-{_name(m.label)}.json",
                           json.dumps(m.to_vllm()).encode())
    png = plot(st, out_dir / "capacity.png")
    md = out_dir / "capacity.md"
    atomic_write_bytes(md, "\n".join(["# Capacity", "", *lines(st), f"![capacity]({png.name})",
                                      ""]).encode())
    return [js, md, png, vdir]
