"""FOLDOC builder: dictd parsing on a hand-written fixture, the benchmark build, the folder
round trip, the CLI on a fake .deb, and (slow) the real Debian package."""

from __future__ import annotations

import gzip
import io
import json
import re
import shutil
import tarfile
from collections import Counter
from pathlib import Path

import pytest

from bench.data.base import CATEGORIES
from bench.data.foldoc import (
    BuildOptions,
    Entry,
    FoldocDataset,
    Source,
    b64_number,
    build_benchmark,
    main,
    manifest_is_current,
    parse_entry,
    read_dictd,
    sentences,
    write_benchmark,
)
from bench.data.foldoc.deb import _extract_ar_members
from bench.errors import BenchError, InputError

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64(n: int) -> str:
    out = ""
    while True:
        out = B64[n % 64] + out
        n //= 64
        if n == 0:
            return out


def write_dictd(folder: Path, blocks: list[tuple[list[str], str]]) -> tuple[Path, Path]:
    """Write a dictd index + gzip'd dict; each block is (names, indented body)."""
    data = b""
    index_lines = []
    for names, body in blocks:
        raw = ("\n".join(names) + "\n\n" + body.rstrip() + "\n\n").encode()
        for name in names:
            index_lines.append(f"{name.lower()}\t{b64(len(data))}\t{b64(len(raw))}")
        data += raw
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "foldoc.index").write_text("\n".join(sorted(index_lines)) + "\n")
    with gzip.open(folder / "foldoc.dict.dz", "wb") as fh:
        fh.write(data)
    return folder / "foldoc.index", folder / "foldoc.dict.dz"


HAND_WRITTEN = [
    (["00-database-info"], "   This is the FOLDOC meta entry."),
    (["algorithm"], """   <algorithm, programming> A detailed sequence of actions to
   perform to accomplish some task.  Named after {Muhammad ibn Musa
   al-Khwarizmi}.

   See also {brute force}, {Dictionary of Algorithms
   (http://nist.gov/dads/)}.

   {Home page (http://example.org/algo)}.

   [{Jargon File}]

   (2002-02-05)"""),
    (["abstract data type", "ADT"], """   <programming> (ADT) A kind of {data abstraction} where a
   type's internal form is hidden behind a set of {access
   functions}.

   (2003-07-03)"""),
    (["desktop"], """   1. <operating system> In a {WIMP} interface, the visual
   representation of a real desktop.

   2. <computer> {desktop computer}.

   (2007-09-12)"""),
    (["redirect"], "   {algorithm}"),
]


@pytest.fixture()
def hand_written(tmp_path: Path) -> tuple[Path, Path]:
    return write_dictd(tmp_path / "dictd", HAND_WRITTEN)


def test_b64_round_trip() -> None:
    assert [b64_number(b64(n)) for n in (0, 1, 63, 64, 4095, 123456789)] == [
        0, 1, 63, 64, 4095, 123456789]
    assert b64_number("BA") == 64 and b64_number("/") == 63


def test_parse_hand_written_fixture(hand_written: tuple[Path, Path]) -> None:
    entries = {e.headword: e for e in read_dictd(*hand_written)}
    assert "00-database-info" not in entries  # meta entry skipped
    algo = entries["algorithm"]
    assert algo.tags == ("algorithm", "programming")
    assert algo.refs == ("Muhammad ibn Musa al-Khwarizmi", "brute force")  # URL links excluded
    assert algo.text == ("A detailed sequence of actions to perform to accomplish some task. "
                         "Named after Muhammad ibn Musa al-Khwarizmi.\n\n"
                         "See also brute force, Dictionary of Algorithms.")
    adt = entries["abstract data type"]
    assert adt.aliases == ("ADT",) and adt.tags == ("programming",)
    assert adt.refs == ("data abstraction", "access functions")
    assert adt.text.startswith("(ADT) A kind of data abstraction where a type's")
    desk = entries["desktop"]
    assert desk.tags == ("operating system", "computer")  # tags of numbered senses too
    assert desk.text == ("1. In a WIMP interface, the visual representation of a real "
                         "desktop.\n\n2. desktop computer.")
    assert entries["redirect"].refs == ("algorithm",)


def test_parse_entry_without_body() -> None:
    assert parse_entry("lonely headword\n") is None


def test_sentences_respect_abbreviations() -> None:
    assert sentences("Made by J. Smith, e.g. in C. It runs fast.  Done") == [
        "Made by J. Smith, e.g. in C.", "It runs fast.", "Done"]


def test_malformed_index_names_the_line(tmp_path: Path) -> None:
    index, dict_dz = write_dictd(tmp_path, HAND_WRITTEN)
    lines = index.read_text().splitlines()
    index.write_text("\n".join([*lines[:2], "broken line without tabs", *lines[2:]]) + "\n")
    with pytest.raises(InputError) as exc:
        read_dictd(index, dict_dz)
    assert str(exc.value).startswith(f"{index}:3: ")
    index.write_text("far\tBAAAAA\tB\n")
    with pytest.raises(InputError, match=r":1: span .* lies past the end"):
        read_dictd(index, dict_dz)


# --------------------------------------------------------------------------- builder

NAMES = ["Zorblat", "Quimby", "Farnax", "Delvin", "Orrick", "Pashto", "Mibble", "Tandor",
         "Glimra", "Hextor", "Jovian", "Kelpie", "Lumox", "Nebbit", "Vortan", "Wexley",
         "Yarrow", "Brisk", "Cindle", "Drovak"]
ADJS = ["fast", "small", "portable", "parallel", "secure", "lazy", "typed", "visual"]


def synthetic_blocks(n: int = 60) -> list[tuple[list[str], str]]:
    """``n`` entries; the first 30 cross-reference each other, the rest stand alone."""
    blocks = []
    for i in range(n):
        name = f"{NAMES[i % 20]} {i}"
        body = (f"   <{'programming' if i % 2 else 'hardware'}> A {ADJS[i % 8]} gadget for "
                f"filing glimmer{i} records inside a\n   distributed ledger of widgets.")
        if i < 30:
            body += (f"  It is often combined with {{{NAMES[(i + 1) % 20]} {(i + 1) % 30}}} and"
                     f"\n   {{{NAMES[(i + 5) % 20]} {(i + 5) % 30}}}.")
        blocks.append(([name], body + "\n\n   (2020-01-01)"))
    return blocks


OPTS = BuildOptions(seed=1, n_docs=40, n_exact=8, n_semantic=8, n_multi=6, n_unanswerable=4,
                    min_chars=50)


@pytest.fixture()
def entries(tmp_path: Path) -> list[Entry]:
    return read_dictd(*write_dictd(tmp_path / "syn", synthetic_blocks()))


def test_build_counts_and_consistency(entries: list[Entry]) -> None:
    built = build_benchmark(entries, OPTS)
    assert built.n_qualifying == 60 and len(built.documents) == 40
    assert Counter(q.category for q in built.queries) == OPTS.targets()
    ids = {d.doc_id for d in built.documents}
    corpus_text = "\n".join(f"{d.title}\n{d.text}" for d in built.documents)
    for q in built.queries:
        assert q.query_id.startswith("foldoc:q")
        assert all(d in ids for d, _ in q.qrels)
        if q.category == "unanswerable":
            assert q.must_abstain and not q.qrels and not q.required_claims
            assert not re.search(rf"\b{re.escape(_term(q.text))}\b", corpus_text)
        else:
            assert not q.must_abstain and q.required_claims
        if q.category == "multi_doc":
            assert q.qrels[0][1] == 2 and {g for _, g in q.qrels[1:]} == {1}
            assert len(q.qrels) >= 2
        if q.category == "semantic_lookup":
            assert q.expected_answer and q.expected_answer not in q.text
            assert "glimmer" in q.text  # the distinctive attribute word survives masking
    titles = {d.doc_id: d.title for d in built.documents}
    for q in built.queries:
        if q.category == "exact_lookup":
            assert _term(q.text) == titles[q.qrels[0][0]]


def _term(question: str) -> str:
    """The term asked about by an exact/unanswerable question template."""
    m = re.fullmatch(r"What is (.+)\?|What does the term (.+) mean\?|Explain what (.+) is\.",
                     question)
    assert m is not None, question
    return next(g for g in m.groups() if g)


def test_build_is_deterministic(entries: list[Entry]) -> None:
    a, b = build_benchmark(entries, OPTS), build_benchmark(list(entries), OPTS)
    assert a == b
    c = build_benchmark(entries, BuildOptions(**{**OPTS.__dict__, "seed": 2}))
    assert c.documents != a.documents or c.queries != a.queries


def test_caller_roles_see_their_gold(entries: list[Entry]) -> None:
    built = build_benchmark(entries, OPTS)
    roles = {d.doc_id: d.allowed_roles for d in built.documents}
    for q in built.queries:
        for doc_id, _ in q.qrels:
            assert not q.allowed_roles or not roles[doc_id] or (
                set(roles[doc_id]) & set(q.allowed_roles))


# --------------------------------------------------------------------------- folder + CLI

SOURCE = Source(deb="dict-foldoc_1-1_all.deb", package="dict-foldoc", version="1-1",
                sha256="0" * 64)


def test_write_and_load_round_trip(entries: list[Entry], tmp_path: Path) -> None:
    built = build_benchmark(entries, OPTS)
    out = tmp_path / "bench"
    manifest = write_benchmark(out, built, SOURCE, OPTS, len(entries))
    assert sorted(p.name for p in out.iterdir()) == ["corpus.jsonl", "manifest.json",
                                                     "queries.jsonl"]
    assert not list(tmp_path.glob(".bench.*"))  # temp folders cleaned up
    ds = FoldocDataset(path=str(out)).load()
    assert ds.name == "foldoc" and ds.fingerprint == manifest["fingerprint"]
    assert ds.documents == built.documents and ds.queries == built.queries
    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk["counts"]["queries_by_category"] == OPTS.targets()
    assert on_disk["source"]["version"] == "1-1"
    assert manifest_is_current(out, OPTS)
    assert not manifest_is_current(out, BuildOptions())
    # rewriting over an existing folder swaps it atomically
    write_benchmark(out, built, SOURCE, OPTS, len(entries))
    assert FoldocDataset(path=str(out)).load().fingerprint == ds.fingerprint


def test_subsample_keeps_gold_docs(entries: list[Entry], tmp_path: Path) -> None:
    write_benchmark(tmp_path / "b", build_benchmark(entries, OPTS), SOURCE, OPTS, 60)
    small = FoldocDataset(path=str(tmp_path / "b"), max_docs=12, max_queries=8).load()
    assert len(small.queries) == 8
    assert Counter(q.category for q in small.queries) == {c: 2 for c in CATEGORIES}
    ids = set(small.doc_ids)
    gold = {d for q in small.queries for d, _ in q.qrels}
    assert gold <= ids and len(ids) == max(12, len(gold))
    again = FoldocDataset(path=str(tmp_path / "b"), max_docs=12, max_queries=8).load()
    assert again.fingerprint == small.fingerprint and small.name.startswith("foldoc[")


def test_missing_folder_names_the_build_command(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="make data") as exc:
        FoldocDataset(path=str(tmp_path / "nope")).load()
    assert "\n" not in str(exc.value) and "--version" not in str(exc.value)
    # the folders of the older versions name the version that builds them, not the default
    for version in (1, 2):
        with pytest.raises(BenchError) as exc:
            FoldocDataset(path=str(tmp_path / f"foldoc_v{version}")).load()
        assert f"build --version {version} --out {tmp_path / f'foldoc_v{version}'}" in str(
            exc.value)


def _fake_deb(path: Path, index: Path, dict_dz: Path) -> Path:
    """A minimal valid .deb (ar: debian-binary, control.tar.gz, data.tar.xz)."""
    def tar(files: dict[str, bytes], mode: str) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode=mode) as t:  # type: ignore[call-overload]
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    control = b"Package: dict-foldoc\nVersion: 1-1\nArchitecture: all\nMaintainer: t <t@t>\n" \
              b"Description: test\n"
    members = [("debian-binary", b"2.0\n"),
               ("control.tar.gz", tar({"./control": control}, "w:gz")),
               ("data.tar.xz", tar({"./usr/share/dictd/foldoc.index": index.read_bytes(),
                                    "./usr/share/dictd/foldoc.dict.dz": dict_dz.read_bytes()},
                                   "w:xz"))]
    out = b"!<arch>\n"
    for name, data in members:
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}`\n".encode() + data
        out += b"\n" if len(data) % 2 else b""
    path.write_bytes(out)
    return path


def test_extract_without_dpkg(tmp_path: Path) -> None:
    index, dict_dz = write_dictd(tmp_path / "src", HAND_WRITTEN)
    deb = _fake_deb(tmp_path / "dict-foldoc_1-1_all.deb", index, dict_dz)
    _extract_ar_members(deb, tmp_path / "x", ("usr/share/dictd/foldoc.index",))
    assert (tmp_path / "x/usr/share/dictd/foldoc.index").read_bytes() == index.read_bytes()
    assert not (tmp_path / "x/usr/share/dictd/foldoc.dict.dz").exists()


def test_cli_build_from_deb_is_idempotent(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    index, dict_dz = write_dictd(tmp_path / "src", synthetic_blocks())
    deb = _fake_deb(tmp_path / "dict-foldoc_1-1_all.deb", index, dict_dz)
    out = tmp_path / "built"
    v1 = ["--version", "1"]  # version 2 also needs wordnet-base (test_data_foldoc_v2)
    assert main(["build", *v1, "--out", str(out), "--deb", str(deb), "--n-docs", "40"]) == 0
    printed = capsys.readouterr().out
    assert "parsed 60 entries" in printed and "WARNING only" in printed  # 60 entries are few
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["source"]["package"] == "dict-foldoc" and manifest["options"]["n_docs"] == 40
    assert main(["build", *v1, "--out", str(out), "--deb", str(deb), "--n-docs", "40"]) == 0
    assert "is up to date" in capsys.readouterr().out


def test_cli_reports_errors_in_one_line(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["build", "--out", str(tmp_path / "o"), "--deb", str(tmp_path / "none.deb")])
    assert code == 2
    assert capsys.readouterr().err.startswith("error: --deb ")


# --------------------------------------------------------------------------- the real thing

@pytest.mark.slow
def test_real_foldoc_build(tmp_path: Path) -> None:
    """Build from Debian's dict-foldoc (needs apt-get and the Debian archive)."""
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        pytest.skip("apt-get/dpkg-deb not available")
    from bench.data.foldoc import build, fetch_deb

    try:
        deb = fetch_deb(tmp_path / "cache")
    except BenchError as err:
        pytest.skip(f"dict-foldoc .deb not reachable: {err}")
    manifest = build(tmp_path / "foldoc", deb=deb, cache_dir=None, opts=BuildOptions())
    assert manifest is not None
    ds = FoldocDataset(path=str(tmp_path / "foldoc")).load()
    counts = Counter(q.category for q in ds.queries)
    assert len(ds.documents) >= 2000 and len(ds.queries) >= 300
    assert all(counts[c] >= 50 for c in CATEGORIES)
    assert ds.fingerprint == manifest["fingerprint"]


def test_fetch_falls_back_to_update_then_uri(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """apt-get download fails twice -> apt-get update once -> urllib on --print-uris."""
    import hashlib
    import subprocess

    from bench.data.foldoc import deb as foldoc

    payload = b"not really a deb"
    sha = hashlib.sha256(payload).hexdigest()
    calls: list[list[str]] = []

    def fake_run(args: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        calls.append(args[1:])
        if "--print-uris" in args:
            out = f"'http://deb.example/dict-foldoc_1-1_all.deb' dict-foldoc_1-1_all.deb 16 " \
                  f"SHA256:{sha}\n"
            return subprocess.CompletedProcess(args, 0, out, "")
        rc = 0 if args[1] == "update" else 100
        return subprocess.CompletedProcess(args, rc, "", "E: network is down")

    monkeypatch.setattr(foldoc.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(foldoc.subprocess, "run", fake_run)
    monkeypatch.setattr(foldoc.urllib.request, "urlopen",
                        lambda url, timeout: io.BytesIO(payload))
    deb = foldoc.fetch_deb(tmp_path)
    assert deb == tmp_path / "dict-foldoc_1-1_all.deb" and deb.read_bytes() == payload
    assert calls == [["download", "dict-foldoc"], ["update"], ["download", "dict-foldoc"],
                     ["download", "--print-uris", "dict-foldoc"]]
    assert foldoc.fetch_deb(tmp_path) == deb  # a cached .deb is reused without apt
    assert len(calls) == 4


def test_categories_mapping_replaces_foldocs(entries: list[Entry], tmp_path: Path) -> None:
    out = tmp_path / "b"
    write_benchmark(out, build_benchmark(entries, OPTS), SOURCE, OPTS, len(entries))
    plain = FoldocDataset(path=str(out)).load()
    first, second = plain.queries[0].query_id, plain.queries[1].query_id
    cats = tmp_path / "cats.jsonl"
    cats.write_text(json.dumps({"query_id": first, "category": "mine"}) + "\n"
                    + json.dumps({"query_id": second, "category": "mine"}) + "\n")
    ds = FoldocDataset(path=str(out), categories=str(cats)).load()
    assert [q.category for q in ds.queries[:2]] == ["mine", "mine"]
    assert {q.category for q in ds.queries[2:]} == {"uncategorized"}
    assert ds.fingerprint != plain.fingerprint
    # subsampling stratifies by the mapped categories: one query of each, round robin
    small = FoldocDataset(path=str(out), categories=str(cats), max_queries=2).load()
    assert Counter(q.category for q in small.queries) == {"mine": 1, "uncategorized": 1}
