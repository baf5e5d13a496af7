"""Sampling a window of traffic for review: a seeded uniform sample kept apart from
oversampled strata, every row with its inclusion probability.

Designs are independent Bernoulli draws per record, each from its own seeded hash stream
(``u = hash(seed, design, trace_id)``, so a record's fate does not depend on the order or
size of the window):

- ``uniform``: every record with probability ``uniform_rate`` (default 2 %);
- ``thumbs_down`` (feedback -1), ``regenerated``, ``low_confidence`` (``confidence`` below
  ``low_confidence_below``, or the top retrieved score when no confidence is recorded): the
  records of the stratum with probability ``rate`` each;
- ``by`` (``route`` or ``tenant``): each group of the window gets ``per_group`` expected rows,
  probability ``min(1, per_group / group size)``.

A sampled row carries the designs that drew it, ``p_uniform`` and ``pi``, the probability
that ANY design draws it (``1 - prod(1 - p_d)``). Traffic-weighted estimates are honest two
ways: the uniform rows alone with weight ``1 / p_uniform``, or every sampled row with weight
``1 / pi`` (Horvitz-Thompson over the union). ``estimate`` computes both.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bench.errors import ConfigError
from bench.traces.record import TraceRecord


@dataclass(frozen=True)
class SamplingPlan:
    seed: int = 0
    uniform_rate: float = 0.02
    thumbs_down_rate: float = 1.0
    regenerated_rate: float = 0.5
    low_confidence_rate: float = 0.5
    low_confidence_below: float = 0.3
    by: str | None = None  # "route" | "tenant"
    per_group: int = 5

    def check(self) -> SamplingPlan:
        for name in ("uniform_rate", "thumbs_down_rate", "regenerated_rate",
                     "low_confidence_rate"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ConfigError(name, f"must be a probability in [0, 1], got {v}")
        if self.uniform_rate <= 0:
            raise ConfigError("uniform_rate", "must be > 0: the uniform sample is what keeps "
                                              "traffic-weighted estimates honest")
        if self.by not in (None, "route", "tenant"):
            raise ConfigError("by", f"must be route or tenant, got {self.by!r}")
        if self.per_group < 1:
            raise ConfigError("per_group", f"must be >= 1, got {self.per_group}")
        return self


@dataclass(frozen=True)
class Sampled:
    record: TraceRecord
    designs: tuple[str, ...]
    p_uniform: float
    pi: float
    #: probability of each design for this record (designs it is not eligible for: absent)
    p_design: tuple[tuple[str, float], ...] = field(default=())

    @property
    def in_uniform(self) -> bool:
        return "uniform" in self.designs

    @property
    def weight(self) -> float:
        return 1.0 / self.pi


def _u(seed: int, design: str, trace_id: str) -> float:
    h = hashlib.blake2b(f"{seed}\x00{design}\x00{trace_id}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2.0**64


def _low_confidence(r: TraceRecord, below: float) -> bool:
    if r.confidence is not None:
        return r.confidence < below
    top = r.documents[0].score if r.documents else None
    return top is not None and top < below


def design_probabilities(records: Sequence[TraceRecord], plan: SamplingPlan
                         ) -> list[dict[str, float]]:
    """Per record: design -> inclusion probability (designs it is eligible for)."""
    groups: Counter[str] = Counter()
    if plan.by:
        groups.update(getattr(r, plan.by) for r in records)
    out = []
    for r in records:
        p = {"uniform": plan.uniform_rate}
        if r.thumbs < 0:
            p["thumbs_down"] = plan.thumbs_down_rate
        if r.regenerated:
            p["regenerated"] = plan.regenerated_rate
        if _low_confidence(r, plan.low_confidence_below):
            p["low_confidence"] = plan.low_confidence_rate
        if plan.by:
            key = getattr(r, plan.by)
            p[f"{plan.by}:{key}"] = min(1.0, plan.per_group / groups[key])
        out.append(p)
    return out


def draw(records: Sequence[TraceRecord], plan: SamplingPlan) -> list[Sampled]:
    """The sampled rows of a window, in the window's order."""
    plan.check()
    out = []
    for r, probs in zip(records, design_probabilities(records, plan), strict=True):
        hit = tuple(d for d, p in probs.items() if _u(plan.seed, d, r.trace_id) < p)
        if not hit:
            continue
        pi = 1.0 - math.prod(1.0 - p for p in probs.values())
        out.append(Sampled(r, hit, plan.uniform_rate, pi, tuple(probs.items())))
    return out


@dataclass(frozen=True)
class Estimate:
    """A traffic-weighted mean from a sample: from the uniform rows alone and from every
    row (Horvitz-Thompson with 1/pi), with the rows each used."""

    uniform: float | None
    n_uniform: int
    weighted: float | None
    n_all: int


def estimate(sample: Sequence[Sampled], value: Callable[[TraceRecord], float],
             n_window: int) -> Estimate:
    """Mean of ``value`` over the whole window estimated from ``sample`` (HT totals divided
    by the known window size)."""
    uni = [s for s in sample if s.in_uniform]
    u = (sum(value(s.record) / s.p_uniform for s in uni) / n_window) if uni else None
    w = (sum(value(s.record) * s.weight for s in sample) / n_window) if sample else None
    return Estimate(u, len(uni), w, len(sample))


def sampled_to_json(s: Sampled) -> dict[str, object]:
    from bench.traces.record import record_to_json

    return {"trace_id": s.record.trace_id, "span_id": s.record.span_id,
            "designs": list(s.designs), "in_uniform": s.in_uniform,
            "p_uniform": s.p_uniform, "pi": s.pi, "weight": s.weight,
            "p_design": dict(s.p_design), "record": record_to_json(s.record)}
