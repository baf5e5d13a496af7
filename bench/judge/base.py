"""Records and Protocols of the `judge` stage.

A judge reads answers with the context they were generated from and returns one ``Verdict``
per answer. Every judge call is schema-guided on every backend: a Pydantic model gives the
JSON Schema text carried by ``GenerationRequest.json_schema`` (vLLM structured outputs,
xgrammar on CPU) and parses the raw output. Output that fails the schema or the judge's own
validator (e.g. a claim partition with an overlap) is retried a bounded number of times, then
recorded ``invalid`` — counted in completion accounting, never dropped and never NaN. Each
call keeps its raw outputs (``JudgeCall.raw``) so a verdict can be audited and the
schema-validity rate of first attempts measured (:func:`schema_validity`).

Verdict statuses: ``ok``; ``invalid`` (schema/validator failed on every attempt);
``no_claims`` (nothing to judge: excluded from the mean, never 1.0); ``error`` (the generation
backend failed, or the answer itself was never generated); ``not_applicable`` (e.g. refusal
correctness on an answerable query).

Adding a judge: subclass ``bench.judge.llm.LLMJudge`` (or implement ``Judge``) in a module
here, declare its metric names in ``bench/metrics/registry.py`` and add
``conf/judge/<name>.yaml`` (the suite finds a pointwise judge there by its file name). An LLM
judge's prompts, score definitions and examples go in ``conf/judge/rubrics/<name>.yaml``
(``bench.judge.rubric``); a check that asks no model subclasses
``bench.judge.verifiers.Verifier`` instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from bench.context.base import Context
from bench.data.base import Query
from bench.generation.base import Generation
from bench.metrics.base import (
    ERROR,
    INVALID,
    NO_CLAIMS,
    NOT_APPLICABLE,
    SCORED,
    QueryValue,
)

OK = "ok"
VERDICT_STATUSES = (OK, INVALID, NO_CLAIMS, ERROR, NOT_APPLICABLE)


@dataclass(frozen=True)
class JudgeCall:
    """One structured question to the judge model, with every attempt it took.

    ``status``: ok | invalid | error. ``first_valid``: the first raw output passed the schema
    and the validator. ``raw`` / ``errors``: each attempt's output and why it was rejected
    ("" for the accepted one)."""

    step: str
    status: str
    attempts: int
    first_valid: bool
    raw: tuple[str, ...]
    errors: tuple[str, ...]


@dataclass(frozen=True)
class Verdict:
    """One judge's verdict on one answer. ``scores``: (metric, value in [0, 1]) of an ``ok``
    verdict; a metric the judge declares but leaves out is undefined for this answer (e.g.
    citation precision with no citation). ``detail``: JSON of what was accepted (claims,
    partitions), for audits."""

    query_id: str
    judge: str
    status: str
    scores: tuple[tuple[str, float], ...]
    calls: tuple[JudgeCall, ...]
    detail: str = ""
    #: which of the ``judge.repeats`` judgments of this answer it is (0: the first)
    repeat: int = 0

    def __post_init__(self) -> None:
        if self.status not in VERDICT_STATUSES:
            raise ValueError(f"unknown verdict status {self.status!r}")
        for name, value in self.scores:
            if not 0.0 <= value <= 1.0:  # also rejects NaN
                raise ValueError(f"{self.judge} {name} of {self.query_id}: {value} not in [0, 1]")

    @property
    def attempts(self) -> int:
        return sum(c.attempts for c in self.calls)

    @property
    def raw(self) -> tuple[str, ...]:
        return tuple(r for c in self.calls for r in c.raw)

    def score(self, metric: str) -> float | None:
        return dict(self.scores).get(metric)

    def values(self, metrics: Sequence[str]) -> list[QueryValue]:
        """Per-query rows for ``metrics``: ``scored`` for a score of an ok verdict, otherwise
        the verdict's status (``not_applicable`` for a metric an ok verdict left undefined)."""
        got = dict(self.scores)
        out = []
        for m in metrics:
            if self.status == OK:
                out.append(QueryValue(self.query_id, m, got[m], SCORED) if m in got
                           else QueryValue(self.query_id, m, 0.0, NOT_APPLICABLE))
            else:
                out.append(QueryValue(self.query_id, m, 0.0, self.status))
        return out


@dataclass(frozen=True)
class JudgeItem:
    """One answer to judge. ``answer`` None: the generation failed (verdict ``error``, no
    judge call). ``context``: what the generator saw (None for closed-book answers)."""

    query_id: str
    query: str
    answer: str | None
    context: Context | None = None
    must_abstain: bool = False
    reference: str | None = None
    #: the dataset's required claims (the ground-truth claims of RAGChecker's diagnostics)
    required_claims: tuple[str, ...] = ()


def judge_items(queries: Sequence[Query], answers: Sequence[Generation],
                contexts: Sequence[Context | None]) -> list[JudgeItem]:
    """Pair golden queries with their generations and contexts (same order); a generation
    whose status is not ``ok`` gives ``answer=None`` (its verdicts are ``error``)."""
    if not len(queries) == len(answers) == len(contexts):
        raise ValueError("queries, answers and contexts differ in length")
    return [
        JudgeItem(query_id=q.query_id, query=q.text, answer=g.text if g.status == "ok" else None,
                  context=c, must_abstain=q.must_abstain, reference=q.expected_answer,
                  required_claims=q.required_claims)
        for q, g, c in zip(queries, answers, contexts, strict=True)
    ]


class Judge(Protocol):
    """A pointwise judge: batch-first, one ``Verdict`` per item, same order."""

    #: short name (``faithfulness``), recorded in each verdict and in calibration files
    name: str
    #: per-query metric names it emits (declared in bench/metrics/registry.py)
    metrics: tuple[str, ...]

    def cache_params(self) -> dict[str, object]:
        """Judge model identity, prompts, schema and retry budget."""
        ...

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]: ...


@dataclass(frozen=True)
class PairItem:
    """Two configs' answers to the same query, to be compared."""

    query_id: str
    query: str
    config_a: str
    answer_a: str
    config_b: str
    answer_b: str
    context: Context | None = None


@dataclass(frozen=True)
class PairVerdict:
    """``winner``: config_a | config_b | "tie" ("" unless ok). A verdict that flips with the
    presentation order is a tie with ``consistent`` False. ``prefs``: config_a's preference
    (1 / 0.5 / 0) as each order was answered, ab first; ``preference``: the aggregate when it
    is not the winner's (the mean of the orders, ``aggregate=mean``); ``judge``: the judge
    model that gave it (short name)."""

    query_id: str
    config_a: str
    config_b: str
    status: str
    winner: str
    consistent: bool
    calls: tuple[JudgeCall, ...]
    prefs: tuple[float, ...] = ()
    preference: float | None = None
    judge: str = ""

    def value(self) -> QueryValue:
        """The per-query ``pairwise_preference`` row of config_a (config_b's is 1 - it)."""
        pref = self.preference_a
        if pref is None:
            return QueryValue(self.query_id, "pairwise_preference", 0.0, self.status)
        return QueryValue(self.query_id, "pairwise_preference", pref, SCORED)

    @property
    def preference_a(self) -> float | None:
        """1 when config_a won, 0.5 on a tie, 0 when it lost; None unless ok."""
        if self.status != OK:
            return None
        if self.preference is not None:
            return self.preference
        return 1.0 if self.winner == self.config_a else 0.5 if self.winner == "tie" else 0.0


@runtime_checkable
class PairwiseJudge(Protocol):
    """A judge of preferences between two answers (asked in both orders); the plan compares
    generated configs with it instead of judging each one (``bench.judge.pairing``)."""

    name: str

    def cache_params(self) -> dict[str, object]: ...

    def compare(self, items: Sequence[PairItem]) -> list[PairVerdict]: ...


@dataclass(frozen=True)
class Rate:
    """A ratio with its counts (None: empty denominator)."""

    rate: float | None
    numerator: int
    denominator: int


def schema_validity(calls: Iterable[JudgeCall]) -> Rate:
    """Judge calls whose FIRST raw output was valid / judge calls (before any retry). Calls
    that never reached the model's output (generation errors) count as invalid."""
    n = valid = 0
    for c in calls:
        n += 1
        valid += c.first_valid
    return Rate(valid / n if n else None, valid, n)


def position_consistency(verdicts: Iterable[PairVerdict]) -> Rate:
    """Pairwise verdicts that agree in both orders / ok pairwise verdicts asked in both orders
    (a verdict asked in one order cannot show its position bias)."""
    ok = [v for v in verdicts if v.status == OK and len(v.prefs) != 1]
    n_c = sum(v.consistent for v in ok)
    return Rate(n_c / len(ok) if ok else None, n_c, len(ok))


#: a verdict's failure modes (:func:`failure_mode`); "" when nothing failed
FAILURE_MODES = ("", "unsupported_claims", "abstained", "no_claims", "schema",
                 "invalid_partition", "backend", "no_answer", "not_applicable",
                 "position_flip", "flagged")
_PARTITION_ERRORS = ("repeated in", " in both ", "out of range", "missing (every number")


def _reason_of(raw: str) -> str:
    """The ``reason`` a judge's JSON output gave, "" when it has none."""
    try:
        obj = json.loads(raw)
    except ValueError:
        return ""
    return str(obj.get("reason", "")) if isinstance(obj, dict) else ""


def _call_failure(calls: Sequence[JudgeCall]) -> tuple[str, str]:
    bad = next((c for c in calls if c.status != OK), None)
    if bad is None:
        return "schema", ""
    last = next((e for e in reversed(bad.errors) if e), "")
    if bad.status == ERROR or last.startswith("generation "):
        return "backend", last
    if any(p in last for p in _PARTITION_ERRORS):
        return "invalid_partition", f"{bad.step}: {last}"
    return "schema", f"{bad.step}: {last}"


def failure_mode(v: Verdict) -> tuple[str, str]:
    """(failure mode, rationale) of a verdict, read from what it recorded (no extra call):

    ``ok``: "" — except a faithfulness verdict with unsupported claims, ``unsupported_claims``
    with those claims as the rationale, and a verifier's finding ``flagged`` with what it
    flagged; elsewhere the rationale is the judge's own ``reason`` where its schema has one.
    ``no_claims``: ``abstained`` (a refusal pattern matched) or
    ``no_claims``. ``invalid``: ``invalid_partition`` (the claim partition was not complete
    and disjoint on every attempt) or ``schema`` (the output never parsed), with the last
    rejection. ``error``: ``backend`` (the judge model's call failed) or ``no_answer`` (the
    answer was never generated: nothing to judge)."""
    detail = json.loads(v.detail) if v.detail else {}
    if v.status == OK:
        if detail.get("flagged"):  # a verifier's finding (bench.judge.verifiers)
            return "flagged", str(detail["flagged"])
        if detail.get("unsupported"):
            claims = detail.get("claims", [])
            names = [claims[i - 1] for i in detail["unsupported"] if 0 < i <= len(claims)]
            return "unsupported_claims", "unsupported: " + " | ".join(names)
        last = v.calls[-1].raw[-1] if v.calls and v.calls[-1].raw else ""
        return "", _reason_of(last)
    if v.status == NO_CLAIMS:
        return ("abstained", "the answer abstains") if detail.get("abstained") else (
            "no_claims", "no claim extracted")
    if v.status == INVALID:
        return _call_failure(v.calls)
    if v.status == ERROR:
        return _call_failure(v.calls) if v.calls else ("no_answer", "")
    return "not_applicable", ""


def pair_failure_mode(v: PairVerdict) -> tuple[str, str]:
    """A pairwise verdict's failure mode: ``position_flip`` when the two orders disagree,
    otherwise as :func:`failure_mode`; the rationale is each order's ``reason``."""
    reasons = " / ".join(r for c in v.calls if c.raw for r in [_reason_of(c.raw[-1])] if r)
    if v.status == OK:
        return ("" if v.consistent or len(v.prefs) == 1 else "position_flip"), reasons
    return _call_failure(v.calls)
