"""Judge ensembles: several LLM judges score the same answers; one aggregate verdict per answer.

``judge=ensemble judge.ensemble=[...]`` lists the members, each a pointwise LLM judge option
(``conf/judge/<name>.yaml``) with its own options, its own judge model or both::

    judge:
      ensemble:
        - context_relevance                                   # the run's judge model
        - {judge: context_relevance, seed: 7, temperature: 0.7}
        - {judge: context_relevance,
           generator: {_target_: bench.generation.vllm_engine.VLLMGenerator, model: ...}}

Every member must emit the same metrics (the same judge, asked differently or by another
model): the ensemble then emits them too, so reports, gates and the calibration loop read
it like any other judge, under the name ``ensemble``.

Aggregation per metric (``aggregate``): ``majority`` votes the members' approvals (a score
counts as approval at the rubric's ``approve_at``) — 1 with more approvals than rejections, 0
with fewer, 0.5 on a tie (flagged ``tie`` in the detail); ``mean`` averages the scores;
``auto`` is majority for a ``binary`` score and mean for the others. Only members whose
verdict scored the metric vote; with fewer than ``quorum`` of them (default: more than half
the members) the aggregate verdict is not ``ok`` (``invalid`` when a member's output failed
its schema, otherwise the first failing member's status) — an ensemble of one surviving
member is not an ensemble score. Each member's status and scores are kept in the verdict's
detail and its calls in ``calls`` (steps prefixed with the member's label), so nothing a
member said is lost.

:func:`agreement` measures how much the members agree with each other — Krippendorff's alpha
(the ``krippendorff`` package; nominal on approve/reject, interval on the scores) with a
percentile bootstrap CI over the answers — and :func:`distribution` each member's score
distribution, whose share at the top of the scale shows a ceiling effect.

The ensemble's rubric hash (calibration records, gates) hashes the members' rubric hashes,
models, options and the aggregation: recalibrate when any of them changes.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from bench.config.build import OptionError, build
from bench.generation.base import Generator
from bench.judge.agreement import Boot, Stat, approves, bootstrap, higher_is_better
from bench.judge.base import INVALID, OK, JudgeItem, Verdict
from bench.judge.llm import LLMJudge, detail
from bench.judge.rubric import Rubric

AGGREGATES = ("auto", "majority", "mean")


def _member_label(i: int, judge: LLMJudge) -> str:
    model = judge.generator.cache_params().get("model", type(judge.generator).__name__)
    return f"{i}:{judge.name}@{str(model).rsplit('/', 1)[-1]}"


class EnsembleJudge:
    """``ensemble``: the members (a judge option name, or a mapping with ``judge`` and that
    judge's options, plus an optional ``generator`` block for its own model); ``aggregate``:
    auto | majority | mean; ``quorum``: members that must score a metric for an ``ok``
    aggregate (None: more than half). The other options are every member's defaults."""

    name = "ensemble"

    def __init__(self, *, generator: Generator, ensemble: Sequence[Any],
                 aggregate: str = "auto", quorum: int | None = None, max_retries: int = 2,
                 max_tokens: int = 512, temperature: float = 0.0, seed: int = 0,
                 feedback: bool = True) -> None:
        from bench.judge.suite import pointwise_judges

        if len(ensemble) < 2:
            raise OptionError("ensemble", f"an ensemble needs at least 2 judges, got "
                                          f"{len(ensemble)}")
        if aggregate not in AGGREGATES:
            raise OptionError("aggregate", f"must be one of {', '.join(AGGREGATES)}, "
                                           f"got {aggregate!r}")
        if quorum is not None and not 1 <= quorum <= len(ensemble):
            raise OptionError("quorum", f"must be in 1..{len(ensemble)}, got {quorum}")
        known = pointwise_judges()
        shared = {"max_retries": max_retries, "max_tokens": max_tokens,
                  "temperature": temperature, "seed": seed, "feedback": feedback}
        self.members: list[LLMJudge] = []
        for i, spec in enumerate(ensemble):
            key = f"ensemble[{i}]"
            spec = {"judge": spec} if isinstance(spec, str) else dict(spec)
            name = spec.pop("judge", None)
            cls = known.get(str(name))
            if cls is None or not issubclass(cls, LLMJudge):
                llm = sorted(n for n, c in known.items() if issubclass(c, LLMJudge))
                raise OptionError(f"{key}.judge", f"{name!r} is not an LLM judge; choose "
                                                  f"from {llm}")
            gen = generator
            if "generator" in spec:
                own = build(spec.pop("generator"), f"judge.{key}.generator")
                gen = own if own is not None else generator
            node = {"_target_": f"{cls.__module__}.{cls.__qualname__}", **shared, **spec}
            for opt in ("max_retries", "max_tokens", "temperature", "seed", "feedback"):
                if opt not in _options(cls):
                    node.pop(opt, None)
            member = build(node, f"judge.{key}", generator=gen)
            assert isinstance(member, LLMJudge)
            self.members.append(member)
        first = self.members[0]
        for i, m in enumerate(self.members[1:], start=1):
            if m.metrics != first.metrics:
                raise OptionError(f"ensemble[{i}].judge",
                                  f"{m.name} emits {list(m.metrics)}, member 0 ({first.name}) "
                                  f"{list(first.metrics)}: members must score the same metrics")
        params = [json.dumps(m.cache_params(), sort_keys=True, default=str)
                  for m in self.members]
        for i, p in enumerate(params):
            if p in params[:i]:
                raise OptionError(f"ensemble[{i}]", f"repeats ensemble[{params.index(p)}] "
                                                    "(same judge, model and options): its "
                                                    "votes would be copies")
        self.metrics = first.metrics
        self.aggregate = aggregate
        self.quorum = quorum if quorum is not None else len(self.members) // 2 + 1
        self.labels = [_member_label(i, m) for i, m in enumerate(self.members)]
        self.rubric: Rubric = replace(first.rubric, digest=self._digest())

    @property
    def generator(self) -> Generator:
        """The first member's judge model (the run records one judge model)."""
        return self.members[0].generator

    def _digest(self) -> str:
        ident = {
            "aggregate": self.aggregate, "quorum": self.quorum,
            "members": [{"judge": m.name, "rubric": m.rubric.digest,
                         "model": m.generator.cache_params().get("model"),
                         "sampling": [m.sampling.max_tokens, m.sampling.temperature,
                                      m.sampling.seed]} for m in self.members],
        }
        return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()
                              ).hexdigest()

    def cache_params(self) -> dict[str, object]:
        return {"ensemble": [m.cache_params() for m in self.members],
                "aggregate": self.aggregate, "quorum": self.quorum}

    def method(self, metric: str) -> str:
        """``majority`` or ``mean`` for ``metric`` (``auto`` resolved by its score kind)."""
        if self.aggregate != "auto":
            return self.aggregate
        return "majority" if self.rubric.score(metric).kind == "binary" else "mean"

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        per_member = [m.judge(items) for m in self.members]
        return [self._combine(item, [vs[k] for vs in per_member])
                for k, item in enumerate(items)]

    def _combine(self, item: JudgeItem, votes: Sequence[Verdict]) -> Verdict:
        calls = tuple(replace(c, step=f"{label}/{c.step}")
                      for label, v in zip(self.labels, votes, strict=True) for c in v.calls)
        members = [{"member": label, "status": v.status, "scores": dict(v.scores)}
                   for label, v in zip(self.labels, votes, strict=True)]
        scores: list[tuple[str, float]] = []
        info: dict[str, Any] = {}
        for metric in self.metrics:
            got = [v.score(metric) for v in votes if v.status == OK]
            values = [x for x in got if x is not None]
            if len(values) < self.quorum:
                continue
            how = self.method(metric)
            if how == "mean":
                scores.append((metric, sum(values) / len(values)))
                continue
            sd = self.rubric.score(metric)
            hib = higher_is_better(metric)
            yes = sum(approves(sd, hib, sd.to_scale(x)) for x in values)
            no = len(values) - yes
            win = 1.0 if yes > no else 0.0 if yes < no else 0.5
            # a majority of approvals is the approving end of the scale
            scores.append((metric, win if hib else 1.0 - win))
            if yes == no:
                info.setdefault("tie", []).append(metric)
        if scores:
            return Verdict(item.query_id, self.name, OK, tuple(scores), calls,
                           detail({"members": members, **info}))
        bad = [v for v in votes if v.status != OK]
        status = (INVALID if any(v.status == INVALID for v in bad)
                  else bad[0].status if bad else OK)
        if status == OK:  # every member ok, none scored: the metric is undefined here
            return Verdict(item.query_id, self.name, OK, (), calls,
                           detail({"members": members, "below_quorum": True}))
        return Verdict(item.query_id, self.name, status, (), calls,
                       detail({"members": members, "below_quorum": True}))


def _options(cls: type) -> set[str]:
    import inspect

    return set(inspect.signature(cls).parameters)


def member_scores(verdicts: Sequence[Verdict], metric: str
                  ) -> tuple[list[str], list[list[float | None]]]:
    """(member labels, one row per member of its score of ``metric`` per answer, None where
    it gave none) from an ensemble's verdicts (their detail)."""
    labels: list[str] = []
    rows: list[list[float | None]] = []
    for j, v in enumerate(verdicts):
        members = json.loads(v.detail).get("members", []) if v.detail else []
        for m in members:
            if m["member"] not in labels:
                labels.append(m["member"])
                rows.append([None] * len(verdicts))
            score = m["scores"].get(metric) if m["status"] == OK else None
            rows[labels.index(m["member"])][j] = None if score is None else float(score)
    return labels, rows


Level = Literal["nominal", "interval"]


def _alpha(rows: Sequence[Sequence[float | None]], level: Level) -> float | None:
    import krippendorff
    import numpy as np

    data = np.array([[np.nan if x is None else x for x in r] for r in rows], dtype=float)
    pairable = (~np.isnan(data)).sum(axis=0) >= 2
    if pairable.sum() < 1 or len(np.unique(data[:, pairable][~np.isnan(data[:, pairable])])) < 2:
        return None  # one value only: agreement is undefined, not perfect
    a = float(krippendorff.alpha(reliability_data=data[:, pairable],
                                 level_of_measurement=level))
    return None if math.isnan(a) else a


@dataclass(frozen=True)
class Agreement:
    """Inter-judge agreement on one metric over one config's answers: Krippendorff's alpha
    on approve/reject (nominal) and on the scores (interval), with bootstrap CIs over the
    answers; ``n``: answers at least two members scored; ``unanimous``: share of them where
    every member that scored made the same approve/reject call."""

    metric: str
    members: int
    n: int
    alpha_approve: Stat
    alpha_score: Stat
    unanimous: float | None


def agreement(ensemble: EnsembleJudge, verdicts: Sequence[Verdict], metric: str,
              boot: Boot | None = None) -> Agreement:
    boot = boot or Boot()
    labels, rows = member_scores(verdicts, metric)
    sd, hib = ensemble.rubric.score(metric), higher_is_better(metric)
    votes = [[None if x is None else float(approves(sd, hib, sd.to_scale(x))) for x in r]
             for r in rows]
    cols = [k for k in range(len(verdicts)) if sum(r[k] is not None for r in rows) >= 2]

    def on(data: Sequence[Sequence[float | None]], level: Level):  # type: ignore[no-untyped-def]
        return lambda ks: _alpha([[r[k] for k in ks] for r in data], level)

    same = [len({r[k] for r in votes if r[k] is not None}) == 1 for k in cols]
    return Agreement(metric, len(labels), len(cols), bootstrap(on(votes, "nominal"), cols, boot),
                     bootstrap(on(rows, "interval"), cols, boot),
                     sum(same) / len(same) if same else None)


@dataclass(frozen=True)
class Distribution:
    """One member's (or the ensemble's) scores of one metric: ``counts`` per level of the
    rubric's scale (per tenth for a ratio), the share at the top (``ceiling``) and the
    bottom (``floor``) of the scale."""

    member: str
    metric: str
    n: int
    mean: float | None
    ceiling: float | None
    floor: float | None
    counts: tuple[tuple[str, int], ...]


def _bins(sd: Any) -> list[float]:
    if sd.kind in ("graded", "binary"):
        return sorted(v for v, _ in sd.levels)
    return [i / 10 for i in range(11)]


def distribution(member: str, metric: str, scores: Sequence[float | None], sd: Any,
                 bins: Sequence[float] | None = None) -> Distribution:
    """``bins``: the levels counted (default: the rubric's levels; tenths for a ratio)."""
    vals = [sd.to_scale(x) for x in scores if x is not None]
    bins = list(bins) if bins is not None else _bins(sd)
    counts = {b: 0 for b in bins}
    for x in vals:
        counts[min(bins, key=lambda b: abs(b - x))] += 1
    lo, hi = min(bins), max(bins)
    n = len(vals)
    return Distribution(member, metric, n, sum(vals) / n if n else None,
                        sum(x >= hi for x in vals) / n if n else None,
                        sum(x <= lo for x in vals) / n if n else None,
                        tuple((f"{b:g}", c) for b, c in counts.items()))


def distributions(ensemble: EnsembleJudge, verdicts: Sequence[Verdict], metric: str
                  ) -> list[Distribution]:
    """Each member's score distribution of ``metric``, then the ensemble's aggregate."""
    sd = ensemble.rubric.score(metric)
    labels, rows = member_scores(verdicts, metric)
    out = [distribution(lab, metric, r, sd) for lab, r in zip(labels, rows, strict=True)]
    agg = [v.score(metric) if v.status == OK else None for v in verdicts]
    # a mean (or a tied vote) falls between the rubric's levels: count the aggregate in
    # tenths of the scale
    lo, hi = min(_bins(sd)), max(_bins(sd))
    tenths = [lo + (hi - lo) * i / 10 for i in range(11)]
    return [*out, distribution("ensemble", metric, agg, sd, tenths)]


def ensemble_of(judge: Any) -> EnsembleJudge | None:
    """The ensemble a run's judge is (None for any other judge)."""
    return judge if isinstance(judge, EnsembleJudge) else None


def summary_rows(ensemble: EnsembleJudge, verdicts: Sequence[Verdict]
                 ) -> tuple[list[Agreement], list[Distribution]]:
    return ([agreement(ensemble, verdicts, m) for m in ensemble.metrics],
            [d for m in ensemble.metrics for d in distributions(ensemble, verdicts, m)])


def as_dict(obj: Agreement | Distribution) -> Mapping[str, Any]:
    from dataclasses import asdict

    return asdict(obj)
