"""Citation precision / recall / coverage of ``[doc:ID]`` citations in answers.

Claims are the answer's sentences (split in code, a sentence made only of tags joins the one
before); a sentence with at least ``min_words`` words needs a citation. Each (sentence, cited
id) pair is decided in code when it can be, and by the judge model otherwise:

- a cited id that is not in the context: unsupported (code);
- a sentence that quotes text (``"..."`` or curly quotes, >= ``min_quote_chars``) citing a
  passage that does not contain the quote (case and whitespace folded): unsupported (code);
- every other pair: the judge partitions the numbered pairs into supported / unsupported
  (complete and disjoint, validated and retried).

precision = supported pairs / pairs (undefined without citations: ``not_applicable``);
recall = sentences needing a citation with >= 1 supported citation / sentences needing one;
coverage = distinct documents cited (and in the context) / distinct documents supplied —
document-level, because citation tags name documents. An abstaining answer, or one without a
sentence to cite for, is ``no_claims``; an item without context is ``not_applicable``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from bench.config.build import OptionError
from bench.context.base import Context, citations, strip_citations, tag
from bench.generation.base import ChatMessage, Generator
from bench.judge.base import OK, JudgeCall, JudgeItem, Verdict
from bench.judge.llm import (
    BOUNDED_PARTITION,
    LLMJudge,
    Partition,
    check_partition,
    detail,
    partition_schema,
)
from bench.judge.rubric import prompts
from bench.judge.structured import Task
from bench.metrics.answer import AbstentionDetector, split_sentences
from bench.metrics.base import ERROR, NO_CLAIMS, NOT_APPLICABLE

#: the prompt templates live in the rubric (conf/judge/rubrics/citations.yaml)
SYSTEM, USER = prompts("citations", "system", "user")
_QUOTE = r"[\"“]([^\"“”]{%d,})[\"”]"


def _fold(text: str) -> str:
    return " ".join(text.casefold().split())


def answer_sentences(answer: str) -> list[str]:
    """Sentences of an answer; a sentence that is only citation tags joins the previous one."""
    out: list[str] = []
    for s in split_sentences(answer):
        if out and not strip_citations(s):
            out[-1] = f"{out[-1]} {s}"
        else:
            out.append(s)
    return out


@dataclass(frozen=True)
class CitedPair:
    sentence: int
    doc_id: str
    decided_by: str  # "code" | "judge"
    supported: bool | None  # None until decided
    reason: str = ""


class CitationJudge(LLMJudge):
    """Extra options: ``min_words`` (a sentence this long needs a citation),
    ``min_quote_chars`` (shorter quoted strings are not checked as quotes),
    ``refusal_patterns`` (abstaining answers have nothing to cite)."""

    name = "citations"
    metrics = ("citation_precision", "citation_recall", "citation_coverage")
    prompts = (SYSTEM, USER)

    def __init__(self, *, generator: Generator, max_retries: int = 2, max_tokens: int = 512,
                 temperature: float = 0.0, seed: int = 0, feedback: bool = True,
                 min_words: int = 3, min_quote_chars: int = 12,
                 refusal_patterns: Sequence[str] = ()) -> None:
        super().__init__(generator=generator, max_retries=max_retries, max_tokens=max_tokens,
                         temperature=temperature, seed=seed, feedback=feedback)
        if min_words < 1:
            raise OptionError("min_words", f"must be >= 1, got {min_words}")
        if min_quote_chars < 1:
            raise OptionError("min_quote_chars", f"must be >= 1, got {min_quote_chars}")
        self.min_words = min_words
        self.min_quote_chars = min_quote_chars
        self.quote = re.compile(_QUOTE % min_quote_chars)
        self.detector = AbstentionDetector(patterns=refusal_patterns)

    @classmethod
    def schemas(cls) -> tuple[type[BaseModel], ...]:
        return (Partition,)

    def cache_params(self) -> dict[str, object]:
        return {**super().cache_params(), **BOUNDED_PARTITION, "min_words": self.min_words,
                "min_quote_chars": self.min_quote_chars,
                "refusal_patterns": list(self.detector.patterns)}

    def pairs(self, sentences: Sequence[str], context: Context) -> list[CitedPair]:
        """Every (sentence, cited id) pair, decided in code where the rules above allow."""
        known = set(context.doc_ids)
        out = []
        for s_i, sentence in enumerate(sentences):
            quotes = [_fold(q) for q in self.quote.findall(strip_citations(sentence))]
            for doc_id in dict.fromkeys(citations(sentence)):
                if doc_id not in known:
                    out.append(CitedPair(s_i, doc_id, "code", False, "id not in the context"))
                    continue
                text = _fold(" ".join(p.text for p in context.passages_of(doc_id)))
                missing = [q for q in quotes if q not in text]
                if missing:
                    out.append(CitedPair(s_i, doc_id, "code", False,
                                         f"quote not in the passage: {missing[0][:60]!r}"))
                else:
                    out.append(CitedPair(s_i, doc_id, "judge", None))
        return out

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        verdicts: dict[int, Verdict] = {}
        plans: dict[int, tuple[list[str], list[CitedPair]]] = {}
        for i, it in enumerate(items):
            if it.answer is None:
                verdicts[i] = Verdict(it.query_id, self.name, ERROR, (), ())
            elif it.context is None or not it.context.passages:
                verdicts[i] = Verdict(it.query_id, self.name, NOT_APPLICABLE, (), ())
            elif self.detector.abstains(it.answer):
                verdicts[i] = Verdict(it.query_id, self.name, NO_CLAIMS, (), (),
                                      detail({"abstained": True}))
            else:
                sentences = answer_sentences(it.answer)
                pairs = self.pairs(sentences, it.context)
                if not pairs and not any(self._needs(s) for s in sentences):
                    verdicts[i] = Verdict(it.query_id, self.name, NO_CLAIMS, (), ())
                else:
                    plans[i] = (sentences, pairs)
        asked = [i for i, (_, pairs) in plans.items() if any(p.supported is None for p in pairs)]
        tasks = []
        for i in asked:
            sentences, pairs = plans[i]
            ctx = items[i].context
            assert ctx is not None
            open_pairs = [p for p in pairs if p.supported is None]
            listing = "\n".join(
                f"{n}. Sentence: {strip_citations(sentences[p.sentence])}\n"
                f"   Passage {tag(p.doc_id)}: "
                f"{' '.join(x.text for x in ctx.passages_of(p.doc_id))}"
                for n, p in enumerate(open_pairs, start=1)
            )
            tasks.append(Task(items[i].query_id, (
                ChatMessage("system", SYSTEM), ChatMessage("user", USER.format(pairs=listing))),
                check_partition(len(open_pairs)),  # type: ignore[arg-type]
                partition_schema(len(open_pairs))))
        results = dict(zip(asked, self.caller(Partition).run(tasks, "pairs"), strict=True))
        for i, (sentences, pairs) in plans.items():
            it = items[i]
            calls: tuple[JudgeCall, ...] = ()
            if i in results:
                part, call = results[i]
                calls = (call,)
                if part is None:
                    verdicts[i] = Verdict(it.query_id, self.name, call.status, (), calls)
                    continue
                open_idx = [k for k, p in enumerate(pairs) if p.supported is None]
                supported = set(part.supported)
                for n, k in enumerate(open_idx, start=1):
                    pairs[k] = CitedPair(pairs[k].sentence, pairs[k].doc_id, "judge",
                                         n in supported)
            assert it.context is not None
            verdicts[i] = self._score(it.query_id, sentences, pairs, it.context, calls)
        return [verdicts[i] for i in range(len(items))]

    def _needs(self, sentence: str) -> bool:
        return len(strip_citations(sentence).split()) >= self.min_words

    def _score(self, qid: str, sentences: list[str], pairs: list[CitedPair], context: Context,
               calls: tuple[JudgeCall, ...]) -> Verdict:
        scores: list[tuple[str, float]] = []
        if pairs:
            scores.append(("citation_precision", sum(bool(p.supported) for p in pairs)
                           / len(pairs)))
        needing = [s for s, text in enumerate(sentences) if self._needs(text)]
        if needing:
            backed = {p.sentence for p in pairs if p.supported}
            scores.append(("citation_recall", sum(s in backed for s in needing) / len(needing)))
        known = set(context.doc_ids)
        cited = {p.doc_id for p in pairs if p.doc_id in known}
        scores.append(("citation_coverage", len(cited) / len(known)))
        return Verdict(qid, self.name, OK, tuple(scores), calls, detail({
            "sentences": sentences,
            "pairs": [[p.sentence, p.doc_id, p.decided_by, p.supported, p.reason]
                      for p in pairs],
        }))
