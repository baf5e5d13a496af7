"""The default benchmark: a RAG benchmark derived from FOLDOC (Debian package ``dict-foldoc``).

Nothing of FOLDOC is committed: set-up runs ``python -m bench.data.foldoc build --out DIR``
(``make data``), which fetches the .debs (dict-foldoc; wordnet-base from version 2 on),
parses them and writes

    DIR/corpus.jsonl    one Document per entry (golden corpus format, see ``golden.py``)
    DIR/queries.jsonl   golden queries in the version's categories (``CATEGORIES``: version 1;
                        ``benchmark_v2.CATEGORIES_V2``; ``benchmark_v3.CATEGORIES_V3``)
    DIR/manifest.json   source .debs (name, version, sha256), options, counts, fingerprint

``--version 3`` (the default, ``dataset=foldoc``) is version 2 plus ``semantic_multi_doc``;
``--version 2`` and ``--version 1`` rebuild the older versions byte for byte.

The build is deterministic: every choice is keyed by sha256(seed, doc id), so the same .deb
and options give byte-identical files and the same ``Dataset.fingerprint``.
``FoldocDataset(path=DIR).load()`` reads the folder back (optionally subsampled).

Modules, in pipeline order: ``deb`` (fetch and unpack the .deb), ``dictd`` (parse the dictd
files into ``Entry``), ``text`` (sentence and hash helpers), ``wordnet`` (WordNet senses),
``benchmark`` / ``benchmark_v2`` / ``benchmark_v3`` (entries -> documents + queries),
``source`` (write / read the folder, ``FoldocDataset``) and ``cli`` (the ``build`` command).
The names below are re-exported so ``bench.data.foldoc.X`` keeps working.
"""

from bench.data.foldoc.benchmark import BUILDER_VERSION, BuildOptions, Built, build_benchmark
from bench.data.foldoc.cli import build, main
from bench.data.foldoc.deb import (
    DICT_MEMBER,
    INDEX_MEMBER,
    PACKAGE,
    Source,
    describe_deb,
    extract_dictd,
    fetch_deb,
)
from bench.data.foldoc.dictd import Entry, b64_number, parse_entry, read_dictd
from bench.data.foldoc.source import (
    BUILD_HINT,
    FoldocDataset,
    manifest_is_current,
    subsample,
    write_benchmark,
)
from bench.data.foldoc.text import (
    as_claim,
    lead_sentence,
    sentences,
    slug,
    stable_hash,
    unit_hash,
)

__all__ = [
    "BUILDER_VERSION",
    "BUILD_HINT",
    "DICT_MEMBER",
    "INDEX_MEMBER",
    "PACKAGE",
    "BuildOptions",
    "Built",
    "Entry",
    "FoldocDataset",
    "Source",
    "as_claim",
    "b64_number",
    "build",
    "build_benchmark",
    "describe_deb",
    "extract_dictd",
    "fetch_deb",
    "lead_sentence",
    "main",
    "manifest_is_current",
    "parse_entry",
    "read_dictd",
    "sentences",
    "slug",
    "stable_hash",
    "subsample",
    "unit_hash",
    "write_benchmark",
]
