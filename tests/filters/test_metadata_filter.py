"""Metadata filter: hard exclusion counts, soft boost order, predicates, empty denominators."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from bench.config.build import OptionError, build
from bench.data.base import Dataset, Document, Query
from bench.errors import ConfigError, InputError
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
    assert out.eligible_gold_queries == 4  # q2's only gold is invisible to its caller
    assert out.eligible_gold_docs == 1 + 2 + 1 + 1
    assert out.gold_per_query.tolist() == [1, 2, 0, 1, 1]
    assert out.filtered_queries == 4
    assert out.predicates == (("net",), ("net",), ("prog",), (), ("net",))
    # the seed's figure, over the eligible corpus: q4's gold a lacks "net" although the
    # retriever never found it -> q0 and q4 are excluded queries; a, d, a excluded docs
    assert out.excluded_per_query.tolist() == [1, 1, 0, 0, 1]
    assert (out.excluded_gold_queries, out.excluded_gold_docs) == (2, 1 + 1 + 1)
    rates = out.exclusion_rates()
    assert (rates.query_rate, rates.doc_rate) == (2 / 4, 3 / 5)
    # pool-relative: only gold that reached the pool counts, so q4 cannot (understated)
    assert out.pool_excluded_per_query.tolist() == [1, 1, 0, 0, 0]
    assert (out.pool_excluded_gold_queries, out.pool_excluded_gold_docs) == (1, 1 + 1)
    pool_rates = out.pool_exclusion_rates()
    assert (pool_rates.query_rate, pool_rates.doc_rate) == (1 / 4, 2 / 5)
    # and it is the predicate's own corpus-level rate (predicate_exclusion, no pool at all)
    assert Fixed(mode="hard").predicate_exclusion(DS) == rates


def test_seed_worked_example_false_exclusion_and_recall() -> None:
    """The seed's example: the filter rules out one of two queries' only gold doc.

    False exclusion 1 / 2 = 50 %; recall against the original eligible gold 50 %; recall
    against a gold set rebuilt from what survived the filter 100 % (the invalid figure). The
    excluded gold was never retrieved, so the old pool-relative rate said 0 %.
    """
    docs = (Document("g1", "x", tags=("net",)), Document("g2", "x", tags=("prog",)),
            Document("n1", "x", tags=("net",)))
    queries = (Query("q1", "t", qrels=(("g1", 1),)), Query("q2", "t", qrels=(("g2", 1),)))
    ds = Dataset("seed", docs, queries)
    key = order_key(ds.doc_ids)
    hits = Hits(np.asarray([0, 2, 4], np.int64), np.asarray([0, 2, 2, 0], np.int32),
                np.asarray([0.9, 0.5, 0.9, 0.5], np.float32))  # q2's gold g2 not retrieved
    flt = Fixed({"q1": {"net"}, "q2": {"net"}}, mode="hard")
    out = flt.apply(hits, ds, id_key=key)
    assert out.exclusion_rates().query_rate == 1 / 2
    assert out.pool_exclusion_rates().query_rate == 0 / 2
    ids = np.asarray(ds.doc_ids, dtype=object)
    run = Run(("q1", "q2"), out.hits.offsets, ids[out.hits.doc_idx], out.hits.scores)
    standard = evaluate(Qrels.from_mapping(eligible_gold(ds)), run, ["recall@10"])
    assert standard.values["recall@10"].mean() == 1 / 2
    survived = {q.query_id: {d: g for d, g in eligible_gold(ds)[q.query_id].items()
                             if "net" in docs[ds.doc_index()[d]].tags} for q in queries}
    rebuilt = evaluate(Qrels.from_mapping(survived), run, ["recall@10"])
    assert rebuilt.values["recall@10"].mean() == 1.0  # q2 drops out: the bug to prevent


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
    assert out.removed == out.excluded_gold_docs == out.pool_excluded_gold_docs == 0
    assert out.boosted == 2


def test_soft_mode_removes_nothing_but_entitlement() -> None:
    out = Fixed(mode="soft").apply(POOL, DS, id_key=KEY)
    assert out.removed == out.removed_unauthorized == 1
    assert out.excluded_gold_queries == out.pool_excluded_gold_queries == 0
    assert out.unauthorized_hits == 0
    # a boost rules nothing out: both rates are 0 over the same denominator
    assert out.exclusion_rates().query_rate == out.pool_exclusion_rates().query_rate == 0.0
    assert out.exclusion_rates().n_queries == 4
    assert out.hits.for_query(3)[0].tolist() == [A, B, C, D, E]  # no predicate: untouched


def test_entitlement_off_lets_leaks_show() -> None:
    out = Fixed(mode="soft", entitlement=False).apply(POOL, DS, id_key=KEY)
    assert out.removed_unauthorized == 0
    assert out.unauthorized_hits == 1  # e in the guest's output
    assert out.unauthorized_per_query.tolist() == [0, 0, 1, 0, 0]  # q2 is the guest


def test_empty_denominator_is_an_error() -> None:
    ds = Dataset("nogold", DOCS, (Query("q", "t"), Query("r", "t", qrels=(("e", 1),),
                                                          allowed_roles=("guest",))))
    f = MetadataFilter(predicate="oracle_tag")
    out = f.apply(pool([FIVE, FIVE]), ds, id_key=KEY)
    assert out.eligible_gold_queries == 0
    with pytest.raises(EmptyDenominatorError):
        out.exclusion_rates()
    with pytest.raises(EmptyDenominatorError):
        out.pool_exclusion_rates()
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
        "min_precision_gain": 0.01, "max_exclusion_rate": 0.02, "max_recall_loss": 0.02}
    with pytest.raises(OptionError, match="boost"):
        MetadataFilter(boost=0.0)
    with pytest.raises(OptionError, match="max_exclusion_rate"):
        MetadataFilter(max_exclusion_rate=1.5)


@pytest.mark.parametrize("option", ["none", "entitlement", "metadata", "hard_vs_soft"])
def test_conf_options_build(option: str) -> None:
    obj = build(OmegaConf.load(CONF / f"{option}.yaml"), "filters")
    assert (obj is None) == (option == "none")


def write_labels(tmp_path: Path, text: str) -> str:
    path = tmp_path / "labels.jsonl"
    path.write_text(text)
    return str(path)


def test_predicate_quality_against_a_labelled_file(tmp_path: Path) -> None:
    docs = tag_corpus()
    queries = (Query("q0", "What is a router?", qrels=(("n0", 1),)),  # extracts networking
               Query("q1", "A router for programming", qrels=(("p2", 1),)),  # both tags
               Query("q2", "What is disk?", qrels=(("k1", 1),)))  # extracts nothing
    ds = Dataset("m", docs, queries)
    # labels say q1 wants programming only and q0 wants no filter; q2 is not labelled
    labels = write_labels(tmp_path, '{"query_id": "q1", "predicate": ["programming"]}\n'
                                    '{"query_id": "q0", "predicate": []}\n')
    f = MetadataFilter(labels=labels)
    f.check(ds)
    got = f.predicate_quality(ds)
    # extracted over the labelled q0, q1: networking (q0), networking + programming (q1)
    assert (got.n_extracted, got.n_labelled, got.n_correct) == (1 + 2, 0 + 1, 1)
    assert (got.precision, got.recall) == (1 / 3, 1 / 1)
    assert f.label_source == f"labels {labels}"
    assert MetadataFilter().label_source == "gold docs' tags"


@pytest.mark.parametrize(("text", "line", "message"), [
    ('{"query_id": "q0", "predicate": ["a"]}\n{"query_id": "q0", "predicate": []}\n', 2,
     "duplicate query_id 'q0' (first seen on line 1)"),
    ('{"query_id": "q0", "predicate": "net"}\n', 1,
     "field 'predicate' must be a list of tags, got str"),
    ('{"query_id": "q0"}\n', 1, "missing"),
    ('{"query_id": "q0", "predicate": [], "why": 1}\n', 1, "why"),
    ('\n{"query_id": "q0", "predicate": [1]}\n', 2, "predicate"),
    ('{"query_id": "q0", "predicate": [}\n', 1, "JSON"),
])
def test_bad_label_files_name_file_and_line(tmp_path: Path, text: str, line: int,
                                            message: str) -> None:
    path = write_labels(tmp_path, text)
    with pytest.raises(InputError) as err:
        MetadataFilter(labels=path)
    assert (err.value.path, err.value.line) == (path, line)
    assert message in err.value.message


def test_labels_are_checked_against_the_dataset(tmp_path: Path) -> None:
    ds = Dataset("tags", DOCS, QUERIES)
    f = MetadataFilter(labels=write_labels(tmp_path, '{"query_id": "q0", "predicate": []}\n'
                                                      '{"query_id": "zz", "predicate": []}\n'))
    with pytest.raises(InputError, match=r"labels.jsonl:2: query_id 'zz' is not a query"):
        f.check(ds)
    f = MetadataFilter(labels=write_labels(tmp_path, '{"query_id": "q0", "predicate": ["nte"]}'))
    with pytest.raises(InputError, match=r":1: predicate tag 'nte' is carried by no document"):
        f.check(ds)


def test_labels_option_errors_at_config_build(tmp_path: Path) -> None:
    cfg = OmegaConf.load(CONF / "hard_vs_soft.yaml")
    cfg.labels = str(tmp_path / "missing.jsonl")
    with pytest.raises(ConfigError, match=r"filters.labels: file not found"):
        build(cfg, "filters")
    cfg.labels = write_labels(tmp_path, "")
    with pytest.raises(InputError, match="no predicate labels"):
        build(cfg, "filters")


def test_hard_vs_soft_reads_one_k() -> None:
    f = build(OmegaConf.load(CONF / "hard_vs_soft.yaml"), "filters")
    assert (f.k, f.precision_metric, f.recall_metric) == (10, "precision@10", "recall@10")
    assert f.hard.max_exclusion_rate == f.soft.max_exclusion_rate == 0.02
    cfg = OmegaConf.load(CONF / "hard_vs_soft.yaml")
    cfg.k = 0
    with pytest.raises(ConfigError, match=r"filters\.k: must be >= 1"):
        build(cfg, "filters")


def _golden(tmp_path: Path) -> list[str]:
    (tmp_path / "corpus.jsonl").write_text(
        '{"doc_id": "a", "text": "alpha", "tags": ["net"]}\n'
        '{"doc_id": "b", "text": "beta", "tags": ["net"]}\n')
    (tmp_path / "queries.jsonl").write_text(
        '{"query_id": "q1", "query": "alpha?", "relevant_document_ids": ["a"]}\n')
    return ["dataset=golden", f"dataset.corpus={tmp_path / 'corpus.jsonl'}",
            f"dataset.queries={tmp_path / 'queries.jsonl'}", "filters=hard_vs_soft",
            f"cache_dir={tmp_path / 'cache'}", "embedder=static_l3"]


def test_run_refuses_a_rule_whose_metrics_are_not_computed(tmp_path: Path, compose_cfg) -> None:
    from bench.pipeline.run import run

    cfg = compose_cfg([*_golden(tmp_path), "filters.k=5"])
    with pytest.raises(ConfigError) as err:
        run(cfg, tmp_path / "run")
    assert err.value.one_line() == (
        "config key filters.k: the hard-vs-soft rule reads precision@5 and recall@5; add "
        "precision@5, recall@5 to metrics.names")
    assert not (tmp_path / "cache").exists()  # before any work


def test_run_refuses_labels_for_unknown_queries_before_any_work(tmp_path: Path,
                                                                compose_cfg) -> None:
    from bench.pipeline.run import run

    labels = write_labels(tmp_path, '{"query_id": "q1", "predicate": ["net"]}\n'
                                    '{"query_id": "q9", "predicate": []}\n')
    cfg = compose_cfg([*_golden(tmp_path), f"filters.labels={labels}"])
    with pytest.raises(InputError) as err:
        run(cfg, tmp_path / "run")
    assert err.value.one_line() == (
        f"{labels}:2: query_id 'q9' is not a query of dataset 'golden:queries'")
    assert not (tmp_path / "cache").exists()
