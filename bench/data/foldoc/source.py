"""The built benchmark folder: write it (atomically), check it is current, read it back.

In: ``Built`` records, the ``Source`` .deb and ``BuildOptions`` (``write_benchmark``), or a
folder path (``FoldocDataset``). Out: ``DIR/{corpus,queries}.jsonl`` + ``manifest.json`` on
disk; ``FoldocDataset(path=DIR).load()`` returns a ``Dataset``, optionally subsampled.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.data.base import CATEGORIES, Dataset
from bench.data.categories import with_categories
from bench.data.foldoc.benchmark import BUILDER_VERSION, BuildOptions, Built
from bench.data.foldoc.benchmark_v2 import (
    BUILDER_VERSION_V2,
    CATEGORIES_V2,
    BuildOptionsV2,
    BuiltV2,
)
from bench.data.foldoc.benchmark_v3 import BUILDER_VERSION_V3, CATEGORIES_V3, BuildOptionsV3
from bench.data.foldoc.deb import Source, _sha256
from bench.data.foldoc.text import stable_hash
from bench.data.golden import GoldenDataset, write_golden
from bench.data.jsonl import loads_strict, read_text
from bench.errors import BenchError, ConfigError, InputError

# the logger name of the single-module builder, so log lines read as before the split
log = logging.getLogger("bench.data.foldoc")

BUILD_HINT = ("build it with `make data` (python -m bench.data.foldoc build{version} "
              "--out {path})")


def build_hint(path: Path) -> str:
    """How to build the folder ``make data`` would put at ``path``: ``foldoc_v1`` and
    ``foldoc_v2`` hold the older versions, any other folder the default (version 3)."""
    version = {"foldoc_v1": " --version 1", "foldoc_v2": " --version 2"}.get(path.name, "")
    return BUILD_HINT.format(version=version, path=path)


AnyOptions = BuildOptions | BuildOptionsV2  # BuildOptionsV3 extends BuildOptionsV2


@dataclass(frozen=True)
class Version:
    """What a builder version writes into its manifest."""

    name: str  # the dataset name runs record ("foldoc" is version 1)
    builder_version: str
    categories: tuple[str, ...]


def version_of(opts: AnyOptions) -> Version:
    """The version an options type builds (``BuildOptionsV3`` extends ``BuildOptionsV2``)."""
    if isinstance(opts, BuildOptionsV3):
        return Version("foldoc_v3", BUILDER_VERSION_V3, CATEGORIES_V3)
    if isinstance(opts, BuildOptionsV2):
        return Version("foldoc_v2", BUILDER_VERSION_V2, CATEGORIES_V2)
    return Version("foldoc", BUILDER_VERSION, CATEGORIES)


def manifest_is_current(out: Path, opts: AnyOptions) -> bool:
    """Whether ``out`` holds a build of this builder version with these options."""
    try:
        manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    version = version_of(opts).builder_version
    return (manifest.get("builder_version") == version
            and manifest.get("options") == dataclasses.asdict(opts))


@dataclass(frozen=True)
class Extras:
    """What a version-2 or -3 build adds to the folder: its second source and its side files."""

    sources: dict[str, object]  # name -> {deb, package, version, sha256, license}
    files: dict[str, str]  # file name -> content (JSONL / TSV)


def write_benchmark(out: Path, built: Built | BuiltV2, source: Source,
                    opts: AnyOptions, n_entries: int,
                    extras: Extras | None = None) -> dict[str, object]:
    """Write corpus/queries/manifest into a temp folder, then swap it in place of ``out``.

    Without ``extras`` (version 1) the manifest is exactly the version-1 one.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    write_golden(built.documents, built.queries, corpus=tmp / "corpus.jsonl",
                 queries_path=tmp / "queries.jsonl")
    version = version_of(opts)
    names = ["corpus.jsonl", "queries.jsonl"]
    for name, content in (extras.files.items() if extras else ()):
        (tmp / name).write_text(content, encoding="utf-8")
        names.append(name)
    by_cat = Counter(q.category for q in built.queries)
    manifest: dict[str, object] = {
        "name": version.name,
        "builder_version": version.builder_version,
        "options": dataclasses.asdict(opts),
        "source": {**dataclasses.asdict(source),
                   "license": "GNU FDL 1.1 or later (FOLDOC, editor Denis Howe)"},
        **({"extra_sources": extras.sources} if extras else {}),
        "counts": {
            "entries_parsed": n_entries,
            "entries_qualifying": built.n_qualifying,
            "documents": len(built.documents),
            "documents_by_roles": {"+".join(r) or "public": n for r, n in sorted(
                Counter(d.allowed_roles for d in built.documents).items())},
            "queries": len(built.queries),
            "queries_by_category": {c: by_cat.get(c, 0) for c in version.categories},
        },
        "fingerprint": Dataset("foldoc", built.documents, built.queries).fingerprint,
        "files": {name: _sha256(tmp / name) for name in names},
    }
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    if out.exists():
        out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)
    return manifest


class FoldocDataset:
    """Reads a built FOLDOC benchmark folder (see ``cli.main``), optionally subsampled.

    ``max_queries`` keeps a seeded, category-stratified sample of queries; ``max_docs`` keeps
    every gold document of the kept queries plus seeded filler documents up to the limit.
    ``categories``: a JSONL mapping ``{"query_id", "category"}`` whose categories replace
    FOLDOC's own, applied before any subsampling (which then stratifies by them).
    """

    def __init__(self, *, path: str, max_docs: int | None = None,
                 max_queries: int | None = None, categories: str | None = None) -> None:
        for key, value in (("max_docs", max_docs), ("max_queries", max_queries)):
            if value is not None and value < 1:
                raise ConfigError(f"dataset.{key}", f"must be >= 1 or null, got {value}")
        self.path = path
        self.max_docs = max_docs
        self.max_queries = max_queries
        self.categories = categories

    def load(self) -> Dataset:
        root = Path(self.path)
        if not (root / "manifest.json").is_file():
            raise BenchError(f"FOLDOC benchmark not found at {root}: "
                             + build_hint(root))
        manifest = _read_manifest(root / "manifest.json")
        ds = GoldenDataset(corpus=str(root / "corpus.jsonl"),
                           queries=str(root / "queries.jsonl")).load()
        if ds.fingerprint != manifest.get("fingerprint"):
            log.warning("foldoc: %s was modified after it was built (fingerprint differs from "
                        "manifest.json)", root)
        ds = subsample(with_categories(ds, self.categories), max_docs=self.max_docs,
                       max_queries=self.max_queries)
        base = str(manifest.get("name", "foldoc"))  # "foldoc" (version 1), "foldoc_v2", "foldoc_v3"
        name = base if (self.max_docs, self.max_queries) == (None, None) else (
            f"{base}[docs={len(ds.documents)},queries={len(ds.queries)}]")
        log.info("foldoc: loaded %d documents, %d queries from %s", len(ds.documents),
                 len(ds.queries), root)
        return dataclasses.replace(ds, name=name)


def _read_manifest(path: Path) -> dict[str, object]:
    """manifest.json as a dict; a damaged file names itself (and the line) instead of a
    traceback."""
    text = read_text(path)
    try:
        manifest = loads_strict(text)
    except json.JSONDecodeError as exc:
        raise InputError(path, exc.lineno, f"malformed JSON: {exc.msg} (column {exc.colno}); "
                         + build_hint(path.parent)) from None
    except ValueError as exc:
        raise InputError(path, 0, f"malformed JSON: {exc}") from None
    if not isinstance(manifest, dict):
        raise InputError(path, 1, f"expected a JSON object, got {type(manifest).__name__}")
    return manifest


def subsample(ds: Dataset, *, max_docs: int | None, max_queries: int | None,
              seed: int = 0) -> Dataset:
    """Seeded subsample keeping the category mix and every gold doc of the kept queries."""
    queries = ds.queries
    if max_queries is not None and max_queries < len(queries):
        # round robin over categories keeps their shares even; imported here because
        # bench.data.subset imports this package (for stable_hash)
        from bench.data.subset import stratified_ids

        keep = stratified_ids(queries, max_queries, seed, allocation="equal")
        queries = tuple(q for q in queries if q.query_id in keep)
    documents = ds.documents
    if max_docs is not None and max_docs < len(documents):
        gold = {doc_id for q in queries for doc_id, _ in q.qrels}
        if len(gold) > max_docs:
            log.warning("foldoc: keeping all %d gold documents of the kept queries "
                        "(more than max_docs=%d)", len(gold), max_docs)
        filler = sorted((d.doc_id for d in documents if d.doc_id not in gold),
                        key=lambda i: stable_hash(seed, "d", i))
        keep_docs = gold | set(filler[: max(0, max_docs - len(gold))])
        documents = tuple(d for d in documents if d.doc_id in keep_docs)
    if queries is ds.queries and documents is ds.documents:
        return ds
    return Dataset(name=ds.name, documents=documents, queries=queries)
