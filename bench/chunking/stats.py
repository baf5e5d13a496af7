"""Diagnostics of a ``ChunkTable``: size distribution, traceability and near-duplicates.

``chunk_stats`` checks that every chunk really is ``chunk_text_field(doc)[start:end]`` (a chunker
bug there silently breaks citation metrics). ``near_duplicates`` estimates how much text recurs
across documents: duplicated chunks in different documents make the "right" document of a query
ambiguous and inflate lexical recall.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.chunking.base import ChunkTable, chunk_text_field
from bench.config.build import OptionError
from bench.data.base import Document
from bench.errors import MissingDependencyError


@dataclass(frozen=True)
class ChunkStats:
    """Summary of a chunk table. Token figures are embedder tokens (``n_tokens``); all token
    figures are 0 and ``traceability_pct`` is 100 for an empty table."""

    n_chunks: int
    n_docs: int  # documents in the corpus, chunked or not
    n_docs_without_chunks: int
    chunks_per_doc_mean: float  # n_chunks / n_docs
    chunks_per_doc_max: int
    tokens_min: int
    tokens_p50: float  # linear-interpolated percentiles (numpy's default)
    tokens_p95: float
    tokens_max: int
    tokens_mean: float
    traceability_pct: float  # % of chunks with chunk_text_field(doc)[start:end] == text
    n_empty: int  # chunks whose text is empty or whitespace only


def chunk_stats(table: ChunkTable, documents: Sequence[Document]) -> ChunkStats:
    """Statistics of ``table``, whose ``doc_idx`` index into ``documents``."""
    n = len(table)
    n_docs = len(documents)
    per_doc = np.bincount(np.asarray(table.doc_idx, dtype=np.int64), minlength=n_docs)
    tokens = np.asarray(table.n_tokens, dtype=np.int64)
    traced = _traced(table, documents)
    return ChunkStats(
        n_chunks=n,
        n_docs=n_docs,
        n_docs_without_chunks=int(np.count_nonzero(per_doc[:n_docs] == 0)),
        chunks_per_doc_mean=n / n_docs if n_docs else 0.0,
        chunks_per_doc_max=int(per_doc.max()) if len(per_doc) else 0,
        tokens_min=int(tokens.min()) if n else 0,
        tokens_p50=float(np.percentile(tokens, 50)) if n else 0.0,
        tokens_p95=float(np.percentile(tokens, 95)) if n else 0.0,
        tokens_max=int(tokens.max()) if n else 0,
        tokens_mean=float(tokens.mean()) if n else 0.0,
        traceability_pct=100.0 * traced / n if n else 100.0,
        n_empty=sum(1 for t in table.text if not t.strip()),
    )


#: documents read at a time for the traceability check (a ``DocumentTable`` builds its
#: ``Document`` objects per slice: one slice per block, not one per chunk)
TRACE_BLOCK = 65_536


def _traced(table: ChunkTable, documents: Sequence[Document]) -> int:
    """How many chunks are their document's text at their offsets: each document block is
    read once and its chunks (in document order) checked against it."""
    n_docs = len(documents)
    d = np.asarray(table.doc_idx, dtype=np.int64)
    s = np.asarray(table.start_char, dtype=np.int64)
    e = np.asarray(table.end_char, dtype=np.int64)
    order = np.argsort(d, kind="stable")
    by_doc = d[order]
    traced = 0
    for lo in range(0, n_docs, TRACE_BLOCK):
        hi = min(lo + TRACE_BLOCK, n_docs)
        a, b = (int(x) for x in np.searchsorted(by_doc, [lo, hi]))
        if a == b:
            continue
        block = documents[lo:hi]
        rows = order[a:b]
        r0, r1 = int(rows.min()), int(rows.max())
        # the block's chunks are usually one run of rows: read their texts as one slice
        texts = table.text[r0 : r1 + 1] if r1 - r0 + 1 == len(rows) else None
        for i in rows.tolist():
            if not 0 <= s[i] <= e[i]:
                continue
            source = chunk_text_field(block[d[i] - lo])
            text = texts[i - r0] if texts is not None else table.text[i]
            traced += bool(e[i] <= len(source) and source[s[i]:e[i]] == text)
    return traced


# --------------------------------------------------------------------------- near-duplicates


@dataclass(frozen=True)
class NearDupPair:
    """Two chunks (rows of the table, ``chunk_a < chunk_b``) with estimated Jaccard similarity
    of their word-shingle sets."""

    chunk_a: int
    chunk_b: int
    jaccard: float
    same_doc: bool


@dataclass(frozen=True)
class NearDupReport:
    """Share of chunks with at least one near-duplicate (estimated Jaccard >= ``threshold``).

    Rates are over ``n_chunks`` (all rows, blank ones included, which never match).
    ``examples``: the most similar cross-document pairs first, then same-document ones.
    """

    n_chunks: int
    threshold: float
    cross_doc_rate: float  # has a near-duplicate in ANOTHER document
    within_doc_rate: float  # has a near-duplicate elsewhere in the SAME document
    n_cross_doc: int
    n_within_doc: int
    examples: tuple[NearDupPair, ...]


_WORD = re.compile(r"\w+")
#: chunks shingled and signed at a time by ``near_duplicates``
SIGN_BATCH = 10_000


def shingles(text: str, size: int) -> list[bytes]:
    """Lower-cased word ``size``-grams as bytes; one shingle of all words for shorter texts."""
    words = _WORD.findall(text.lower())
    if len(words) <= size:
        return [" ".join(words).encode()] if words else []
    grams = zip(*(words[k:] for k in range(size)), strict=False)
    return [" ".join(g).encode() for g in grams]


def _band_members(sig: np.ndarray, rows: np.ndarray, start: int, end: int
                  ) -> tuple[np.ndarray, list[np.ndarray]]:
    """One LSH band over the signed ``rows``: per row its bucket (-1: alone in it) and each
    shared bucket's rows, ascending. A bucket is the band's exact words (``MinHashLSH``'s
    key is the band's bytes), found by sorting the rows' band slices, not in a dict."""
    band = np.ascontiguousarray(sig[rows, start:end])
    keys = band.view(np.dtype((np.void, band.dtype.itemsize * (end - start)))).ravel()
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    new = np.ones(len(sk), dtype=bool)
    new[1:] = sk[1:] != sk[:-1]
    starts = np.flatnonzero(new)
    sizes = np.diff(np.append(starts, len(sk)))
    bucket = np.full(len(rows), -1, dtype=np.int64)
    members: list[np.ndarray] = []
    for s0, size in zip(starts[sizes > 1].tolist(), sizes[sizes > 1].tolist(), strict=True):
        idx = order[s0:s0 + size]  # stable: ascending row positions within the bucket
        bucket[idx] = len(members)
        members.append(rows[idx])
    return bucket, members


def near_duplicates(
    table: ChunkTable,
    *,
    threshold: float = 0.9,
    num_perm: int = 128,
    shingle: int = 5,
    seed: int = 1,
    max_examples: int = 5,
    scratch: Path | None = None,
) -> NearDupReport:
    """Find chunks with a near-duplicate via MinHash LSH over word ``shingle``-grams.

    LSH candidates are confirmed with the MinHash Jaccard estimate (>= ``threshold``), so the
    rates count estimated, not exact, near-duplicates. The bands are ``MinHashLSH``'s (its
    number and width for ``threshold`` and ``num_perm``); the candidates of a chunk are the
    chunks sharing one of its bands exactly, as ``MinHashLSH.query`` returns them (in its
    order, so ties between equally close chunks break as there), found by sorting each band
    instead of an index of every chunk in Python dicts. ``scratch``: a folder for the
    signature matrix (a memory map, num_perm words a chunk) instead of memory. Needs
    ``datasketch`` (extra ``cpu``). Bad option values raise ``OptionError``.
    """
    if not 0.0 < threshold <= 1.0:
        raise OptionError("threshold", f"must be in (0, 1], got {threshold}")
    if num_perm < 2:
        raise OptionError("num_perm", f"must be >= 2, got {num_perm}")
    if shingle < 1:
        raise OptionError("shingle", f"must be >= 1 word, got {shingle}")
    try:
        from datasketch import MinHash, MinHashLSH
    except ImportError:
        raise MissingDependencyError("datasketch", "cpu", "near-duplicate detection") from None

    n = len(table)
    ranges = MinHashLSH(threshold=threshold, num_perm=num_perm).hashranges  # its bands
    # The corpus is signed batch by batch: its shingles and MinHash objects live for one
    # batch, only the signature matrix for all (at 1M chunks every shingle list at once was
    # ~4 GB of the pass's 6.6 GB peak; datasketch's dict index of every band took it from
    # 1.6 to 3.5 GB)
    dtype = MinHash(num_perm=num_perm, seed=seed).hashvalues.dtype
    sig = (np.lib.format.open_memmap(scratch / "signatures.npy", mode="w+", dtype=dtype,
                                     shape=(n, num_perm)) if scratch is not None and n
           else np.zeros((n, num_perm), dtype=dtype))
    signed = np.zeros(n, dtype=bool)
    for b0 in range(0, n, SIGN_BATCH):
        grams = [shingles(t, shingle) for t in table.text[b0:b0 + SIGN_BATCH]]
        rows = [b0 + k for k, g in enumerate(grams) if g]
        hashes = MinHash.bulk((g for g in grams if g), num_perm=num_perm, seed=seed)
        for i, mh in zip(rows, hashes, strict=True):
            sig[i] = mh.hashvalues
        signed[rows] = True
        del grams, hashes
    live = np.flatnonzero(signed)
    bands = [_band_members(sig, live, s0, e0) for s0, e0 in ranges]
    doc = np.asarray(table.doc_idx)
    cross = np.zeros(n, dtype=bool)
    within = np.zeros(n, dtype=bool)
    found: list[NearDupPair] = []
    shared = np.zeros(len(live), dtype=bool)
    for bucket, _ in bands:
        shared |= bucket >= 0
    # the buckets as MinHashLSH holds them: sets filled in insertion (row) order, so a
    # query's candidates iterate as its do
    sets: list[dict[int, set[int]]] = [{} for _ in bands]
    for at in np.flatnonzero(shared).tolist():  # alone in every band: no candidate
        i = int(live[at])
        candidates: set[int] = set()
        for k, (bucket, members) in enumerate(bands):
            g = int(bucket[at])
            if g >= 0:
                if g not in sets[k]:
                    sets[k][g] = set(members[g].tolist())
                for key in sets[k][g]:
                    candidates.add(key)
        cand = np.fromiter((j for j in candidates if j != i), dtype=np.int64)
        if len(cand) == 0:
            continue
        jac = (sig[cand] == sig[i]).mean(axis=1)
        hit = jac >= threshold
        same = doc[cand] == doc[i]
        cross[i] = bool(np.any(hit & ~same))
        within[i] = bool(np.any(hit & same))
        # Keep each chunk's best match per kind with a later chunk: pairs are found once.
        for kind in (~same, same):
            sel = np.flatnonzero(hit & kind & (cand > i))
            if len(sel):
                k = sel[np.argmax(jac[sel])]
                found.append(NearDupPair(i, int(cand[k]), float(jac[k]), bool(same[k])))
    del sig
    found.sort(key=lambda p: (p.same_doc, -p.jaccard, p.chunk_a, p.chunk_b))
    return NearDupReport(
        n_chunks=n,
        threshold=threshold,
        cross_doc_rate=float(cross.mean()) if n else 0.0,
        within_doc_rate=float(within.mean()) if n else 0.0,
        n_cross_doc=int(cross.sum()),
        n_within_doc=int(within.sum()),
        examples=tuple(found[:max_examples]),
    )
