"""Run the metadata filter both ways — hard predicate and soft boost — on every lane, and
decide between them with the pre-registered rule of docs/metrics.md."""

from __future__ import annotations

from typing import Literal

from bench.config.build import OptionError
from bench.data.base import Dataset
from bench.filters.metadata import MetadataFilter


class HardVsSoft:
    """Two ``MetadataFilter`` s differing only in mode. Options are MetadataFilter's, plus ``k``.

    Each candidate lane becomes two configs (``<lane>|hard``, ``<lane>|soft``); the pipeline
    pairs their per-query precision@k and calls ``decide`` with the hard filter's
    false-exclusion rate (the seed's, over the eligible corpus) and both recalls at the SAME
    k: the gain and the loss are then measured on the one list a reader of the top k sees (a
    precision@10 gain weighed against a recall@100 loss let a filter buy top-10 precision
    with gold lost at ranks 11-100, or the reverse). k = 10: precision@100 on corpora with
    one or two gold docs per query is at most 0.01-0.02, so no gain could reach the minimum.
    """

    def __init__(
        self,
        *,
        boost: float = 0.1,
        predicate: Literal["oracle_tag", "query_tag"] = "query_tag",
        entitlement: bool = True,
        min_precision_gain: float = 0.01,
        max_exclusion_rate: float = 0.02,
        max_recall_loss: float = 0.02,
        k: int = 10,
        labels: str | None = None,
        pushdown: bool = False,
    ) -> None:
        if k < 1:
            raise OptionError("k", f"must be >= 1, got {k}")
        common = dict(boost=boost, predicate=predicate, entitlement=entitlement,
                      min_precision_gain=min_precision_gain,
                      max_exclusion_rate=max_exclusion_rate, max_recall_loss=max_recall_loss)
        # only the hard member can run inside the index; the soft boost re-scores the pool
        self.hard = MetadataFilter(mode="hard", labels=labels, pushdown=pushdown,
                                   **common)  # type: ignore[arg-type]
        self.soft = MetadataFilter(mode="soft", **common)  # type: ignore[arg-type]
        self.entitlement = entitlement
        self.k = k

    @property
    def precision_metric(self) -> str:
        return f"precision@{self.k}"

    @property
    def recall_metric(self) -> str:
        return f"recall@{self.k}"

    def check(self, dataset: Dataset) -> None:
        self.hard.check(dataset)

    def members(self) -> list[tuple[str, MetadataFilter]]:
        return [("hard", self.hard), ("soft", self.soft)]
