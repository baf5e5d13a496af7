"""Budgets on whole chains, decided with confidence.

Before the full run, each config's whole chain (query embedding, search, fold, fusion,
filters, rerank: ``bench.pipeline.request``) runs on a seeded sample of queries; the probe
gives per-query milliseconds per stage and end to end (the sum along the chain). A config is
pruned only when a ceiling is exceeded WITH CONFIDENCE: the seeded bootstrap lower bound of
the statistic (p95 of a stage, p95 end to end, mean cost per query) lies above the ceiling.
A point estimate above the ceiling whose lower bound is not is kept: a 50-query probe is too
noisy to drop a config on. Peak VRAM is one high-water mark, not a sample statistic: its
"bound" is the measured peak itself.

Cost per query = ``price_per_hour`` (of the configured ``price_unit``: one GPU or one CPU
worker) x the mean end-to-end seconds of a query / 3600 — the worker is assumed busy with one
query at a time (closed loop, no batching across requests; capacity planning measures more).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from bench.config.build import OptionError

PRICE_UNITS = ("gpu_hour", "cpu_hour")


@dataclass(frozen=True)
class BudgetCheck:
    """One ceiling applied to one config's probe: ``over`` when ``bound`` > ``limit``."""

    name: str  # e.g. "e2e_p95_ms", "stage_p95_ms[rerank]", "cost_per_query", "peak_vram_bytes"
    limit: float
    measured: float  # the point estimate on the probe sample
    bound: float  # the one-sided lower confidence bound (VRAM: the peak itself)
    over: bool
    #: the latency stage of a stage ceiling (None for the others)
    stage: str | None = None

    def describe(self) -> str:
        verdict = "over" if self.over else "within"
        return (f"{self.name} {self.measured:.4g} (lower bound {self.bound:.4g}) {verdict} "
                f"budget {self.limit:g}")


def bootstrap_lower(values: np.ndarray, stat: str, *, confidence: float, resamples: int,
                    seed: int) -> float:
    """One-sided lower confidence bound of ``stat`` ("p95" | "mean") by a seeded percentile
    bootstrap over the per-query values."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        raise ValueError("no probe values")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, v.size, size=(resamples, v.size))
    draws = v[idx]
    stats = np.percentile(draws, 95, axis=1) if stat == "p95" else draws.mean(axis=1)
    return float(np.quantile(stats, 1.0 - confidence))


def point(values: np.ndarray, stat: str) -> float:
    v = np.asarray(values, dtype=np.float64)
    return float(np.percentile(v, 95)) if stat == "p95" else float(v.mean())


class ChainBudget:
    """Ceilings on a config's whole chain (null = no limit).

    probe_queries: queries in the seeded probe sample. seed: of the sample and the bootstrap.
    max_stage_p95_ms: ceiling per latency stage ({rerank: 40, retrieve: 5}); the stages are
    those the plan's query-time ops time (``Plan.query_time_stages``): a name no config of
    the run has is a config error before any work (``check_stages``).
    max_e2e_p95_ms: ceiling on the end-to-end p95 (sum along the chain per query).
    max_vram_bytes: ceiling on the probe's peak VRAM (from telemetry; never checked on CPU).
    price_per_hour / price_unit: one worker's price (gpu_hour | cpu_hour) for cost per query;
    max_cost_per_query: ceiling on it (needs a price).
    confidence, resamples: of the one-sided bootstrap lower bound that must exceed a ceiling.
    """

    def __init__(
        self,
        *,
        probe_queries: int = 50,
        seed: int = 0,
        max_stage_p95_ms: Mapping[str, float] | None = None,
        max_e2e_p95_ms: float | None = None,
        max_vram_bytes: int | None = None,
        price_per_hour: float | None = None,
        price_unit: str = "cpu_hour",
        max_cost_per_query: float | None = None,
        confidence: float = 0.95,
        resamples: int = 1000,
    ) -> None:
        if probe_queries < 2:
            raise OptionError("probe_queries", f"must be >= 2, got {probe_queries}")
        stages = dict(max_stage_p95_ms or {})
        for stage, limit in stages.items():
            if limit is None or limit <= 0:
                raise OptionError(f"max_stage_p95_ms.{stage}", f"must be > 0, got {limit}")
        for name, value in (("max_e2e_p95_ms", max_e2e_p95_ms),
                            ("max_vram_bytes", max_vram_bytes),
                            ("price_per_hour", price_per_hour),
                            ("max_cost_per_query", max_cost_per_query)):
            if value is not None and value <= 0:
                raise OptionError(name, f"must be > 0 or null, got {value}")
        if price_unit not in PRICE_UNITS:
            raise OptionError("price_unit", f"must be one of {', '.join(PRICE_UNITS)}")
        if max_cost_per_query is not None and price_per_hour is None:
            raise OptionError("max_cost_per_query", "needs price_per_hour")
        if not 0.5 < confidence < 1.0:
            raise OptionError("confidence", f"must be in (0.5, 1), got {confidence}")
        if resamples < 100:
            raise OptionError("resamples", f"must be >= 100, got {resamples}")
        self._probe = probe_queries
        self.seed = seed
        self.max_stage_p95_ms = {str(k): float(v) for k, v in stages.items()}
        self.max_e2e_p95_ms = max_e2e_p95_ms
        self.max_vram_bytes = max_vram_bytes
        self.price_per_hour = price_per_hour
        self.price_unit = price_unit
        self.max_cost_per_query = max_cost_per_query
        self.confidence = confidence
        self.resamples = resamples

    @property
    def probe_queries(self) -> int:
        return self._probe

    def check_stages(self, stages: tuple[str, ...]) -> None:
        """Every stage ceiling must name a latency stage of the run's chains (``stages``),
        else it could never fire."""
        for stage in self.max_stage_p95_ms:
            if stage not in stages:
                raise OptionError(f"max_stage_p95_ms.{stage}",
                                  f"no config of this run has this stage; its stages: "
                                  f"{', '.join(stages)}")

    def cost_per_query(self, e2e_mean_ms: float) -> float | None:
        """Price of one query at ``e2e_mean_ms`` of one worker's time (None without a price)."""
        if self.price_per_hour is None:
            return None
        return self.price_per_hour * e2e_mean_ms / 3_600_000.0

    def _check(self, name: str, values: np.ndarray, stat: str, limit: float,
               scale: float = 1.0, stage: str | None = None) -> BudgetCheck:
        measured = point(values, stat) * scale
        bound = bootstrap_lower(values, stat, confidence=self.confidence,
                                resamples=self.resamples, seed=self.seed) * scale
        return BudgetCheck(name, limit, measured, bound, bound > limit, stage)

    def judge(self, stage_ms: Mapping[str, np.ndarray], e2e_ms: np.ndarray,
              peak_vram_bytes: int | None) -> list[BudgetCheck]:
        """Every configured ceiling that applies to this probe (a stage the chain does not
        have, or VRAM without a GPU reading, is not checked)."""
        out = []
        for stage, limit in self.max_stage_p95_ms.items():
            if stage in stage_ms and len(stage_ms[stage]):
                out.append(self._check(f"stage_p95_ms[{stage}]", stage_ms[stage], "p95", limit,
                                       stage=stage))
        if self.max_e2e_p95_ms is not None and len(e2e_ms):
            out.append(self._check("e2e_p95_ms", e2e_ms, "p95", self.max_e2e_p95_ms))
        if self.max_cost_per_query is not None and self.price_per_hour is not None \
                and len(e2e_ms):
            out.append(self._check("cost_per_query", e2e_ms, "mean", self.max_cost_per_query,
                                   self.price_per_hour / 3_600_000.0))
        if self.max_vram_bytes is not None and peak_vram_bytes is not None:
            v = float(peak_vram_bytes)
            out.append(BudgetCheck("peak_vram_bytes", float(self.max_vram_bytes), v, v,
                                   v > self.max_vram_bytes))
        return out
