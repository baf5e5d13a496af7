"""Metadata (domain tag) filter: a hard predicate or a soft boost, after entitlement.

Each query gets a predicate: a set of domain tags it asks for (``predicates``). A candidate
matches when it carries at least one of them. ``mode="hard"`` drops non-matching candidates;
``mode="soft"`` adds ``boost`` (in the retriever's score units) to matching ones and re-orders
by the trec_eval rule. A query with an empty predicate passes unfiltered. Entitlement, when
on, runs first and is always hard.

Predicate sources:

* ``oracle_tag``: the tags of the query's eligible gold docs (an upper bound; uses qrels).
* ``query_tag``: a deterministic keyword matcher over the corpus's tag vocabulary, learnt from
  document tags and text only (never from qrels), see ``TagMatcher``. It makes mistakes on
  purpose of being realistic; ``predicate_quality`` scores it with
  ``bench.metrics.setlevel.predicate_scores`` against a labelled set of (query, correct
  predicate) pairs (``labels``: a JSONL file, ``read_predicate_labels``) or, without one,
  against the oracle labels.

The false-exclusion rate is the seed's: over the eligible corpus, before retrieval
(``FilterOutcome.exclusion_rates``); the pool-relative figure is kept beside it.

Whether hard beats soft is decided by ``bench.filters.decision.hard_vs_soft`` with the
pre-registered thresholds held here (``decide``).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from bench.config.build import OptionError
from bench.data.base import Dataset, Document
from bench.data.jsonl import check_keys, iter_jsonl, json_id, json_str_list
from bench.errors import InputError
from bench.filters.base import (
    RELEVANT_GRADE,
    FilterOutcome,
    check_pool,
    corpus_exclusions,
    eligible_gold,
    eligible_gold_idx,
    keep_where,
    query_of_candidate,
)
from bench.filters.decision import Decision, hard_vs_soft
from bench.filters.entitlement import check_tenants, entitle, unauthorized_per_query
from bench.metrics.setlevel import (
    ExclusionRates,
    PrecisionRecall,
    false_exclusion_rates,
    predicate_scores,
)
from bench.retrieval.base import Hits

#: Bump when the matcher's rule or constants change (it keys cached filtered pools).
MATCHER_VERSION = "1"
#: A tag enters the vocabulary when this many documents carry it (drops one-off junk tags).
MIN_TAG_DOCS = 2
#: A query naming a tag extracts it when at least this share of the documents naming it carry
#: it ("operating system" 0.9 yes; "software", named everywhere but rarely a tag, no).
MIN_NAME_SHARE = 0.3
#: A word is a cue for a tag when it occurs in >= MIN_CUE_DOCS documents and at least
#: MIN_CUE_SHARE of them carry the tag ("baud" -> communications).
MIN_CUE_DOCS = 5
MIN_CUE_SHARE = 0.6
#: Candidates per block when matching tags (bounds memory at block x tag-vocabulary bools).
_BLOCK = 1 << 16

_TOKEN = re.compile(r"[a-z0-9]+")
_TAG_SHAPE = re.compile(r"[a-z0-9][a-z0-9 \-]*")


def _tokens(text: str) -> list[str]:
    """Lower-case alphanumeric runs with a light plural fold (so "protocols" names "protocol")."""
    return [t[:-1] if len(t) > 3 and t[-1] == "s" and t[-2] != "s" else t
            for t in _TOKEN.findall(text.lower())]


def _names(joined: str, phrase: str) -> bool:
    """Whole-token phrase search in space-joined tokens (padded so "web" misses "webs ite")."""
    return f" {phrase} " in joined


@dataclass(frozen=True)
class TagMatcher:
    """Deterministic query -> tags matcher learnt from one corpus.

    Two rules, their union is the predicate:
    1. the query names a vocabulary tag (whole tokens, plural-folded) whose name is a
       reliable signal in the corpus (``MIN_NAME_SHARE`` of the documents naming it carry
       it; a tag no document names is kept);
    2. the query contains a cue word: a word whose documents mostly carry one tag
       (``MIN_CUE_DOCS``, ``MIN_CUE_SHARE``).
    All documents (restricted ones too) feed the statistics: the matcher models a tagger
    trained on the whole collection, and it only ever emits tag names.
    """

    names: tuple[tuple[str, str], ...]  # (space-joined tag tokens, tag), sorted
    cues: dict[str, frozenset[str]]  # cue word -> tags

    @classmethod
    def learn(cls, documents: Sequence[Document]) -> TagMatcher:
        """Learn names and cues from the documents' tags, titles and texts (no qrels)."""
        tag_docs = Counter(t for d in documents for t in set(d.tags))
        vocab = sorted(t for t, n in tag_docs.items()
                       if n >= MIN_TAG_DOCS and _TAG_SHAPE.fullmatch(t))
        if not vocab:  # untagged corpora (BEIR): nothing to learn, skip tokenising them
            return cls(names=(), cues={})
        in_vocab = set(vocab)
        joined: list[str] = []
        word_docs: Counter[str] = Counter()
        word_tag_docs: Counter[tuple[str, str]] = Counter()
        for d in documents:
            toks = _tokens(d.text if d.title_in_text else f"{d.title} {d.text}")
            joined.append(f" {' '.join(toks)} ")
            words = set(toks)
            word_docs.update(words)  # Counter.update counts in C: the corpus pass stays fast
            for t in set(d.tags) & in_vocab:
                word_tag_docs.update(zip(words, [t] * len(words), strict=True))
        names = []
        for t in vocab:
            phrase = " ".join(_tokens(t))
            if " " not in phrase:  # one token: the word counts above already say it
                naming, carrying = word_docs[phrase], word_tag_docs[phrase, t]
            else:
                hits = [i for i, j in enumerate(joined) if _names(j, phrase)]
                naming, carrying = len(hits), sum(1 for i in hits if t in documents[i].tags)
            # A tag no document names has no evidence against it: naming it is the signal.
            if naming == 0 or carrying / naming >= MIN_NAME_SHARE:
                names.append((phrase, t))
        cues: defaultdict[str, set[str]] = defaultdict(set)
        for (w, t), n in word_tag_docs.items():
            if word_docs[w] >= MIN_CUE_DOCS and n / word_docs[w] >= MIN_CUE_SHARE:
                cues[w].add(t)
        return cls(names=tuple(sorted(names)),
                   cues={w: frozenset(ts) for w, ts in sorted(cues.items())})

    def extract(self, text: str) -> frozenset[str]:
        """The tags ``text`` asks for (empty: no predicate, the query passes unfiltered)."""
        toks = _tokens(text)
        joined = f" {' '.join(toks)} "
        found = {t for phrase, t in self.names if _names(joined, phrase)}
        for w in toks:
            found |= self.cues.get(w, frozenset())
        return frozenset(found)


@dataclass(frozen=True)
class PredicateLabels:
    """A labelled set of (query, correct predicate) pairs read from a JSONL file.

    ``tags[query_id]``: the correct predicate (a set of tags; empty: the query should pass
    unfiltered); ``lines[query_id]``: its 1-based line, for errors found against a dataset.
    """

    path: str
    tags: dict[str, frozenset[str]]
    lines: dict[str, int]


def read_predicate_labels(path: str) -> PredicateLabels:
    """Read ``{"query_id": "q1", "predicate": ["networking"]}`` lines.

    Both keys required, nothing else; ``predicate`` a list of non-empty strings (``[]`` is a
    label too: no filter wanted). A duplicate query id, a wrong type or an empty file is an
    ``InputError`` naming file:line.
    """
    tags: dict[str, frozenset[str]] = {}
    lines: dict[str, int] = {}
    for where, obj in iter_jsonl(path):
        check_keys(obj, where, required=("query_id", "predicate"), optional=())
        qid = json_id(obj["query_id"], "query_id", where)
        if qid in lines:
            raise where.error(f"duplicate query_id {qid!r} (first seen on line {lines[qid]})")
        if not isinstance(obj["predicate"], list):
            raise where.error("field 'predicate' must be a list of tags, got "
                              f"{type(obj['predicate']).__name__}")
        tags[qid] = frozenset(json_str_list(obj["predicate"], "predicate", where))
        lines[qid] = where.line
    if not lines:
        raise InputError(path, 0, "no predicate labels (the file has no rows)")
    return PredicateLabels(str(path), tags, lines)


class MetadataFilter:
    """Domain-tag predicate filter (hard) or boost (soft), entitlement first.

    Options: ``mode`` hard|soft; ``boost`` added to matching candidates' scores in soft mode;
    ``predicate`` query_tag|oracle_tag; ``entitlement`` (default on: turning it off is only
    for measuring leaks, ``unauthorized_hits`` is still counted); ``labels``: a JSONL file of
    (query, correct predicate) pairs that predicate precision / recall are scored against
    (default: the tags of each query's eligible gold docs). The decision thresholds
    (``min_precision_gain``, ``max_exclusion_rate`` = the seed's epsilon, 2 %,
    ``max_recall_loss``) are pre-registered here so the hard-vs-soft choice is fixed before
    any result is seen; they and ``labels`` do not change the filtered pool and are not cache
    keys.
    """

    def __init__(
        self,
        *,
        mode: Literal["hard", "soft"] = "hard",
        boost: float = 0.1,
        predicate: Literal["oracle_tag", "query_tag"] = "query_tag",
        entitlement: bool = True,
        min_precision_gain: float = 0.01,
        max_exclusion_rate: float = 0.02,
        max_recall_loss: float = 0.02,
        labels: str | None = None,
        pushdown: bool = False,
    ) -> None:
        if mode not in ("hard", "soft"):
            raise OptionError("mode", f"must be 'hard' or 'soft', got {mode!r}")
        if pushdown and mode != "hard":
            raise OptionError("pushdown", "only a hard filter can run inside the index (a "
                                          "soft boost re-scores the pool; set mode=hard)")
        if predicate not in ("oracle_tag", "query_tag"):
            raise OptionError("predicate",
                              f"must be 'oracle_tag' or 'query_tag', got {predicate!r}")
        if not (np.isfinite(boost) and boost > 0):
            raise OptionError("boost", f"must be a finite number > 0, got {boost}")
        if not np.isfinite(min_precision_gain):
            raise OptionError("min_precision_gain", f"must be finite, got {min_precision_gain}")
        for name, value in (("max_exclusion_rate", max_exclusion_rate),
                            ("max_recall_loss", max_recall_loss)):
            if not 0.0 <= value <= 1.0:
                raise OptionError(name, f"must be in [0, 1], got {value}")
        self.mode = mode
        self.boost = float(boost)
        self.predicate = predicate
        self.entitlement = entitlement
        self.min_precision_gain = float(min_precision_gain)
        self.max_exclusion_rate = float(max_exclusion_rate)
        self.max_recall_loss = float(max_recall_loss)
        if labels is not None and not Path(labels).is_file():
            raise OptionError("labels", f"file not found: {labels}")
        # read at build time: a malformed file stops the run before the dataset loads
        self.labels = None if labels is None else read_predicate_labels(labels)
        self._matchers: dict[str, TagMatcher] = {}  # by dataset fingerprint
        self.pushdown = bool(pushdown)

    def eligible(self, dataset: Dataset, *, relevance_level: int = RELEVANT_GRADE
                 ) -> np.ndarray:
        """bool [n_queries, n_documents]: what ``apply`` keeps of any pool (hard mode):
        visible to the caller (when ``entitlement``), and holding a predicate tag where the
        query has a predicate."""
        if self.mode != "hard":
            raise ValueError("a soft boost keeps every candidate: nothing to push down")
        n_q, n_d = len(dataset.queries), len(dataset.documents)
        if self.entitlement:
            from bench.filters.entitlement import EntitlementFilter

            out = EntitlementFilter().eligible(dataset)
        else:
            out = np.ones((n_q, n_d), dtype=bool)
        preds = self.predicates(dataset, relevance_level=relevance_level)
        vocab = sorted({t for p in preds.values() for t in p})
        col = {t: j for j, t in enumerate(vocab)}
        doc_tags = np.zeros((n_d, len(vocab)), dtype=bool)
        for i, d in enumerate(dataset.documents):
            doc_tags[i, [col[t] for t in d.tags if t in col]] = True
        for qi, q in enumerate(dataset.queries):
            p = preds[q.query_id]
            if p:
                out[qi] &= doc_tags[:, [col[t] for t in sorted(p)]].any(axis=1)
        return out

    def cache_params(self) -> dict[str, object]:
        params: dict[str, object] = {
            "mode": self.mode,
            "predicate": self.predicate,
            "entitlement": self.entitlement,
            "matcher": MATCHER_VERSION,
        }
        if self.mode == "soft":  # boost is unused by a hard filter: same pool, same key
            params["boost"] = self.boost
        return params

    def thresholds(self) -> dict[str, float]:
        """The pre-registered decision thresholds (for run.json and reports)."""
        return {
            "min_precision_gain": self.min_precision_gain,
            "max_exclusion_rate": self.max_exclusion_rate,
            "max_recall_loss": self.max_recall_loss,
        }

    def check(self, dataset: Dataset) -> None:
        """Refuse, before any work, what this filter cannot handle on ``dataset``: documents
        with tenants and a query without one (when entitlement is on), labels naming a query
        the dataset lacks or a tag no document carries (a typo would read as a wrong
        predicate). InputError names the labels file and line."""
        if self.entitlement:
            check_tenants(dataset)
        if self.labels is None:
            return
        ids = {q.query_id for q in dataset.queries}
        vocab = {t for d in dataset.documents for t in d.tags}
        for qid, line in self.labels.lines.items():
            if qid not in ids:
                raise InputError(self.labels.path, line,
                                 f"query_id {qid!r} is not a query of dataset {dataset.name!r}")
            unknown = sorted(self.labels.tags[qid] - vocab)
            if unknown:
                raise InputError(self.labels.path, line,
                                 f"predicate tag {unknown[0]!r} is carried by no document of "
                                 f"dataset {dataset.name!r}")

    # ------------------------------------------------------------------ predicates

    def matcher(self, dataset: Dataset) -> TagMatcher:
        """The ``query_tag`` matcher learnt from ``dataset``'s corpus (built once per dataset)."""
        if dataset.fingerprint not in self._matchers:
            self._matchers[dataset.fingerprint] = TagMatcher.learn(dataset.documents)
        return self._matchers[dataset.fingerprint]

    def predicates(
        self, dataset: Dataset, *, relevance_level: int = RELEVANT_GRADE
    ) -> dict[str, frozenset[str]]:
        """``{query_id: tags}`` this filter applies (per its ``predicate`` option)."""
        if self.predicate == "oracle_tag":
            return self.labelled_predicates(dataset, relevance_level=relevance_level)
        m = self.matcher(dataset)
        return {q.query_id: m.extract(q.text) for q in dataset.queries}

    @staticmethod
    def labelled_predicates(
        dataset: Dataset, *, relevance_level: int = RELEVANT_GRADE
    ) -> dict[str, frozenset[str]]:
        """Oracle labels: ``{query_id: union of the tags of its eligible gold docs}``.

        Eligible gold only: tags of a doc the caller may not see say nothing about what that
        caller can find.
        """
        docs = dataset.doc_index()
        gold = eligible_gold(dataset)
        out: dict[str, frozenset[str]] = {}
        for q in dataset.queries:
            tags = {t for d, g in gold[q.query_id].items() if g >= relevance_level and d in docs
                    for t in dataset.documents[docs[d]].tags}
            out[q.query_id] = frozenset(tags)
        return out

    @property
    def label_source(self) -> str:
        """What predicate precision / recall are scored against (for run.json and reports)."""
        return "gold docs' tags" if self.labels is None else f"labels {self.labels.path}"

    def predicate_quality(
        self, dataset: Dataset, *, relevance_level: int = RELEVANT_GRADE
    ) -> PrecisionRecall:
        """Micro precision / recall of this filter's predicates against the labelled pairs
        (``labels``: over the labelled queries only) or, without labels, against the oracle
        labels of every query."""
        got = self.predicates(dataset, relevance_level=relevance_level)
        if self.labels is not None:
            ids = [q.query_id for q in dataset.queries if q.query_id in self.labels.tags]
            return predicate_scores([got[i] for i in ids], [self.labels.tags[i] for i in ids])
        gold = self.labelled_predicates(dataset, relevance_level=relevance_level)
        ids = [q.query_id for q in dataset.queries]
        return predicate_scores([got[i] for i in ids], [gold[i] for i in ids])

    def predicate_exclusion(
        self, dataset: Dataset, *, relevance_level: int = RELEVANT_GRADE
    ) -> ExclusionRates:
        """False exclusions of the predicate over the whole corpus (retrieval-independent).

        A gold doc counts as excluded when it lacks every predicate tag, whether or not the
        retriever found it: what a pre-filter in the index would remove. A hard run's
        ``FilterOutcome.exclusion_rates`` is this (reported as ``false_exclusion_rate``); the
        pool-relative figure is ``FilterOutcome.pool_exclusion_rates``. Raises
        EmptyDenominatorError when no query has eligible gold.
        """
        preds = self.predicates(dataset, relevance_level=relevance_level)
        docs = dataset.documents
        gold_sets: list[list[str]] = []
        passed: list[list[str]] = []
        for q, gold in zip(dataset.queries, eligible_gold_idx(dataset, relevance_level),
                           strict=True):
            p = preds[q.query_id]
            ids = [docs[i].doc_id for i in gold.tolist()]
            gold_sets.append(ids)
            passed.append([docs[i].doc_id for i in gold.tolist()
                           if not p or not p.isdisjoint(docs[i].tags)])
        return false_exclusion_rates(gold_sets, passed)

    # ------------------------------------------------------------------ filtering

    def apply(
        self,
        hits: Hits,
        dataset: Dataset,
        *,
        id_key: np.ndarray,
        relevance_level: int = RELEVANT_GRADE,
    ) -> FilterOutcome:
        """Entitlement (if on), then the tag predicate (hard) or boost (soft)."""
        check_pool(hits, dataset)
        removed_unauth = 0
        if self.entitlement:
            hits, removed_unauth = entitle(hits, dataset)
        preds = self.predicates(dataset, relevance_level=relevance_level)
        pred_list = [preds[q.query_id] for q in dataset.queries]
        qidx = query_of_candidate(hits)
        match = _matches(hits, qidx, dataset.documents, pred_list)
        has_pred = np.array([bool(p) for p in pred_list], dtype=bool)
        gold = eligible_gold_idx(dataset, relevance_level)
        is_gold = _is_gold(hits, qidx, gold, len(dataset.documents))

        if self.mode == "hard":
            keep = match | ~has_pred[qidx]
            out = keep_where(hits, keep)
            boosted = 0
            # the seed's figure: what the predicate rules out of the eligible corpus
            excluded = corpus_exclusions(dataset, gold, pred_list)
        else:
            keep = np.ones(len(hits.doc_idx), dtype=bool)
            scores = hits.scores.astype(np.float32) + np.where(
                match, np.float32(self.boost), np.float32(0.0)).astype(np.float32)
            # One lexsort orders every slice: query, then score desc, then doc id desc.
            perm = np.lexsort((-id_key[hits.doc_idx], -scores, qidx))
            out = hits.take(hits.offsets.copy(), perm, scores[perm])
            boosted = int(match.sum())
            excluded = np.zeros(hits.n_queries, dtype=np.int32)  # a boost rules nothing out

        n_q = hits.n_queries
        gold_in = np.bincount(qidx[is_gold], minlength=n_q)
        gold_out = np.bincount(qidx[is_gold & ~keep], minlength=n_q)
        removed_pred = int(keep.size - keep.sum())
        bad = unauthorized_per_query(out, dataset)
        return FilterOutcome(
            hits=out,
            removed=removed_unauth + removed_pred,
            unauthorized_hits=int(bad.sum()),
            pool_excluded_gold_queries=int(((gold_in > 0) & (gold_out == gold_in)).sum()),
            removed_unauthorized=removed_unauth,
            removed_by_predicate=removed_pred,
            pool_excluded_gold_docs=int(gold_out.sum()),
            filtered_queries=int(has_pred.sum()),
            boosted=boosted,
            pool_excluded_per_query=gold_out.astype(np.int32),
            gold_per_query=np.asarray([g.size for g in gold], dtype=np.int32),
            excluded_per_query=excluded,
            predicates=tuple(tuple(sorted(p)) for p in pred_list),
            unauthorized_per_query=bad,
        )

    def decide(
        self,
        hard_values: np.ndarray,
        soft_values: np.ndarray,
        *,
        exclusion_rate: float,
        recall_hard: float,
        recall_soft: float,
        seed: int = 0,
        resamples: int = 1000,
    ) -> Decision:
        """``hard_vs_soft`` with this filter's pre-registered thresholds."""
        return hard_vs_soft(
            hard_values, soft_values,
            min_precision_gain=self.min_precision_gain,
            max_exclusion_rate=self.max_exclusion_rate,
            max_recall_loss=self.max_recall_loss,
            exclusion_rate=exclusion_rate,
            recall_hard=recall_hard,
            recall_soft=recall_soft,
            seed=seed,
            resamples=resamples,
        )


def _matches(hits: Hits, qidx: np.ndarray, documents: Sequence[Document],
             preds: Sequence[frozenset[str]]) -> np.ndarray:
    """bool per candidate: its document carries at least one of its query's predicate tags."""
    vocab = sorted({t for p in preds for t in p})
    col = {t: j for j, t in enumerate(vocab)}
    doc_tags = np.zeros((len(documents), len(vocab)), dtype=bool)
    for i, d in enumerate(documents):
        doc_tags[i, [col[t] for t in d.tags if t in col]] = True
    q_tags = np.zeros((len(preds), len(vocab)), dtype=bool)
    for qi, p in enumerate(preds):
        q_tags[qi, [col[t] for t in p]] = True
    out = np.zeros(len(hits.doc_idx), dtype=bool)
    for s in range(0, len(out), _BLOCK):
        e = min(s + _BLOCK, len(out))
        out[s:e] = (doc_tags[hits.doc_idx[s:e]] & q_tags[qidx[s:e]]).any(axis=1)
    return out


def _is_gold(hits: Hits, qidx: np.ndarray, gold: Sequence[np.ndarray], n_docs: int) -> np.ndarray:
    """bool per candidate: it is an eligible gold doc of its query."""
    keys = [np.int64(q) * n_docs + g.astype(np.int64) for q, g in enumerate(gold)]
    gold_keys = np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64)
    return np.isin(qidx * n_docs + hits.doc_idx.astype(np.int64), gold_keys)
