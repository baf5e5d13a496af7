"""The planner's predictions and checks as markdown tables and JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from bench.report.fmt import num
from bench.scaling.base import Check, Prediction, Profile

MIB = 2**20
GIB = 2**30


def _bytes(b: float) -> str:
    return f"{b / GIB:,.2f} GiB" if b >= GIB else f"{b / MIB:,.0f} MiB"


def _seconds(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:,.1f} h"
    return f"{s / 60:,.1f} min" if s >= 120 else f"{s:,.1f} s"


def prediction_lines(profile: Profile, pred: Prediction) -> list[str]:
    """A few lines for the plan preview: total, the dominant stage, memory, disk."""
    top = max(pred.stages, key=lambda s: s.seconds)
    sizes = ", ".join(f"{p.n_chunks:,}" for p in profile.points)
    lines = [
        f"scale plan for {pred.n_chunks:,} chunks x {pred.n_queries:,} queries "
        f"(profile {profile.source}, sizes {sizes}; {pred.machine}):",
        f"  wall ~{_seconds(pred.seconds)} ("
        + ", ".join(f"{s.stage} {_seconds(s.seconds)}" for s in pred.stages)
        + f"); {top.stage} dominates ({top.seconds / pred.seconds:.0%})",
        f"  memory ~{_bytes(pred.memory_need_bytes)}: {memory_parts(pred)}; peak RSS "
        f"~{_bytes(pred.peak_rss_bytes)} (counts the mapped files' pages as far as the "
        "profile's machine held them)",
        "  disk ~" + _bytes(pred.disk_total_bytes) + " ("
        + ", ".join(f"{k} {_bytes(v)}" for k, v in pred.disk_bytes.items()) + ")",
    ]
    if pred.index_memory is not None:
        m = pred.index_memory
        lines.append(f"  the profile's index {m['factory']}: resident "
                     f"{_bytes(float(m['resident_bytes']))}, build peak "
                     f"{_bytes(float(m['peak_bytes']))}")
    lines += [f"  {n}" for n in pred.notes]
    return lines


def memory_parts(pred: Prediction) -> str:
    """The memory need in its parts: the heap (resident) + each mapped file."""
    heap = "heap" if pred.heap_measured else "RSS as heap (the runs recorded no heap)"
    parts = [f"{heap} {_bytes(pred.peak_anon_bytes)}"]
    parts += [f"{name} {_bytes(pred.disk_bytes[name])} mapped" for name in pred.mapped]
    return " + ".join(parts)


def settings_line(settings: dict[str, object]) -> str:
    """The profile's options in a line: a resolved stage config by its class and the options
    that set it apart (a pipeline run's), a scale-script option by its name."""
    parts = []
    for key, value in settings.items():
        if isinstance(value, dict):
            target = value.get("_target_")
            if not target:
                continue  # a stage the runs did not use
            opts = ", ".join(f"{k}={v}" for k, v in value.items()
                             if k != "_target_" and v not in (None, [], {}, ""))
            parts.append(f"{key} {str(target).rsplit('.', 1)[-1]}"
                         + (f" ({opts})" if opts and len(opts) < 120 else ""))
        elif value not in (None, {}, ""):
            parts.append(f"{key} {value}")
    return "; ".join(parts)


def prediction_markdown(profile: Profile, pred: Prediction) -> str:
    out = [f"# Scale plan: {pred.n_chunks:,} chunks, {pred.n_queries:,} queries", "",
           f"Profile: {profile.source} ({', '.join(f'{p.n_chunks:,}' for p in profile.points)}"
           f" chunks measured; {settings_line(profile.settings)}). Seconds: {pred.machine}.",
           "",
           "| stage | seconds | how | peak RSS | peak heap |", "|---|---:|---|---:|---:|"]
    for s in pred.stages:
        out.append(f"| {s.stage} | {num(s.seconds, spec=',.1f')} | {s.seconds_fit.describe()} | "
                   f"{_bytes(s.peak_rss_bytes)} | {_bytes(s.peak_anon_bytes)} |")
    out += ["", f"Total: **{_seconds(pred.seconds)}**; memory "
                f"**{_bytes(pred.memory_need_bytes)}** ({memory_parts(pred)}); peak RSS "
                f"{_bytes(pred.peak_rss_bytes)}; disk {_bytes(pred.disk_total_bytes)} ("
            + ", ".join(f"{k} {_bytes(v)}" for k, v in pred.disk_bytes.items()) + ")."]
    if pred.index_memory is not None:
        m = pred.index_memory
        out.append(f"Index memory math ({m['factory']}, {m['n']:,} x {m['dim']}): resident "
                   f"{_bytes(float(m['resident_bytes']))}, build peak "
                   f"{_bytes(float(m['peak_bytes']))}, lists on disk "
                   f"{_bytes(float(m['disk_lists_bytes']))}.")
    out += [f"- {n}" for n in pred.notes]
    return "\n".join(out) + "\n"


#: the figures the validation table shows, in order (disk and per-stage seconds in JSON)
SHOWN = ("seconds.total", "seconds.chunk", "seconds.embed", "seconds.index", "seconds.search",
         "peak_rss", "peak_anon", "disk.total")


def _value(figure: str, v: float) -> str:
    return num(v, spec=",.1f") + " s" if figure.startswith("seconds") else _bytes(v)


def validation_markdown(profile: Profile, checks: Sequence[Check], *, ratio: float,
                        method: str) -> str:
    out = [f"# Scale planner checked on {profile.source}", "",
           f"Each size predicted from the sizes at least {ratio:g}x smaller (method "
           f"{method}), against what was measured. Error = (predicted - measured) / measured.",
           "peak_rss: the process' ru_maxrss (mapped files' pages included, capped by the "
           "machine); peak_anon: the heap (RssAnon), the highest stage's.",
           *profile.notes, ""]
    if not checks:
        return "\n".join([*out, "No size has two sizes that much smaller to fit on."]) + "\n"
    out += ["| chunks | fitted on | reach | figure | predicted | measured | error |",
            "|---:|---|---:|---|---:|---:|---:|"]
    for c in checks:
        for f in SHOWN:
            if f not in c.figures:
                continue
            pred, meas = c.figures[f]
            err = c.error(f)
            out.append(f"| {c.n_chunks:,} | {', '.join(f'{n:,}' for n in c.fitted_on)} | "
                       f"{c.ratio:.0f}x | {f} | {_value(f, pred)} | {_value(f, meas)} | "
                       f"{'—' if err is None else f'{err:+.1%}'} |")
    return "\n".join(out) + "\n"


def to_json(profile: Profile, pred: Prediction | None = None,
            checks: Sequence[Check] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"profile": profile.source, "settings": profile.settings,
                           "sizes": [p.n_chunks for p in profile.points],
                           "heap_measured": profile.heap_measured, "notes": list(profile.notes)}
    if pred is not None:
        out["prediction"] = {
            "n_chunks": pred.n_chunks, "n_queries": pred.n_queries, "machine": pred.machine,
            "seconds": pred.seconds, "peak_rss_bytes": pred.peak_rss_bytes,
            "peak_anon_bytes": pred.peak_anon_bytes, "heap_measured": pred.heap_measured,
            "mapped": list(pred.mapped), "mapped_bytes": pred.mapped_bytes,
            "memory_need_bytes": pred.memory_need_bytes, "disk_bytes": pred.disk_bytes,
            "stages": [{**asdict(s), "seconds_fit": s.seconds_fit.describe()}
                       for s in pred.stages],
            "index_memory": pred.index_memory, "notes": list(pred.notes)}
    if checks:
        out["checks"] = [{"n_chunks": c.n_chunks, "fitted_on": list(c.fitted_on),
                          "ratio": c.ratio,
                          "figures": {f: {"predicted": p, "measured": m, "error": c.error(f)}
                                      for f, (p, m) in c.figures.items()}}
                         for c in checks]
    return out
