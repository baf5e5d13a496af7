"""Records and Protocol of budgets.

Before a config's full query set runs, the pipeline measures a small probe sample and asks
the budget. A pruned config is not run further (nor anything downstream of it); it is
reported with the reason and counted as ``pruned`` in completion accounting — never hidden.
``conf/budget/none.yaml`` (``_target_: null``) disables pruning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ProbeMeasurement:
    """What a probe measured for one config."""

    stage: str
    n_queries: int
    query_latency_ms: tuple[float, ...]
    index_bytes: int
    peak_rss_bytes: int
    peak_vram_bytes: int | None


@dataclass(frozen=True)
class BudgetDecision:
    keep: bool
    reason: str


class Budget(Protocol):
    @property
    def probe_queries(self) -> int:
        """How many queries the probe runs (a deterministic sample)."""
        ...

    def check(self, probe: ProbeMeasurement) -> BudgetDecision: ...
