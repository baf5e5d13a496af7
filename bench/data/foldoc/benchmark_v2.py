"""FOLDOC benchmark version 2: independent questions, paraphrases and hard negatives.

In: FOLDOC ``Entry`` records, a ``WordNet`` (Debian ``wordnet-base``) and ``BuildOptionsV2``.
Out: ``BuiltV2``, deterministically from ``opts.seed``. Nothing here touches the file system.

What changes from version 1 (``benchmark.py``, still built as ``dataset=foldoc_v1``):
- ``semantic_lookup``: the question is the WordNet gloss of the sense the headword names
  (``wordnet.match_sense``), never FOLDOC's own wording; every corpus entry whose headword is
  a lemma of that sense is relevant (kilobyte / kibibyte share one gloss).
- ``paraphrase_lookup`` (new): FOLDOC's masked defining sentence (as v1's semantic questions)
  with every single-sense WordNet word swapped for its WordNet synonym, then v1's light
  synonym swaps: the question keeps the meaning but loses the rare words BM25 matches on.
- hard negatives: for each exact / semantic / paraphrase question, the ``n_hard_negatives``
  pool entries sharing the most IDF-weighted words with it (not the gold ones, not the same
  name) are forced into the corpus and listed in ``hard_negatives``, so precision at small k
  is tested on near misses rather than on random filler.
- ``exact_lookup``, ``multi_doc`` and ``unanswerable`` are built as in v1 on this corpus.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from bench.data.base import Document, Query
from bench.data.foldoc.benchmark import (
    _EXACT,
    _GENERIC,
    _SEMANTIC,
    _STOPWORDS,
    _SYNONYM_RE,
    BuildOptions,
    _caller_roles,
    _Doc,
    _document,
    _exact_query,
    _multi_query,
    _name_index,
    _norm,
    _qualifying,
    _swap,
    _take,
    _unanswerable,
    _words_index,
    masked_definition,
)
from bench.data.foldoc.dictd import Entry
from bench.data.foldoc.text import _WORD, as_claim, stable_hash
from bench.data.foldoc.wordnet import Synset, WordNet, match_sense, monosemous_synonyms

BUILDER_VERSION_V2 = "2"
CATEGORIES_V2 = ("exact_lookup", "semantic_lookup", "paraphrase_lookup", "multi_doc",
                 "unanswerable")
# words too common in the pool to make a document a near miss (df cut for hard negatives)
_MAX_DF_SHARE = 0.05
# the question templates' own words say nothing about the topic
_TEMPLATE_WORDS = frozenset(w.lower() for t in (*_EXACT, *_SEMANTIC) for w in _WORD.findall(t))


@dataclass(frozen=True)
class BuildOptionsV2:
    """What to build (version 2). Every field is recorded in the manifest."""

    seed: int = 13
    n_docs: int = 3000
    n_exact: int = 110
    n_semantic: int = 150
    n_paraphrase: int = 120
    n_multi: int = 110
    n_unanswerable: int = 100
    n_hard_negatives: int = 3
    min_chars: int = 200

    def targets(self) -> dict[str, int]:
        return dict(zip(CATEGORIES_V2, (self.n_exact, self.n_semantic, self.n_paraphrase,
                                        self.n_multi, self.n_unanswerable), strict=True))

    def v1(self) -> BuildOptions:
        """The v1 options whose helpers v2 reuses (seed, min_chars, n_unanswerable)."""
        return BuildOptions(seed=self.seed, n_docs=self.n_docs, n_exact=self.n_exact,
                            n_semantic=self.n_semantic, n_multi=self.n_multi,
                            n_unanswerable=self.n_unanswerable, min_chars=self.min_chars)


@dataclass(frozen=True)
class SenseMatch:
    """One FOLDOC headword matched to a WordNet sense (kept for auditing the match rule)."""

    doc_id: str
    headword: str
    synset: str
    gloss: str


@dataclass(frozen=True)
class BuiltV2:
    documents: tuple[Document, ...]
    queries: tuple[Query, ...]
    n_qualifying: int
    hard_negatives: dict[str, tuple[str, ...]]  # query_id -> doc ids
    matches: tuple[SenseMatch, ...]  # every headword matched in the pool (not only queried)


@dataclass(frozen=True)
class V2Parts:
    """What a v2 build derived on the way, for builds that extend it (version 3)."""

    matches: list[tuple[_Doc, Synset]]  # pool entries naming a WordNet computing sense
    by_synset: dict[str, list[_Doc]]  # synset offset -> pool entries naming it
    corpus_unique: list[_Doc]  # corpus entries whose name no other corpus entry spells
    by_name: dict[str, _Doc]  # their lower-cased names and aliases -> entry


def build_benchmark_v2(entries: Sequence[Entry], wordnet: WordNet,
                       opts: BuildOptionsV2) -> BuiltV2:
    """Entries + WordNet -> documents, queries and hard negatives (see the module docstring)."""
    return build_v2_parts(entries, wordnet, opts)[0]


def build_v2_parts(entries: Sequence[Entry], wordnet: WordNet,
                   opts: BuildOptionsV2) -> tuple[BuiltV2, V2Parts]:
    """``build_benchmark_v2`` and what it derived on the way."""
    pool = _qualifying(entries, opts.v1())
    spelled = Counter(_norm(d.title) for d in pool)
    unique = [d for d in pool if spelled[_norm(d.title)] == 1]
    pool_docs = [_document(d, opts.seed) for d in pool]
    pool_words = _words_index(pool_docs)

    def ranked(tag: str, docs: Sequence[_Doc]) -> list[_Doc]:
        return sorted(docs, key=lambda d: stable_hash(opts.seed, tag, d.doc_id))

    matches, by_synset = sense_matches(pool, wordnet)
    semantic: list[Query] = []
    seen_synsets: set[str] = set()
    for d, s in sorted(((d, s) for d, s in matches if d in unique),
                       key=lambda m: stable_hash(opts.seed, "semantic", m[0].doc_id)):
        if len(semantic) == opts.n_semantic:
            break
        if s.offset in seen_synsets:
            continue
        q = _gloss_query(d, s, by_synset[s.offset], opts.seed)
        if q is not None:
            semantic.append(q)
            seen_synsets.add(s.offset)
    used = {doc_id for q in semantic for doc_id, _ in q.qrels}

    mono = {w: alt for w, alt in monosemous_synonyms(wordnet.all_synsets()).items()
            if w not in _STOPWORDS and not w.endswith(("ing", "ed"))}  # participles: verbs
    swap_re = re.compile(r"\b(" + "|".join(map(re.escape, sorted(mono, key=len, reverse=True)))
                         + r")\b")
    paraphrase = _take(opts.n_paraphrase, (
        _paraphrase_query(d, pool_words, mono, swap_re, opts.seed)
        for d in ranked("paraphrase", unique) if d.doc_id not in used))
    used |= {q.qrels[0][0] for q in paraphrase}
    exact = [_exact_query(d, opts.seed)
             for d in ranked("exact", [d for d in unique if d.doc_id not in used])[: opts.n_exact]]

    lookups = [*exact, *semantic, *paraphrase]
    # near misses share words with the question in their NAME or DEFINING SENTENCE: whole
    # texts would favour the longest essays, which share some word with everything
    head_words = _words_index(dataclasses.replace(doc, text=d.lead)
                              for d, doc in zip(pool, pool_docs, strict=True))
    negatives = [_hard_negatives(q, pool, head_words, opts.n_hard_negatives) for q in lookups]
    core = {doc_id for q in lookups for doc_id, _ in q.qrels} | {n for ns in negatives for n in ns}
    order = ranked("corpus", pool)
    chosen = set(core)
    for d in order:
        if len(chosen) >= opts.n_docs:
            break
        chosen.add(d.doc_id)
    corpus = [d for d in pool if d.doc_id in chosen]
    documents = tuple(_document(d, opts.seed) for d in corpus)
    roles = {d.doc_id: d.allowed_roles for d in documents}
    c_spelled = Counter(_norm(d.title) for d in corpus)
    multi_targets = [d for d in corpus if c_spelled[_norm(d.title)] == 1]
    by_name = _name_index(multi_targets)
    multi = _take(opts.n_multi, (_multi_query(d, by_name, opts.seed)
                                 for d in ranked("multi", multi_targets)))
    held_out = [d for d in order if d.doc_id not in chosen]
    unanswerable = _unanswerable(held_out, documents, _name_index(corpus), opts.v1())

    queries: list[Query] = []
    hard: dict[str, tuple[str, ...]] = {}
    negs_of = {id(q): n for q, n in zip(lookups, negatives, strict=True)}
    for q in (*exact, *semantic, *paraphrase, *multi, *unanswerable):
        qid = f"foldoc2:q{len(queries) + 1:04d}"
        if id(q) in negs_of:
            hard[qid] = negs_of[id(q)]
        queries.append(dataclasses.replace(q, query_id=qid,
                                           allowed_roles=_caller_roles(q, roles, opts.seed)))
    audit = tuple(SenseMatch(d.doc_id, d.title, s.offset, s.gloss) for d, s in matches)
    return (BuiltV2(documents, tuple(queries), len(pool), hard, audit),
            V2Parts(matches, by_synset, multi_targets, by_name))


def sense_matches(pool: Sequence[_Doc], wordnet: WordNet
                  ) -> tuple[list[tuple[_Doc, Synset]], dict[str, list[_Doc]]]:
    """Each pool entry whose headword names a WordNet computing sense (``match_sense``), in
    pool order, and the entries of each sense (synset offset -> entries)."""
    senses = wordnet.noun_senses()
    computing = wordnet.computing_domain_offsets()
    matches = [(d, s) for d in pool if (s := match_sense(d.title, senses, computing))]
    by_synset: dict[str, list[_Doc]] = {}
    for d, s in matches:
        by_synset.setdefault(s.offset, []).append(d)
    return matches, by_synset


def gloss_of(s: Synset, same_sense: list[_Doc]) -> str | None:
    """The WordNet gloss of ``s`` as a question's description; None when it names the term
    (a word of any same-sense headword or lemma) or is shorter than 4 words."""
    gloss = re.sub(r"^\([^()]*\)\s*", "", s.gloss).strip()  # "(computer science) ..."
    names = {x.title for x in same_sense} | {lemma for lemma in s.lemmas}
    leaks = {w.lower() for n in names for w in _WORD.findall(n)
             if (len(w) >= 3 or w.isupper()) and w.lower() not in _GENERIC}
    words = [w.lower() for w in _WORD.findall(gloss)]
    if leaks & set(words) or len(words) < 4:
        return None
    return gloss


def _gloss_query(d: _Doc, s: Synset, same_sense: list[_Doc], seed: int) -> Query | None:
    """"What is the term for <WordNet gloss>?"; None when the gloss names the term."""
    gloss = gloss_of(s, same_sense)
    if gloss is None:
        return None
    template = _SEMANTIC[stable_hash(seed, "tmpl", d.doc_id) % len(_SEMANTIC)]
    gold = sorted({x.doc_id for x in same_sense})
    return Query(query_id="", text=template.format(d=gloss), category="semantic_lookup",
                 qrels=tuple((g, 2) for g in gold),
                 required_claims=(as_claim(d.title, d.lead),), expected_answer=d.title)


def _paraphrase_query(d: _Doc, pool_words: dict[str, set[str]], mono: dict[str, str],
                      swap_re: re.Pattern[str], seed: int) -> Query | None:
    """The masked definition with single-sense words swapped for WordNet synonyms (>= 2)."""
    phrase = masked_definition(d, pool_words)
    if phrase is None:
        return None
    n_swaps = 0

    def swap(m: re.Match[str]) -> str:
        nonlocal n_swaps
        n_swaps += 1
        return mono[m.group(1)]

    swapped = swap_re.sub(swap, phrase)
    if n_swaps < 2:
        return None
    swapped = _SYNONYM_RE.sub(_swap, swapped)
    template = _SEMANTIC[stable_hash(seed, "tmpl", d.doc_id) % len(_SEMANTIC)]
    return Query(query_id="", text=template.format(d=swapped), category="paraphrase_lookup",
                 qrels=((d.doc_id, 2),), required_claims=(as_claim(d.title, d.lead),),
                 expected_answer=d.title)


def _hard_negatives(q: Query, pool: Sequence[_Doc], pool_words: dict[str, set[str]],
                    n: int) -> tuple[str, ...]:
    """The ``n`` pool docs sharing the most IDF-weighted query words (``pool_words``: word ->
    docs), gold documents and their namesakes left out."""
    gold = {doc_id for doc_id, _ in q.qrels}
    gold_names = {_norm(d.title) for d in pool if d.doc_id in gold}
    n_pool = len(pool)
    score: dict[str, float] = {}
    for w in {w.lower() for w in _WORD.findall(q.text)}:
        holders = pool_words.get(w, set())
        if (w in _STOPWORDS or w in _TEMPLATE_WORDS or not holders
                or len(holders) > _MAX_DF_SHARE * n_pool):
            continue
        idf = math.log(n_pool / len(holders))
        for doc_id in holders:
            score[doc_id] = score.get(doc_id, 0.0) + idf
    title_of = {d.doc_id: d.title for d in pool}
    ranked = sorted((doc_id for doc_id in score if doc_id not in gold
                     and _norm(title_of[doc_id]) not in gold_names),
                    key=lambda i: (-score[i], i))
    return tuple(ranked[:n])
