"""Run the metadata filter both ways — hard predicate and soft boost — on every lane, and
decide between them with the pre-registered rule of docs/metrics.md."""

from __future__ import annotations

from typing import Literal

from bench.filters.metadata import MetadataFilter


class HardVsSoft:
    """Two ``MetadataFilter`` s differing only in mode. Options are MetadataFilter's.

    Each candidate lane becomes two configs (``<lane>|hard``, ``<lane>|soft``); the pipeline
    pairs their per-query precision@k and calls ``decide`` with the hard filter's exclusion
    rate and both recalls.
    """

    def __init__(
        self,
        *,
        boost: float = 0.1,
        predicate: Literal["oracle_tag", "query_tag"] = "query_tag",
        entitlement: bool = True,
        min_precision_gain: float = 0.01,
        max_exclusion_rate: float = 0.05,
        max_recall_loss: float = 0.02,
        precision_metric: str = "precision@10",
        recall_metric: str = "recall@100",
    ) -> None:
        common = dict(boost=boost, predicate=predicate, entitlement=entitlement,
                      min_precision_gain=min_precision_gain,
                      max_exclusion_rate=max_exclusion_rate, max_recall_loss=max_recall_loss)
        self.hard = MetadataFilter(mode="hard", **common)  # type: ignore[arg-type]
        self.soft = MetadataFilter(mode="soft", **common)  # type: ignore[arg-type]
        self.entitlement = entitlement
        self.precision_metric = precision_metric
        self.recall_metric = recall_metric

    def members(self) -> list[tuple[str, MetadataFilter]]:
        return [("hard", self.hard), ("soft", self.soft)]
