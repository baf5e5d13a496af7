"""Find the knee: the highest offered rate whose goodput fraction stays >= the attainment
target, with a confidence interval from repeated levels.

Each probed rate is run ``repeats`` times (fresh seeded schedules). Its attainment CI is the
wider of the between-run Student-t interval of the runs' goodput fractions and the Wilson
interval of the pooled requests (a t-interval of three identical 100 % runs would claim
certainty that 3 x 60 requests cannot give). A rate PASSES when the CI's low end is >= the
target, FAILS when its high end is below it, and is UNSURE otherwise — then more runs are
added at that rate, up to ``max_repeats``.

Search: double the rate from ``start_rps`` until one fails (never above ``max_rps``, the
generator's ceiling), then bisect between the highest passing and the lowest failing rate.
The knee's CI is that bracket [highest pass, lowest fail]; the point estimate interpolates
the mean fraction's crossing of the target inside it. It stops when the bracket is narrower
than ``ci_width`` (relative to its low end), or after ``max_levels`` level runs or
``max_seconds`` of load, or when a rate stays unsure after ``max_repeats`` — and says which.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from bench.capacity.metrics import LevelMetrics
from bench.metrics.stats import student_t_ppf

Verdict = Literal["pass", "fail", "unsure"]
#: measure(rate_rps, repeat) -> one level run at that rate (repeat seeds the schedule)
Measure = Callable[[float, int], LevelMetrics]


def wilson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    z = -student_t_ppf((1 - confidence) / 2, 10**6)
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


@dataclass(frozen=True)
class Probe:
    """One probed rate and its runs."""

    rate_rps: float
    runs: tuple[LevelMetrics, ...]
    mean: float
    ci_low: float
    ci_high: float
    verdict: Verdict

    @staticmethod
    def of(rate: float, runs: Sequence[LevelMetrics], target: float,
           confidence: float = 0.95, quality: bool = False) -> Probe:
        """``quality``: judge the quality-goodput share (SLOs met AND correct) instead."""
        if quality:
            f = np.asarray([r.quality_goodput_fraction or 0.0 for r in runs])
            good = sum(r.quality_good or 0 for r in runs)
        else:
            f = np.asarray([r.goodput_fraction for r in runs])
            good = sum(r.good for r in runs)
        lo, hi = wilson(good, sum(r.n_requests for r in runs), confidence)
        if f.size >= 2:
            half = -student_t_ppf((1 - confidence) / 2, f.size - 1) * f.std(ddof=1) / math.sqrt(
                f.size)
            lo, hi = min(lo, f.mean() - half), max(hi, f.mean() + half)
        lo, hi = max(0.0, float(lo)), min(1.0, float(hi))
        verdict: Verdict = "pass" if lo >= target else "fail" if hi < target else "unsure"
        return Probe(rate, tuple(runs), float(f.mean()), lo, hi, verdict)


@dataclass(frozen=True)
class Knee:
    """The knee (None when even the lowest probed rate failed) and its CI bracket; the
    bracket's high end is None when every rate passed up to ``max_rps``."""

    rate_rps: float | None
    ci_low_rps: float | None
    ci_high_rps: float | None
    attainment: float
    probes: tuple[Probe, ...]
    stopped_by: Literal["width", "levels", "seconds", "ceiling", "unresolved", "floor"]
    levels_run: int
    seconds: float

    @property
    def text(self) -> str:
        if self.rate_rps is None and not self.probes:
            return "no knee: no level was run (see the generator's ceiling)"
        if self.rate_rps is None and any(p.verdict != "fail" for p in self.probes):
            return ("knee undetermined: no probed rate showed a goodput share >= "
                    f"{self.attainment:.0%} with confidence in {self.levels_run} level runs "
                    "(more requests per level or more repeats would tell)")
        if self.rate_rps is None:
            return (f"no knee: goodput share < {self.attainment:.0%} already at the lowest "
                    f"probed rate ({self.probes[0].rate_rps:g} req/s)")
        hi = "beyond" if self.ci_high_rps is None else f"{self.ci_high_rps:.2f}"
        why = {"width": "CI narrower than asked", "levels": "level budget spent",
               "seconds": "time budget spent", "ceiling": "reached the generator's ceiling",
               "unresolved": "a rate stayed unsure after every repeat",
               "floor": "lowest rate"}[self.stopped_by]
        return (f"knee {self.rate_rps:.2f} req/s (CI {self.ci_low_rps:.2f} - {hi}) at goodput "
                f"share >= {self.attainment:.0%}; {self.levels_run} level runs in "
                f"{self.seconds:.0f} s, stopped: {why}")


def find_knee(measure: Measure, *, start_rps: float, attainment: float = 0.9,
              repeats: int = 2, max_repeats: int = 4, ci_width: float = 0.25,
              max_levels: int = 20, max_seconds: float = 300.0,
              max_rps: float = math.inf, min_rps: float | None = None,
              confidence: float = 0.95) -> Knee:
    if not 0 < attainment <= 1 or repeats < 1 or max_repeats < repeats or start_rps <= 0:
        raise ValueError("need 0 < attainment <= 1, 1 <= repeats <= max_repeats, start_rps > 0")
    t_start = time.perf_counter()
    probes: dict[float, Probe] = {}
    used = 0
    floor = min_rps if min_rps is not None else start_rps / 16

    def budget_left() -> bool:
        return used < max_levels and time.perf_counter() - t_start < max_seconds

    def probe(rate: float) -> Probe:
        nonlocal used
        runs = list(probes[rate].runs) if rate in probes else []
        want = repeats
        while budget_left():
            while len(runs) < want and budget_left():
                runs.append(measure(rate, len(runs)))
                used += 1
            p = Probe.of(rate, runs, attainment, confidence)
            probes[rate] = p
            if p.verdict != "unsure" or want >= max_repeats:
                return p
            want += 1
        p = Probe.of(rate, runs, attainment, confidence) if runs else Probe(
            rate, (), float("nan"), 0.0, 1.0, "unsure")
        probes[rate] = p
        return p

    def stop(why: Literal["width", "levels", "seconds", "ceiling", "unresolved", "floor"]
             ) -> Knee:
        done = sorted((p for p in probes.values() if p.runs), key=lambda p: p.rate_rps)
        passed = [p.rate_rps for p in done if p.verdict == "pass"]
        failed = [p.rate_rps for p in done if p.verdict == "fail"]
        lo = max(passed) if passed else None
        hi = min((r for r in failed if lo is None or r > lo), default=None)
        point = _crossing(done, attainment, lo, hi)
        return Knee(point, lo, hi, attainment, tuple(done), why, used,
                    time.perf_counter() - t_start)

    rate = min(start_rps, max_rps)
    p = probe(rate)
    while p.verdict == "fail" and rate / 2 >= floor and budget_left():  # start too high
        rate /= 2
        p = probe(rate)
    if p.verdict == "fail":
        return stop("floor" if budget_left() else "levels")
    while p.verdict != "fail":  # bracket upwards: an unsure rate is no upper end either
        if rate >= max_rps:
            return stop("ceiling")
        if not budget_left():
            return stop("levels" if used >= max_levels else "seconds")
        rate = min(rate * 2, max_rps)
        p = probe(rate)
    while True:
        k = stop("width")
        if k.ci_low_rps is None or k.ci_high_rps is None:
            return k if p.verdict != "unsure" else stop("unresolved")
        if (k.ci_high_rps - k.ci_low_rps) <= ci_width * k.ci_low_rps:
            return k
        if not budget_left():
            return stop("levels" if used >= max_levels else "seconds")
        mid = (k.ci_low_rps + k.ci_high_rps) / 2
        if mid in probes and probes[mid].verdict == "unsure":
            return stop("unresolved")
        p = probe(mid)
        if p.verdict == "unsure" and len(p.runs) >= max_repeats:
            # try both halves once more before giving up: the knee is near mid
            lo_mid, hi_mid = (k.ci_low_rps + mid) / 2, (mid + k.ci_high_rps) / 2
            if budget_left():
                probe(lo_mid)
            if budget_left():
                probe(hi_mid)
            k2 = stop("width")
            if (k2.ci_low_rps, k2.ci_high_rps) == (k.ci_low_rps, k.ci_high_rps):
                return stop("unresolved")


def quality_knee(knee: Knee, confidence: float = 0.95) -> Knee | None:
    """The knee of the quality-goodput share (requests within the SLOs AND correct) from the
    same level runs as ``knee`` (no new load): each probed rate judged on that share with the
    same CI rule, the bracket [highest passing, lowest failing rate above it]. None when the
    levels carry no answer metric."""
    runs = [p for p in knee.probes if p.runs]
    if not runs or any(r.quality_good is None for p in runs for r in p.runs):
        return None
    done = [Probe.of(p.rate_rps, p.runs, knee.attainment, confidence, quality=True)
            for p in sorted(runs, key=lambda p: p.rate_rps)]
    passed = [p.rate_rps for p in done if p.verdict == "pass"]
    lo = max(passed) if passed else None
    hi = min((p.rate_rps for p in done if p.verdict == "fail" and (lo is None or
                                                                    p.rate_rps > lo)),
             default=None)
    return Knee(_crossing(done, knee.attainment, lo, hi), lo, hi, knee.attainment,
                tuple(done), knee.stopped_by, knee.levels_run, knee.seconds)


def _crossing(done: Sequence[Probe], target: float, lo: float | None,
              hi: float | None) -> float | None:
    """Where the mean fraction crosses the target, linearly between neighbouring probes in
    the bracket; the bracket's low end when no crossing is inside it."""
    if lo is None:
        return None
    inside = [p for p in done if p.rate_rps >= lo and (hi is None or p.rate_rps <= hi)]
    for a, b in itertools.pairwise(inside):
        if a.mean >= target > b.mean:
            return a.rate_rps + (a.mean - target) / (a.mean - b.mean) * (b.rate_rps - a.rate_rps)
    return lo
