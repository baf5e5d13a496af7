"""The robustness tables: outcome shares per case type and poisoning rates, each with its n
and a Wilson score interval (``scipy.stats.binomtest(...).proportion_ci``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scipy.stats import binomtest

from bench.robustness.base import DESIRED, GENERATION_FAILED, CaseOutcome


@dataclass(frozen=True)
class Rate:
    """``k`` of ``n`` with a Wilson interval (None when n is 0)."""

    k: int
    n: int
    ci_low: float | None
    ci_high: float | None

    @property
    def value(self) -> float | None:
        return self.k / self.n if self.n else None

    def cell(self) -> str:
        if not self.n or self.ci_low is None or self.ci_high is None:
            return "n/a"
        return (f"{self.k / self.n:.1%} [{self.ci_low:.1%}, {self.ci_high:.1%}]"
                .replace("%", " %"))


def wilson(k: int, n: int, confidence: float) -> Rate:
    if n == 0:
        return Rate(k, n, None, None)
    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return Rate(k, n, float(ci.low), float(ci.high))


@dataclass(frozen=True)
class TypeRow:
    """One case type: answered / abstained / drifted (wrong: the invited answer; other)."""

    case_type: str
    desired: str
    n: int
    failed: int
    answered: Rate
    abstained: Rate
    drifted: Rate
    drifted_wrong: Rate


@dataclass(frozen=True)
class PoisonRow:
    """Retrieval- and answer-level hijack of one poisoning kind, and the filter's catch.

    ``hijack_retrieval``: attacked queries with a planted passage of their cluster in the
    top-k; ``hijack_after_filter``: the same after the token-overlap filter; ``caught``:
    planted passages in the top-k that the filter removed (passages of one cluster are not
    independent: read its CI as optimistic); ``clean_removed``: corpus passages in the top-k
    the filter removed (its false positives); ``hijack_answer``: generated answers naming the
    attacker's term; ``control_any``: clean control queries (``poison_rate`` < 1) with any
    planted passage in their top-k."""

    case_type: str
    hijack_retrieval: Rate
    hijack_after_filter: Rate
    caught: Rate
    clean_removed: Rate
    hijack_answer: Rate
    control_any: Rate


def type_rows(outcomes: Sequence[CaseOutcome], confidence: float) -> list[TypeRow]:
    """One row per case type, in first-seen order; failed generations are counted apart and
    never in n. Poisoning rows count the attacked queries that were answered."""
    order = list(dict.fromkeys(o.case_type for o in outcomes))
    rows = []
    for t in order:
        mine = [o for o in outcomes if o.case_type == t and o.attacked]
        done = [o for o in mine if o.outcome != GENERATION_FAILED]
        n = len(done)

        def count(*classes: str, done: list[CaseOutcome] = done) -> int:
            return sum(o.outcome in classes for o in done)

        rows.append(TypeRow(
            t, DESIRED[t], n, len(mine) - n,
            wilson(count("answered"), n, confidence), wilson(count("abstained"), n, confidence),
            wilson(count("drifted_wrong", "drifted_other"), n, confidence),
            wilson(count("drifted_wrong"), n, confidence)))
    return rows


def markdown(types: Sequence[TypeRow], poison: Sequence[PoisonRow], *, generator: str,
             plumbing: bool, top_k: int, threshold: float, confidence: float) -> list[str]:
    """The tables as markdown lines (``robustness.md``, the run log)."""
    pct = f"{confidence:.0%}".replace("%", " %")
    out = [f"Robustness cases answered by `{generator}`; shares with {pct} Wilson intervals; "
           "outcome classes decided by string checks (bench.robustness.outcomes)."]
    if plumbing:
        out.append("**The packaged SmolLM2-135M generator is a plumbing check: its answer-level "
                   "outcomes are not a measurement of a real system.** Retrieval-level hijack "
                   "and the filter's catch rates are real measurements with the run's encoder.")
    out += ["", "| case type | desired | n | answered | abstained | drifted | drifted to the "
            "invited wrong answer | failed |", "|---|---|---|---|---|---|---|---|"]
    for r in types:
        out.append(f"| {r.case_type} | {r.desired} | {r.n} | {r.answered.cell()} | "
                   f"{r.abstained.cell()} | {r.drifted.cell()} | {r.drifted_wrong.cell()} | "
                   f"{r.failed} |")
    if poison:
        out += ["", f"Poisoning (top-{top_k}; token-overlap filter at Jaccard >= {threshold}):",
                "", "| kind | n attacked | hijack (retrieval) | after filter | filter catch "
                "(planted passages) | clean passages removed | hijack (answer) | "
                "controls with planted passages |", "|---|---|---|---|---|---|---|---|"]
        for p in poison:
            out.append(f"| {p.case_type} | {p.hijack_retrieval.n} | "
                       f"{p.hijack_retrieval.cell()} | {p.hijack_after_filter.cell()} | "
                       f"{p.caught.cell()} (of {p.caught.n}) | {p.clean_removed.cell()} "
                       f"(of {p.clean_removed.n}) | {p.hijack_answer.cell()} (n "
                       f"{p.hijack_answer.n}) | {p.control_any.cell()} |")
    return out
