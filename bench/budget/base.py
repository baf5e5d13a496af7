"""Records and Protocol of budgets.

Before a config's full query set runs, the pipeline measures a small probe sample and asks
the budget. A pruned config is not run further (nor anything downstream of it); it is
reported with the reason and counted as ``pruned`` in completion accounting — never hidden.
``conf/budget/none.yaml`` (``_target_: null``) disables pruning; ``conf/budget/chain.yaml``
and ``conf/budget/latency.yaml`` (a search-stage ceiling alone) are ``ChainBudget`` presets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from bench.budget.chain import BudgetCheck


class Budget(Protocol):
    """Ceilings on a config's whole query-time chain (``bench.budget.chain.ChainBudget``):
    the probe runs each config's chain on the sample and asks for the checks; a check that is
    ``over`` prunes the node of its stage (every config built on it), or the config's leaf
    when it names no stage."""

    @property
    def probe_queries(self) -> int:
        """How many queries the probe runs (a deterministic sample)."""
        ...

    @property
    def seed(self) -> int:
        """Seed of the probe sample (and of any bootstrap)."""
        ...

    def judge(self, stage_ms: Mapping[str, np.ndarray], e2e_ms: np.ndarray,
              peak_vram_bytes: int | None) -> list[BudgetCheck]:
        """Every ceiling that applies to one config's probe: per-query ms per latency stage
        and end to end, and the probe's peak VRAM (None without a GPU reading)."""
        ...
