"""The scale-test corpus generator: deterministic, sharded, gold ids valid, streamable."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from bench.config.build import OptionError
from bench.data.base import Document
from bench.data.scale import (
    MAX_DOCS,
    NAME_SPACE,
    ScaleDataset,
    doc_id,
    doc_ids,
    iter_shards,
    name_of,
    read_info,
    read_queries,
    sentences_of,
    write_scale_corpus,
)
from bench.errors import InputError


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_arguments_give_byte_identical_files_and_another_seed_does_not(
        tmp_path: Path) -> None:
    a = write_scale_corpus(tmp_path / "a", n_docs=250, n_queries=20, seed=3, shard_size=100)
    write_scale_corpus(tmp_path / "b", n_docs=250, n_queries=20, seed=3, shard_size=100)
    write_scale_corpus(tmp_path / "c", n_docs=250, n_queries=20, seed=4, shard_size=100)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert _digest(tmp_path / "a") != _digest(tmp_path / "c")
    assert a.shard_rows == (100, 100, 50) and a.n_shards == 3
    assert read_info(tmp_path / "a") == a
    assert sorted(p.name for p in (tmp_path / "a" / "corpus").iterdir()) == [
        "part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]


def test_shards_stream_in_order_with_their_first_row(tmp_path: Path) -> None:
    write_scale_corpus(tmp_path, n_docs=250, n_queries=20, shard_size=100)
    starts, ids = [], []
    for start, docs in iter_shards(tmp_path):
        starts.append(start)
        ids += [d.doc_id for d in docs]
        assert len(docs) <= 100
    assert starts == [0, 100, 200]
    assert ids == [doc_id(i) for i in range(250)]
    # fixed width: byte order is row order (the trec_eval tie-break key of row i is i)
    assert sorted(ids) == ids
    assert doc_ids(np.array([0, 7, 249])).tolist() == ["s000000000", "s000000007", "s000000249"]


def test_gold_documents_exist_and_hold_what_the_query_names(tmp_path: Path) -> None:
    write_scale_corpus(tmp_path, n_docs=300, n_queries=40, seed=1, shard_size=64)
    ds = ScaleDataset(path=str(tmp_path)).load()
    index = ds.doc_index()
    queries = read_queries(tmp_path)
    assert len(queries) == 40 and len({q.query_id for q in queries}) == 40
    golds = [q.qrels for q in queries]
    assert all(len(g) == 1 and g[0][1] == 1 for g in golds)
    assert len({g[0][0] for g in golds}) == 40  # distinct gold documents
    for q in queries:
        doc = ds.documents[index[q.qrels[0][0]]]
        name = q.text.split()[2].rstrip(",")
        assert name == doc.title and doc.text.startswith(f"{name} is a ")
        kind_place = q.text.split(", the ", 1)[1].rstrip("?")
        assert kind_place in doc.text


def test_names_are_unique_and_documents_short(tmp_path: Path) -> None:
    assert len({name_of(i) for i in range(50_000)}) == 50_000
    assert name_of(MAX_DOCS - 1) != name_of(0)
    # names below NAME_SPACE are one word, pinned (a corpus below it must not change)
    assert (name_of(0), name_of(NAME_SPACE - 1)) == ("Dalrumofennzorzor", "Toskithelundzorwyn")
    # past it, the same word and a second one numbering the round: still distinct
    past = [name_of(r * NAME_SPACE + b) for r in range(1, 25) for b in (0, 1, 12_345)]
    assert len(set(past)) == len(past) and all(len(n.split()) == 2 for n in past)
    assert past[0].split()[0] == name_of(0) and MAX_DOCS == 25 * NAME_SPACE
    with pytest.raises(OptionError, match="n_docs"):
        write_scale_corpus(tmp_path / "big", n_docs=MAX_DOCS + 1, n_queries=1)
    write_scale_corpus(tmp_path, n_docs=50, n_queries=5)
    ds = ScaleDataset(path=str(tmp_path)).load()
    assert all(20 <= len(d.text.split()) <= 40 for d in ds.documents)
    assert ds.name == "scale:50x5:seed0"


def test_a_sentence_pool_is_recombined(tmp_path: Path) -> None:
    pool = sentences_of([Document("x", "A compiler translates source code into machine code. "
                                       "Short one. A linker joins object files into one "
                                       "executable program.")])
    assert pool == ("A compiler translates source code into machine code.",
                    "A linker joins object files into one executable program.")
    write_scale_corpus(tmp_path, n_docs=30, n_queries=3, sentences=pool)
    docs = ScaleDataset(path=str(tmp_path)).load().documents
    assert all(sum(s in d.text for s in pool) >= 1 for d in docs)
    assert read_info(tmp_path).sentence_pool == 2


@pytest.mark.parametrize("kwargs, option", [
    ({"n_docs": 0, "n_queries": 1}, "n_docs"),
    ({"n_docs": 10, "n_queries": 11}, "n_queries"),
    ({"n_docs": 10, "n_queries": 1, "shard_size": 0}, "shard_size"),
])
def test_bad_sizes_name_the_option(tmp_path: Path, kwargs: dict[str, int], option: str) -> None:
    with pytest.raises(OptionError) as err:
        write_scale_corpus(tmp_path, **kwargs)
    assert err.value.option == option


def test_a_folder_without_manifest_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="manifest"):
        list(iter_shards(tmp_path))
    with pytest.raises(OptionError):
        ScaleDataset()
