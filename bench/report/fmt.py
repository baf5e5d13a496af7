"""How every report writes a number, and when a metric cannot tell configs apart.

One formatter for every report — the in-run report (markdown), the merged report (content,
evidence), the sweep report, the answer tables, the stages' own sections (iterative, route,
system, rewrite) and the gates' JUnit lines: ``-`` for a missing value (and, with
``finite=True``, for NaN), fixed digits otherwise, an optional sign. One saturation rule:
every config has the same mean (within ``tol``), so the metric is flagged instead of drawn as a
row of equal bars; one config alone never is.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

#: a table cell: its text and the number behind it (None for a missing value)
Cell = tuple[str, float | None]


def num(v: float | None, digits: int = 4, sign: str = "", *, finite: bool = False,
        spec: str | None = None) -> str:
    """``v`` with ``digits`` decimals (``sign="+"``: always signed); ``-`` when missing.

    ``finite=True``: NaN and infinities are missing too (a mean over no query); ``spec``: a
    format spec used instead of ``digits`` and ``sign`` (``".6g"`` for a gate's bound)."""
    if v is None or (finite and not math.isfinite(v)):
        return "-"
    return format(v, spec) if spec is not None else f"{v:{sign}.{digits}f}"


def cell(v: float | None, digits: int = 4) -> Cell:
    """``num(v)`` with the number kept for sorting and styling."""
    return (num(v, digits), None if v is None else float(v))


def common_value(values: Iterable[float], tol: float = 1e-9) -> float | None:
    """The value every config shares when all of at least two are equal within ``tol``
    (e.g. Recall@100 = 1.0 everywhere: the metric is saturated); None otherwise."""
    vals = list(values)
    if len(vals) < 2 or max(vals) - min(vals) > tol:
        return None
    return float(vals[0])
