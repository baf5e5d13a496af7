"""The labelling file of the calibration loop (``bench.judge.calibration``).

``judge_labelling.jsonl`` (run dir): one row per (config, query, LLM-judge metric) with the
query, the answer (a pairwise row: ``answer`` A the candidate's, ``answer_b`` B the
baseline's), the context passages, the verdict's score on the rubric's scale and whether it
approves (``approve_at``), its rationale, the rubric hash, the query's split and category,
its status and ``"human": null`` for labellers to fill in. Labels come back as
``{"item_id", "human"}`` rows (:func:`read_human`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.errors import InputError
from bench.judge.agreement import approves, higher_is_better
from bench.judge.rubric import Rubric

if TYPE_CHECKING:
    from bench.pipeline.outcome import ConfigRun
    from bench.pipeline.view import RunView

LABELLING_FILE = "judge_labelling.jsonl"


def item_id(config_id: str, query_id: str, metric: str) -> str:
    return f"{config_id}:{query_id}:{metric}"


def labelling_rows(done: RunView) -> list[dict[str, Any]]:
    """``judge_labelling.jsonl`` rows of a finished run: every verdict of every
    LLM judge metric of every generated config; nothing without an LLM judge."""
    from bench.judge.base import failure_mode
    from bench.judge.stage import _members, asks_model
    from bench.pipeline.answers import answered
    from bench.pipeline.lanes import ConfigKind

    judge = done.judge
    if judge is None:
        return []
    llm = {j.name: j for j in _members(judge) if asks_model(j)}
    if not llm:
        return []
    by_id = {q.query_id: q for q in done.dataset.queries}
    rows: list[dict[str, Any]] = []
    # each answers node's ok answers: a pairwise candidate's baseline is the node its pairwise
    # node reads as ``baseline`` (the first config; per context in a generator sweep)
    ok_answers: dict[int, dict[str, str]] = {}
    for c in done.configs:
        if c.spec.kind is not ConfigKind.GENERATED or c.pool is None:
            continue
        a = answered(c.spec, done)
        answers = {g.request_id: g for g in a.generations}
        contexts = {x.query_id: x for x in a.contexts}
        assert c.spec.answers is not None
        ok_answers[id(c.spec.answers)] = {g.request_id: g.text for g in a.generations
                                          if g.status == "ok"}
        if a.pairs is not None and "pairwise" in llm:
            baseline = ok_answers.get(id(c.spec.leaf.input("baseline")), {})
            rows += _pair_rows(done, c, llm["pairwise"].rubric, a, baseline, by_id)
        for v in a.verdicts:
            j = llm.get(v.judge)
            if j is None or v.repeat != 0:
                continue
            q, gen, ctx = by_id[v.query_id], answers.get(v.query_id), contexts.get(v.query_id)
            _, why = failure_mode(v)
            for metric in j.metrics:
                sd = j.rubric.score(metric)
                score = v.score(metric) if v.status == "ok" else None
                scaled = None if score is None else sd.to_scale(score)
                rows.append({
                    "item_id": item_id(c.spec.config_id, v.query_id, metric),
                    "config_id": c.spec.config_id, "config": c.spec.label,
                    "query_id": v.query_id, "category": q.category, "split": q.split,
                    "dataset": done.dataset.name, "judge": v.judge, "metric": metric,
                    "kind": sd.kind, "rubric": j.rubric.digest, "status": v.status,
                    # the rubric file whose score definitions apply (an ensemble's members')
                    "rubric_judge": j.rubric.judge,
                    "score": scaled,
                    "approve": (None if scaled is None
                                else approves(sd, higher_is_better(metric), scaled)),
                    "rationale": why, "query": q.text,
                    "answer": gen.text if gen is not None else None,
                    "context": [{"doc_id": p.doc_id, "text": p.text}
                                for p in (ctx.passages if ctx is not None else ())],
                    "human": None,
                })
    return rows


def _pair_rows(done: RunView, c: ConfigRun, rub: Rubric, a: Any, baseline: Mapping[str, str],
               by_id: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Labelling rows of a candidate's pairwise verdicts: answer A is the candidate's, answer
    B the baseline's (the first generated config, of its context in a generator sweep);
    ``score`` is A's preference."""
    from bench.judge.base import pair_failure_mode

    metric = "pairwise_preference"
    sd = rub.score(metric)
    answers = {g.request_id: g.text for g in a.generations}
    rows = []
    for pv in a.pairs.primary:
        q = by_id[pv.query_id]
        rows.append({
            "item_id": item_id(c.spec.config_id, pv.query_id, metric),
            "config_id": c.spec.config_id, "config": c.spec.label, "query_id": pv.query_id,
            "category": q.category, "split": q.split, "dataset": done.dataset.name,
            "judge": "pairwise", "metric": metric, "kind": sd.kind, "rubric": rub.digest,
            "status": pv.status, "score": pv.preference_a, "approve": None,
            "rationale": pair_failure_mode(pv)[1], "query": q.text,
            "answer": answers.get(pv.query_id), "answer_b": baseline.get(pv.query_id),
            "context": [], "human": None,
        })
    return rows


@dataclass(frozen=True)
class Item:
    """One judged item of a labelling file, with its human label once joined."""

    item_id: str
    judge: str
    metric: str
    kind: str
    category: str
    split: str
    dataset: str
    rubric: str
    status: str
    score: float | None
    approve: bool | None
    #: the judge whose rubric defines the score (an ensemble's members'; "": ``judge``)
    rubric_judge: str = ""

    @property
    def scored_as(self) -> str:
        return self.rubric_judge or self.judge


def read_labelling(path: str | Path) -> list[Item]:
    """A run's ``judge_labelling.jsonl``; InputError names file:line."""
    out: list[Item] = []
    need = ("item_id", "judge", "metric", "kind", "category", "split", "dataset", "rubric",
            "status", "score", "approve")
    for n, obj in read_jsonl(path):
        missing = [k for k in need if k not in obj]
        if missing:
            raise InputError(path, n, f"missing field {missing[0]!r} (not a labelling file "
                                      f"written by a run: {LABELLING_FILE})")
        out.append(Item(**{k: obj[k] for k in need},
                        rubric_judge=str(obj.get("rubric_judge") or "")))
    if not out:
        raise InputError(path, 0, "no rows")
    return out


def read_jsonl(path: str | Path) -> Iterable[tuple[int, dict[str, Any]]]:
    """``(line, object)`` per non-blank line, through the dataset readers' ``iter_jsonl``
    (invalid UTF-8, malformed JSON, duplicate keys and NaN name file:line; a BOM is
    dropped)."""
    from bench.data.jsonl import iter_jsonl

    for where, obj in iter_jsonl(path):
        yield where.line, obj


def read_human(path: str | Path) -> dict[str, tuple[object, int]]:
    """``{"item_id", "human"}`` rows (rows with ``human: null`` are not labelled yet and
    skipped): item id -> (label, line)."""
    out: dict[str, tuple[object, int]] = {}
    for n, obj in read_jsonl(path):
        if "item_id" not in obj or not isinstance(obj["item_id"], str):
            raise InputError(path, n, "missing string field 'item_id'")
        if "human" not in obj:
            raise InputError(path, n, "missing field 'human' (true/false, a number on the "
                                      "rubric's scale, or a/b/tie)")
        label = obj["human"]
        if label is None:
            continue
        if not isinstance(label, bool | int | float | str) or (
                isinstance(label, str) and label.lower() not in ("a", "b", "tie")):
            raise InputError(path, n, f"field 'human' must be true/false, a number or "
                                      f"a/b/tie, got {label!r}")
        if obj["item_id"] in out:
            raise InputError(path, n, f"item {obj['item_id']!r} repeats line "
                                      f"{out[obj['item_id']][1]}")
        out[obj["item_id"]] = (label, n)
    if not out:
        raise InputError(path, 0, "no labelled row (every 'human' is null)")
    return out
