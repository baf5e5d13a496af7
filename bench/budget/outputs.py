"""The budget stage's outputs: the ceiling that pruned a config (kept: the one closest to
binding), its limit, the probe's point estimate and the bound compared with it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.pipeline.outputs import Column, Outputs, RowInput


def fill(row: RowInput, so_far: Mapping[str, Any]) -> dict[str, Any]:
    c, probe = row.run, row.done.probe
    p = None if probe is None else probe.configs.get(c.spec.config_id)
    check = None
    if p is not None and p.pruned_check is not None:
        check = p.pruned_check
    elif p is not None and p.by_prefix and probe is not None:
        keys = {n.key for n in c.spec.chain}
        check = next((q.pruned_check for q in probe.configs.values()
                      if q.pruned_key is not None and q.pruned_key in keys
                      and q.pruned_check is not None), None)
    elif p is not None and p.checks:  # kept: the check closest to binding
        check = max(p.checks, key=lambda k: k.bound / k.limit if k.limit else 0.0)
    if check is None:
        return {}
    return {"budget_name": check.name, "budget_limit": check.limit,
            "budget_measured": check.measured, "budget_bound": check.bound}


OUTPUTS = Outputs(
    columns=(Column("budget_name", "string"), Column("budget_limit", "float64"),
             Column("budget_measured", "float64"), Column("budget_bound", "float64")),
    fill="bench.budget.outputs:fill")
