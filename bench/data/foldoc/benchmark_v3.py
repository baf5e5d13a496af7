"""FOLDOC benchmark version 3: version 2 plus a two-document slice asked in independent words.

In: FOLDOC ``Entry`` records, a ``WordNet`` (Debian ``wordnet-base``) and ``BuildOptionsV3``.
Out: ``BuiltV2`` records, deterministically from ``opts.seed``; no file-system access.

Version 3 keeps version 2 whole (``build_v2_parts``): the same corpus, the same 590
questions with the same ids (``foldoc2:qNNNN``), so every per-query value measured on v2 is
a v3 value too and ``bench.compare`` pairs them. It adds ``semantic_multi_doc``
(``foldoc3:qNNNN``): "What is the term for <WordNet gloss of A>, and how is it related to
<B>?", where A is a corpus entry matched to a WordNet computing sense (the rule of v2's
``semantic_lookup``) and B (and C) are A's FOLDOC cross-references in the corpus, named.
A (grade 2) is findable only by meaning, B by name: recall of both in one ranked list is
what a hybrid retriever is for, and a single lane is not enough.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from bench.data.base import Query
from bench.data.foldoc.benchmark import (
    _caller_roles,
    _claims,
    _Doc,
    _take,
    cross_refs,
)
from bench.data.foldoc.benchmark_v2 import (
    CATEGORIES_V2,
    BuildOptionsV2,
    BuiltV2,
    build_v2_parts,
    gloss_of,
)
from bench.data.foldoc.dictd import Entry
from bench.data.foldoc.text import stable_hash
from bench.data.foldoc.wordnet import Synset, WordNet

BUILDER_VERSION_V3 = "3"
CATEGORIES_V3 = (*CATEGORIES_V2[:-1], "semantic_multi_doc", CATEGORIES_V2[-1])
_SEMANTIC_MULTI_1 = ("What is the term for {a}, and how is it related to {b}?",
                     "Which term means {a}, and what is its connection to {b}?")
_SEMANTIC_MULTI_2 = ("What is the term for {a}, and how does it relate to {b} and {c}?",
                     "Which term means {a}, and how is it connected to {b} and {c}?")


@dataclass(frozen=True)
class BuildOptionsV3(BuildOptionsV2):
    """What to build (version 3): version 2's options plus the new slice's size."""

    n_semantic_multi: int = 110

    def v2(self) -> BuildOptionsV2:
        return BuildOptionsV2(**{f.name: getattr(self, f.name)
                                 for f in dataclasses.fields(BuildOptionsV2)})

    def targets(self) -> dict[str, int]:
        return {**self.v2().targets(), "semantic_multi_doc": self.n_semantic_multi}


def build_benchmark_v3(entries: Sequence[Entry], wordnet: WordNet,
                       opts: BuildOptionsV3) -> BuiltV2:
    """Version 2, unchanged, plus ``semantic_multi_doc`` (see the module docstring)."""
    v2, parts = build_v2_parts(entries, wordnet, opts.v2())
    in_corpus = {d.doc_id for d in v2.documents}
    unique_ids = {d.doc_id for d in parts.corpus_unique}
    # every pool entry naming a sense is a gold of its gloss (as v2): kilobyte / kibibyte
    candidates = sorted(((d, s) for d, s in parts.matches if d.doc_id in unique_ids),
                        key=lambda m: stable_hash(opts.seed, "semantic_multi", m[0].doc_id))
    seen: set[str] = set()  # one question per sense: kilobyte / kibibyte share a gloss

    def one_per_sense() -> Iterator[Query | None]:
        for d, s in candidates:
            if s.offset in seen:
                continue
            q = _semantic_multi_query(d, s, parts.by_synset[s.offset], parts.by_name,
                                      in_corpus, opts.seed)
            if q is not None:
                seen.add(s.offset)
            yield q

    added = _take(opts.n_semantic_multi, one_per_sense())
    roles = {d.doc_id: d.allowed_roles for d in v2.documents}
    new = tuple(dataclasses.replace(q, query_id=f"foldoc3:q{i:04d}",
                                    allowed_roles=_caller_roles(q, roles, opts.seed))
                for i, q in enumerate(added, start=1))
    # the new slice goes before the must-abstain questions, as in the category order
    answerable = tuple(q for q in v2.queries if not q.must_abstain)
    abstain = tuple(q for q in v2.queries if q.must_abstain)
    return dataclasses.replace(v2, queries=(*answerable, *new, *abstain))


def _semantic_multi_query(d: _Doc, s: Synset, same_sense: list[_Doc],
                          by_name: dict[str, _Doc], in_corpus: set[str],
                          seed: int) -> Query | None:
    """A described by its gloss, plus up to two of its cross-references named; None when the
    gloss names the term or no cross-reference is a corpus entry of another sense."""
    gloss = gloss_of(s, same_sense)
    if gloss is None:
        return None
    refs = cross_refs(d, by_name, {x.doc_id for x in same_sense})
    if not refs:
        return None
    pick = stable_hash(seed, "tmpl", d.doc_id)
    if len(refs) == 1:
        text = _SEMANTIC_MULTI_1[pick % 2].format(a=gloss, b=refs[0].title)
    else:
        text = _SEMANTIC_MULTI_2[pick % 2].format(a=gloss, b=refs[0].title, c=refs[1].title)
    golds = sorted(x.doc_id for x in same_sense if x.doc_id in in_corpus)
    return Query(query_id="", text=text, category="semantic_multi_doc",
                 qrels=(*((g, 2) for g in golds), *((r.doc_id, 1) for r in refs)),
                 required_claims=(_claims(d)[0], *(_claims(r)[0] for r in refs)))
