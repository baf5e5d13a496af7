"""End-to-end latency measured the way configs are compared: interleaved, warmed up, with CIs.

Each op records its own single-query samples while it runs, one node after another, so two
configs' latencies used to come from different minutes of the run: background load and
drift (a cache warming, a CPU clocking down) hit them unequally, and on a loaded box a deeper
rerank could time faster than a shallower one. This pass re-times every kept config's whole
query-time chain (``bench.pipeline.request.QueryChain``: query encoding, search, fusion,
filters, rerank — what one served request runs) on one seeded query sample:

- **warm-up**: the first ``warmup`` requests of every config run and are excluded (counted
  in ``n_latency_warmup``): first-call costs (lazy allocations, cold caches) are not latency;
- **interleaved**: for each query of the sample, every config runs once, in an order drawn
  afresh per query from the run's seed, so drift and load spread over all configs alike;
- **uncertainty**: p50/p95/p99 of the per-request sums come with bootstrap CIs over the
  requests (``bench.metrics.stats.percentile_ci``), and the figures say how many requests
  they rest on. Reports call two configs' latencies different only where these CIs separate.

The pass is fresh measurement: nothing here is cached (a warm cache must not replay an old
machine's latency as this run's). ``latency.parquet`` keeps every request.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from bench.metrics.stats import PercentileCI, percentile_ci
from bench.pipeline.lanes import ConfigKind
from bench.pipeline.node import Phase

if TYPE_CHECKING:  # the run's records import the settings, which import this module
    from bench.pipeline.outcome import ConfigRun
    from bench.pipeline.request import QueryChain

log = logging.getLogger("bench")

#: the percentiles reported (configs.parquet e2e_p50/p95/p99_ms)
PERCENTILES = (50.0, 95.0, 99.0)
SOURCE = "interleaved"


@dataclass(frozen=True)
class LatencySettings:
    """``latency:`` of the config (bench.config.schema.LatencyConfig), plus the run's CI
    settings."""

    interleave: bool
    queries: int
    warmup: int
    seed: int
    resamples: int
    confidence: float


@dataclass(frozen=True)
class Request:
    """One timed request of the pass (a row of latency.parquet)."""

    config_id: str
    query_id: str
    #: the request's round (its query's position in the sample; warm-up rounds first)
    round: int
    #: the config's position within its round (0 = ran first)
    position: int
    warmup: bool
    #: the chain's latency stages summed (what the request cost end to end)
    e2e_ms: float
    #: per latency stage, as the ops timed it
    stage_ms: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class LatencyEstimate:
    config_id: str
    n: int
    n_warmup: int
    p50: PercentileCI
    p95: PercentileCI
    p99: PercentileCI
    source: str = SOURCE


@dataclass(frozen=True)
class LatencyRun:
    """The pass's estimates by config id (empty when it did not run) and every request."""

    estimates: Mapping[str, LatencyEstimate]
    requests: Sequence[Request]


def timed_configs(configs: Sequence[ConfigRun]) -> list[ConfigRun]:
    """Kept configs whose chain has query-time work (a pruned config has no pool). Generated
    configs are left out: their whole request (chain, context, generation) is timed per
    answered query by the generation stage (``request`` samples)."""
    # a query-time op that times nothing (the dataset root) is no query-time work: a chain
    # of batch-measured requests alone (a black-box system, bench.system) keeps its own
    return [c for c in configs if c.pool is not None and c.spec.kind is not ConfigKind.GENERATED
            and any(n.phase is Phase.QUERY and n.op.latency_stages for n in c.spec.chain)]


def sample_queries(n_queries: int, settings: LatencySettings) -> tuple[list[int], list[int]]:
    """(warm-up query indexes, timed query indexes): one seeded permutation, the warm-up
    taken from its head (its queries are timed again later, then warm)."""
    order = np.random.default_rng(settings.seed).permutation(n_queries)
    timed = sorted(int(i) for i in order[:min(settings.queries, n_queries)])
    warm = [int(i) for i in order[:min(settings.warmup, n_queries)]]
    return warm, timed


def interleave(chains: Sequence[tuple[str, QueryChain]], query_ids: Sequence[str],
               settings: LatencySettings) -> list[Request]:
    """Run the warm-up rounds, then one round per timed query; within a round every chain
    runs once, in a seeded random order."""
    warm, timed = sample_queries(len(query_ids), settings)
    rng = np.random.default_rng([settings.seed, 1])
    out: list[Request] = []
    for rnd, (q, is_warm) in enumerate([(q, True) for q in warm] + [(q, False) for q in timed]):
        for pos, k in enumerate(rng.permutation(len(chains))):
            cid, chain = chains[int(k)]
            ms, _ = chain(q)
            out.append(Request(cid, query_ids[q], rnd, pos, is_warm, float(sum(ms.values())),
                               tuple(sorted(ms.items()))))
    return out


def estimate(config_id: str, requests: Sequence[Request], settings: LatencySettings
             ) -> LatencyEstimate | None:
    mine = [r for r in requests if r.config_id == config_id]
    ms = np.asarray([r.e2e_ms for r in mine if not r.warmup])
    if ms.size == 0:
        return None
    p50, p95, p99 = (percentile_ci(ms, q, resamples=settings.resamples, seed=settings.seed,
                                   confidence=settings.confidence) for q in PERCENTILES)
    return LatencyEstimate(config_id, int(ms.size), sum(r.warmup for r in mine), p50, p95, p99)


def measure(configs: Sequence[ConfigRun], chains: Sequence[tuple[str, QueryChain]],
            query_ids: Sequence[str], settings: LatencySettings
            ) -> tuple[dict[str, LatencyEstimate], list[Request]]:
    """The interleaved pass over ``chains`` (config id, its QueryChain); estimates by config
    id and every request."""
    if not chains:
        return {}, []
    requests = interleave(chains, query_ids, settings)
    out = {cid: e for cid, _ in chains if (e := estimate(cid, requests, settings)) is not None}
    for c in configs:
        e = out.get(c.spec.config_id)
        if e is not None:
            log.info("latency %s %s: e2e p50/p95/p99 %.2f/%.2f/%.2f ms (p95 95 %% CI "
                     "[%.2f, %.2f]) over %d interleaved requests, %d warm-up excluded",
                     c.spec.config_id, c.spec.label, e.p50.value, e.p95.value, e.p99.value,
                     e.p95.ci_low, e.p95.ci_high, e.n, e.n_warmup)
    return out, requests
