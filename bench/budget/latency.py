"""Latency / memory budget: prune a config whose probe breaks any configured ceiling."""

from __future__ import annotations

import numpy as np

from bench.budget.base import BudgetDecision, ProbeMeasurement
from bench.config.build import OptionError


class LatencyBudget:
    """Ceilings on single-query latency percentiles, index size and memory. null = no limit."""

    def __init__(
        self,
        *,
        probe_queries: int = 50,
        max_p50_ms: float | None = None,
        max_p95_ms: float | None = None,
        max_index_bytes: int | None = None,
        max_rss_bytes: int | None = None,
        max_vram_bytes: int | None = None,
    ) -> None:
        if probe_queries < 1:
            raise OptionError("probe_queries", f"must be >= 1, got {probe_queries}")
        for name, value in (
            ("max_p50_ms", max_p50_ms),
            ("max_p95_ms", max_p95_ms),
            ("max_index_bytes", max_index_bytes),
            ("max_rss_bytes", max_rss_bytes),
            ("max_vram_bytes", max_vram_bytes),
        ):
            if value is not None and value <= 0:
                raise OptionError(name, f"must be > 0 or null, got {value}")
        self._probe = probe_queries
        self.max_p50_ms = max_p50_ms
        self.max_p95_ms = max_p95_ms
        self.max_index_bytes = max_index_bytes
        self.max_rss_bytes = max_rss_bytes
        self.max_vram_bytes = max_vram_bytes

    @property
    def probe_queries(self) -> int:
        return self._probe

    def check(self, probe: ProbeMeasurement) -> BudgetDecision:
        broken: list[str] = []
        lat = np.asarray(probe.query_latency_ms, dtype=np.float64)
        if lat.size:
            for q, limit in ((50, self.max_p50_ms), (95, self.max_p95_ms)):
                value = float(np.percentile(lat, q))
                if limit is not None and value > limit:
                    broken.append(f"{probe.stage} p{q} {value:.2f} ms > {limit:g} ms")
        if self.max_index_bytes is not None and probe.index_bytes > self.max_index_bytes:
            broken.append(f"index {probe.index_bytes} B > {self.max_index_bytes} B")
        if self.max_rss_bytes is not None and probe.peak_rss_bytes > self.max_rss_bytes:
            broken.append(f"peak RSS {probe.peak_rss_bytes} B > {self.max_rss_bytes} B")
        vram = probe.peak_vram_bytes
        if self.max_vram_bytes is not None and vram is not None and vram > self.max_vram_bytes:
            broken.append(f"peak VRAM {vram} B > {self.max_vram_bytes} B")
        if broken:
            return BudgetDecision(False, "; ".join(broken))
        return BudgetDecision(True, f"within budget on {probe.n_queries} probe queries")
