"""A non-LLM generator: answers with the context sentence that best matches the question.

The sentence-selection reader is the classic extractive baseline of reading comprehension
(the sliding-window baseline of MCTest, Richardson et al. 2013; SQuAD's sentence baseline,
Rajpurkar et al. 2016): it reads the same prompt an LLM gets, splits the passages into
sentences, scores each against the question with BM25 (bm25s, over that prompt's sentences:
stop words removed, optionally stemmed) and answers with the best ``max_sentences`` in passage
order, each followed by its passage's citation tag. When no sentence shares a term with the
question it answers ``abstain_phrase``.

It is a second generator of another *family* for generator comparisons
(``generator=sweep``): fast, deterministic, never hallucinates a word that is not in the
context, and never paraphrases. It reads the prompt through the context builder's contract:
passages start with their ``[doc:ID]`` tag (``bench.context.base.tag``); the question is the
rest of the line after ``question_marker`` in the last user message. A prompt
without that shape is a per-request ``error`` naming what is missing, never a guess.

``count_tokens`` counts whitespace-separated words (its budget unit when it is a sweep's
first member, whose tokenizer fits the shared context).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from bench.config.build import OptionError
from bench.context.base import _CITATION, tag
from bench.generation.base import ChatMessage, Generation, GenerationRequest
from bench.lexical.bm25 import _bm25s, _stemmer
from bench.metrics.answer import split_sentences

_SPACE = re.compile(r"\s+")
#: bump when the selection changes (it is part of the cache key)
VERSION = "1"


@dataclass(frozen=True)
class PromptPassage:
    doc_id: str
    text: str


def read_prompt(messages: Sequence[ChatMessage], question_marker: str
                ) -> tuple[str, list[PromptPassage]]:
    """(question, passages) of a context builder's prompt; ValueError naming what is
    missing when the prompt does not have that shape."""
    users = [m.content for m in messages if m.role == "user"]
    if not users:
        raise ValueError("no user message in the prompt")
    text = users[-1]
    at = text.rfind(question_marker)
    if at < 0:
        raise ValueError(f"no {question_marker!r} in the user message")
    # the question is the rest of the marker's line (the template's "Answer:" cue follows)
    question = text[at + len(question_marker):].strip().split("\n", 1)[0].strip()
    body = text[:at]
    starts = list(_CITATION.finditer(body))
    if not question:
        raise ValueError(f"nothing after {question_marker!r}")
    passages = []
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(body)
        chunk = body[m.end():end].strip()
        if chunk:
            passages.append(PromptPassage(m.group(1), chunk))
    return question, passages


class ExtractiveGenerator:
    """Options: ``max_sentences`` (sentences in an answer), ``stemmer`` (a PyStemmer
    language, or null), ``abstain_phrase`` (the answer when no sentence matches; keep it
    equal to the context builder's), ``question_marker`` (what precedes the question in the
    user message; the default template's ``Question:``)."""

    def __init__(self, *, max_sentences: int = 1, stemmer: str | None = "english",
                 abstain_phrase: str = "I don't know", question_marker: str = "Question:"
                 ) -> None:
        if max_sentences < 1:
            raise OptionError("max_sentences", f"must be >= 1, got {max_sentences}")
        if not question_marker.strip():
            raise OptionError("question_marker", "must not be empty")
        self.max_sentences = max_sentences
        self.stemmer_language = stemmer
        self.abstain_phrase = abstain_phrase
        self.question_marker = question_marker
        self._stemmer: object | None = None
        if stemmer is not None:
            self._stemmer = _stemmer(stemmer)

    def cache_params(self) -> dict[str, object]:
        return {"backend": "extractive", "model": "extractive-bm25", "version": VERSION,
                "max_sentences": self.max_sentences, "stemmer": self.stemmer_language,
                "abstain_phrase": self.abstain_phrase,
                "question_marker": self.question_marker}

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def close(self) -> None:
        return None

    def answer(self, question: str, passages: Sequence[PromptPassage]) -> str:
        """The best sentences (passage order) with their tags, or ``abstain_phrase``."""
        bm25s = _bm25s()
        sents = [(i, p.doc_id, s) for i, p in enumerate(passages)
                 for s in split_sentences(p.text)]
        if not sents:
            return self.abstain_phrase
        kw = {"stopwords": "en", "stemmer": self._stemmer, "show_progress": False}
        corpus = bm25s.tokenize([s for _, _, s in sents], return_ids=False, **kw)
        query = bm25s.tokenize([question], return_ids=False, **kw)[0]
        if not query or not any(corpus):
            return self.abstain_phrase
        model = bm25s.BM25()
        model.index(corpus, show_progress=False)
        scores = model.get_scores(query)
        best = sorted(range(len(sents)), key=lambda k: (-float(scores[k]), k))
        chosen = sorted(k for k in best[: self.max_sentences] if scores[k] > 0)
        if not chosen:
            return self.abstain_phrase
        return " ".join(f"{_SPACE.sub(' ', sents[k][2])} {tag(sents[k][1])}" for k in chosen)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        out = []
        for r in requests:
            t0 = time.perf_counter()
            prompt_words = sum(self.count_tokens(m.content) for m in r.messages)
            if r.json_schema is not None:
                out.append(self._failed(r, prompt_words, t0, "an extractive reader cannot "
                                        "follow a JSON schema (use it as an answerer only)"))
                continue
            try:
                question, passages = read_prompt(r.messages, self.question_marker)
            except ValueError as exc:
                out.append(self._failed(r, prompt_words, t0, str(exc)))
                continue
            text = self.answer(question, passages)
            ms = (time.perf_counter() - t0) * 1000.0
            out.append(Generation(r.request_id, text, "ok", "stop", prompt_words,
                                  self.count_tokens(text), None, None, ms))
        return out

    @staticmethod
    def _failed(r: GenerationRequest, prompt_words: int, t0: float, why: str) -> Generation:
        return Generation(r.request_id, "", "error", "error", prompt_words, 0, None, None,
                          (time.perf_counter() - t0) * 1000.0, error=why)
