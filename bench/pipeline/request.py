"""One config's query-time chain, run for ONE query: the unit of budget probes and capacity.

``QueryChain(chain, executor, dataset, device)`` resolves the chain's index-time nodes once
through the executor (chunks, document embeddings, vector / lexical / passage indexes: built
once, shared). Each call ``chain(q)`` then walks the chain in order for query ``q`` alone:
a query-time node's op computes its value with ``run_one`` from its inputs restricted to
that query, timing its own latency stages; an offline node (a latency measurement, a
reference search, answers generated in batch) is no serving work and gives no value. There
is no per-stage code here: each op's ``run_one`` sits next to its batch code. A chain with a
``SelectiveOp`` (a router) is resolved on demand from its last query-time node instead: the
selective op asks for the inputs it needs (the route it chose), and the routes it did not
choose do not run — a request pays for the route it took.

A whole-request chain (``whole_request=True``: a served ``/v1/answer``, the capacity study of
a generated config) also runs the request ops after it: offline ops whose work every request
pays (``request_stages``: context assembly, generation) and that compute one request's value
with ``run_one``, timing those stages; its value is then the last request op's (the answers).
The budget probe keeps the query-time chain alone (a ceiling prunes retrieval work).

``chain(q)`` returns ``(latency stage -> ms, the chain's last value)``; ``chain.serve(query)``
the same for any ``Query`` (a served request, ``bench.serve``), where ``ops`` swaps a node's
op for this request only (a served request's sampling and token stream) and ``on_value`` sees
each node's value as soon as it is computed (a served answer streams its hits first).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench.capacity.base import RequestTiming
from bench.data.base import Dataset, Query
from bench.pipeline.executor import Executor
from bench.pipeline.node import (
    Node,
    OneQuery,
    Phase,
    QueryOp,
    QueryTimer,
    SelectiveOp,
    StageOp,
)
from bench.retrieval.base import order_key
from bench.telemetry.base import StageTiming

#: sample kind of one stage of one whole request (``QueryChain.timed``)
REQUEST = "request"

#: ``QueryChain.serve``'s hook: (node, its value for this request, ms per stage so far)
OnValue = Callable[[Node, Any, Mapping[str, float]], None]


def is_request_op(node: Node) -> bool:
    """An offline op whose work every request pays and that can do it for one request
    (context assembly, generation): a whole-request chain runs it."""
    return (node.phase is Phase.OFFLINE and bool(node.op.request_stages)
            and isinstance(node.op, QueryOp))


class QueryChain:
    def __init__(self, chain: list[Node], executor: Executor, dataset: Dataset,
                 device: str, *, whole_request: bool = False) -> None:
        self.chain = chain
        self.dataset = dataset
        self.device = device
        self.whole_request = whole_request
        self.id_key = order_key(dataset.doc_ids)
        self._fixed: dict[str, Any] = {n.key: executor.value(n) for n in chain
                                       if n.phase is Phase.INDEX}
        bad = [n.label for n in chain if n.phase is Phase.QUERY and not isinstance(n.op, QueryOp)]
        if bad:
            raise TypeError(f"query-time nodes without run_one: {bad}")
        served = [n for n in chain if self._runs(n)]
        self._last_node = served[-1] if served else None
        self._selective = any(isinstance(n.op, SelectiveOp) for n in served)

    def _runs(self, n: Node) -> bool:
        """Whether a request runs ``n`` (else it is offline work no request pays)."""
        return n.phase is Phase.QUERY or (self.whole_request and is_request_op(n))

    @property
    def last(self) -> Node | None:
        """The node whose value a call returns (None: the chain runs nothing per query)."""
        return self._last_node

    def __call__(self, q: int) -> tuple[dict[str, float], Any]:
        return self.serve(self.dataset.queries[q])

    def serve(self, query: Query, *, ops: Mapping[str, StageOp] | None = None,
              on_value: OnValue | None = None
              ) -> tuple[dict[str, float], Any]:
        """The chain for ``query``: one of the dataset's, or any request's (``bench.serve``:
        its text, the caller's roles and tenant) over the same corpus and index. ``ops``: by
        node key, the op that node runs for this request instead of its own (same inputs);
        ``on_value(node, value, ms)`` is called as each node's value is computed, with the
        milliseconds per latency stage so far."""
        one = OneQuery(query, Dataset(self.dataset.name, self.dataset.documents, (query,),
                                      fingerprint=self.dataset.fingerprint), self.id_key)
        timer = QueryTimer(sync_cuda=self.device == "cuda")
        vals: dict[str, Any] = dict(self._fixed)
        run = _Request(self, one, timer, vals, ops or {}, on_value)
        if self._selective and self._last_node is not None:
            return timer.ms, run.demand(self._last_node)
        for n in self.chain:
            if n.key not in vals:
                run.compute(n)
        return timer.ms, None if self._last_node is None else vals[self._last_node.key]

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


class _Request:
    """One call of a chain: its values so far, by node key."""

    def __init__(self, chain: QueryChain, one: OneQuery, timer: QueryTimer,
                 vals: dict[str, Any], ops: Mapping[str, StageOp],
                 on_value: OnValue | None) -> None:
        self.chain, self.one, self.timer, self.vals = chain, one, timer, vals
        self.ops, self.on_value = ops, on_value

    def _op(self, n: Node) -> StageOp:
        return self.ops.get(n.key, n.op)

    def compute(self, n: Node) -> Any:
        """``n``'s value from its inputs' (already computed)."""
        out = None  # offline work: no request pays it
        if self.chain._runs(n):
            op = self._op(n)
            assert isinstance(op, QueryOp)
            out = op.run_one(n.bind(self.vals), self.one, self.timer)
        return self._keep(n, out)

    def _keep(self, n: Node, out: Any) -> Any:
        self.vals[n.key] = out
        if self.on_value is not None:
            self.on_value(n, out, dict(self.timer.ms))
        return out

    def demand(self, n: Node) -> Any:
        """``n``'s value for this request, computing only what it (and a selective op among
        its upstream) reads."""
        if n.key in self.vals:
            return self.vals[n.key]
        op = self._op(n)
        if self.chain._runs(n) and isinstance(op, SelectiveOp):
            return self._keep(n, op.run_one_lazy(lambda name: self.demand(n.input(name)),
                                                 self.one, self.timer))
        if self.chain._runs(n):
            for i in n.inputs:
                self.demand(i)
        return self.compute(n)
