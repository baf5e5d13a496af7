"""FOLDOC benchmark versions 2 and 3: WordNet parsing and match rule on a hand-written
WordNet, the v2 / v3 builds on the synthetic dictionary of test_data_foldoc, and (slow) the
real Debian packages with the hand-checked match sample."""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from bench.data.foldoc import FoldocDataset, read_dictd, write_benchmark
from bench.data.foldoc.benchmark_v2 import CATEGORIES_V2, BuildOptionsV2, build_benchmark_v2
from bench.data.foldoc.benchmark_v3 import CATEGORIES_V3, BuildOptionsV3, build_benchmark_v3
from bench.data.foldoc.deb import Source
from bench.data.foldoc.source import Extras, manifest_is_current
from bench.data.foldoc.wordnet import WordNet, match_sense, monosemous_synonyms
from bench.errors import BenchError
from tests.data.test_data_foldoc import synthetic_blocks, write_dictd

# wndb(5WN) lines: offset lex_filenum pos w_cnt(hex) [word lex_id]... p_cnt [ptr]... | gloss
NOUNS = """\
  1 This software and database is being provided to you, the LICENSEE, by Princeton
00000009 09 n 02 computer_science 0 computing 0 000 | the branch of engineering science
00000100 06 n 02 Zorblat_0 0 zorb_gadget 0 000 | a machine storing glimmer for a computer; "an ex"
00000200 13 n 01 Quimby_1 0 000 | a soft cheese from the hills
00000300 06 n 01 Farnax_2 0 001 ;c 00000009 n 0000 | a fruit-like thing of the orchard
00000400 06 n 01 Farnax_2 0 000 | a second sense nobody reaches
00000500 06 n 02 gadget 0 contraption 0 000 | a device that is very useful for a particular job
00000600 06 n 02 ledger 0 account_book 0 000 | a record in which commercial accounts are recorded
00000700 06 n 01 Delvin_3 0 000 | a program for a software ledger of widgets
"""
VERBS = "00000800 30 v 01 file 0 000 | place in a container for keeping records\n"
ADJS = """\
00000900 00 a 02 distributed 0 spread_out 0 000 | spread out or scattered
00001000 00 a 01 fast 0 000 | acting or moving quickly
00001100 00 a 01 fast 0 000 | firmly fixed
"""


@pytest.fixture()
def wordnet(tmp_path: Path) -> WordNet:
    folder = tmp_path / "wn"
    folder.mkdir()
    (folder / "data.noun").write_text(NOUNS)
    (folder / "data.verb").write_text(VERBS)
    (folder / "data.adj").write_text(ADJS)
    return WordNet.load(folder)


def test_read_wordnet(wordnet: WordNet) -> None:
    assert len(wordnet.nouns) == 8  # the licence line is skipped
    zorb = wordnet.nouns[1]
    assert zorb.lemmas == ("Zorblat 0", "zorb gadget")
    assert zorb.gloss == "a machine storing glimmer for a computer"  # example cut
    assert wordnet.nouns[3].domains == ("00000009",)
    assert wordnet.computing_domain_offsets() == frozenset({"00000009"})


def test_match_rule(wordnet: WordNet) -> None:
    senses, computing = wordnet.noun_senses(), wordnet.computing_domain_offsets()
    zorb = match_sense("Zorblat 0", senses, computing)
    assert zorb is not None and zorb.offset == "00000100"  # gloss cue "computer"
    assert match_sense("Quimby 1", senses, computing) is None  # a cheese: no cue, no domain
    farnax = match_sense("Farnax 2", senses, computing)
    assert farnax is not None and farnax.offset == "00000300"  # topic domain, first sense
    assert match_sense("zorblat 0", senses, computing) is None  # spelling is exact


def test_monosemous_synonyms(wordnet: WordNet) -> None:
    mono = monosemous_synonyms(wordnet.all_synsets())
    assert mono["gadget"] == "contraption" and mono["ledger"] == "account book"
    assert mono["distributed"] == "spread out"
    assert "fast" not in mono  # two senses: no swap without disambiguation
    assert "file" not in mono  # single sense but no synonym


OPTS = BuildOptionsV2(seed=1, n_docs=40, n_exact=6, n_semantic=3, n_paraphrase=6, n_multi=5,
                      n_unanswerable=4, n_hard_negatives=2, min_chars=50)


@pytest.fixture()
def built(tmp_path: Path, wordnet: WordNet):  # type: ignore[no-untyped-def]
    entries = read_dictd(*write_dictd(tmp_path / "syn", synthetic_blocks()))
    return build_benchmark_v2(entries, wordnet, OPTS)


def test_v2_build(built) -> None:  # type: ignore[no-untyped-def]
    docs = {d.doc_id: d for d in built.documents}
    counts = Counter(q.category for q in built.queries)
    # Zorblat 0 and Delvin 3 by a gloss cue ("computer", "program"), Farnax 2 by its domain
    assert {m.headword for m in built.matches} == {"Zorblat 0", "Farnax 2", "Delvin 3"}
    assert counts["semantic_lookup"] == 3
    for q in built.queries:
        assert all(doc_id in docs for doc_id, _ in q.qrels)
        if q.category == "semantic_lookup":
            gold = docs[q.qrels[0][0]]
            # the question is WordNet's wording, never the gold document's
            assert "glimmer" not in q.text.lower() or gold.title == "Zorblat 0"
            assert q.text.split(" ", 4)[-1].rstrip("?") not in gold.text
        if q.category == "paraphrase_lookup":
            assert "gadget" not in q.text and "ledger" not in q.text  # swapped
            assert "contraption" in q.text and "account book" in q.text
    assert counts["paraphrase_lookup"] == 6 and counts["exact_lookup"] == 6
    lookups = [q for q in built.queries if q.category in
               ("exact_lookup", "semantic_lookup", "paraphrase_lookup")]
    assert set(built.hard_negatives) == {q.query_id for q in lookups}
    # a question whose words all are common (> 5 % of the pool: 3 of these 60) has none
    assert any(built.hard_negatives[q.query_id] for q in lookups)
    for q in lookups:
        negs = built.hard_negatives[q.query_id]
        assert len(negs) <= 2
        assert all(n in docs for n in negs)
        assert not {n for n in negs} & {doc_id for doc_id, _ in q.qrels}
    assert all(q.query_id.startswith("foldoc2:q") for q in built.queries)


def test_v2_is_deterministic(tmp_path: Path, wordnet: WordNet, built) -> None:  # type: ignore[no-untyped-def]
    entries = read_dictd(*write_dictd(tmp_path / "syn2", synthetic_blocks()))
    again = build_benchmark_v2(entries, wordnet, OPTS)
    assert again.queries == built.queries and again.documents == built.documents
    assert again.hard_negatives == built.hard_negatives


def test_v2_folder_round_trip(tmp_path: Path, built) -> None:  # type: ignore[no-untyped-def]
    source = Source(deb="dict-foldoc_1_all.deb", package="dict-foldoc", version="1",
                    sha256="0" * 64)
    extras = Extras(sources={"wordnet": {"package": "wordnet-base"}},
                    files={"hard_negatives.jsonl": "{}\n"})
    manifest = write_benchmark(tmp_path / "v2", built, source, OPTS, 60, extras)
    assert manifest["name"] == "foldoc_v2" and manifest["builder_version"] == "2"
    assert set(manifest["counts"]["queries_by_category"]) == set(CATEGORIES_V2)  # type: ignore[index]
    assert "hard_negatives.jsonl" in manifest["files"]  # type: ignore[operator]
    ds = FoldocDataset(path=str(tmp_path / "v2")).load()
    assert ds.name == "foldoc_v2" and ds.fingerprint == manifest["fingerprint"]


# --------------------------------------------------------------------------- the real thing

AUDIT = Path(__file__).with_name("foldoc_wordnet_matches.tsv")


def test_hand_checked_sample_precision() -> None:
    """The README's precision figure is this file's: 46 of 50 sampled matches correct."""
    rows = list(csv.DictReader((ln for ln in AUDIT.open() if not ln.startswith("#")),
                               delimiter="\t"))
    verdicts = Counter(r["verdict"] for r in rows)
    assert len(rows) == 50 and set(verdicts) == {"same", "different"}
    assert verdicts["same"] / len(rows) == 46 / 50
    assert all(r["note"] for r in rows if r["verdict"] == "different")


@pytest.mark.slow
def test_real_v2_build_reproduces_the_audited_matches(tmp_path: Path) -> None:
    """Build v2 from Debian's dict-foldoc and wordnet-base (needs apt-get and the archive)."""
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        pytest.skip("apt-get/dpkg-deb not available")
    from bench.data.foldoc import build

    try:
        manifest = build(tmp_path / "foldoc", deb=None, cache_dir=tmp_path / "debs",
                         opts=BuildOptionsV2())
    except BenchError as err:
        pytest.skip(f"Debian packages not reachable: {err}")
    assert manifest is not None
    ds = FoldocDataset(path=str(tmp_path / "foldoc")).load()
    counts = Counter(q.category for q in ds.queries)
    assert all(counts[c] >= 100 for c in CATEGORIES_V2)
    matched = {r["doc_id"]: r["synset"] for r in csv.DictReader(
        (tmp_path / "foldoc" / "wordnet_matches.tsv").open(), delimiter="\t",
        quoting=csv.QUOTE_NONE)}
    audited = [r for r in csv.DictReader((ln for ln in AUDIT.open() if not ln.startswith("#")),
                                         delimiter="\t")]
    assert all(matched.get(r["doc_id"]) == r["synset"] for r in audited)
    negatives = [json.loads(line) for line in (tmp_path / "foldoc" / "hard_negatives.jsonl")
                 .read_text().splitlines()]
    assert len(negatives) == counts["exact_lookup"] + counts["semantic_lookup"] + counts[
        "paraphrase_lookup"]


# --------------------------------------------------------------------------- version 3

OPTS3 = BuildOptionsV3(**{**dataclasses.asdict(OPTS), "n_semantic_multi": 5})


def test_v3_is_v2_plus_semantic_multi_doc(tmp_path: Path, wordnet: WordNet, built) -> None:  # type: ignore[no-untyped-def]
    entries = read_dictd(*write_dictd(tmp_path / "syn3", synthetic_blocks()))
    v3 = build_benchmark_v3(entries, wordnet, OPTS3)
    assert OPTS3.v2() == OPTS
    # version 2 whole: the same corpus, the same questions under the same ids, in order
    assert v3.documents == built.documents and v3.hard_negatives == built.hard_negatives
    old = [q for q in v3.queries if q.category != "semantic_multi_doc"]
    assert tuple(old) == built.queries
    new = [q for q in v3.queries if q.category == "semantic_multi_doc"]
    # Zorblat 0, Farnax 2 and Delvin 3 match a sense, and each cross-references corpus entries
    assert [q.query_id for q in new] == [f"foldoc3:q{i:04d}" for i in range(1, len(new) + 1)]
    assert len(new) == 3
    docs = {d.doc_id: d for d in v3.documents}
    glosses = {s.gloss for s in wordnet.nouns}
    for q in new:
        grade2 = [docs[g] for g, grade in q.qrels if grade == 2]
        refs = [docs[g] for g, grade in q.qrels if grade == 1]
        assert len(grade2) == 1 and 1 <= len(refs) <= 2
        a = grade2[0]
        assert a.title in {"Zorblat 0", "Farnax 2", "Delvin 3"}
        assert a.title not in q.text and not any(w in q.text for w in a.title.split())
        assert any(g in q.text for g in glosses)  # described in WordNet's words ...
        assert all(r.title in q.text for r in refs)  # ... and the cross-references named
        assert all(r.title in a.text for r in refs)  # they are A's own {references}
        assert len(q.required_claims) == 1 + len(refs) and not q.must_abstain
    # the new slice goes before the must-abstain questions (category order)
    cats = [q.category for q in v3.queries]
    assert cats.index("unanswerable") > max(i for i, c in enumerate(cats)
                                            if c == "semantic_multi_doc")
    source = Source(deb="dict-foldoc_1_all.deb", package="dict-foldoc", version="1",
                    sha256="0" * 64)
    manifest = write_benchmark(tmp_path / "v3", v3, source, OPTS3, 60,
                               Extras(sources={}, files={}))
    assert manifest["name"] == "foldoc_v3" and manifest["builder_version"] == "3"
    assert list(manifest["counts"]["queries_by_category"]) == list(CATEGORIES_V3)  # type: ignore[index]
    ds = FoldocDataset(path=str(tmp_path / "v3")).load()
    assert ds.name == "foldoc_v3" and ds.fingerprint == manifest["fingerprint"]
    assert manifest_is_current(tmp_path / "v3", OPTS3)
    assert not manifest_is_current(tmp_path / "v3", OPTS)  # a v2 build is not current here


@pytest.mark.slow
def test_real_v3_build_keeps_v2_and_adds_the_slice(tmp_path: Path) -> None:
    """Build v2 and v3 from Debian's packages: v3's corpus is v2's byte for byte, v2's
    590 questions are in v3 unchanged, and the new slice has >= 100 questions."""
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        pytest.skip("apt-get/dpkg-deb not available")
    from bench.data.foldoc import build

    try:
        for version, opts in (("v2", BuildOptionsV2()), ("v3", BuildOptionsV3())):
            build(tmp_path / version, deb=None, cache_dir=tmp_path / "debs", opts=opts)
    except BenchError as err:
        pytest.skip(f"Debian packages not reachable: {err}")
    assert ((tmp_path / "v2" / "corpus.jsonl").read_bytes()
            == (tmp_path / "v3" / "corpus.jsonl").read_bytes())
    v2_rows = (tmp_path / "v2" / "queries.jsonl").read_text().splitlines()
    v3_rows = (tmp_path / "v3" / "queries.jsonl").read_text().splitlines()
    assert set(v2_rows) < set(v3_rows)
    counts = Counter(json.loads(r)["category"] for r in v3_rows)
    assert all(counts[c] >= 100 for c in CATEGORIES_V3)
