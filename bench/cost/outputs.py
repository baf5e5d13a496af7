"""The cost stage's outputs: the price of one query (mean / p50 / p99), each priced
component's mean, what it rests on and what was not priced (``bench.cost.prices``); with
``cost=none``, a budget's ``price_per_hour`` x the probe's (or the run's) mean e2e time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from bench.cost.parts import COMPONENTS
from bench.pipeline.outputs import Column, Outputs, RowInput

if TYPE_CHECKING:
    from bench.cost.prices import Prices, QueryCosts
    from bench.generation.base import Generation
    from bench.pipeline.outcome import ConfigRun
    from bench.pipeline.view import RunView



def fill(row: RowInput, so_far: Mapping[str, Any]) -> dict[str, Any]:
    import numpy as np

    from bench.budget.chain import ChainBudget
    from bench.cost.prices import Prices
    from bench.pipeline.e2e import e2e_timings, end_to_end_ms

    c, done = row.run, row.done
    probe = done.probe
    p = None if probe is None else probe.configs.get(c.spec.config_id)
    budget = None if probe is None else probe.budget
    prices = done.component("cost")
    if isinstance(prices, Prices):
        return cost_columns(query_cost_of(c, done, prices), prices) if c.pool is not None \
            else {}
    if isinstance(budget, ChainBudget) and budget.price_per_hour is not None:
        if p is not None and p.e2e_mean_ms is not None:
            return {"cost_per_query": budget.cost_per_query(p.e2e_mean_ms),
                    "cost_basis": f"{budget.price_per_hour:g} per {budget.price_unit} x "
                                  f"probe e2e mean {p.e2e_mean_ms:.3f} ms "
                                  f"({len(p.e2e_ms)} queries, query embedding included)"}
        if so_far.get("e2e_p50_ms") is not None and c.pool is not None:
            e2e = end_to_end_ms(e2e_timings(c.timings, done.query_time_stages()),
                                done.e2e_stages(c.spec))
            mean = float(np.mean(e2e))
            return {"cost_per_query": budget.cost_per_query(mean),
                    "cost_basis": f"{budget.price_per_hour:g} per {budget.price_unit} x "
                                  f"run e2e mean {mean:.3f} ms"}
    return {}


def query_cost_of(c: ConfigRun, done: RunView, prices: Prices) -> QueryCosts:
    """One config's per-query cost by component over the queries its end-to-end latency is
    measured on (a generated config: its answered queries)."""
    import numpy as np

    from bench.cost.prices import query_costs
    from bench.index.stage import IndexArtifact
    from bench.pipeline.e2e import e2e_timings, stage_ms_by_query
    from bench.rewrite.stage import rewrite_tokens

    qids, stage_ms = stage_ms_by_query(
        e2e_timings(c.timings, done.query_time_stages()), done.e2e_stages(c.spec))
    tokens = None
    if c.spec.answers is not None:
        gens: list[Generation] = done.value(c.spec.answers)
        by_id = {g.request_id: g for g in gens}
        tokens = (np.asarray([by_id[q].prompt_tokens if q in by_id else 0 for q in qids]),
                  np.asarray([by_id[q].output_tokens if q in by_id else 0 for q in qids]))
    rw = rewrite_tokens(c.chain, done.dataset, qids)  # a generated query rewrite's tokens
    if rw is not None:
        tokens = rw if tokens is None else (tokens[0] + rw[0], tokens[1] + rw[1])
    index = c.node("index")
    info = index.value.info if index is not None and isinstance(index.value, IndexArtifact) \
        else None
    return query_costs(prices, query_ids=qids, stage_ms=stage_ms, tokens=tokens,
                       index_bytes=None if info is None else info.index_bytes,
                       has_index=index is not None)


def cost_columns(costs: QueryCosts, prices: Prices) -> dict[str, Any]:
    """configs.parquet's cost columns: the total's mean / p50 / p99, each priced
    component's mean, what was not priced and the basis."""
    stats = costs.stats()
    if not stats:
        return {"cost_unpriced": "; ".join(costs.unpriced) or None,
                "cost_basis": "no end-to-end samples to price"}
    total = stats["total"]
    parts = [f"price_per_hour {prices.price_per_hour:g}/{prices.price_unit}"
             if prices.price_per_hour is not None else None,
             f"tokens {prices.prompt_price_per_mtok:g} prompt + "
             f"{prices.output_price_per_mtok:g} output per Mtok"
             if prices.prompt_price_per_mtok is not None
             and prices.output_price_per_mtok is not None else None,
             f"generation {prices.generation_price_per_hour:g}/hour"
             if prices.generation_price_per_hour is not None else None,
             f"storage {prices.storage_price_per_gb_month:g}/GB-month over "
             f"{prices.queries_per_month:g} queries/month"
             if prices.storage_price_per_gb_month is not None else None]
    basis = (f"sum of {', '.join(costs.components) or 'no'} components over "
             f"{int(total['n'])} queries; " + "; ".join(x for x in parts if x))
    if costs.unpriced:
        basis += "; not priced: " + "; ".join(costs.unpriced)
    out: dict[str, Any] = {
        "cost_per_query": total["mean"], "cost_p50_per_query": total["p50"],
        "cost_p99_per_query": total["p99"], "cost_basis": basis,
        "cost_unpriced": "; ".join(costs.unpriced) or None}
    for comp in COMPONENTS:
        if comp in stats:
            out[f"cost_{comp}"] = stats[comp]["mean"]
    return out


OUTPUTS = Outputs(
    columns=(Column("cost_per_query", "float64"), Column("cost_basis", "string"),
             Column("cost_p50_per_query", "float64"), Column("cost_p99_per_query", "float64"),
             *(Column(f"cost_{c}", "float64") for c in COMPONENTS),
             Column("cost_unpriced", "string")),
    fill="bench.cost.outputs:fill")
