"""What one query costs: the sum of its parts at configured prices, per query.

cost(q) = embedding(q) + retrieval(q) + rerank(q) + generation(q) + storage, where

- embedding, retrieval, rerank: the query's measured milliseconds of those query-time stages
  (query encoding; search, fold, lexical, fusion, filters, rewrite and context assembly;
  reranking and its cut) x ``price_per_hour`` of one worker (``price_unit``) / 3.6e6 — the
  worker is busy with one query at a time (closed loop, as the budget assumes);
- generation: the answer's prompt and output tokens at ``prompt_price_per_mtok`` /
  ``output_price_per_mtok`` (per million tokens, an API's price list), or its measured
  generation time x ``generation_price_per_hour`` (a GPU you rent) — one of the two;
- storage: the index's bytes x ``storage_price_per_gb_month`` (GB = 1e9 bytes) /
  ``queries_per_month``, the same for every query of a config.

A part without a price is left out of the sum and NAMED (``QueryCosts.unpriced``): the report
and configs.parquet's ``cost_basis`` say what the figure does not cover, and a release gate
on ``cost_per_query`` fails while a part the config has is unpriced.

``cost=none`` with a budget that sets ``price_per_hour`` keeps the budget's figure: that
price x the probe's mean end-to-end time (``bench.budget.chain``), one number, no components.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.config.build import OptionError
from bench.cost.parts import COMPONENTS as COMPONENTS  # re-exported: the priced parts
from bench.pipeline.stages import cost_components

PRICE_UNITS = ("gpu_hour", "cpu_hour")
#: the generation stage's timing samples (GenerateOp: one per answer)
GENERATE_STAGE = "generate"
_MS_PER_HOUR = 3_600_000.0


def component_of(stage: str) -> str:
    """The cost component a latency stage's time belongs to: what its stage declares
    (``Outputs.cost``: query encoding is embedding, reranking rerank, generating an answer
    or a rewrite generation); default retrieval."""
    return cost_components().get(stage, "retrieval")


class Prices:
    """Prices of a query's parts; null leaves that part unpriced (and named as such).

    price_per_hour / price_unit: one worker (cpu_hour | gpu_hour) for the query-time stages.
    prompt_price_per_mtok / output_price_per_mtok: generation priced by tokens (per million),
    or generation_price_per_hour: generation priced by its time (not both).
    storage_price_per_gb_month with queries_per_month: the index's storage, amortised.
    """

    def __init__(
        self,
        *,
        price_per_hour: float | None = None,
        price_unit: str = "cpu_hour",
        prompt_price_per_mtok: float | None = None,
        output_price_per_mtok: float | None = None,
        generation_price_per_hour: float | None = None,
        storage_price_per_gb_month: float | None = None,
        queries_per_month: float | None = None,
    ) -> None:
        for name, value in (("price_per_hour", price_per_hour),
                            ("prompt_price_per_mtok", prompt_price_per_mtok),
                            ("output_price_per_mtok", output_price_per_mtok),
                            ("generation_price_per_hour", generation_price_per_hour),
                            ("storage_price_per_gb_month", storage_price_per_gb_month),
                            ("queries_per_month", queries_per_month)):
            if value is not None and (isinstance(value, bool) or not math.isfinite(value)
                                      or value < 0):
                raise OptionError(name, f"must be a finite number >= 0 or null, got {value}")
        if price_unit not in PRICE_UNITS:
            raise OptionError("price_unit", f"must be one of {', '.join(PRICE_UNITS)}")
        tokens = prompt_price_per_mtok is not None or output_price_per_mtok is not None
        if tokens and generation_price_per_hour is not None:
            raise OptionError("generation_price_per_hour", "generation is priced by tokens "
                              "(prompt/output_price_per_mtok) or by time, not both")
        if tokens and (prompt_price_per_mtok is None or output_price_per_mtok is None):
            missing = "prompt" if prompt_price_per_mtok is None else "output"
            raise OptionError(f"{missing}_price_per_mtok", "token pricing needs both the "
                              "prompt and the output price (0 for a free side)")
        if (storage_price_per_gb_month is None) != (queries_per_month is None):
            missing = ("queries_per_month" if queries_per_month is None
                       else "storage_price_per_gb_month")
            raise OptionError(missing, "storage is amortised as price per GB-month / queries "
                              "per month: set both or neither")
        if queries_per_month is not None and queries_per_month <= 0:
            raise OptionError("queries_per_month", f"must be > 0, got {queries_per_month}")
        self.price_per_hour = price_per_hour
        self.price_unit = price_unit
        self.prompt_price_per_mtok = prompt_price_per_mtok
        self.output_price_per_mtok = output_price_per_mtok
        self.generation_price_per_hour = generation_price_per_hour
        self.storage_price_per_gb_month = storage_price_per_gb_month
        self.queries_per_month = queries_per_month

    def settings(self) -> dict[str, Any]:
        """run.json's ``cost.prices``."""
        return dict(vars(self))


@dataclass(frozen=True)
class QueryCosts:
    """One config's per-query cost by component, in ``query_ids`` order (priced parts only),
    and the parts the config has that carry no price."""

    query_ids: tuple[str, ...]
    components: Mapping[str, np.ndarray]
    unpriced: tuple[str, ...]

    @property
    def total(self) -> np.ndarray:
        out = np.zeros(len(self.query_ids), dtype=np.float64)
        for v in self.components.values():
            out = out + v
        return out

    def stats(self) -> dict[str, dict[str, float]]:
        """mean / p50 / p99 of the total and of each priced component (run.json, report)."""
        out: dict[str, dict[str, float]] = {}
        if not self.query_ids:
            return out
        for name, v in {"total": self.total, **self.components}.items():
            p50, p99 = np.percentile(v, [50, 99])
            out[name] = {"mean": float(v.mean()), "p50": float(p50), "p99": float(p99),
                         "n": len(v)}
        return out


def query_costs(prices: Prices, *, query_ids: Sequence[str],
                stage_ms: Mapping[str, np.ndarray],
                tokens: tuple[np.ndarray, np.ndarray] | None,
                index_bytes: int | None, has_index: bool) -> QueryCosts:
    """Per-query cost of one config. ``stage_ms``: each query-time latency stage's ms per
    query (``query_ids`` order), generation's included for a generated config; ``tokens``:
    (prompt, output) tokens per query of a generated config, else None; ``index_bytes``: the
    size of the vector index the chain searches (None: not measured), ``has_index``: whether
    the chain searches one."""
    n = len(query_ids)
    ms: dict[str, np.ndarray] = {}
    for stage, v in stage_ms.items():
        comp = component_of(stage)
        ms[comp] = ms.get(comp, np.zeros(n)) + np.asarray(v, dtype=np.float64)
    out: dict[str, np.ndarray] = {}
    unpriced: list[str] = []
    worker = [c for c in ("embedding", "retrieval", "rerank") if c in ms]
    if prices.price_per_hour is None:
        unpriced += [f"{c} (no price_per_hour)" for c in worker]
    else:
        for c in worker:
            out[c] = ms[c] * (prices.price_per_hour / _MS_PER_HOUR)
    generated = "generation" in ms or tokens is not None
    if generated:
        if prices.prompt_price_per_mtok is not None and prices.output_price_per_mtok is not None:
            if tokens is None:
                unpriced.append("generation (token counts not recorded)")
            else:
                prompt, output = (np.asarray(t, dtype=np.float64) for t in tokens)
                out["generation"] = (prompt * prices.prompt_price_per_mtok
                                     + output * prices.output_price_per_mtok) / 1e6
        elif prices.generation_price_per_hour is not None and "generation" in ms:
            out["generation"] = ms["generation"] * (prices.generation_price_per_hour
                                                    / _MS_PER_HOUR)
        else:
            unpriced.append("generation (no token prices or generation_price_per_hour)")
    if has_index:
        if prices.storage_price_per_gb_month is None or prices.queries_per_month is None:
            unpriced.append("index storage (no storage_price_per_gb_month)")
        elif index_bytes is None:
            unpriced.append("index storage (index size not measured)")
        else:
            per_query = (index_bytes / 1e9 * prices.storage_price_per_gb_month
                         / prices.queries_per_month)
            out["storage"] = np.full(n, per_query)
    ordered = {c: out[c] for c in COMPONENTS if c in out}
    return QueryCosts(tuple(query_ids), ordered, tuple(unpriced))


@dataclass(frozen=True)
class CostSummary:
    """One config's cost per query in figures (run.json ``cost``, the report): per priced
    component and the total, (name, mean, p50, p99); what the config has that is unpriced."""

    config_id: str
    label: str
    n_queries: int
    rows: tuple[tuple[str, float, float, float], ...]
    unpriced: tuple[str, ...]


def cost_summary(config_id: str, label: str, costs: QueryCosts) -> CostSummary:
    stats = costs.stats()
    rows = tuple((name, v["mean"], v["p50"], v["p99"]) for name, v in stats.items()
                 if name != "total")
    if "total" in stats:
        t = stats["total"]
        rows += (("total", t["mean"], t["p50"], t["p99"]),)
    return CostSummary(config_id, label, len(costs.query_ids), rows, costs.unpriced)

