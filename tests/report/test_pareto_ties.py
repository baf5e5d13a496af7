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


def test_paired_evidence_decides_where_configs_pair() -> None:
    """C's marginal CI overlaps B's (the screen says tied), but the paired CI of B - C
    excludes 0: dominated. D's marginal CIs separate (screen: dominated) but the paired delta
    is unresolved: tied. Each point says what decided it and what the screen said."""
    items = [FrontInput("A", 0.80, 0.78, 0.82, 1.0), FrontInput("B", 0.90, 0.88, 0.92, 2.0),
             FrontInput("C", 0.89, 0.87, 0.91, 3.0), FrontInput("D", 0.70, 0.69, 0.71, 2.5),
             FrontInput("E", 0.775, 0.74, 0.79, 1.5)]
    paired = {("B", "C"): (0.004, 0.016), ("B", "D"): (-0.01, 0.41)}
    got = {p.key: p for p in quality_cost_front(
        items, higher_is_better=True, paired=lambda ref, key: paired.get((ref, key)))}
    assert (got["C"].status, got["C"].screen, got["C"].basis) == ("dominated", "tied", "paired")
    assert (got["D"].status, got["D"].screen, got["D"].basis) == ("tied", "dominated", "paired")
    # no paired values for E vs A: the screen decides, and says so
    assert (got["E"].status, got["E"].basis) == ("tied", "ci overlap")


def test_latency_dominates_only_where_the_p95_cis_separate() -> None:
    """B is better and cheaper by point estimate than C and D; quality does not resolve
    (paired CI holds 0). C's p95 CI overlaps B's: tied. D's lies above B's: dominated; and
    with a stated margin larger than the gap, D is tied again."""
    items = [FrontInput("B", 0.90, 0.88, 0.92, 100.0, cost_ci_low=95.0, cost_ci_high=105.0),
             FrontInput("C", 0.89, 0.87, 0.91, 104.0, cost_ci_low=99.0, cost_ci_high=110.0),
             FrontInput("D", 0.89, 0.87, 0.91, 130.0, cost_ci_low=120.0, cost_ci_high=140.0)]

    def tie(ref: str, key: str) -> tuple[float, float]:
        return (-0.01, 0.03)

    got = {p.key: p.status for p in quality_cost_front(items, higher_is_better=True,
                                                        paired=tie)}
    assert got == {"B": "front", "C": "tied", "D": "dominated"}
    got = {p.key: p.status for p in quality_cost_front(items, higher_is_better=True,
                                                        paired=tie, cost_margin=50.0)}
    assert got["D"] == "tied"
    # an exact cost (bytes, no CI) decides only by a stated margin
    exact = [FrontInput("B", 0.9, 0.88, 0.92, 10.0), FrontInput("C", 0.89, 0.87, 0.91, 11.0)]
    assert [p.status for p in quality_cost_front(exact, higher_is_better=True,
                                                 paired=tie)] == ["front", "tied"]
    assert [p.status for p in quality_cost_front(exact, higher_is_better=True, paired=tie,
                                                 cost_margin=0.5)] == ["front", "dominated"]
