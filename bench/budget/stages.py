"""Budgets on every stage that costs, decided BEFORE its expensive node runs.

``StageBudget`` is a ``ChainBudget`` (its chain ceilings still apply to the query-time chain
after the index is built) with ceilings on what the stage probes (``bench.pipeline.
probe_stages``) predict from a seeded sample before any full-corpus work:

- the corpus embedding pass: seconds (``max_embed_docs_s``) and its price
  (``max_embed_docs_cost``, with ``price_per_hour``), extrapolated from encoding a seeded
  sample of chunks by the corpus's TOKEN count (``ChunkTable.n_tokens`` is known for every
  chunk before any encoding);
- the single-query encode: the chain's own ``max_stage_p95_ms.embed_query`` ceiling, applied
  before the corpus is embedded (an embedder over it prunes every index built on it);
- the index build: seconds (``max_index_build_s``) and bytes (``max_index_bytes``), from
  builds on nested samples of the probe's vectors and a power-law fit ``y = a * n^b`` in log
  space, extrapolated to the corpus with a one-sided prediction bound;
- the reranker at each depth: the chain's ``max_stage_p95_ms.rerank`` ceiling, from scoring
  ``depth`` sampled passages per probe query before any candidate is retrieved;
- the generator: TTFT p95, time per output token (mean), whole-request p95, tokens per
  request (mean), cost per request and peak memory (RSS on CPU, torch peak allocated on a
  GPU), from a few real requests with prompts built by the run's context builder.

A ceiling prunes only when the LOWER bound of its prediction is above it (a peak memory is a
high-water mark: its bound is the measurement itself). ``validate=true`` runs every pruned
config fully as well and reports each probe's prediction error (``bench.pipeline.
probe_stages.validate``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from scipy import stats

from bench.budget.chain import ChainBudget
from bench.config.build import OptionError

if TYPE_CHECKING:
    from bench.scaling.planner import Stated

#: the ceilings a StageBudget adds, by config key (for error lines and the preview)
EMBED_CEILINGS = ("max_embed_docs_s", "max_embed_docs_cost")
INDEX_CEILINGS = ("max_index_build_s", "max_index_bytes")
GEN_CEILINGS = ("max_gen_ttft_p95_ms", "max_gen_tpot_ms", "max_gen_request_p95_ms",
                "max_gen_tokens_per_request", "max_gen_cost_per_request",
                "max_gen_peak_memory_bytes")


@dataclass(frozen=True)
class Estimate:
    """One predicted figure with its bounds (``lower`` <= ``predicted`` <= ``upper``)."""

    name: str  # e.g. "embed_docs_s", "index_build_s", "gen_ttft_p95_ms"
    predicted: float
    lower: float
    upper: float
    how: str

    def describe(self) -> str:
        return f"{self.name} {self.predicted:.4g} [{self.lower:.4g}, {self.upper:.4g}]"


@dataclass(frozen=True)
class StageCheck:
    """One ceiling against one estimate: ``over`` when the lower bound is above it."""

    key: str  # the budget key, e.g. "max_index_build_s"
    limit: float
    estimate: Estimate

    @property
    def over(self) -> bool:
        return self.estimate.lower > self.limit

    def describe(self) -> str:
        e = self.estimate
        return (f"{e.name} predicted {e.predicted:.4g} (lower bound {e.lower:.4g}) "
                f"{'over' if self.over else 'within'} budget.{self.key} {self.limit:g}")


def ratio_estimate(seconds: np.ndarray, units: np.ndarray, total_units: float, *,
                   confidence: float, resamples: int, seed: int, name: str, how: str
                   ) -> Estimate:
    """``total_units`` x (sum seconds / sum units) over timed batches, with a seeded
    percentile bootstrap over the batches for the two-sided ``confidence`` bounds."""
    t = np.asarray(seconds, dtype=np.float64)
    u = np.asarray(units, dtype=np.float64)
    if t.size == 0 or u.sum() <= 0:
        raise ValueError("no timed batches")
    rate = t.sum() / u.sum()
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, t.size, size=(resamples, t.size))
    draws = t[idx].sum(axis=1) / np.maximum(u[idx].sum(axis=1), 1e-12)
    alpha = 1.0 - confidence
    lo, hi = np.quantile(draws, [alpha, 1.0 - alpha])
    return Estimate(name, float(rate * total_units), float(lo * total_units),
                    float(hi * total_units), how)


def power_fit(n: np.ndarray, y: np.ndarray, target: float, *, confidence: float, name: str,
              unit: str) -> Estimate:
    """Least squares of ``log y = log a + b log n`` over the sample builds, predicted at
    ``target`` with the one-sided ``confidence`` prediction interval of a new observation
    (Student t, n-2 degrees of freedom) on each side. Needs >= 3 distinct sizes."""
    x = np.log(np.asarray(n, dtype=np.float64))
    ly = np.log(np.maximum(np.asarray(y, dtype=np.float64), 1e-12))
    if np.unique(x).size < 3:
        raise ValueError("a power-law fit needs builds at >= 3 sizes")
    b, loga = np.polyfit(x, ly, 1)
    resid = ly - (loga + b * x)
    dof = x.size - 2
    s = float(np.sqrt(resid @ resid / dof)) if dof > 0 else 0.0
    x0 = np.log(target)
    se = s * np.sqrt(1.0 + 1.0 / x.size + (x0 - x.mean()) ** 2 / ((x - x.mean()) ** 2).sum())
    tq = float(stats.t.ppf(confidence, dof)) if dof > 0 else 0.0
    mid = loga + b * x0
    how = (f"power-law fit {unit} = a*n^b over {x.size} sample builds at "
           f"{int(np.exp(x.min()))}..{int(np.exp(x.max()))} vectors: b={b:.3f}, "
           f"residual sd {s:.3f} (log); {confidence:.0%} one-sided prediction bounds at "
           f"n={int(target)}")
    return Estimate(name, float(np.exp(mid)), float(np.exp(mid - tq * se)),
                    float(np.exp(mid + tq * se)), how)


def sample_estimate(values: np.ndarray, stat: str, *, confidence: float, resamples: int,
                    seed: int, name: str, how: str, scale: float = 1.0) -> Estimate:
    """p95 or mean of per-request values with a seeded percentile bootstrap (two-sided
    ``confidence`` bounds); ``scale`` converts the unit (a price)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        raise ValueError("no values")
    rng = np.random.default_rng(seed)
    draws = v[rng.integers(0, v.size, size=(resamples, v.size))]
    s = np.percentile(draws, 95, axis=1) if stat == "p95" else draws.mean(axis=1)
    point = float(np.percentile(v, 95)) if stat == "p95" else float(v.mean())
    alpha = 1.0 - confidence
    lo, hi = np.quantile(s, [alpha, 1.0 - alpha])
    return Estimate(name, point * scale, float(lo) * scale, float(hi) * scale, how)


class StageBudget(ChainBudget):
    """A ``ChainBudget`` plus ceilings on what the stage probes predict (null = no limit).

    probe_chunks: chunks in the seeded sample encoded (and built into sample indexes).
    index_build_repeats: builds per sample size for the index fit (>= 1; sizes: a quarter,
    a half and all of the sample). probe_requests: real generator requests in its probe.
    max_embed_docs_s / max_embed_docs_cost: the corpus embedding pass (cost needs
    price_per_hour). max_index_build_s / max_index_bytes: the vector index build.
    max_gen_*: the generator (cost per request needs price_per_hour).
    validate: run every pruned config fully as well and report the probes' prediction
    errors (costs the work pruning would save: for checking a budget, not for saving).
    stated: a file of another machine's figures (``bench.scaling.planner.read_stated``:
    ``scripts/gpu_check.sh``'s gpu_check.json from a GPU box, or a YAML of rates): the work
    saved and the probes' cost are also given at its rates (the corpus pass at its
    embedding chunks/s); it prunes nothing.
    Every ChainBudget option applies too (its stage ceilings on embed_query and rerank are
    also checked before the corpus work, by the stage probes).
    """

    def __init__(
        self,
        *,
        probe_chunks: int = 256,
        index_build_repeats: int = 2,
        probe_requests: int = 3,
        max_embed_docs_s: float | None = None,
        max_embed_docs_cost: float | None = None,
        max_index_build_s: float | None = None,
        max_index_bytes: float | None = None,
        max_gen_ttft_p95_ms: float | None = None,
        max_gen_tpot_ms: float | None = None,
        max_gen_request_p95_ms: float | None = None,
        max_gen_tokens_per_request: float | None = None,
        max_gen_cost_per_request: float | None = None,
        max_gen_peak_memory_bytes: float | None = None,
        validate: bool = False,
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
        stated: str | None = None,
    ) -> None:
        super().__init__(probe_queries=probe_queries, seed=seed,
                         max_stage_p95_ms=max_stage_p95_ms, max_e2e_p95_ms=max_e2e_p95_ms,
                         max_vram_bytes=max_vram_bytes, price_per_hour=price_per_hour,
                         price_unit=price_unit, max_cost_per_query=max_cost_per_query,
                         confidence=confidence, resamples=resamples)
        if probe_chunks < 16:
            raise OptionError("probe_chunks", f"must be >= 16, got {probe_chunks}")
        if index_build_repeats < 1:
            raise OptionError("index_build_repeats", f"must be >= 1, got {index_build_repeats}")
        if probe_requests < 1:
            raise OptionError("probe_requests", f"must be >= 1, got {probe_requests}")
        ceilings: dict[str, float | None] = {
            "max_embed_docs_s": max_embed_docs_s, "max_embed_docs_cost": max_embed_docs_cost,
            "max_index_build_s": max_index_build_s, "max_index_bytes": max_index_bytes,
            "max_gen_ttft_p95_ms": max_gen_ttft_p95_ms, "max_gen_tpot_ms": max_gen_tpot_ms,
            "max_gen_request_p95_ms": max_gen_request_p95_ms,
            "max_gen_tokens_per_request": max_gen_tokens_per_request,
            "max_gen_cost_per_request": max_gen_cost_per_request,
            "max_gen_peak_memory_bytes": max_gen_peak_memory_bytes}
        for name, value in ceilings.items():
            if value is not None and value <= 0:
                raise OptionError(name, f"must be > 0 or null, got {value}")
        for name in ("max_embed_docs_cost", "max_gen_cost_per_request"):
            if ceilings[name] is not None and self.price_per_hour is None:
                raise OptionError(name, "needs price_per_hour")
        self.probe_chunks = probe_chunks
        self.index_build_repeats = index_build_repeats
        self.probe_requests = probe_requests
        self.validate = bool(validate)
        self.ceilings: Mapping[str, float] = {k: float(v) for k, v in ceilings.items()
                                              if v is not None}
        self.stated = None if stated in (None, "") else str(stated)
        if self.stated is not None:
            self.stated_figures()  # a missing or bad file: one line, before any work

    def stated_figures(self) -> Stated | None:
        """The ``stated`` file's figures (None without one); a file that is missing or
        malformed is an ``InputError`` naming it."""
        from bench.scaling.planner import read_stated

        if self.stated is None:
            return None
        if not Path(self.stated).is_file():
            raise OptionError("stated", f"no such file: {self.stated}")
        return read_stated(self.stated)

    @property
    def chain_probe_needed(self) -> bool:
        """Whether a ceiling needs the chain probe after the index is built: the stage
        probes check embed_query and rerank before the work; the other stages, end to end,
        cost per query and VRAM need the whole chain."""
        return (any(s not in ("embed_query", "rerank") for s in self.max_stage_p95_ms)
                or any(v is not None for v in (self.max_e2e_p95_ms, self.max_cost_per_query,
                                                self.max_vram_bytes)))

    def set_ceilings(self, keys: tuple[str, ...]) -> dict[str, float]:
        """The configured ceilings among ``keys``."""
        return {k: self.ceilings[k] for k in keys if k in self.ceilings}

    def stage_ceiling(self, stage: str) -> float | None:
        """The chain's own p95 ceiling on a latency stage (embed_query, rerank), if set."""
        return self.max_stage_p95_ms.get(stage)
