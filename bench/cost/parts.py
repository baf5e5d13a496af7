"""The priced components of a query: each a ``cost_<component>`` column of configs.parquet
(declared in ``bench.cost.outputs``) and a part of ``bench.cost.prices``' per-query cost."""

COMPONENTS = ("embedding", "retrieval", "rerank", "generation", "storage")
