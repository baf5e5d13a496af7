"""Agreement measures of the shadow replay, by their definitions."""

from __future__ import annotations

import pytest

from bench.traces.replay import ReplayRow, overlap_at_k, rbo, summarize, table


def test_overlap_and_rbo() -> None:
    a = ["d1", "d2", "d3", "d4"]
    assert overlap_at_k(a, a, 4) == 1.0 and rbo(a, a) == pytest.approx(1.0)
    assert overlap_at_k(a, ["d4", "d3", "d2", "d1"], 4) == 1.0
    assert overlap_at_k(a, ["x", "y", "d1", "d2"], 4) == 2 / 4
    assert rbo(a, ["x", "y", "z", "w"]) == 0.0
    # depth 2, p = 0.9: X_1 = 0, X_2 = 1 (d2 seen in both at depth 2)
    # RBO_ext = (X_2/2) p^2 + (1-p)/p * (0/1 * p + (1/2) p^2)
    p = 0.9
    assert rbo(["d1", "d2"], ["d2", "d3"]) == pytest.approx(0.5 * p**2 + (1 - p) / p * 0.5 * p**2)
    # a swap at the top costs more than a swap at the bottom
    assert rbo(a, ["d2", "d1", "d3", "d4"]) < rbo(a, ["d1", "d2", "d4", "d3"]) < 1.0


def test_summary_counts_failures_apart() -> None:
    rows = [ReplayRow(f"t{i}", "cand", "ok", 1.0, 1.0, 10.0 + i) for i in range(10)]
    rows.append(ReplayRow("t10", "cand", "status_503"))
    (s,) = summarize(rows)
    assert s.n == 10 and s.failed == {"status_503": 1}
    assert s.overlap.mean == 1.0 and s.p50_ms.value == pytest.approx(14.5)
    assert "| cand | 10 | 1 | 1.000 [1.000, 1.000]" in table([s])
