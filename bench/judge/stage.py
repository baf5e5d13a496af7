"""Plan operation of the `judge` stage: verdicts on one config's answers (cached).

``JudgeOp`` reads the answers (the generate node), the contexts they were generated from and
the dataset, and stores every verdict with every judge call's raw outputs in Parquet. Its key
is the judge's ``cache_params`` (judge model identity included) over the answers' key, so a
judge sweep re-runs only the judges: the generate node upstream is loaded from the cache.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeGuard

import pyarrow as pa
import pyarrow.parquet as pq

from bench.data.base import Dataset
from bench.generation.base import Generation, Generator
from bench.judge.base import Judge, JudgeCall, Verdict, judge_items
from bench.metrics.base import QueryValue
from bench.pipeline.node import OpTraits, Phase
from bench.telemetry.base import TimingLog

if TYPE_CHECKING:
    from bench.generation.stage import Contexts
    from bench.judge.ensemble import EnsembleJudge
    from bench.judge.llm import LLMJudge

VERDICTS_FILE = "verdicts.parquet"

_CALL = pa.struct([
    pa.field("step", pa.string()), pa.field("status", pa.string()),
    pa.field("attempts", pa.int64()), pa.field("first_valid", pa.bool_()),
    pa.field("raw", pa.list_(pa.string())), pa.field("errors", pa.list_(pa.string())),
])
_VERDICT_SCHEMA = pa.schema([
    pa.field("query_id", pa.string()), pa.field("judge", pa.string()),
    pa.field("status", pa.string()),
    pa.field("scores", pa.list_(pa.struct([pa.field("metric", pa.string()),
                                           pa.field("value", pa.float64())]))),
    pa.field("calls", pa.list_(_CALL)), pa.field("detail", pa.string()),
    pa.field("repeat", pa.int64()),
])


def _members(judge: Judge) -> list[Judge]:
    from bench.judge.repeats import RepeatedJudge
    from bench.judge.suite import JudgeSuite

    if isinstance(judge, RepeatedJudge):
        return _members(judge.inner)
    return list(judge.judges) if isinstance(judge, JudgeSuite) else [judge]


def judge_name(judge: Judge) -> str:
    """``faithfulness`` for one judge, ``faithfulness+refusal`` for a suite."""
    return "+".join(j.name for j in _members(judge))


def judge_metrics(judge: Judge) -> dict[str, tuple[str, ...]]:
    """Metric names per judge name (a suite's members, or the judge itself)."""
    return {j.name: tuple(j.metrics) for j in _members(judge)}


def verdict_values(judge: Judge, verdicts: Sequence[Verdict]) -> list[QueryValue]:
    """Per-query rows of every judge metric; with ``judge.repeats`` the mean over the
    repeats that scored it (bench.judge.repeats)."""
    from bench.judge.repeats import mean_over_repeats, repeat_rows

    metrics = judge_metrics(judge)
    if all(v.repeat == 0 for v in verdicts):
        return [row for v in verdicts for row in v.values(metrics[v.judge])]
    return mean_over_repeats(repeat_rows(verdicts, metrics))


def judge_repeats(judge: Judge) -> int:
    """How many times the judge judges each answer (``judge.repeats``)."""
    from bench.judge.repeats import RepeatedJudge

    return judge.repeats if isinstance(judge, RepeatedJudge) else 1


def save_verdicts(verdicts: Sequence[Verdict], path: Path) -> None:
    rows = [{
        "query_id": v.query_id, "judge": v.judge, "status": v.status,
        "scores": [{"metric": m, "value": x} for m, x in v.scores],
        "calls": [{"step": c.step, "status": c.status, "attempts": c.attempts,
                   "first_valid": c.first_valid, "raw": list(c.raw),
                   "errors": list(c.errors)} for c in v.calls],
        "detail": v.detail, "repeat": v.repeat,
    } for v in verdicts]
    pq.write_table(pa.Table.from_pylist(rows, schema=_VERDICT_SCHEMA), path)


def load_verdicts(path: Path) -> list[Verdict]:
    out = []
    for r in pq.read_table(path).to_pylist():
        calls = tuple(JudgeCall(c["step"], c["status"], c["attempts"], c["first_valid"],
                                tuple(c["raw"]), tuple(c["errors"])) for c in r["calls"])
        # verdicts cached before judge.repeats existed have no repeat column: the first
        out.append(Verdict(r["query_id"], r["judge"], r["status"],
                           tuple((s["metric"], s["value"]) for s in r["scores"]), calls,
                           r["detail"], int(r.get("repeat") or 0)))
    return out


@dataclass(frozen=True)
class JudgeInputs:
    generations: list[Generation]
    contexts: Contexts
    data: Dataset


@dataclass(frozen=True)
class JudgeOp(OpTraits):
    judge: Judge
    stage: str = "judge"
    version: str = "1"
    #: evaluation of answers: no request pays it
    phase: ClassVar[Phase] = Phase.OFFLINE
    Inputs: ClassVar[type] = JudgeInputs

    def params(self) -> Mapping[str, Any]:
        return {"judge": json.loads(json.dumps(self.judge.cache_params(), default=str))}

    def write(self, inputs: JudgeInputs, directory: Path, timing: TimingLog) -> None:
        items = judge_inputs(inputs.generations, inputs.contexts.contexts, inputs.data)
        with timing.measure("total", len(items)):
            verdicts = self.judge.judge(items)
        save_verdicts(verdicts, directory / VERDICTS_FILE)

    def load(self, directory: Path, inputs: JudgeInputs) -> list[Verdict]:
        return load_verdicts(directory / VERDICTS_FILE)


def judge_inputs(gens: Sequence[Generation], contexts: Sequence[Any], dataset: Dataset
                 ) -> list[Any]:
    by_id = {q.query_id: q for q in dataset.queries}
    queries = [by_id[g.request_id] for g in gens]
    return judge_items(queries, gens, list(contexts))



def judge_generator(judge: Judge) -> Generator | None:
    """The generator the judge asks (a suite's members share one; an ensemble's first
    member's); None for a judge that asks no model."""
    first = next((j for j in _members(judge) if asks_model(j)), None)
    return None if first is None else first.generator


def asks_model(judge: Judge) -> TypeGuard[LLMJudge | EnsembleJudge]:
    """An LLM judge or an ensemble of them: its metrics need calibration, its verdicts go
    out for labelling (it has a ``rubric`` and a ``generator``)."""
    from bench.judge.ensemble import EnsembleJudge as Ens
    from bench.judge.llm import LLMJudge as LLM

    return isinstance(judge, LLM | Ens)
