"""Pareto fronts over configs (METRICS.md): on the front when no other config is at least as
good on every objective and strictly better on one."""

from __future__ import annotations

from collections.abc import Sequence


def pareto_front(points: Sequence[Sequence[float]], higher_is_better: Sequence[bool]) -> list[bool]:
    """``points[i][j]``: config i's value of objective j. Returns on-front flags per config."""
    sign = [1.0 if h else -1.0 for h in higher_is_better]
    scored = [[s * v for s, v in zip(sign, p, strict=True)] for p in points]
    flags = []
    for i, p in enumerate(scored):
        dominated = any(
            all(q[j] >= p[j] for j in range(len(p))) and any(q[j] > p[j] for j in range(len(p)))
            for k, q in enumerate(scored)
            if k != i
        )
        flags.append(not dominated)
    return flags
