"""DocumentTable: a corpus as Arrow columns behaves as the tuple of its documents."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

import bench.data.table as table_mod
from bench.data.base import Dataset, Document, Query
from bench.data.scale import ScaleDataset, iter_shards, write_scale_corpus
from bench.data.table import DocumentTable


def docs(n: int, *, title_in_text: bool = False) -> tuple[Document, ...]:
    return tuple(Document(f"d{i}", f"text {i} é😀", title=f"T{i}" if i % 3 else "",
                          title_in_text=title_in_text) for i in range(n))


@pytest.mark.parametrize("title_in_text", [False, True])
def test_a_table_is_the_sequence_of_its_documents(title_in_text: bool,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(table_mod, "ITER_BLOCK", 4)  # iteration crosses blocks
    ref = docs(11, title_in_text=title_in_text)
    t = DocumentTable.of(ref)
    assert len(t) == 11 and list(t) == list(ref) and t == ref and t.doc_ids == [
        d.doc_id for d in ref]
    assert t[0] == ref[0] and t[-1] == ref[-1] and t[7] == ref[7]
    assert t[2:9] == ref[2:9] and t[::3] == ref[::3] and t[9:2:-2] == ref[9:2:-2]
    assert t[20:] == () and isinstance(t[1:3], tuple)
    with pytest.raises(IndexError):
        t[11]
    assert t != ref[:-1] and t != docs(11, title_in_text=not title_in_text)
    back = pickle.loads(pickle.dumps(t))
    assert isinstance(back, DocumentTable) and back == t and hash(back) == hash(t)


@pytest.mark.parametrize("title_in_text", [False, True])
def test_a_dataset_over_a_table_is_the_dataset_over_the_tuple(title_in_text: bool) -> None:
    # the fingerprint of a table is read from its columns: the same as the tuple's
    ref = docs(50, title_in_text=title_in_text)
    q = (Query("q1", "text 3", qrels=(("d3", 1),)),)
    a, b = Dataset("x", DocumentTable.of(ref), q), Dataset("x", ref, q)
    assert a.fingerprint == b.fingerprint and a.corpus.fingerprint == b.corpus.fingerprint
    assert a.doc_ids == b.doc_ids and a.doc_index() == b.doc_index() and a == b


def test_only_id_title_and_text_fit_a_table() -> None:
    with pytest.raises(ValueError, match="d1"):
        DocumentTable.of([Document("d0", "a"), Document("d1", "b", tags=("x",))])
    with pytest.raises(ValueError, match="title_in_text"):
        DocumentTable.of([Document("d0", "a"), Document("d1", "b", title_in_text=True)])


def test_the_scale_loader_reads_a_table_with_the_shards_documents(tmp_path: Path) -> None:
    write_scale_corpus(tmp_path, n_docs=300, n_queries=10, shard_size=64)
    ds = ScaleDataset(path=str(tmp_path)).load()
    assert isinstance(ds.documents, DocumentTable)
    shards = tuple(d for _, part in iter_shards(tmp_path) for d in part)
    assert ds.documents == shards
    assert ds.fingerprint == Dataset(ds.name, shards, ds.queries).fingerprint


def test_a_text_column_is_the_sequence_of_its_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow as pa

    from bench.data.table import TextColumn

    monkeypatch.setattr(table_mod, "ITER_BLOCK", 3)
    ref = tuple(f"s{i} é😀" if i % 4 else "" for i in range(10))
    col = TextColumn(pa.chunked_array([pa.array(ref[:4]), pa.array(ref[4:])]))
    assert len(col) == 10 and list(col) == list(ref) and col == ref and ref == col
    assert col[0] == ref[0] and col[-1] == ref[-1] and col[5] == ref[5]
    assert col[2:7] == list(ref[2:7]) and col[::4] == list(ref[::4]) and col[12:] == []
    with pytest.raises(IndexError):
        col[10]
    assert col != ref[:-1] and col == TextColumn(pa.array(ref))
    back = pickle.loads(pickle.dumps(col))
    assert back == col
