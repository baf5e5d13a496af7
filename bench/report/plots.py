"""PNG plots of the report (matplotlib, Agg), returned as bytes.

Rules (issue 11, "reports a person reads in a minute"): every config appears in every plot —
long lists are paginated, never cut; values are drawn as points with their 95 % CI bars on an
axis zoomed to the data (bars from zero would hide the differences); configs are numbered as in
the report's tables (``#3``) so labels stay short.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

from bench.report.fmt import common_value
from bench.report.load import ConfigView
from bench.report.views import Front
from bench.results.records import SummaryRow

#: configs per page of a metric plot
PER_PAGE = 25


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> bytes:
    plt = _plt()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def zoomed_limits(lows: Sequence[float], highs: Sequence[float],
                  margin: float = 0.08) -> tuple[float, float]:
    """Axis limits around [min low, max high] with a relative margin (a flat range gets a
    small fixed pad so its points stay visible)."""
    lo, hi = min(lows), max(highs)
    pad = (hi - lo) * margin if hi > lo else max(abs(hi) * 0.01, 1e-3)
    return lo - pad, hi + pad


def metric_pages(configs: Sequence[ConfigView], numbers: dict[str, int], metric: str,
                 scopes: Sequence[str], per_page: int = PER_PAGE) -> list[bytes]:
    """One figure per page of ``per_page`` configs; one facet per scope; point + CI bar each.

    Configs without a value for a scope are shown with the label "no value" (not dropped).
    """
    plt = _plt()
    out = []
    n_pages = max(1, math.ceil(len(configs) / per_page))
    for page in range(n_pages):
        chunk = list(configs[page * per_page:(page + 1) * per_page])
        height = 1.2 + 0.32 * len(chunk)
        fig, axes = plt.subplots(1, len(scopes), figsize=(3.2 * len(scopes) + 2.2, height),
                                 squeeze=False, sharey=True)
        ys = list(range(len(chunk)))[::-1]
        for ax, scope in zip(axes[0], scopes, strict=True):
            flat = _flat([c.mean(metric, scope) for c in configs])
            if flat is not None:
                # the same value for every config (on every page): say it, draw nothing
                ax.text(0.5, 0.5, f"{flat:.4f} for all\n{len(configs)} configs\n(saturated)",
                        ha="center", va="center", transform=ax.transAxes, fontsize=8)
                ax.set_title(scope.removeprefix("category:"), fontsize=9)
                ax.set_xticks([])
                continue
            lows, highs = [], []
            for y, c in zip(ys, chunk, strict=True):
                row = c.mean(metric, scope)
                if row is None or row.mean is None:
                    ax.annotate("no value", (0.02, y), xycoords=("axes fraction", "data"),
                                fontsize=7, color="grey", va="center")
                    continue
                m = row.mean
                lo = min(row.ci_low if row.ci_low is not None else m, m)
                hi = max(row.ci_high if row.ci_high is not None else m, m)
                ax.errorbar([m], [y], xerr=[[m - lo], [hi - m]], fmt="o", capsize=3,
                            color="C0", markersize=4)
                lows.append(lo)
                highs.append(hi)
            if lows:
                ax.set_xlim(*zoomed_limits(lows, highs))
            ax.set_title(scope.removeprefix("category:"), fontsize=9)
            ax.grid(axis="x", alpha=0.3)
            ax.tick_params(labelsize=7)
        axes[0][0].set_yticks(ys)
        axes[0][0].set_yticklabels([f"#{numbers[c.key]} {c.display}"[:38] for c in chunk],
                                   fontsize=7)
        axes[0][0].set_ylim(-0.7, len(chunk) - 0.3)
        suffix = f" — page {page + 1}/{n_pages}" if n_pages > 1 else ""
        fig.suptitle(f"{metric} (mean, 95 % CI; axis zoomed to the data){suffix}", fontsize=10)
        fig.tight_layout()
        out.append(_png(fig))
    return out


def _flat(rows: Sequence[SummaryRow | None]) -> float | None:
    return common_value(r.mean for r in rows if r is not None and r.mean is not None)


_STYLE = {"front": ("*", "C3", 11), "tied": ("o", "C1", 6), "dominated": ("o", "0.6", 5)}


def front_plot(front: Front, numbers: dict[str, int]) -> bytes:
    """Quality vs one cost: every measured config with its CI bar, numbered; the front as a
    staircase; statistically tied configs in orange; pruned ones as x on the floor at their
    cost when they have one."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    lows, highs = [], []
    pts = list(zip(front.inputs, front.points, strict=True))
    # labels of configs at nearly the same point (fused lanes often are) are stacked, not
    # printed over each other: the k-th config in cost order within 3 % of the previous
    # one's cost and 2 % of the quality span goes k lines up
    drawn = sorted((float(i.cost), float(i.quality), i.key) for i, p in pts
                   if p.status in _STYLE and i.cost is not None and i.quality is not None)
    span = (max(q for _, q, _ in drawn) - min(q for _, q, _ in drawn)) if drawn else 0.0
    stack: dict[str, int] = {}
    for k, (cost, quality, key) in enumerate(drawn):
        near = [j for j in range(k) if abs(drawn[j][0] - cost) <= 0.03 * max(abs(cost), 1e-12)
                and abs(drawn[j][1] - quality) <= 0.02 * max(span, 1e-12)]
        stack[key] = max((stack[drawn[j][2]] + 1 for j in near), default=0)
    for inp, pt in pts:
        if pt.status not in _STYLE or inp.quality is None or inp.cost is None:
            continue
        marker, color, size = _STYLE[pt.status]
        lo = min(inp.ci_low if inp.ci_low is not None else inp.quality, inp.quality)
        hi = max(inp.ci_high if inp.ci_high is not None else inp.quality, inp.quality)
        ax.errorbar([inp.cost], [inp.quality], yerr=[[inp.quality - lo], [hi - inp.quality]],
                    fmt=marker, color=color, markersize=size, capsize=2, elinewidth=0.8)
        ax.annotate(f"#{numbers[inp.key]}", (inp.cost, inp.quality), fontsize=7,
                    xytext=(3, 3 + 8 * stack[inp.key]), textcoords="offset points")
        lows.append(lo)
        highs.append(hi)
    fr = sorted((float(i.cost), float(i.quality)) for i, p in pts
                if p.status == "front" and i.cost is not None and i.quality is not None)
    if len(fr) > 1:
        ax.step([c for c, _ in fr], [q for _, q in fr], where="post", color="C3", alpha=0.5)
    if lows:
        ylo, yhi = zoomed_limits(lows, highs)
        ax.set_ylim(ylo, yhi)
        pruned = [(i.cost, i.key) for i, p in pts if p.status == "pruned" and i.cost is not None]
        for cost, key in pruned:
            ax.plot([cost], [ylo], "x", color="k", clip_on=False)
            ax.annotate(f"#{numbers[key]} pruned", (cost, ylo), fontsize=6,
                        xytext=(2, 4), textcoords="offset points")
    costs = [i.cost for i, p in pts if i.cost is not None and i.cost > 0]
    if costs and max(costs) / min(costs) > 20:
        # a wide cost range (ANN sweeps span decades) reads better on a log axis
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(plt.NullFormatter())  # decade labels only: no clutter
    n_pruned = sum(1 for _, p in pts if p.status == "pruned")
    n_none = sum(1 for _, p in pts if p.status == "no data")
    ax.set_xlabel(f"{front.axis.name} ({front.axis.unit}), lower is better")
    ax.set_ylabel(f"{front.metric} (95 % CI), {'higher' if front.higher_is_better else 'lower'}"
                  " is better")
    ax.set_title(f"{front.metric} vs {front.axis.name}: ★ front, ● orange tied, grey dominated"
                 f"\n{n_pruned} pruned, {n_none} without data (see table)", fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig)
