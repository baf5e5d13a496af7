"""Pareto front with CI ties (definition in bench/report/pareto.py)."""

from __future__ import annotations

from bench.report.pareto import FrontInput, pareto_front, quality_cost_front


def test_pareto_front_flags() -> None:
    assert pareto_front([(0.5, 1.0), (0.6, 2.0), (0.4, 3.0)], (True, False)) == [True, True, False]


def test_ties_pruned_and_missing() -> None:
    items = [
        FrontInput("A", 0.80, 0.78, 0.82, 1.0),
        FrontInput("B", 0.90, 0.88, 0.92, 2.0),
        # dominated by B; its CI top .91 reaches B's bottom .88 -> tied
        FrontInput("C", 0.89, 0.87, 0.91, 3.0),
        # dominated; best front config costing <= 2.5 is B (.90): .71 < .88 -> dominated
        FrontInput("D", 0.70, 0.69, 0.71, 2.5),
        # dominated by A only (cost 1.5 < B's 2): .79 reaches A's .78 -> tied, reference A
        FrontInput("E", 0.775, 0.74, 0.79, 1.5),
        FrontInput("F", 0.99, 0.98, 1.0, 9.0, pruned=True),
        FrontInput("G", 0.95, 0.94, 0.96, None),
    ]
    got = {p.key: (p.status, p.reference) for p in quality_cost_front(items, higher_is_better=True)}
    assert got == {"A": ("front", None), "B": ("front", None), "C": ("tied", "B"),
                   "D": ("dominated", "B"), "E": ("tied", "A"), "F": ("pruned", None),
                   "G": ("no data", None)}


def test_lower_is_better_quality_mirrors() -> None:
    items = [FrontInput("A", 0.10, 0.08, 0.12, 1.0),
             FrontInput("B", 0.13, 0.11, 0.15, 2.0),   # worse and dearer; .11 <= .12 -> tied
             FrontInput("C", 0.20, 0.19, 0.21, 2.0)]   # .19 > .12 -> dominated
    got = [p.status for p in quality_cost_front(items, higher_is_better=False)]
    assert got == ["front", "tied", "dominated"]
