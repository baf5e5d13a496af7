"""Metadata filter: hard exclusion counts, soft boost order, predicates, empty denominators."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from bench.config.build import OptionError, build
from bench.data.base import Dataset, Document, Query
from bench.filters.base import eligible_gold
from bench.filters.metadata import MetadataFilter, TagMatcher
from bench.metrics.base import Qrels, Run
from bench.metrics.engine import evaluate
from bench.metrics.setlevel import EmptyDenominatorError
from bench.retrieval.base import Hits, order_key, trec_order

CONF = Path(__file__).resolve().parents[2] / "conf" / "filters"

DOCS = (
    Document("a", "x", tags=("prog",)),
    Document("b", "x", tags=("net",)),
    Document("c", "x", tags=("prog", "net")),
    Document("d", "x"),  # untagged: a hard predicate always drops it
    Document("e", "x", tags=("net",), allowed_roles=("staff",)),
)
A, B, C, D, E = range(5)
QUERIES = (
    Query("q0", "t", qrels=(("a", 1),)),
    Query("q1", "t", qrels=(("d", 1), ("b", 2)), allowed_roles=("staff",)),
    Query("q2", "t", qrels=(("e", 1),), allowed_roles=("guest",)),  # gold invisible
    Query("q3", "t", qrels=(("c", 1),)),
    Query("q4", "t", qrels=(("a", 1),)),  # its gold is not in its pool
)
DS = Dataset("tags", DOCS, QUERIES)
KEY = order_key(DS.doc_ids)
PREDS = {"q0": {"net"}, "q1": {"net"}, "q2": {"prog"}, "q3": set(), "q4": {"net"}}


class Fixed(MetadataFilter):
    """Fixed predicates, so these tests exercise the filter, not the extractor."""

    def __init__(self, preds: dict[str, set[str]] = PREDS, **options: object) -> None:
        super().__init__(**options)  # type: ignore[arg-type]
        self.fixed = {q: frozenset(p) for q, p in preds.items()}

    def predicates(self, dataset: Dataset, *, relevance_level: int = 1
                   ) -> dict[str, frozenset[str]]:
        return self.fixed


def pool(per_query: list[list[tuple[int, float]]]) -> Hits:
    docs, scores, offsets = [], [], [0]
    for pairs in per_query:
        d = np.asarray([p[0] for p in pairs], dtype=np.int32)
        s = np.asarray([p[1] for p in pairs], dtype=np.float32)
        o = trec_order(d, s, KEY)
        docs.append(d[o])
        scores.append(s[o])
        offsets.append(offsets[-1] + len(d))
    return Hits(np.asarray(offsets, np.int64), np.concatenate(docs), np.concatenate(scores))


FIVE = [(A, 0.9), (B, 0.8), (C, 0.7), (D, 0.6), (E, 0.5)]
POOL = pool([FIVE, FIVE, FIVE, FIVE, [(B, 0.8), (C, 0.7)]])


def test_hard_filter_counts_false_exclusions_over_eligible_gold() -> None:
    out = Fixed(mode="hard").apply(POOL, DS, id_key=KEY)
    assert [out.hits.for_query(q)[0].tolist() for q in range(5)] == [
        [B, C, E],  # q0: {net}; its only gold (a) removed -> an excluded query
        [B, C, E],  # q1: gold d removed, gold b kept -> 1 excluded doc, query not excluded
        [A, C],  # q2: guest loses e to entitlement, then {prog}
        [A, B, C, D, E],  # q3: no predicate -> unfiltered
        [B, C],  # q4: gold a never reached the pool -> nothing to exclude
    ]
    assert out.removed_unauthorized == 1  # e for the guest
    assert out.removed_by_predicate == 2 + 2 + 2 + 0 + 0
    assert out.removed == 1 + 6
    assert out.unauthorized_hits == 0
    assert out.excluded_gold_queries == 1  # q0
    assert out.eligible_gold_queries == 4  # q2's only gold is invisible to its caller
    assert out.excluded_gold_docs == 1 + 1
    assert out.eligible_gold_docs == 1 + 2 + 1 + 1
    assert out.excluded_per_query.tolist() == [1, 1, 0, 0, 0]
    assert out.filtered_queries == 4
    rates = out.exclusion_rates()
    assert (rates.query_rate, rates.doc_rate) == (1 / 4, 2 / 5)


def test_recall_keeps_the_original_eligible_gold() -> None:
    out = Fixed(mode="hard").apply(POOL, DS, id_key=KEY)
    ids = np.asarray(DS.doc_ids, dtype=object)
    run = Run(tuple(q.query_id for q in QUERIES), out.hits.offsets, ids[out.hits.doc_idx],
              out.hits.scores)
    ev = evaluate(Qrels.from_mapping(eligible_gold(DS)), run, ["recall@10"])
    # q1 kept b of its eligible gold {b, d}: 1/2, not the 100 % of a gold rebuilt after filtering
    assert dict(zip(ev.query_ids, ev.values["recall@10"].tolist(), strict=True)) == {
        "q0": 0 / 1, "q1": 1 / 2, "q3": 1 / 1, "q4": 0 / 1}


def test_soft_boost_reorders_with_the_trec_tie_rule() -> None:
    # binary-exact floats: c 0.25 + 0.25 ties a at 0.5 exactly; ties go to the larger doc id
    hits = pool([[(A, 0.5), (B, 0.375), (C, 0.25), (D, 0.125)]])
    ds = Dataset("one", DOCS, (Query("q0", "t", qrels=(("a", 1),)),))
    out = Fixed({"q0": {"net"}}, mode="soft", boost=0.25).apply(hits, ds, id_key=KEY)
    docs, scores = out.hits.for_query(0)
    assert docs.tolist() == [B, C, A, D]
    assert scores.tolist() == [0.375 + 0.25, 0.25 + 0.25, 0.5, 0.125]
    assert out.removed == out.excluded_gold_docs == 0 and out.boosted == 2


def test_soft_mode_removes_nothing_but_entitlement() -> None:
    out = Fixed(mode="soft").apply(POOL, DS, id_key=KEY)
    assert out.removed == out.removed_unauthorized == 1
    assert out.excluded_gold_queries == 0 and out.unauthorized_hits == 0
    assert out.hits.for_query(3)[0].tolist() == [A, B, C, D, E]  # no predicate: untouched


def test_entitlement_off_lets_leaks_show() -> None:
    out = Fixed(mode="soft", entitlement=False).apply(POOL, DS, id_key=KEY)
    assert out.removed_unauthorized == 0
    assert out.unauthorized_hits == 1  # e in the guest's output


def test_empty_denominator_is_an_error() -> None:
    ds = Dataset("nogold", DOCS, (Query("q", "t"), Query("r", "t", qrels=(("e", 1),),
                                                          allowed_roles=("guest",))))
    f = MetadataFilter(predicate="oracle_tag")
    out = f.apply(pool([FIVE, FIVE]), ds, id_key=KEY)
    assert out.eligible_gold_queries == 0
    with pytest.raises(EmptyDenominatorError):
        out.exclusion_rates()
    with pytest.raises(EmptyDenominatorError):
        f.predicate_exclusion(ds)


def test_oracle_predicates_use_eligible_gold_tags() -> None:
    labels = MetadataFilter.labelled_predicates(DS)
    # q1: d untagged, b net; q2: its gold e is invisible -> no label
    assert labels == {"q0": {"prog"}, "q1": {"net"}, "q2": frozenset(),
                      "q3": {"prog", "net"}, "q4": {"prog"}}
    # over the whole corpus, the oracle only loses untagged gold: q1's d (1 of 5 docs)
    rates = MetadataFilter(predicate="oracle_tag").predicate_exclusion(DS)
    assert (rates.query_rate, rates.doc_rate) == (0 / 4, 1 / 5)


def tag_corpus() -> tuple[Document, ...]:
    net = [Document(f"n{i}", f"router {w}", tags=("networking",))
           for i, w in enumerate(["alpha software", "beta software", "gamma", "delta", "eps"])]
    return (*net,
            Document("p1", "a router in a programming language, software", tags=("programming",)),
            Document("p2", "programming with a compiler, software", tags=("programming",)),
            Document("s1", "software", tags=("software",)),
            Document("s2", "software tools", tags=("software",)),
            Document("k1", "disk one software", tags=("storage",)),
            Document("k2", "disk two", tags=("storage", "<a href>")),
            Document("r1", "rare", tags=("rare",)))


@pytest.mark.parametrize(("text", "tags"), [
    ("What is a router?", {"networking"}),  # cue: 5 of the 6 docs with "router" are networking
    ("Routers, explained", {"networking"}),  # plural fold
    ("Explain programming.", {"programming"}),  # names a tag every doc naming it carries
    ("Which software is best?", set()),  # 7 docs name it, 2 carry it: no name, no cue
    ("storage devices", {"storage"}),  # named by no doc: naming it is the signal
    ("a rare compiler", set()),  # rare: 1 doc (< 2); compiler: in 1 doc (< 5), no cue
    ("programming a router", {"programming", "networking"}),
])
def test_query_tag_matcher(text: str, tags: set[str]) -> None:
    assert TagMatcher.learn(tag_corpus()).extract(text) == tags


def test_predicate_quality_against_oracle_labels() -> None:
    docs = tag_corpus()
    queries = (Query("q0", "What is a router?", qrels=(("n0", 1),)),  # right
               Query("q1", "A router for programming", qrels=(("p2", 1),)),  # 1 of 2 right
               Query("q2", "What is disk?", qrels=(("k1", 1),)))  # missed
    got = MetadataFilter().predicate_quality(Dataset("m", docs, queries))
    assert (got.n_extracted, got.n_labelled, got.n_correct) == (1 + 2 + 0, 1 + 1 + 1, 1 + 1)
    assert (got.precision, got.recall) == (2 / 3, 2 / 3)


def test_cache_params_and_options() -> None:
    assert "boost" not in MetadataFilter(mode="hard").cache_params()
    assert MetadataFilter(mode="soft", boost=0.2).cache_params()["boost"] == 0.2
    assert MetadataFilter().thresholds() == {
        "min_precision_gain": 0.01, "max_exclusion_rate": 0.05, "max_recall_loss": 0.02}
    with pytest.raises(OptionError, match="boost"):
        MetadataFilter(boost=0.0)
    with pytest.raises(OptionError, match="max_exclusion_rate"):
        MetadataFilter(max_exclusion_rate=1.5)


@pytest.mark.parametrize("option", ["none", "entitlement", "metadata"])
def test_conf_options_build(option: str) -> None:
    obj = build(OmegaConf.load(CONF / f"{option}.yaml"), "filters")
    assert (obj is None) == (option == "none")
