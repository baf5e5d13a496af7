"""The iterative stage's outputs: a loop a budget stopped ends ``budget_exhausted``."""

from __future__ import annotations

from bench.pipeline.outputs import Outputs, QueryStatus

OUTPUTS = Outputs(statuses=(
    QueryStatus("budget_exhausted", valued=True, share_column="budget_exhausted_share",
                doc="an iterative loop stopped by a budget: scored on the evidence it had "
                    "(like a missing run is scored as an empty ranking) and counted"),))
