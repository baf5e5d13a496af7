"""One config's query-time chain, run for ONE query: the unit of budget probes and capacity.

``QueryChain(chain, executor, dataset, device)`` resolves the chain's index-time nodes once
through the executor (chunks, document embeddings, vector / lexical / passage indexes: built
once, shared). Each call ``chain(q)`` then walks the chain in order for query ``q`` alone:
a query-time node's op computes its value with ``run_one`` from its inputs restricted to
that query, timing its own latency stages; an offline node (a latency measurement, a
reference search, answers generated in batch) is no serving work and gives no value. There
is no per-stage code here: each op's ``run_one`` sits next to its batch code.

``chain(q)`` returns ``(latency stage -> ms, the chain's last query-time value)``;
``chain.serve(query)`` the same for any ``Query`` (a served request, ``bench.serve``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from bench.capacity.base import RequestTiming
from bench.data.base import Dataset, Query
from bench.pipeline.executor import Executor
from bench.pipeline.node import Node, OneQuery, Phase, QueryOp, QueryTimer
from bench.retrieval.base import order_key
from bench.telemetry.base import StageTiming

#: sample kind of one stage of one whole request (``QueryChain.timed``)
REQUEST = "request"


class QueryChain:
    def __init__(self, chain: list[Node], executor: Executor, dataset: Dataset,
                 device: str) -> None:
        self.chain = chain
        self.dataset = dataset
        self.device = device
        self.id_key = order_key(dataset.doc_ids)
        self._fixed: dict[str, Any] = {n.key: executor.value(n) for n in chain
                                       if n.phase is Phase.INDEX}
        bad = [n.label for n in chain if n.phase is Phase.QUERY and not isinstance(n.op, QueryOp)]
        if bad:
            raise TypeError(f"query-time nodes without run_one: {bad}")
        served = [n for n in chain if n.phase is Phase.QUERY]
        self._last = served[-1].key if served else None

    def __call__(self, q: int) -> tuple[dict[str, float], Any]:
        return self.serve(self.dataset.queries[q])

    def serve(self, query: Query) -> tuple[dict[str, float], Any]:
        """The chain for ``query``: one of the dataset's, or any request's (``bench.serve``:
        its text, the caller's roles and tenant) over the same corpus and index."""
        one = OneQuery(query, Dataset(self.dataset.name, self.dataset.documents, (query,),
                                      fingerprint=self.dataset.fingerprint), self.id_key)
        timer = QueryTimer(sync_cuda=self.device == "cuda")
        vals: dict[str, Any] = dict(self._fixed)
        for n in self.chain:
            if n.key in vals:
                continue
            if n.phase is Phase.QUERY:
                op = n.op
                assert isinstance(op, QueryOp)
                vals[n.key] = op.run_one(n.bind(vals), one, timer)
            else:  # offline work: no request pays it
                vals[n.key] = None
        return timer.ms, None if self._last is None else vals[self._last]

    def timed(self, query_ids: Sequence[str]) -> list[StageTiming]:
        """Each of these queries' chain run alone, one ``request`` sample per latency stage
        (a generated config's answered queries: the retrieval part of its whole requests,
        whatever queries the batch stages' own latency samples drew)."""
        index = {q.query_id: i for i, q in enumerate(self.dataset.queries)}
        if query_ids:  # warm-up, as the probe does: first-call costs (model load) are no latency
            self(index[query_ids[0]])
        out = []
        for qid in query_ids:
            ms, _ = self(index[qid])
            out += [StageTiming(stage, REQUEST, 1, v, self.device, query_id=qid)
                    for stage, v in ms.items()]
        return out

    def request(self, i: int) -> RequestTiming:
        """Capacity driver: request i is query ``i mod n_queries``'s whole chain."""
        t0 = time.perf_counter()
        self(i % len(self.dataset.queries))
        return RequestTiming((time.perf_counter() - t0) * 1000.0)
