"""RAGChecker's generator diagnostics from claim-level entailment (Ru et al. 2024,
amazon-science/RAGChecker ``computation.py``), as a pointwise judge (``judge.judges:
[..., diagnostics]``).

Per answer the judge model is asked, with the faithfulness judge's own prompts and schemas:

1. the answer's atomic claims (the faithfulness extraction: with ``generation.memo`` the same
   request is a memo hit);
2. which claims the REFERENCE entails — the expected answer and the required claims, shown as
   the one passage (a claim is *correct* when it does);
3. which claims the RELEVANT passages entail and which the IRRELEVANT ones do (one partition
   call per group that has passages). A passage is relevant when it covers a required claim
   (RAGChecker's definition; the coverage test is the ``claims_coverage`` matcher,
   ``bench.context.metrics.relevant_passages``); without required claims the reference stands
   for the one ground-truth claim.

Then, over the n extracted claims (RAGChecker's formulas; each claim falls in one share or is
correct and grounded):

- ``noise_sensitivity_relevant`` = incorrect claims a relevant passage entails / n;
- ``noise_sensitivity_irrelevant`` = incorrect claims only irrelevant passages entail / n;
- ``hallucination`` = incorrect claims no passage entails / n;
- ``self_knowledge`` = correct claims no passage entails / n.

Statuses as the faithfulness judge's: an abstaining answer or one without claims is
``no_claims``; a query without a reference or required claims (must-abstain ones) is
``not_applicable``; any call that fails its schema after retries makes the verdict ``invalid``.
A 135M judge model makes these figures a plumbing check, as every judge figure here.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from bench.context.base import ContextPassage, strip_citations, tag
from bench.context.metrics import JUDGED_DIAGNOSTICS, relevant_passages
from bench.generation.base import ChatMessage, Generator
from bench.judge.base import OK, JudgeCall, JudgeItem, Verdict
from bench.judge.faithfulness import (
    EXTRACT_SYSTEM,
    EXTRACT_USER,
    VERIFY_SYSTEM,
    VERIFY_USER,
    Claims,
)
from bench.judge.llm import (
    BOUNDED_PARTITION,
    LLMJudge,
    Partition,
    check_partition,
    detail,
    numbered,
    partition_schema,
)
from bench.judge.structured import Task
from bench.metrics.answer import AbstentionDetector
from bench.metrics.base import ERROR, INVALID, NO_CLAIMS, NOT_APPLICABLE


def _render(passages: Sequence[ContextPassage]) -> str:
    return "\n\n".join(f"{tag(p.doc_id)} {p.text}" for p in passages)


def diagnostic_scores(n: int, correct: set[int], by_relevant: set[int],
                      by_irrelevant: set[int]) -> tuple[tuple[str, float], ...]:
    """The four shares of claims 1..n (module docstring) from the claim numbers the reference,
    the relevant passages and the irrelevant passages entail."""
    claims = range(1, n + 1)
    noise_rel = sum(c not in correct and c in by_relevant for c in claims)
    noise_irr = sum(c not in correct and c not in by_relevant and c in by_irrelevant
                    for c in claims)
    grounded = by_relevant | by_irrelevant
    halluc = sum(c not in correct and c not in grounded for c in claims)
    self_k = sum(c in correct and c not in grounded for c in claims)
    return tuple(zip(JUDGED_DIAGNOSTICS, (noise_rel / n, noise_irr / n, halluc / n, self_k / n),
                     strict=True))


class GeneratorDiagnosticsJudge(LLMJudge):
    """Extra options: ``refusal_patterns`` (as the faithfulness judge's) and
    ``claim_f1_threshold`` (the matcher deciding which passages are relevant; keep it equal to
    ``answers.claim_f1_threshold``)."""

    name = "diagnostics"
    metrics = JUDGED_DIAGNOSTICS
    prompts = (EXTRACT_SYSTEM, EXTRACT_USER, VERIFY_SYSTEM, VERIFY_USER)

    def __init__(self, *, generator: Generator, max_retries: int = 2, max_tokens: int = 512,
                 temperature: float = 0.0, seed: int = 0, feedback: bool = True,
                 refusal_patterns: Sequence[str] = (), claim_f1_threshold: float = 0.5) -> None:
        super().__init__(generator=generator, max_retries=max_retries, max_tokens=max_tokens,
                         temperature=temperature, seed=seed, feedback=feedback)
        self.detector = AbstentionDetector(patterns=refusal_patterns)
        self.claim_f1_threshold = claim_f1_threshold

    def cache_params(self) -> dict[str, object]:
        return {**super().cache_params(), **BOUNDED_PARTITION,
                "refusal_patterns": list(self.detector.patterns),
                "claim_f1_threshold": self.claim_f1_threshold}

    @classmethod
    def schemas(cls) -> tuple[type[BaseModel], ...]:
        return (Claims, Partition)

    def _verify(self, key: str, context: str, claims: list[str]) -> Task[Partition]:
        return Task(key, (
            ChatMessage("system", VERIFY_SYSTEM),
            ChatMessage("user", VERIFY_USER.format(context=context, claims=numbered(claims)))),
            check_partition(len(claims)),  # type: ignore[arg-type]
            partition_schema(len(claims)))

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        out: dict[int, Verdict] = {}
        asked = []
        for i, it in enumerate(items):
            truth = [c for c in it.required_claims if c.strip()] or (
                [it.reference] if it.reference else [])
            if it.answer is None:
                continue
            if it.must_abstain or not truth:
                out[i] = Verdict(it.query_id, self.name, NOT_APPLICABLE, (), ())
            elif self.detector.abstains(strip_citations(it.answer)):
                out[i] = Verdict(it.query_id, self.name, NO_CLAIMS, (), (),
                                 detail({"abstained": True}))
            else:
                asked.append(i)
        extract = self.caller(Claims).run([
            Task(items[i].query_id, (
                ChatMessage("system", EXTRACT_SYSTEM),
                ChatMessage("user", EXTRACT_USER.format(
                    query=items[i].query, answer=strip_citations(items[i].answer or "")))))
            for i in asked], "extract")
        claims_of: dict[int, list[str]] = {}
        calls_of: dict[int, list[JudgeCall]] = {}
        for i, (obj, call) in zip(asked, extract, strict=True):
            calls_of[i] = [call]
            if obj is None:
                out[i] = Verdict(items[i].query_id, self.name, call.status, (), (call,))
                continue
            claims = [c.strip() for c in obj.claims if c.strip()]
            if not claims:
                out[i] = Verdict(items[i].query_id, self.name, NO_CLAIMS, (), (call,),
                                 detail({"claims": []}))
                continue
            claims_of[i] = claims
        # one batch of partition calls: reference, relevant passages, irrelevant passages
        tasks: list[Task[Partition]] = []
        slots: list[tuple[int, str]] = []
        groups: dict[int, dict[str, list[int]]] = {}
        for i, claims in claims_of.items():
            it = items[i]
            truth = [c for c in it.required_claims if c.strip()] or [it.reference or ""]
            reference = "\n".join(dict.fromkeys([*([it.reference] if it.reference else []),
                                                 *truth]))
            passages = it.context.passages if it.context is not None else ()
            relevant = relevant_passages([p.text for p in passages], truth,
                                         f1_threshold=self.claim_f1_threshold)
            groups[i] = {"relevant": [n for n, r in enumerate(relevant, 1) if r],
                         "irrelevant": [n for n, r in enumerate(relevant, 1) if not r]}
            tasks.append(self._verify(f"{it.query_id}/reference", f"[reference] {reference}",
                                      claims))
            slots.append((i, "reference"))
            for group, numbers in groups[i].items():
                if numbers:
                    tasks.append(self._verify(f"{it.query_id}/{group}", _render(
                        [passages[n - 1] for n in numbers]), claims))
                    slots.append((i, group))
        results = self.caller(Partition).run(tasks, "entail")
        got: dict[int, dict[str, set[int]]] = {i: {} for i in claims_of}
        failed: dict[int, JudgeCall] = {}
        for (i, group), (part, call) in zip(slots, results, strict=True):
            calls_of[i].append(call)
            if part is None:
                failed.setdefault(i, call)
                continue
            got[i][group] = set(part.supported)
        for i, claims in claims_of.items():
            it, calls = items[i], tuple(calls_of[i])
            if i in failed:
                status = ERROR if failed[i].status == ERROR else INVALID
                out[i] = Verdict(it.query_id, self.name, status, (), calls,
                                 detail({"claims": claims}))
                continue
            g = got[i]
            correct = g["reference"]
            rel, irr = g.get("relevant", set()), g.get("irrelevant", set())
            out[i] = Verdict(it.query_id, self.name, OK,
                             diagnostic_scores(len(claims), correct, rel, irr), calls,
                             detail({"claims": claims, "correct": sorted(correct),
                                     "by_relevant": sorted(rel), "by_irrelevant": sorted(irr),
                                     "passages": groups[i]}))
        return [out.get(i) or Verdict(it.query_id, self.name, ERROR, (), ())
                for i, it in enumerate(items)]
