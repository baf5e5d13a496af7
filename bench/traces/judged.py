"""Judge metrics in the shadow replay: production's answers (from the trace) and each
candidate's (generated under replay) judged the same way, paired per query.

Without gold labels, three judges of ``bench.judge`` score an answer against what it was
built from: faithfulness to its own context, answer relevancy, context relevance. Each side's
context is the same rule applied to its own retrieved list: the first ``context_k`` documents
(text from the corpus snapshot, cut to ``passage_chars``), so production and candidate are
judged alike (the trace does not say which passages production's prompt held).

``paired`` turns the verdicts into one row per (candidate, metric): the queries both sides
scored, each side's mean and the candidate - production delta with a bootstrap CI and a
sign-flip p-value (``bench.metrics.stats.paired_compare``); what was not scored is counted
per side by verdict status (``no_claims``, ``invalid``, ``error``, ``not_applicable``), never
averaged in. With the packaged 135M model the verdicts are a plumbing check, not quality.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.context.base import Context, ContextPassage
from bench.data.base import Document
from bench.judge.base import OK, JudgeItem, Verdict
from bench.judge.llm import LLMJudge

#: the judges that need no gold label (conf/judge/<name>.yaml)
JUDGES = ("faithfulness", "answer_relevancy", "context_relevance")
PRODUCTION = "production"


def side_context(query_id: str, query: str, doc_ids: Sequence[str],
                 texts: Mapping[str, str], *, k: int, passage_chars: int) -> Context:
    """The judged context of one answer: its first ``k`` retrieved documents' text."""
    passages = tuple(
        ContextPassage(d, 0, texts[d][:passage_chars], rank, len(texts[d]) > passage_chars)
        for rank, d in enumerate(list(dict.fromkeys(doc_ids))[:k], start=1) if d in texts)
    return Context(query_id, query, passages, (), 0, len(doc_ids))


def corpus_texts(documents: Sequence[Document]) -> dict[str, str]:
    return {d.doc_id: (d.text if d.title_in_text or not d.title else f"{d.title}. {d.text}")
            for d in documents}


@dataclass(frozen=True)
class JudgedRow:
    """One judge metric of one side's answer to one replayed request."""

    trace_id: str
    side: str  # production | a candidate's name
    metric: str
    status: str  # ok | no_claims | invalid | error | not_applicable
    value: float | None
    detail: str = ""
    #: why it was not scored (``bench.judge.base.failure_mode``: mode and last rejection)
    failure: str = ""
    #: the side whose verdict on the identical item this row repeats ("" = judged here)
    shared_with: str = ""


def judge_sides(items: Mapping[str, Sequence[JudgeItem]], judges: Sequence[LLMJudge]
                ) -> list[JudgedRow]:
    """Every side's items (``query_id`` = the trace id) through every judge.

    An item identical to one judged before it (the same question, answer and context: a
    candidate that retrieved and answered as production did, or a question asked twice) is
    not sent to the judge again: it takes that verdict, its row naming the side it came from
    (``shared_with``). Identical inputs then get identical verdicts, so a paired delta is not
    moved by the judge model's batch padding (a greedy verdict can change with its batchmates),
    and each distinct answer costs one judge call per judge."""
    from bench.judge.base import failure_mode

    out = []
    # per (judge, input): the side and position of the item judged, and its verdict
    judged: dict[tuple[int, Hashable], tuple[str, int, Verdict]] = {}
    for side, its in items.items():
        contents = [_content(i) for i in its]
        for n, j in enumerate(judges):
            keys = [(n, c) for c in contents]
            new: dict[tuple[int, Hashable], int] = {}
            for pos, k in enumerate(keys):
                if k not in judged:
                    new.setdefault(k, pos)  # a repeat within the side: its first is judged
            verdicts = j.judge([its[pos] for pos in new.values()])
            for (k, pos), v in zip(new.items(), verdicts, strict=True):
                judged[k] = (side, pos, v)
            for pos, (k, it) in enumerate(zip(keys, its, strict=True)):
                first_side, first_pos, v = judged[k]
                v = replace(v, query_id=it.query_id)
                for m in j.metrics:
                    val = v.score(m) if v.status == OK else None
                    mode, why = failure_mode(v) if val is None else ("", "")
                    out.append(JudgedRow(v.query_id, side, m,
                                         v.status if v.status != OK or val is not None
                                         else "not_applicable", val, v.detail,
                                         f"{mode}: {why}" if mode else "",
                                         "" if (first_side, first_pos) == (side, pos)
                                         else first_side))
    return out


def _content(item: JudgeItem) -> Hashable:
    """An item without its ids: two items equal here are the same judge input."""
    ctx = None if item.context is None else replace(item.context, query_id="")
    return replace(item, query_id="", context=ctx)


@dataclass(frozen=True)
class JudgedPair:
    """Candidate vs production on one judge metric over the requests both sides scored."""

    candidate: str
    metric: str
    requests: int
    n: int  # paired: both sides scored
    production: Any  # MeanCI over the pairs, None without pairs
    candidate_mean: Any  # MeanCI
    delta: Any  # PairedComparison (candidate - production), None without pairs
    not_scored_production: dict[str, int]
    not_scored_candidate: dict[str, int]


def paired(rows: Sequence[JudgedRow], *, seed: int = 0, resamples: int = 1000
           ) -> list[JudgedPair]:
    from bench.metrics.stats import bootstrap_ci, paired_compare

    prod = {(r.trace_id, r.metric): r for r in rows if r.side == PRODUCTION}
    out = []
    sides = [s for s in dict.fromkeys(r.side for r in rows) if s != PRODUCTION]
    metrics = list(dict.fromkeys(r.metric for r in rows))
    for cand in sides:
        for m in metrics:
            mine = [r for r in rows if r.side == cand and r.metric == m]
            pairs = [(prod[(r.trace_id, m)].value, r.value) for r in mine
                     if (r.trace_id, m) in prod and r.value is not None
                     and prod[(r.trace_id, m)].value is not None]
            theirs = [prod[(r.trace_id, m)] for r in mine if (r.trace_id, m) in prod]
            a = np.array([p for p, _ in pairs], dtype=np.float64)
            b = np.array([c for _, c in pairs], dtype=np.float64)
            out.append(JudgedPair(
                cand, m, len(mine), len(pairs),
                bootstrap_ci(a, seed=seed, resamples=resamples) if pairs else None,
                bootstrap_ci(b, seed=seed, resamples=resamples) if pairs else None,
                paired_compare(a, b, seed=seed, resamples=resamples) if pairs else None,
                dict(Counter(r.status for r in theirs if r.value is None)),
                dict(Counter(r.status for r in mine if r.value is None))))
    return out


def build_judges(generator: Any, names: Sequence[str] = JUDGES, *, max_retries: int = 1,
                 max_tokens: int = 96, seed: int = 0) -> list[LLMJudge]:
    """The named LLM judges over one judge model (options as ``judge=suite``)."""
    from bench.judge.suite import JudgeSuite

    suite = JudgeSuite(generator=generator, judges=list(names), max_retries=max_retries,
                       max_tokens=max_tokens, seed=seed)
    return [j for j in suite.judges if isinstance(j, LLMJudge)]


def judge_generator(option: str, *, cache_dir: str | Path) -> Any:
    """The judge model: ``conf/generator/<option>.yaml`` built as a run builds it."""
    from omegaconf import OmegaConf

    from bench.config.build import build
    from bench.judge.suite import JUDGE_CONF

    path = JUDGE_CONF.parent / "generator" / f"{option}.yaml"
    if not path.is_file():
        from bench.errors import ConfigError

        raise ConfigError("generator", f"no generator option {option!r} ({path})")
    node = OmegaConf.create({"cache_dir": str(cache_dir), "generator": OmegaConf.load(path)})
    return build(node.generator, "generator")


def table(pairs: Sequence[JudgedPair]) -> str:
    def ci(m: Any) -> str:
        return "-" if m is None else f"{m.mean:.3f} [{m.ci_low:.3f}, {m.ci_high:.3f}]"

    def d(p: Any) -> str:
        return "-" if p is None else (f"{p.delta:+.3f} [{p.ci_low:+.3f}, {p.ci_high:+.3f}] "
                                      f"(p {p.p_value:.3f})")

    def ns(c: Mapping[str, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(c.items())) or "0"

    head = ("| candidate | metric | requests | paired | production | candidate | delta "
            "(candidate - production) | not scored: production / candidate |\n"
            "|---|---|---:|---:|---|---|---|---|\n")
    return head + "".join(
        f"| {p.candidate} | {p.metric} | {p.requests} | {p.n} | {ci(p.production)} | "
        f"{ci(p.candidate_mean)} | {d(p.delta)} | {ns(p.not_scored_production)} / "
        f"{ns(p.not_scored_candidate)} |\n" for p in pairs)
