"""``dataset=raw_docs``: a folder of raw files parsed into the corpus (docs/ingestion.md).

Before any work, the whole folder is checked and a bad input is one line naming
``file:line`` (exit 2): a manifest row naming a missing or zero-byte file, a file larger than
``max_file_mb``, a type no parser takes, a truth file that does not match its row (another
doc_id, a text that is not its blocks joined, missing fields), a query naming a doc_id the
manifest lacks. Then every file is parsed (``bench.parsing.pool``: one worker process per
file at a time, ``timeout_s`` each) or loaded from the parse cache, keyed on (file sha256,
parser, its options, code version). Each manifest row is one corpus document, in manifest
order, with the parsed text — and no text where the parse did not succeed (``failed``,
``timeout``, ``empty``, ``unsupported``): the document cannot be retrieved, and every query
whose gold document it was still counts, and loses it. ``ParsedDataset.parse`` keeps each
file's record for the stage's report (``bench.parsing.report``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from bench.cache.store import ArtifactStore
from bench.config.build import OptionError, build
from bench.data.base import Dataset, Document
from bench.data.golden import read_queries
from bench.data.jsonl import Where, check_keys, iter_jsonl, json_id, json_str, require_rows
from bench.errors import ConfigError, InputError
from bench.parsing.base import FILE_TYPES, ParsedDocument, Parser, ParseStatus, RawFile

log = logging.getLogger("bench")

MANIFEST_REQUIRED = ("doc_id", "file", "type")
MANIFEST_OPTIONAL = ("layout", "source", "truth")
TRUTH_REQUIRED = ("doc_id", "text")
#: the cache stage of one file's parse
CACHE_STAGE = "parse"


@dataclass(frozen=True)
class ParseOutcome:
    """Every file's parse in manifest order, with the run's parse wall time."""

    parser: str
    files: tuple[RawFile, ...]
    records: tuple[ParsedDocument, ...]
    wall_s: float
    workers: int
    timeout_s: float

    def counts(self) -> dict[str, int]:
        out = {str(s): 0 for s in ParseStatus}
        for r in self.records:
            out[str(r.status)] += 1
        return out


@dataclass(frozen=True)
class ParsedDataset(Dataset):
    """A dataset whose corpus came from parsing raw files; ``parse`` says how each went."""

    parse: ParseOutcome | None = field(default=None, compare=False)


def default_parsers() -> dict[str, type]:
    """The parser of each file type a swept parser does not take (``fallback: true``)."""
    from bench.parsing.docx import DocxParser
    from bench.parsing.html_trafilatura import TrafilaturaParser
    from bench.parsing.ocr_tesseract import TesseractParser
    from bench.parsing.pdf_pypdf import PypdfParser
    from bench.parsing.text import TextParser

    return {"pdf": PypdfParser, "html": TrafilaturaParser, "docx": DocxParser,
            "md": TextParser, "txt": TextParser, "png": TesseractParser,
            "jpg": TesseractParser, "tiff": TesseractParser}


class RawDocsDataset:
    """``path``: the folder (manifest.jsonl, files/, truth/, queries.jsonl); ``parser``: the
    ``parser`` group's config (conf/dataset/raw_docs.yaml interpolates it); ``fallback``:
    file types the parser does not take go through the default parser of their type
    (``default_parsers``) — false: such a file is an error before work; ``timeout_s``: per
    file; ``workers``: parse processes; ``max_file_mb``: a larger file is an error before
    work; ``max_docs``: the first N manifest rows (queries whose gold documents are all
    left out are dropped and counted); ``query_categories``: evaluate only the queries of
    these categories (null: all; the others are dropped and counted — e.g. ``[squad2]``,
    the ingestion benchmark's queries with SQuAD answers)."""

    path: Path
    parser: Parser
    cache_dir: str
    fallback: bool
    timeout_s: float
    workers: int
    max_file_mb: float
    max_bytes: int
    max_docs: int | None
    query_categories: tuple[str, ...] | None

    def __init__(self, *, path: str, parser: dict[str, Any], cache_dir: str,
                 fallback: bool = True, timeout_s: float = 120.0, workers: int = 1,
                 max_file_mb: float = 512.0, max_docs: int | None = None,
                 query_categories: list[str] | None = None) -> None:
        if timeout_s <= 0:
            raise OptionError("timeout_s", f"must be > 0, got {timeout_s}")
        if workers < 1:
            raise OptionError("workers", f"must be >= 1, got {workers}")
        if max_file_mb <= 0:
            raise OptionError("max_file_mb", f"must be > 0, got {max_file_mb}")
        if max_docs is not None and max_docs < 1:
            raise OptionError("max_docs", f"must be >= 1 or null, got {max_docs}")
        built = build(parser, "parser")
        if built is None:
            raise ConfigError("parser", "dataset=raw_docs parses raw files: pick a parser "
                                        "(parser=pypdf, parser=oracle, ...; conf/parser/)")
        self.path = Path(path)
        self.parser = cast(Parser, built)
        self.cache_dir = cache_dir
        self.fallback = fallback
        self.timeout_s = timeout_s
        self.workers = workers
        self.max_file_mb = max_file_mb
        self.max_bytes = int(max_file_mb * 2**20)
        self.max_docs = max_docs
        if query_categories is not None and not query_categories:
            raise OptionError("query_categories", "must name at least one category or be null")
        self.query_categories = None if query_categories is None else tuple(query_categories)

    # -- before work -----------------------------------------------------------------
    def read_manifest(self) -> list[RawFile]:
        manifest = self.path / "manifest.jsonl"
        files: list[RawFile] = []
        seen: dict[str, int] = {}
        for where, obj in iter_jsonl(manifest):
            check_keys(obj, where, required=MANIFEST_REQUIRED, optional=MANIFEST_OPTIONAL)
            doc_id = json_id(obj["doc_id"], "doc_id", where)
            if doc_id in seen:
                raise where.error(f"duplicate doc_id {doc_id!r} (first on line {seen[doc_id]})")
            seen[doc_id] = where.line
            kind = json_str(obj["type"], "type", where)
            if kind not in FILE_TYPES:
                raise where.error(f"type {kind!r}: no parser takes it; types: "
                                  f"{', '.join(FILE_TYPES)}")
            file = self._inside(json_str(obj["file"], "file", where), "file", where)
            if not file.is_file():
                raise where.error(f"file {obj['file']!r} does not exist ({file})")
            size = file.stat().st_size
            if size == 0:
                raise where.error(f"file {obj['file']!r} is empty (0 bytes)")
            if size > self.max_bytes:
                raise where.error(f"file {obj['file']!r} is {size / 2**20:.0f} MiB, over "
                                  f"dataset.max_file_mb={self.max_file_mb:g}")
            truth = None
            if obj.get("truth") is not None:
                truth = self._inside(json_str(obj["truth"], "truth", where), "truth", where)
                check_truth(truth, doc_id, where)
            elif self.parser.needs_truth:
                raise where.error(f"parser={self.parser.name} reads the truth text: this row "
                                  "has no truth file")
            files.append(RawFile(doc_id, file, kind, _sha256(file), size,
                                 json_str(obj.get("layout", ""), "layout", where,
                                          allow_empty=True),
                                 json_str(obj.get("source", ""), "source", where,
                                          allow_empty=True), truth))
            if self.max_docs is not None and len(files) == self.max_docs:
                break
        require_rows(manifest, len(files), "manifest rows")
        return files

    def _inside(self, rel: str, key: str, where: Where) -> Path:
        p = (self.path / rel).resolve()
        if not p.is_relative_to(self.path.resolve()):
            raise where.error(f"{key} {rel!r} points outside the folder")
        return p

    def parsers_by_type(self, types: Sequence[str], manifest: Path) -> dict[str, Parser]:
        out: dict[str, Parser] = {}
        defaults = default_parsers()
        for t in dict.fromkeys(types):
            if t in self.parser.types:
                out[t] = self.parser
            elif self.fallback:
                out[t] = defaults[t]()
            else:
                raise InputError(manifest, 0, f"parser={self.parser.name} does not read "
                                              f"{t!r} files (it reads "
                                              f"{', '.join(self.parser.types)}); set "
                                              "dataset.fallback=true or drop them")
        return out

    # -- the work ----------------------------------------------------------------------
    def load(self) -> ParsedDataset:
        files = self.read_manifest()
        ids = {f.doc_id for f in files}
        queries_path = self.path / "queries.jsonl"
        if self.max_docs is None:
            queries = read_queries(queries_path, ids)
            dropped = 0
        else:
            everyone = set(self._all_rows())
            queries = read_queries(queries_path, everyone)
            kept = tuple(q for q in queries if q.must_abstain or any(d in ids for d, _ in q.qrels))
            dropped = len(queries) - len(kept)
            queries = tuple(_only(q, ids) for q in kept)
        reasons = [f"dataset.max_docs={self.max_docs} left out all their gold documents"
                   ] if dropped else []
        if self.query_categories is not None:
            kept = tuple(q for q in queries if q.category in self.query_categories)
            if not kept:
                raise ConfigError("dataset.query_categories",
                                  f"no query of {queries_path} has category "
                                  f"{' or '.join(self.query_categories)}")
            if len(kept) < len(queries):
                reasons.append(f"dataset.query_categories={list(self.query_categories)} left "
                               f"out {len(queries) - len(kept)}")
            dropped += len(queries) - len(kept)
            queries = kept
        parsers = self.parsers_by_type([f.type for f in files], self.path / "manifest.jsonl")
        t0 = time.perf_counter()
        records = parse_files(files, parsers, ArtifactStore(Path(self.cache_dir).expanduser()),
                              workers=self.workers, timeout_s=self.timeout_s)
        wall = time.perf_counter() - t0
        outcome = ParseOutcome(self.parser.name, tuple(files), tuple(records), wall,
                               self.workers, self.timeout_s)
        counts = {k: v for k, v in outcome.counts().items() if v}
        log.info("stage %-10s %s: %d files in %.2fs (%s)", "parse", self.parser.name,
                 len(files), wall, ", ".join(f"{k} {v}" for k, v in counts.items()))
        docs = tuple(Document(doc_id=r.doc_id,
                              text=r.text if r.status is ParseStatus.OK else "")
                     for r in records)
        return ParsedDataset(name=f"raw_docs:{self.path.name}", documents=docs,
                             queries=queries, n_dropped_queries=dropped,
                             dropped_reason="; ".join(reasons),
                             parse=outcome)

    def _all_rows(self) -> list[str]:
        return [str(obj.get("doc_id")) for _, obj in iter_jsonl(self.path / "manifest.jsonl")]


def _only(q: Any, ids: set[str]) -> Any:
    from dataclasses import replace

    return replace(q, qrels=tuple((d, g) for d, g in q.qrels if d in ids))


def check_truth(path: Path, doc_id: str, where: Where) -> None:
    """A truth file must exist, be a JSON object for this doc_id, and its blocks (when
    given) must join to its text: a truth that does not match its row is bad input."""
    if not path.is_file():
        raise where.error(f"truth file {path} does not exist")
    try:
        truth = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(path, 0, f"not a JSON truth file: {exc}") from None
    if not isinstance(truth, dict):
        raise InputError(path, 0, "a truth file is one JSON object")
    missing = [k for k in TRUTH_REQUIRED if k not in truth]
    if missing:
        raise InputError(path, 0, f"missing field(s) {', '.join(missing)}")
    if truth["doc_id"] != doc_id:
        raise InputError(path, 0, f"doc_id {truth['doc_id']!r} does not match its manifest "
                                  f"row {doc_id!r} ({where.path}:{where.line})")
    if not isinstance(truth["text"], str):
        raise InputError(path, 0, "text must be a string")
    blocks = truth.get("blocks")
    if blocks:
        joined = "\n\n".join(str(b.get("text", "")) for b in blocks)
        if joined != truth["text"]:
            raise InputError(path, 0, "its blocks joined by blank lines are not its text "
                                      "(the truth does not match itself)")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _cache_params(parser: Parser, f: RawFile) -> dict[str, Any]:
    return {"parser": parser.name, "options": parser.cache_params(), "sha256": f.sha256,
            "type": f.type}


def parse_files(files: Sequence[RawFile], parsers: Mapping[str, Parser], store: ArtifactStore,
                *, workers: int, timeout_s: float) -> list[ParsedDocument]:
    """One record per file (in order): cached parses loaded, the rest parsed in the pool
    (per parser) and stored — except a timeout or a dead worker, which depend on the
    machine and its load and are tried again next run."""
    from bench.cache.store import make_key
    from bench.parsing.pool import ParsePool

    out: list[ParsedDocument | None] = [None] * len(files)
    todo: dict[str, list[int]] = {}
    for i, f in enumerate(files):
        p = parsers[f.type]
        key = make_key(CACHE_STAGE, p.version, _cache_params(p, f), [])
        if store.lookup(CACHE_STAGE, key) is not None:
            try:
                out[i] = _store(store, p, f, None)  # verifies and loads it
                continue
            except _Damaged:  # quarantined by the store: parse it again below
                pass
        todo.setdefault(p.name, []).append(i)
    for name, idx in todo.items():
        parser = parsers[files[idx[0]].type]
        batch = [files[i] for i in idx]

        def done(j: int, doc: ParsedDocument, settled: bool, batch: list[RawFile] = batch,
                 idx: list[int] = idx, parser: Parser = parser) -> None:
            f = batch[j]
            doc = _relative(doc, f)
            out[idx[j]] = _store(store, parser, f, doc) if settled else doc

        ParsePool(parser, workers=workers, timeout_s=timeout_s).run(batch, done)
        log.info("stage %-10s parsed %d files with %s", "parse", len(batch), name)
    assert all(r is not None for r in out)
    return cast(list[ParsedDocument], out)


class _Damaged(Exception):
    """A cached parse failed verification: the file goes back to the pool."""


def _relative(doc: ParsedDocument, f: RawFile) -> ParsedDocument:
    from dataclasses import replace

    return replace(doc, doc_id=f.doc_id, file=f.path.name)


def _store(store: ArtifactStore, parser: Parser, f: RawFile,
           doc: ParsedDocument | None) -> ParsedDocument:
    """The cached record of (file, parser), written from ``doc`` on a miss; ``doc`` None
    reads a cached one (``_Damaged`` if the store found it damaged and would recompute)."""

    def compute(directory: Path) -> None:
        if doc is None:
            raise _Damaged(f.doc_id)
        (directory / "parsed.json").write_text(json.dumps(doc.to_json(), ensure_ascii=False),
                                              encoding="utf-8")

    def load(directory: Path) -> ParsedDocument:
        from dataclasses import replace

        rec = ParsedDocument.from_json(json.loads((directory / "parsed.json").read_text(
            encoding="utf-8")))
        return replace(rec, doc_id=f.doc_id, file=f.path.name)

    value, _key, hit = store.resolve(CACHE_STAGE, version=parser.version,
                                     params=_cache_params(parser, f), upstream=[],
                                     compute=compute, load=load, log_level=logging.DEBUG)
    if hit and doc is None:
        from dataclasses import replace

        return replace(value, cached=True)
    return value
