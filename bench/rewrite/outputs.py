"""The rewrite stage's outputs: a generated query rewrite is generation work in the cost
model."""

from __future__ import annotations

from bench.pipeline.outputs import Outputs

#: bench.rewrite.stage.GENERATE_STAGE (tests/results check they agree)
OUTPUTS = Outputs(cost=(("rewrite_generate", "generation"),))
