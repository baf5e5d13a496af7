"""The embedding stage's outputs: query encoding is embedding work in the cost model."""

from __future__ import annotations

from bench.pipeline.outputs import Outputs

#: bench.embedding.stage.EMBED_QUERY_STAGE (tests/results check they agree)
OUTPUTS = Outputs(cost=(("embed_query", "embedding"),))
