"""BM25 lexical index: retrieval, ordering, padding, persistence, options."""

from __future__ import annotations

import inspect
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from bench.app import CONF_DIR
from bench.config.build import OptionError, build
from bench.errors import ConfigError, MissingDependencyError
from bench.lexical.bm25 import BM25Index
from bench.retrieval.base import order_key

CORPUS = [
    "The quick brown fox jumps over the lazy dog",
    "A lazy dog sleeps all day",
    "Quantum chromodynamics describes gluons and quarks",
    "The fox and the dog are friends",
    "Gluons bind quarks",
]


def test_exact_term_document_ranks_first() -> None:
    built = BM25Index().build(CORPUS)
    res = built.search(["chromodynamics", "gluons", "fox"], k=5)
    assert res.ids.dtype == np.int64
    assert res.scores.dtype == np.float32
    assert res.ids[0, 0] == 2
    assert set(res.ids[1, :2].tolist()) == {2, 4}
    assert set(res.ids[2, :2].tolist()) == {0, 3}


def test_scores_descending_and_padding_when_fewer_matches_than_depth() -> None:
    built = BM25Index().build(CORPUS)
    res = built.search(["lazy dog fox", "quarks", "the of and", "zebra"], k=8)
    assert res.ids.shape == (4, 8)
    for row_ids, row_scores in zip(res.ids, res.scores, strict=True):
        valid = row_ids >= 0
        # padding is a suffix: -1 ids with -inf scores
        assert np.all(valid[: valid.sum()])
        assert np.all(row_scores[~valid] == -np.inf)
        assert np.all(np.diff(row_scores[valid]) <= 0)
    assert sorted(res.ids[0][res.ids[0] >= 0].tolist()) == [0, 1, 3]  # only term-matching rows
    assert sorted(res.ids[1][res.ids[1] >= 0].tolist()) == [2, 4]
    assert np.all(res.ids[2] == -1)  # stop words only
    assert np.all(res.ids[3] == -1)  # unknown term


def test_lucene_score_by_hand() -> None:
    texts = ["apple banana", "apple apple cherry", "cherry date"]
    built = BM25Index(k1=1.2, b=0.75, stopwords=None).build(texts)
    res = built.search(["banana"], k=3)
    # lucene: idf = ln(1 + (N - df + 0.5) / (df + 0.5));
    # tf part = tf / (tf + k1 (1 - b + b dl / avgdl))
    n, df, tf, dl, avgdl = 3, 1, 1, 2, (2 + 3 + 2) / 3
    expected = (
        math.log(1 + (n - df + 0.5) / (df + 0.5)) * tf / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl))
    )
    assert res.ids[0].tolist() == [0, -1, -1]
    assert res.scores[0, 0] == pytest.approx(expected, rel=1e-6)


def test_ties_ordered_by_chunk_row() -> None:
    built = BM25Index().build(["red wine", "blue sky", "red wine", "red wine"])
    res = built.search(["wine"], k=2)
    assert res.ids[0].tolist() == [0, 2]
    assert res.scores[0, 0] == res.scores[0, 1]


def test_save_load_round_trip_without_pickles(tmp_path: Path) -> None:
    index = BM25Index(k1=1.2, b=0.6, method="bm25+")
    built = index.build(CORPUS)
    built.save(tmp_path / "bm25")
    files = sorted(p.name for p in (tmp_path / "bm25").iterdir())
    assert all(name.endswith((".json", ".npy")) for name in files), files
    for name in files:
        if name.endswith(".npy"):
            np.load(tmp_path / "bm25" / name, allow_pickle=False)  # raises on a pickled array
    loaded = index.load(tmp_path / "bm25")
    queries = ["lazy dog", "gluons quarks", "nothing here"]
    a, b = built.search(queries, k=6), loaded.search(queries, k=6)
    np.testing.assert_array_equal(a.ids, b.ids)
    np.testing.assert_array_equal(a.scores, b.scores)
    with pytest.raises(ValueError, match="built with"):
        BM25Index(stopwords=None).load(tmp_path / "bm25")


def test_depth_fold_and_cache_params() -> None:
    index = BM25Index(k=2)
    assert index.depth(100) == 3 * 2
    assert index.depth(4) == 4
    assert BM25Index(k=2, chunk_depth=5).depth(100) == 5
    assert "k" not in index.cache_params()  # a query setting: the built index serves all k
    res = index.build(CORPUS).search(["dog"], k=index.depth(len(CORPUS)))
    chunk_doc = np.array([0, 1, 2, 0, 1], dtype=np.int32)  # chunks 0 and 3 are doc 0
    hits = index.fold(res, chunk_doc, order_key(["d0", "d1", "d2"]))
    assert hits.offsets.tolist() == [0, 2]
    assert sorted(hits.doc_idx.tolist()) == [0, 1]


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"k1": -0.1}, "k1"),
        ({"b": 1.5}, "b"),
        ({"method": "tfidf"}, "method"),
        ({"stopwords": "klingon"}, "stopwords"),
        ({"k": 0}, "k"),
        ({"k": 10, "chunk_depth": 5}, "chunk_depth"),
    ],
)
def test_option_validation(kwargs: dict[str, object], option: str) -> None:
    with pytest.raises(OptionError) as err:
        BM25Index(**kwargs)  # type: ignore[arg-type]
    assert err.value.option == option


def test_stemmer_needs_pystemmer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "Stemmer", None)  # import Stemmer -> ImportError
    with pytest.raises(MissingDependencyError, match="PyStemmer"):
        BM25Index(stemmer="english")


def test_stemmer_matches_inflections() -> None:
    pytest.importorskip("Stemmer")
    built = BM25Index(stemmer="english").build(["she runs daily", "he swims"])
    assert built.search(["running"], k=2).ids[0].tolist() == [0, -1]
    with pytest.raises(OptionError) as err:
        BM25Index(stemmer="klingon")
    assert err.value.option == "stemmer"


def test_yaml_lists_every_option_with_its_default() -> None:
    node = OmegaConf.load(Path(CONF_DIR) / "lexical" / "bm25.yaml")
    params = inspect.signature(BM25Index).parameters
    options = dict(OmegaConf.to_container(node))  # type: ignore[arg-type]
    del options["_target_"]
    assert options == {name: p.default for name, p in params.items()}
    assert isinstance(build(node, "lexical"), BM25Index)
    assert build(OmegaConf.load(Path(CONF_DIR) / "lexical" / "none.yaml"), "lexical") is None
    with pytest.raises(ConfigError, match=r"lexical\.b"):
        build(OmegaConf.merge(node, {"b": 2.0}), "lexical")
