"""The cost stage's outputs: the price of one query (mean / p50 / p99), each priced
component's mean, what it rests on and what was not priced (``bench.cost.prices``); with
``cost=none``, a budget's ``price_per_hour`` x the probe's (or the run's) mean e2e time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.pipeline.outputs import Column, Outputs, RowInput

#: the priced components, each a ``cost_<component>`` column (bench.cost.prices.COMPONENTS)
COMPONENTS = ("embedding", "retrieval", "rerank", "generation", "storage")


def fill(row: RowInput, so_far: Mapping[str, Any]) -> dict[str, Any]:
    import numpy as np

    from bench.budget.chain import ChainBudget
    from bench.cost.prices import Prices
    from bench.pipeline.record import (
        cost_columns,
        e2e_timings,
        end_to_end_ms,
        query_cost_of,
    )

    c, done = row.run, row.done
    probe = done.probe
    p = None if probe is None else probe.configs.get(c.spec.config_id)
    budget = None if probe is None else probe.budget
    prices = done.comps.get("cost")
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
            e2e = end_to_end_ms(e2e_timings(c.timings, done.plan.query_time_stages()),
                                done.plan.e2e_stages(c.spec))
            mean = float(np.mean(e2e))
            return {"cost_per_query": budget.cost_per_query(mean),
                    "cost_basis": f"{budget.price_per_hour:g} per {budget.price_unit} x "
                                  f"run e2e mean {mean:.3f} ms"}
    return {}


OUTPUTS = Outputs(
    columns=(Column("cost_per_query", "float64"), Column("cost_basis", "string"),
             Column("cost_p50_per_query", "float64"), Column("cost_p99_per_query", "float64"),
             *(Column(f"cost_{c}", "float64") for c in COMPONENTS),
             Column("cost_unpriced", "string")),
    fill="bench.cost.outputs:fill")
