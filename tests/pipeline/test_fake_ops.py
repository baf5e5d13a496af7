"""The executor, the per-query loop and the plan fold with fake ops (no stage code).

Fake ops are frozen dataclasses declaring only what the pipeline reads: phase, typed
inputs, latency stages, params, and how they compute (write/load, run, run_one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest

from bench.cache.store import ArtifactStore
from bench.data.base import Dataset, Document, Query
from bench.pipeline.executor import Executor
from bench.pipeline.lanes import ConfigKind, PlanState, Stage, lane
from bench.pipeline.node import Node, OneQuery, OpTraits, Phase, QueryTimer, ValueOp
from bench.pipeline.request import QueryChain
from bench.telemetry.base import TimingLog
from bench.telemetry.basic import BasicTelemetry


def _dataset() -> Dataset:
    docs = tuple(Document(f"d{i}", f"text {i}") for i in range(3))
    return Dataset("fake", docs, (Query("q0", "zero"), Query("q1", "one")))


@dataclass(frozen=True)
class CountInputs:
    data: Dataset


@dataclass(frozen=True)
class CountDocs(OpTraits):
    """Index time, cached: the number of documents (written to a file)."""

    calls: list[int] = field(default_factory=list, compare=False, hash=False)
    stage: str = "count"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.INDEX
    Inputs: ClassVar[type] = CountInputs

    def params(self) -> Mapping[str, Any]:
        return {}

    def write(self, inputs: CountInputs, directory: Path, timing: TimingLog) -> None:
        self.calls.append(1)
        (directory / "n.txt").write_text(str(len(inputs.data.documents)))

    def load(self, directory: Path, inputs: CountInputs) -> int:
        return int((directory / "n.txt").read_text())


@dataclass(frozen=True)
class EchoInputs:
    n_docs: int
    data: Dataset


@dataclass(frozen=True)
class Echo(OpTraits):
    """Query time, ephemeral: per query, its text and the document count."""

    tag: str = "x"
    stage: str = "echo"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.QUERY
    Inputs: ClassVar[type] = EchoInputs
    latency_stages: ClassVar[tuple[str, ...]] = ("echo",)

    def params(self) -> Mapping[str, Any]:
        return {"tag": self.tag}

    def run(self, inputs: EchoInputs, timing: TimingLog) -> list[str]:
        return [f"{self.tag}:{q.text}:{inputs.n_docs}" for q in inputs.data.queries]

    def run_one(self, inputs: EchoInputs, query: OneQuery, timer: QueryTimer) -> list[str]:
        with timer.measure("echo"):
            return [f"{self.tag}:{query.text}:{inputs.n_docs}"]


@dataclass(frozen=True)
class Measure(OpTraits):
    """Offline: a measurement that no request pays."""

    stage: str = "measure"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.OFFLINE
    Inputs: ClassVar[type] = CountInputs

    def params(self) -> Mapping[str, Any]:
        return {}

    def run(self, inputs: CountInputs, timing: TimingLog) -> str:
        return "measured"


def _graph() -> tuple[Node, Node, Node, CountDocs]:
    ds = _dataset()
    data = Node(ValueOp("data", ds), (), "data", root_key=ds.fingerprint)
    count_op = CountDocs()
    count = Node.of(count_op, "count", data=data)
    echo = Node.of(Echo(), "echo", n_docs=count, data=data)
    return data, count, echo, count_op


def test_nodes_take_inputs_by_name_in_field_order() -> None:
    data, count, echo, _ = _graph()
    assert echo.input_names == ("n_docs", "data") and echo.inputs == (count, data)
    with pytest.raises(TypeError, match="no inputs"):
        Node.of(Echo(), "bad", n_docs=count, dataset=data)
    assert Node.of(Echo("y"), "y", n_docs=count, data=data).key != echo.key
    assert Node.of(Echo(), "again", n_docs=count, data=data).key == echo.key


def test_executor_resolves_each_key_once_and_caches(tmp_path: Path) -> None:
    _, count, echo, count_op = _graph()
    ex = Executor(ArtifactStore(tmp_path), BasicTelemetry(), "cpu")
    assert ex.value(echo) == ["x:zero:3", "x:one:3"]
    assert ex.value(echo) is ex.value(echo)
    assert count_op.calls == [1] and not ex.resolved(count).hit
    again = Executor(ArtifactStore(tmp_path), BasicTelemetry(), "cpu")
    assert again.resolved(count).hit and again.value(count) == 3  # loaded, not recomputed
    assert count_op.calls == [1]


def test_the_per_query_loop_runs_query_ops_and_skips_offline_ones(tmp_path: Path) -> None:
    data, count, echo, _ = _graph()
    leaf = Node.of(Echo("z"), "leaf", n_docs=count, data=data)
    offline = Node.of(Measure(), "measure", data=data)
    ex = Executor(ArtifactStore(tmp_path), BasicTelemetry(), "cpu")
    chain = QueryChain([data, count, offline, echo, leaf], ex, data.op.value, "cpu")
    times, value = chain(1)
    assert value == ["z:one:3"]  # the last query-time node's value, for query 1 alone
    assert set(times) == {"echo"} and times["echo"] >= 0.0  # both echo ops add up
    assert chain.request(3).e2e_ms > 0.0  # request i is query i mod n


@dataclass(frozen=True)
class AnswerInputs:
    echoed: list[str]


@dataclass(frozen=True)
class Answer(OpTraits):
    """Offline, but work every request pays (``request_stages``), with a ``run_one``: the
    generation stage's shape."""

    suffix: str = "!"
    stage: str = "answer"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.OFFLINE
    request_stages: ClassVar[tuple[str, ...]] = ("answer",)
    Inputs: ClassVar[type] = AnswerInputs

    def params(self) -> Mapping[str, Any]:
        return {}

    def run(self, inputs: AnswerInputs, timing: TimingLog) -> list[str]:
        return [e + self.suffix for e in inputs.echoed]

    def run_one(self, inputs: AnswerInputs, query: OneQuery, timer: QueryTimer) -> list[str]:
        with timer.measure("answer"):
            return [e + self.suffix for e in inputs.echoed]


def test_a_whole_request_chain_runs_the_request_ops_too(tmp_path: Path) -> None:
    data, count, echo, _ = _graph()
    answer = Node.of(Answer(), "answer", echoed=echo)
    judge = Node.of(Measure(), "judge", data=data)  # evaluation after it: no request's work
    ex = Executor(ArtifactStore(tmp_path), BasicTelemetry(), "cpu")
    nodes = [data, count, echo, answer, judge]
    probe = QueryChain(nodes, ex, data.op.value, "cpu")
    times, value = probe(0)
    assert value == ["x:zero:3"] and set(times) == {"echo"} and probe.last is echo
    whole = QueryChain(nodes, ex, data.op.value, "cpu", whole_request=True)
    times, value = whole(0)
    assert value == ["x:zero:3!"] and set(times) == {"echo", "answer"} and whole.last is answer
    assert ex.value(answer) == ["x:zero:3!", "x:one:3!"]  # the batch rows it agrees with
    # one request's own op for a node (a served request's sampling), and each value as it comes
    seen: list[tuple[str, object, tuple[str, ...]]] = []
    times, value = whole.serve(Query("new", "new text"), ops={answer.key: Answer("?")},
                               on_value=lambda n, v, ms: seen.append((n.label, v, tuple(ms))))
    assert value == ["x:new text:3?"]
    assert [(lbl, v) for lbl, v, _ in seen if lbl in ("echo", "answer", "judge")] == [
        ("echo", ["x:new text:3"]), ("answer", ["x:new text:3?"]), ("judge", None)]
    assert dict((lbl, ms) for lbl, _, ms in seen)["echo"] == ("echo",)  # ms so far
    assert whole(0)[1] == ["x:zero:3!"]  # the swap was that request's only


def expand_root(s: PlanState) -> PlanState:
    d = s.dataset
    return s.with_nodes(data=Node(ValueOp("data", d), (), "data", root_key=d.fingerprint))


def expand_count(s: PlanState) -> PlanState:
    return s.with_nodes(count=Node.of(CountDocs(), "count", data=s.node("data")))


def expand_echo(s: PlanState) -> PlanState:
    out = [lane(t, ConfigKind.DENSE, Node.of(Echo(t), t, n_docs=s.node("count"),
                                             data=s.node("data")), {"tag": t})
           for t in ("a", "b", "a")]
    return s.with_configs([*s.configs, *out])


def test_the_plan_folds_the_stage_list(tmp_path: Path) -> None:
    from bench.pipeline.plan import dedupe

    stages = (Stage("root", ("dataset",), f"{__name__}:expand_root"),
              Stage("count", ("counter",), f"{__name__}:expand_count"),
              Stage("echo", ("echo",), f"{__name__}:expand_echo"),
              Stage("service", ("report",)))  # no expander: no nodes
    state = PlanState(None, _dataset(), "cpu", 1)  # type: ignore[arg-type]
    for st in stages:
        state = st.expand(state)
        state = state.with_configs(dedupe(state.configs))
    assert [c.label for c in state.configs] == ["a", "b"]  # the same chain is one config
    assert set(state.nodes) == {"data", "count"}
    ex = Executor(ArtifactStore(tmp_path), BasicTelemetry(), "cpu")
    assert ex.value(state.configs[1].leaf) == ["b:zero:3", "b:one:3"]
