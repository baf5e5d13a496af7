"""Plan nodes and the stage operations the executor resolves.

A stage declares, next to its own code, an operation object that says everything the
pipeline needs to know about it — nothing about a stage is listed centrally:

- ``stage`` and ``version``: its name and code version (both key its artifacts);
- ``params()``: its semantic parameters (they key the artifact too);
- ``phase``: ``INDEX`` (built once per corpus and shared: chunks, embeddings, indexes),
  ``QUERY`` (work a serving system does per request: query encoding, search, fusion,
  filters, reranking) or ``OFFLINE`` (evaluation work no request pays: reference searches,
  latency measurements, reports; verdicts; answers and their contexts, which are generated
  in batch after retrieval);
- ``request_stages``: stages of serving work an ``OFFLINE`` op does for every request but
  measures in its batch (context assembly, generation): their samples in a config's timings
  (per-query, or a whole-stage total shared evenly) count into that config's end-to-end
  latency and cost. One that also has ``run_one`` does that work for one request in a
  whole-request chain (``bench.pipeline.request.QueryChain(whole_request=True)``: a served
  answer, a capacity study); the budget probe's query-time chain does not run it;
- ``latency_stages``: the per-query latency stages its ``run_one`` times (a query-time op);
  samples of these names in a config's timings add up to its end-to-end latency, a budget
  ceiling may name them, and a ceiling broken on one prunes the first node emitting it;
- ``work_stages``: the probe stages whose per-query time this node spends on every query it
  processes (``work_queries`` of them), to estimate the work a pruned node saved;
- ``Inputs``: a frozen dataclass whose fields are its typed inputs, by name. Two kinds of
  optional field (``field(default=None, metadata=...)``) say how an input computes the value
  rather than what it is: ``UNKEYED`` — the op's output does not change by one bit with it
  (a forward pass shared with another artifact): neither its key nor its ident enters the
  node's, so the artifact keeps the key it has without it; ``UNNAMED`` — the output may
  differ in rounding: its key enters the node's key (never a cached value computed the other
  way) but not the ident, so the config keeps its id. Both are resolved like any input.

How it computes:

- ``CachedOp``: ``write(inputs, directory, timing)`` fills a fresh artifact folder and
  ``load(directory, inputs)`` reads it back (Parquet / .npy / faiss; never pickle). The
  executor resolves it through ``bench.cache.store.ArtifactStore``: the key is
  hash(stage, version, params, input keys), so a value computed once is loaded by every config
  and every later run that shares it.
- ``EphemeralOp``: ``run(inputs, timing)`` returns the value; cheap steps (fusion, filters,
  depth cuts) recomputed each run, keyed the same way for identity.
- ``QueryOp`` (a query-time op, either of the above): ``run_one(inputs, query, timer)``
  computes its value for ONE query — what the budget probe, the capacity driver and a served
  endpoint call — from the same inputs restricted to that query, timing each of its
  ``latency_stages`` in ``timer``. Its value agrees with the batch value's row for that query.

Bump an op's ``version`` when its code changes what it produces: old artifacts are then never
reused. ``Node`` is one step of a plan: an op, its input nodes by name, a display label. Its
``key`` is the content key above; its ``ident`` leaves code versions out, so a config's id
(``bench.pipeline.plan.Plan``) survives a version bump and names the same chain in every run.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

import numpy as np

from bench.cache.store import canonical_json, make_key
from bench.data.base import Corpus, Dataset, Query
from bench.telemetry.base import TimingLog, cuda_sync

T = TypeVar("T")


#: written by an op's ``write`` when some of its work failed (per-query statuses of a served
#: backend that died, timed out or answered wrong): the executor uses the artifact for THIS
#: run only and never stores it, so a rerun computes it again (see ``bench.pipeline.executor``)
INCOMPLETE_FILE = "incomplete.json"


def mark_incomplete(directory: Path, statuses: Mapping[str, str], reason: str) -> None:
    """Say that the artifact in ``directory`` lacks the work of some queries: ``statuses``
    maps each query id to its status (``failed`` / ``timeout`` / ``invalid``)."""
    import json

    (directory / INCOMPLETE_FILE).write_text(json.dumps({"reason": reason,
                                                         "statuses": dict(statuses)}))


def read_incomplete(directory: Path) -> dict[str, str]:
    """The per-query statuses ``mark_incomplete`` wrote ({} for a complete artifact)."""
    import json

    path = directory / INCOMPLETE_FILE
    if not path.is_file():
        return {}
    return {str(k): str(v) for k, v in json.loads(path.read_text())["statuses"].items()}


class Phase(enum.Enum):
    """When an op's work happens (see the module docstring)."""

    INDEX = "index"
    QUERY = "query"
    OFFLINE = "offline"


@dataclass(frozen=True)
class OneQuery:
    """The request a per-query call serves: the query, the corpus with this query alone (a
    one-query ``Dataset``: every batch value downstream has one row), and the corpus's
    document order key (trec_eval tie order), computed once per chain."""

    query: Query
    dataset: Dataset
    id_key: np.ndarray

    @property
    def text(self) -> str:
        return self.query.text


class QueryTimer:
    """Per-stage milliseconds of one request (a stage timed twice adds up)."""

    def __init__(self, *, sync_cuda: bool = False) -> None:
        self.sync_cuda = sync_cuda
        self.ms: dict[str, float] = {}

    @contextmanager
    def measure(self, stage: str) -> Iterator[None]:
        if self.sync_cuda:
            cuda_sync()
        t0 = time.perf_counter()
        yield
        if self.sync_cuda:
            cuda_sync()
        self.ms[stage] = self.ms.get(stage, 0.0) + (time.perf_counter() - t0) * 1000.0

    def time(self, stage: str, fn: Callable[[], T]) -> T:
        with self.measure(stage):
            return fn()


@dataclass(frozen=True)
class NoInputs:
    """The inputs of a root op."""


_KEYED, _NAMED = "bench.keyed", "bench.named"
#: ``dataclasses.field`` metadata of an optional ``Inputs`` field left out of the node's key
#: and ident: an input the op's output does not depend on, bit for bit (see the module
#: docstring; a test must show the identity)
UNKEYED: Mapping[str, bool] = {_KEYED: False, _NAMED: False}
#: ... of one in the key but not in the ident: how the value was computed (its bits may
#: differ), not which config it belongs to
UNNAMED: Mapping[str, bool] = {_KEYED: True, _NAMED: False}


def _flag(inputs: type, name: str, flag: str) -> bool:
    return bool(next(f for f in dataclasses.fields(inputs)
                     if f.name == name).metadata.get(flag, True))


class OpTraits:
    """Defaults of what an op declares (latency and work stages, ``Inputs``); an op overrides
    the ones that differ and always declares its ``phase``. Each op is a frozen dataclass
    inheriting this."""

    latency_stages: ClassVar[tuple[str, ...]] = ()
    request_stages: ClassVar[tuple[str, ...]] = ()
    work_stages: ClassVar[tuple[str, ...]] = ()
    Inputs: ClassVar[type] = NoInputs

    def work_queries(self, n_queries: int) -> int:
        """How many queries this node processes in a full run (for work-saved estimates)."""
        return n_queries


@runtime_checkable
class StageOp(Protocol):
    """What every op declares (see the module docstring)."""

    @property
    def stage(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def phase(self) -> Phase: ...

    @property
    def latency_stages(self) -> tuple[str, ...]: ...

    @property
    def request_stages(self) -> tuple[str, ...]: ...

    @property
    def work_stages(self) -> tuple[str, ...]: ...

    @property
    def Inputs(self) -> type: ...

    def work_queries(self, n_queries: int) -> int: ...

    def params(self) -> Mapping[str, Any]:
        """The semantic parameters of this step (they key the artifact)."""
        ...


@runtime_checkable
class CachedOp(StageOp, Protocol):
    def write(self, inputs: Any, directory: Path, timing: TimingLog) -> None:
        """Compute from ``inputs`` (an ``Inputs`` instance holding the input nodes' values)
        and write the artifact files into ``directory``, timing the work in ``timing``."""
        ...

    def load(self, directory: Path, inputs: Any) -> Any:
        """Read the value back from ``directory``."""
        ...


@runtime_checkable
class EphemeralOp(StageOp, Protocol):
    def run(self, inputs: Any, timing: TimingLog) -> Any:
        """Compute the value from ``inputs`` (not stored)."""
        ...


@runtime_checkable
class QueryOp(StageOp, Protocol):
    def run_one(self, inputs: Any, query: OneQuery, timer: QueryTimer) -> Any:
        """This op's value for one query, from inputs restricted to that query (index-time
        inputs whole), timing its ``latency_stages`` in ``timer``."""
        ...


@runtime_checkable
class SelectiveOp(QueryOp, Protocol):
    """A query-time op that, per request, reads only some of its inputs (a router: the
    route it chooses). The batch run computes every input; a per-query chain
    (``bench.pipeline.request.QueryChain``) resolves only the inputs this asks for, so the
    latency, cost and budget of a request are those of the work it really did."""

    def run_one_lazy(self, get: Callable[[str], Any], query: OneQuery, timer: QueryTimer
                     ) -> Any:
        """``run_one``'s value, reading input ``name`` with ``get(name)`` (computed on first
        use, with its own upstream) and no other input."""
        ...


@dataclass(frozen=True, eq=False)
class Node:
    """One step of a plan. Nodes with equal ``key`` are the same computation.

    ``inputs`` are the input nodes in the order of the op's ``Inputs`` fields (that order is
    part of the key); ``input_names`` names each. Build nodes with :meth:`of`."""

    op: StageOp
    inputs: tuple[Node, ...]
    label: str
    #: the root's key is given (the corpus or dataset fingerprint); others derive from op
    #: and inputs
    root_key: str | None = None
    #: the root's ident when it is not its key (the dataset root: named by its corpus, so a
    #: config's id is the same over any query set of that corpus)
    root_ident: str | None = None
    input_names: tuple[str, ...] = ()
    key: str = field(init=False)
    ident: str = field(init=False)

    @classmethod
    def of(cls, op: StageOp, label: str, **inputs: Node | None) -> Node:
        """A node of ``op`` reading ``inputs`` by field name of ``op.Inputs`` (an optional
        input given as None is left out, as if its field did not exist)."""
        fields = {f.name: f for f in dataclasses.fields(op.Inputs)}
        unknown = sorted(set(inputs) - set(fields))
        if unknown:
            raise TypeError(f"{type(op).__name__} has no inputs {unknown}; its inputs: "
                            f"{', '.join(fields)}")
        given = [(n, inputs[n]) for n in fields if inputs.get(n) is not None]
        return cls(op, tuple(v for _, v in given if v is not None), label,
                   input_names=tuple(n for n, _ in given))

    def __post_init__(self) -> None:
        if len(self.input_names) != len(self.inputs):
            raise TypeError(f"node {self.label!r}: {len(self.inputs)} inputs but "
                            f"{len(self.input_names)} names (build nodes with Node.of)")
        params = dict(self.op.params())
        if self.root_key is not None:
            key = self.root_key
            ident = self.root_ident or self.root_key
        else:
            key = make_key(self.op.stage, self.op.version, params,
                           [n.key for n in self.keyed_inputs])
            named = [i for n, i in zip(self.input_names, self.inputs, strict=True)
                     if _flag(self.op.Inputs, n, _NAMED)]
            ident = hashlib.sha256(canonical_json(
                {"stage": self.op.stage, "params": params,
                 "inputs": [n.ident for n in named]}).encode()).hexdigest()
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "ident", ident)

    @property
    def keyed_inputs(self) -> tuple[Node, ...]:
        """The inputs whose keys enter this node's key (all but ``UNKEYED`` fields)."""
        return tuple(i for n, i in zip(self.input_names, self.inputs, strict=True)
                     if _flag(self.op.Inputs, n, _KEYED))

    @property
    def stage(self) -> str:
        return str(self.op.stage)

    @property
    def phase(self) -> Phase:
        return self.op.phase

    @property
    def cached(self) -> bool:
        return isinstance(self.op, CachedOp)

    def input(self, name: str) -> Node:
        """The input node named ``name``."""
        return self.inputs[self.input_names.index(name)]

    def bind(self, values: Mapping[str, Any]) -> Any:
        """The op's ``Inputs`` holding the values of the input nodes (by key)."""
        return self.op.Inputs(**{n: values[i.key]
                                 for n, i in zip(self.input_names, self.inputs, strict=True)})

    def ancestors(self) -> list[Node]:
        """This node and every node upstream of it, each once, inputs before users."""
        seen: dict[str, Node] = {}

        def visit(n: Node) -> None:
            if n.key in seen:
                return
            for i in n.inputs:
                visit(i)
            seen[n.key] = n

        visit(self)
        return list(seen.values())


@dataclass(frozen=True)
class CorpusOp(OpTraits):
    """The root of document-side work: the corpus alone (``bench.data.base.Corpus``, no
    queries), keyed by its fingerprint. Chunks, document embeddings and indexes read it, so
    their keys never change with the query set; an op that reads queries reads the dataset
    root instead and is keyed on it (it cannot read them from here)."""

    stage: str
    value: Corpus
    version: str = "1"
    phase: ClassVar[Phase] = Phase.INDEX

    def params(self) -> Mapping[str, Any]:
        # keyed like any op (never equal to the dataset root's key, even with no queries)
        return {"fingerprint": self.value.fingerprint}

    def run(self, inputs: NoInputs, timing: TimingLog) -> Corpus:
        return self.value


@dataclass(frozen=True)
class ValueOp(OpTraits):
    """A root that hands an already-loaded value to the plan (the dataset). Per query, the
    value is the one-query view of it."""

    stage: str
    value: Any
    version: str = "1"
    phase: ClassVar[Phase] = Phase.QUERY

    def params(self) -> Mapping[str, Any]:
        return {}

    def run(self, inputs: NoInputs, timing: TimingLog) -> Any:
        return self.value

    def run_one(self, inputs: NoInputs, query: OneQuery, timer: QueryTimer) -> Dataset:
        return query.dataset
