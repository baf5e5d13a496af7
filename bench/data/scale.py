"""Synthetic corpora for scale tests: N short documents streamed to disk in shards.

``write_scale_corpus`` writes ``n_docs`` documents of about 30-45 embedder tokens (one chunk
each under any chunker with windows >= 64 tokens, so N documents ~ N chunks) and ``n_queries``
queries with one known gold document each. Nothing holds the corpus in memory: each shard is
generated from its own seeded stream (``(seed, shard)``), written, and dropped; queries
regenerate only their gold documents' shard plans (integer arrays, not texts).

Each document is a unique invented name (its index, scrambled and spelled in syllables) plus two
sentences recombined from a sentence pool: the built-in grammar (kinds, places, colours, diets,
habits: ~10^7 distinct sentences) or, with ``sentences=``, a given pool (e.g. FOLDOC sentences,
``sentences_of``). A query names its gold document's creature and paraphrases one of its
sentences ("What is Zorvathquil, the river fish from the Quessary Marsh?"), so retrieval has
one right answer that gets harder to find as N grows.

Layout (``path``)::

    corpus/part-00000.parquet ...   doc_id, title, text (CORPUS_SCHEMA), shard_size rows each
    queries.jsonl                   BEIR rows {"_id", "text"}
    qrels/test.tsv                  BEIR qrels (query-id, corpus-id, score = 1)
    manifest.json                   written last: sizes, seed, shards, shard row counts

Doc ids are ``s`` + 9 digits of the row index, so their byte order is their row order (the
trec_eval tie-break key of row i is i) and a row maps back to its id without a table.
``ScaleDataset`` loads the whole folder as a ``Dataset`` (small sizes, ``dataset=scale``);
``iter_shards`` streams it shard by shard (what ``scripts/bench_scale.py`` does at 1M).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.config.build import OptionError
from bench.data.base import Dataset, Document, Query
from bench.data.jsonl import iter_jsonl, json_id, json_str, write_jsonl
from bench.data.table import DOCUMENT_SCHEMA, DocumentTable
from bench.errors import InputError

CORPUS_SCHEMA = DOCUMENT_SCHEMA
MANIFEST = "manifest.json"
FORMAT_VERSION = 1

_SYLLABLES = ("zor", "vath", "quil", "mera", "tosk", "lund", "brae", "kiv", "ostra", "pell",
              "dru", "xan", "yel", "fenn", "gor", "ithe", "nax", "rumo", "sev", "tal", "ulb",
              "wyn", "cor", "dal")
_NAME_SYLLABLES = 5
#: distinct 5-syllable names: every index below this has its own one-word name
NAME_SPACE = len(_SYLLABLES) ** _NAME_SYLLABLES
#: documents a corpus can have: past NAME_SPACE a name takes a second word (``name_of``)
MAX_DOCS = NAME_SPACE * (1 + len(_SYLLABLES))
#: index scrambling: i -> (i * _MUL + _ADD) mod NAME_SPACE is a bijection (_MUL coprime to 24)
_MUL, _ADD = 1_000_003, 7_919

_KINDS = ("river fish", "mountain bird", "desert lizard", "forest beetle", "sea snail",
          "cave bat", "meadow moth", "swamp frog", "tundra hare", "reef crab", "night owl",
          "pond newt", "salt spider", "cliff goat", "moss slug", "sand wasp")
_PLACES = ("Velmora Hills", "Quessary Marsh", "Drennick Coast", "Olvasti Plain",
           "Karrowind Valley", "Ithelmar Dunes", "Brisquen Lakes", "Tamberlow Forest",
           "Usk Tablelands", "Pellidor Caves", "Orrin Fjords", "Zanthe Steppe", "Mirelock Fens",
           "Cadwen Islands", "Haldrun Peaks", "Sorrel Delta")
_COLOURS = ("crimson", "azure", "amber", "violet", "ivory", "emerald", "cobalt", "ochre",
            "silver", "scarlet", "teal", "charcoal")
_PARTS = ("claws", "feathers", "scales", "wings", "antennae", "spines", "fins", "whiskers")
_DIETS = ("eats floating moss", "feeds on tiny shrimp", "drinks flower nectar",
          "hunts night moths", "grazes on lichen", "cracks hard seeds", "filters plankton",
          "scavenges fallen fruit")
_HABITS = ("sings loudly at dawn", "migrates every winter", "glows faintly at night",
           "burrows deep into sand", "sleeps hanging upside down", "builds towers of pebbles",
           "changes colour when startled", "travels in large swarms")
_SEASONS = ("in spring", "in late summer", "after the first frost", "during the rains",
            "at midwinter", "when the tide is low")


@dataclass(frozen=True)
class ScaleCorpusInfo:
    """What ``manifest.json`` records about a written corpus."""

    n_docs: int
    n_queries: int
    seed: int
    shard_size: int
    shard_rows: tuple[int, ...]
    sentence_pool: int  # 0 = the built-in grammar, else the size of the given pool
    format_version: int = FORMAT_VERSION

    @property
    def n_shards(self) -> int:
        return len(self.shard_rows)


def doc_id(i: int) -> str:
    """The id of document row ``i`` (fixed width: byte order = row order)."""
    return f"s{i:09d}"


def doc_ids(rows: np.ndarray) -> np.ndarray:
    """Ids (numpy ``U10``) of the document rows ``rows``, without any table."""
    return np.char.add("s", np.char.zfill(np.asarray(rows, dtype=np.int64).astype(str), 9))


def name_of(i: int) -> str:
    """The unique creature name of document ``i``: 5 syllables of its scrambled index, one
    word, for ``i < NAME_SPACE`` (7,962,624); past it the same word for ``i mod NAME_SPACE``
    and a second word, a syllable that numbers the round (``Zorvathquilmeratosk Kiv``), so
    names stay distinct up to ``MAX_DOCS`` and a corpus below NAME_SPACE is unchanged."""
    rnd, base = divmod(i, NAME_SPACE)
    v = (base * _MUL + _ADD) % NAME_SPACE
    parts = []
    for _ in range(_NAME_SYLLABLES):
        v, r = divmod(v, len(_SYLLABLES))
        parts.append(_SYLLABLES[r])
    word = "".join(parts).capitalize()
    return word if rnd == 0 else f"{word} {_SYLLABLES[rnd - 1].capitalize()}"


@dataclass(frozen=True)
class _ShardPlan:
    """Integer choices of one shard's documents (regenerable from (seed, shard) alone)."""

    slots: np.ndarray  # int64 [n, 9]: kind, place, colour, part, diet, habit, season, s1, s2


def _plan(seed: int, shard: int, n: int, pool: int) -> _ShardPlan:
    rng = np.random.default_rng([seed, shard])
    highs = (len(_KINDS), len(_PLACES), len(_COLOURS), len(_PARTS), len(_DIETS),
             len(_HABITS), len(_SEASONS), max(pool, 1), max(pool, 1))
    return _ShardPlan(np.stack([rng.integers(0, h, size=n) for h in highs], axis=1))


def _document(i: int, row: np.ndarray, pool: Sequence[str]) -> tuple[str, str]:
    """(title, text) of document ``i`` from its plan row."""
    name = name_of(i)
    kind, place = _KINDS[row[0]], _PLACES[row[1]]
    if pool:
        body = f"{pool[row[7]]} {pool[row[8]]}"
    else:
        body = (f"It has {_COLOURS[row[2]]} {_PARTS[row[3]]} and {_DIETS[row[4]]}. "
                f"It {_HABITS[row[5]]} {_SEASONS[row[6]]}.")
    return name, f"{name} is a {kind} from the {place}. {body}"


def _query(i: int, row: np.ndarray) -> str:
    return f"What is {name_of(i)}, the {_KINDS[row[0]]} from the {_PLACES[row[1]]}?"


def write_scale_corpus(path: str | Path, *, n_docs: int, n_queries: int, seed: int = 0,
                       shard_size: int = 100_000,
                       sentences: Sequence[str] | None = None) -> ScaleCorpusInfo:
    """Write the corpus, queries and qrels under ``path`` (see the module docstring).

    Same arguments -> byte-identical files. Shards are written one at a time; the manifest
    last, so a folder without one is an interrupted write.
    """
    if not 1 <= n_docs <= MAX_DOCS:
        raise OptionError("n_docs", f"must be in [1, {MAX_DOCS}], got {n_docs}")
    if not 1 <= n_queries <= n_docs:
        raise OptionError("n_queries", f"must be in [1, n_docs={n_docs}], got {n_queries}")
    if shard_size < 1:
        raise OptionError("shard_size", f"must be >= 1, got {shard_size}")
    pool = tuple(sentences or ())
    root = Path(path)
    (root / "corpus").mkdir(parents=True, exist_ok=True)
    (root / MANIFEST).unlink(missing_ok=True)
    rows: list[int] = []
    for shard, start in enumerate(range(0, n_docs, shard_size)):
        n = min(shard_size, n_docs - start)
        plan = _plan(seed, shard, n, len(pool))
        ids, titles, texts = [], [], []
        for j in range(n):
            title, text = _document(start + j, plan.slots[j], pool)
            ids.append(doc_id(start + j))
            titles.append(title)
            texts.append(text)
        table = pa.table({"doc_id": ids, "title": titles, "text": texts}, schema=CORPUS_SCHEMA)
        out = root / "corpus" / f"part-{shard:05d}.parquet"
        tmp = out.with_suffix(".tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, out)
        rows.append(n)
    gold = np.sort(np.random.default_rng([seed, 1 << 30]).choice(n_docs, n_queries,
                                                                   replace=False))
    query_rows: list[dict[str, str]] = []
    qrels: list[str] = ["query-id\tcorpus-id\tscore"]
    for shard in np.unique(gold // shard_size):
        start = int(shard) * shard_size
        plan = _plan(seed, int(shard), min(shard_size, n_docs - start), len(pool))
        for i in gold[gold // shard_size == shard]:
            qid = f"q{len(query_rows):07d}"
            query_rows.append({"_id": qid, "text": _query(int(i), plan.slots[int(i) - start])})
            qrels.append(f"{qid}\t{doc_id(int(i))}\t1")
    write_jsonl(root / "queries.jsonl", query_rows)
    (root / "qrels").mkdir(exist_ok=True)
    (root / "qrels" / "test.tsv").write_text("\n".join(qrels) + "\n", encoding="utf-8")
    info = ScaleCorpusInfo(n_docs, n_queries, seed, shard_size, tuple(rows), len(pool))
    (root / MANIFEST).write_text(json.dumps(asdict(info), indent=2))
    return info


def read_info(path: str | Path) -> ScaleCorpusInfo:
    """The manifest of a written corpus; InputError when there is none (unfinished write)."""
    p = Path(path) / MANIFEST
    if not p.is_file():
        raise InputError(p, 0, "no scale corpus manifest (not written, or the write was "
                               "interrupted): run write_scale_corpus / scripts/bench_scale.py")
    obj = json.loads(p.read_text())
    obj["shard_rows"] = tuple(obj["shard_rows"])
    info = ScaleCorpusInfo(**obj)
    if info.format_version != FORMAT_VERSION:
        raise InputError(p, 0, f"format_version {info.format_version}, this code reads "
                               f"{FORMAT_VERSION}: regenerate the corpus")
    return info


def _shard_table(root: Path, shard: int, n: int) -> pa.Table:
    """Shard ``shard`` of the corpus, checked against the manifest's row count ``n``."""
    f = root / "corpus" / f"part-{shard:05d}.parquet"
    t = pq.read_table(f, schema=CORPUS_SCHEMA)
    if t.num_rows != n:
        raise InputError(f, 0, f"{t.num_rows} rows, the manifest says {n}")
    return t


def iter_shards(path: str | Path) -> Iterator[tuple[int, tuple[Document, ...]]]:
    """(first row, documents) of each shard in order; one shard in memory at a time."""
    root = Path(path)
    info = read_info(root)
    start = 0
    for shard, n in enumerate(info.shard_rows):
        t = _shard_table(root, shard, n)
        docs = tuple(Document(doc_id=d, title=ti, text=tx) for d, ti, tx in
                     zip(t["doc_id"].to_pylist(), t["title"].to_pylist(),
                         t["text"].to_pylist(), strict=True))
        yield start, docs
        start += n


def read_queries(path: str | Path) -> tuple[Query, ...]:
    """The queries with their qrels (one gold document each)."""
    root = Path(path)
    texts = {}
    for where, obj in iter_jsonl(root / "queries.jsonl"):
        texts[json_id(obj.get("_id"), "_id", where)] = json_str(obj.get("text"), "text", where)
    gold: dict[str, list[tuple[str, int]]] = {}
    lines = (root / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines[1:], start=2):
        qid, did, score = line.split("\t")
        if qid not in texts:
            raise InputError(root / "qrels" / "test.tsv", n, f"unknown query {qid!r}")
        gold.setdefault(qid, []).append((did, int(score)))
    return tuple(Query(query_id=q, text=t, qrels=tuple(gold.get(q, ()))) for q, t in
                 texts.items())


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentences_of(documents: Sequence[Document], *, min_words: int = 5,
                 max_words: int = 18) -> tuple[str, ...]:
    """Sentences of ``documents`` with min..max words (a pool for ``sentences=``), in order,
    each once."""
    seen: dict[str, None] = {}
    for d in documents:
        for s in _SENTENCE_END.split(" ".join(d.text.split())):
            if min_words <= len(s.split()) <= max_words and s.endswith((".", "!", "?")):
                seen.setdefault(s, None)
    return tuple(seen)


def read_corpus_table(path: str | Path) -> pa.Table:
    """The whole corpus as one Arrow table (``CORPUS_SCHEMA``), shard by shard: no Python
    object per document (what ``ScaleDataset`` holds)."""
    root = Path(path)
    parts = [_shard_table(root, shard, n) for shard, n in enumerate(read_info(root).shard_rows)]
    return pa.concat_tables(parts) if parts else CORPUS_SCHEMA.empty_table()


class ScaleDataset:
    """A folder written by ``write_scale_corpus``, loaded whole (``dataset=scale``).

    Its documents are a ``DocumentTable`` (Arrow columns, about 230 bytes a document rather
    than 520 as Python objects). ``iter_shards`` streams the folder shard by shard instead
    (scripts/bench_scale.py).
    """

    def __init__(self, *, path: str | None = None) -> None:
        if path is None or path in ("", "???"):
            raise OptionError("path", "required: set dataset.path=DIR, a folder written by "
                                      "bench.data.scale.write_scale_corpus")
        self.path = path

    def load(self) -> Dataset:
        info = read_info(self.path)
        return Dataset(name=f"scale:{info.n_docs}x{info.n_queries}:seed{info.seed}",
                       documents=DocumentTable(read_corpus_table(self.path)),
                       queries=read_queries(self.path))
