"""BM25 over chunk texts with bm25s (eager sparse scoring, numpy only).

Retrieved set: a chunk is retrieved for a query only if it shares at least one (stemmed,
non-stop) term with it, as in Lucene. bm25s itself returns ``k`` rows whatever the scores, so
chunks without a matching term would otherwise fill the list with arbitrary zero-score rows and
earn RRF credit; here those slots stay empty (-1). Within a row, equal scores are ordered by
chunk row ascending so results do not depend on the selection algorithm.

Storage: bm25s's own ``save``/``load`` (sparse matrix as three ``.npy`` arrays written with
``allow_pickle=False``, vocabulary and parameters as JSON) plus ``bench_lexical.json`` with the
build options, checked on load so a directory is never read with other tokenisation settings.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from bench.config.build import OptionError
from bench.errors import MissingDependencyError
from bench.index.base import SearchResult
from bench.retrieval.base import Hits, fold_chunks

#: term-frequency / idf variants bm25s implements
METHODS = ("robertson", "lucene", "atire", "bm25l", "bm25+")
META_FILE = "bench_lexical.json"

Tokenize = Callable[[list[str]], list[list[str]]]


def _bm25s() -> ModuleType:
    try:
        import bm25s
    except ImportError:
        raise MissingDependencyError("bm25s", "cpu", "the BM25 lexical index") from None
    return bm25s


def _stemmer(language: str) -> Any:
    """A PyStemmer ``Stemmer`` for ``language`` (bm25s calls its ``stemWords``)."""
    try:
        import Stemmer
    except ImportError:
        raise MissingDependencyError(
            "PyStemmer", "stemmer", "BM25 stemming (lexical.stemmer)"
        ) from None
    algorithms = sorted(Stemmer.algorithms())
    if language not in algorithms:
        raise OptionError("stemmer", f"unknown language {language!r}; one of {algorithms}")
    return Stemmer.Stemmer(language)


class BuiltBM25:
    """A built (or loaded) bm25s index plus the tokeniser it was built with."""

    def __init__(self, model: Any, tokenize: Tokenize, meta: dict[str, object]) -> None:
        self._model = model
        self._tokenize = tokenize
        self._meta = meta
        self.n_chunks = int(model.scores["num_docs"])

    def search(self, queries: Sequence[str], k: int) -> SearchResult:
        """Top-``k`` chunk rows per query (-1 / -inf where fewer chunks match a term)."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        n_q = len(queries)
        ids = np.full((n_q, k), -1, dtype=np.int64)
        scores = np.full((n_q, k), -np.inf, dtype=np.float32)
        vocab: dict[str, int] = self._model.vocab_dict
        indices = self._model.scores["indices"]
        indptr = self._model.scores["indptr"]
        # the vocabulary holds bm25s's "" placeholder, which has no column in the matrix
        n_terms = len(indptr) - 1
        tokens = self._tokenize(list(queries))
        for i, toks in enumerate(tqdm(tokens, desc="bm25 search", unit="q", leave=False)):
            # repeated query terms stay repeated: they weigh twice, as in Lucene and bm25s
            term_ids = [vocab[t] for t in toks if t in vocab and vocab[t] < n_terms]
            if not term_ids:
                continue
            postings = [indices[indptr[t] : indptr[t + 1]] for t in set(term_ids)]
            cand = np.unique(np.concatenate(postings)).astype(np.int64)
            if cand.size == 0:
                continue
            s = np.asarray(self._model.get_scores_from_ids(term_ids), dtype=np.float32)[cand]
            if cand.size > k:
                # cheap cut before the full sort; ">=" keeps every tie at the k-th score so
                # the row-ascending tie order below decides who stays
                kth = np.partition(s, cand.size - k)[cand.size - k]
                keep = s >= kth
                cand, s = cand[keep], s[keep]
            order = np.lexsort((cand, -s))[:k]
            ids[i, : len(order)] = cand[order]
            scores[i, : len(order)] = s[order]
        return SearchResult(ids=ids, scores=scores)

    # -- weighted queries (query expansion: bench.rewrite.rm3) ---------------------------
    def analyze(self, texts: Sequence[str]) -> list[list[str]]:
        """The index's own tokens of ``texts`` (lower-cased, stop words out, stemmed)."""
        return self._tokenize(list(texts))

    def doc_freq(self, terms: Sequence[str]) -> np.ndarray:
        """int64 number of indexed chunks holding each term (0 for a term not indexed)."""
        vocab: dict[str, int] = self._model.vocab_dict
        indptr = self._model.scores["indptr"]
        n_terms = len(indptr) - 1
        out = np.zeros(len(terms), dtype=np.int64)
        for i, t in enumerate(terms):
            tid = vocab.get(t)
            if tid is not None and tid < n_terms:
                out[i] = int(indptr[tid + 1] - indptr[tid])
        return out

    def search_weighted(self, queries: Sequence[Sequence[tuple[str, float]]], k: int
                        ) -> SearchResult:
        """Top-``k`` chunk rows per weighted query: score(chunk) = sum over the query's
        (term, weight) of weight x the term's BM25 score in the chunk (Lucene's boosted
        SHOULD clauses: a ``BoostQuery`` multiplies its clause's score). Terms are index
        tokens (``analyze``); a chunk is retrieved when it holds a term of positive weight.
        Same row layout and tie order as ``search``."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        ids = np.full((len(queries), k), -1, dtype=np.int64)
        scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
        vocab: dict[str, int] = self._model.vocab_dict
        data, indices = self._model.scores["data"], self._model.scores["indices"]
        indptr = self._model.scores["indptr"]
        n_terms = len(indptr) - 1
        for i, terms in enumerate(queries):
            acc = np.zeros(self.n_chunks, dtype=np.float64)
            hit = np.zeros(self.n_chunks, dtype=bool)
            for term, weight in terms:
                tid = vocab.get(term)
                if tid is None or tid >= n_terms or weight <= 0:
                    continue
                rows = indices[indptr[tid]: indptr[tid + 1]]
                acc[rows] += float(weight) * data[indptr[tid]: indptr[tid + 1]]
                hit[rows] = True
            cand = np.flatnonzero(hit).astype(np.int64)
            if cand.size == 0:
                continue
            s = acc[cand].astype(np.float32)
            order = np.lexsort((cand, -s))[:k]
            ids[i, : len(order)] = cand[order]
            scores[i, : len(order)] = s[order]
        return SearchResult(ids=ids, scores=scores)

    def save(self, directory: Path) -> None:
        """bm25s's JSON + ``.npy`` files (no pickle) and the build options, under ``directory``."""
        directory = Path(directory)
        self._model.save(directory, allow_pickle=False, show_progress=False)
        (directory / META_FILE).write_text(json.dumps(self._meta, indent=2, sort_keys=True))


class BM25Index:
    """BM25 lexical index over chunk texts (bm25s).

    Build options: ``k1`` (term-frequency saturation, >= 0), ``b`` (length normalisation,
    in [0, 1]), ``method`` (one of ``METHODS``; lucene is Lucene/Elasticsearch's weighting),
    ``stopwords`` (a bm25s stop-word list name such as "en", or null for none), ``stemmer``
    (a PyStemmer language such as "english", or null; needs the PyStemmer package).
    Query options, as in ``bench.retrieval.dense.DenseRetriever``: ``k`` documents kept per
    query, ``chunk_depth`` chunks fetched before folding into documents (null: 3 * k, capped
    at the number of chunks).
    """

    def __init__(
        self,
        *,
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
        stopwords: str | None = "en",
        stemmer: str | None = None,
        k: int = 100,
        chunk_depth: int | None = None,
    ) -> None:
        if not k1 >= 0:
            raise OptionError("k1", f"must be >= 0, got {k1}")
        if not 0 <= b <= 1:
            raise OptionError("b", f"must be in [0, 1], got {b}")
        if method not in METHODS:
            raise OptionError("method", f"must be one of {', '.join(METHODS)}, got {method!r}")
        if k < 1:
            raise OptionError("k", f"must be >= 1, got {k}")
        if chunk_depth is not None and chunk_depth < k:
            raise OptionError("chunk_depth", f"must be >= k={k}, got {chunk_depth}")
        bm25s = _bm25s()
        if stopwords is not None:
            try:  # bm25s resolves list names only while tokenising: fail at config time instead
                bm25s.tokenize([], stopwords=stopwords, return_ids=False, show_progress=False)
            except ValueError:
                raise OptionError(
                    "stopwords", f"unknown stop-word list {stopwords!r} (e.g. en, de, fr, or null)"
                ) from None
        self._stem = _stemmer(stemmer) if stemmer is not None else None
        self.k1 = float(k1)
        self.b = float(b)
        self.method = method
        self.stopwords = stopwords
        self.stemmer = stemmer
        self.k = k
        self.chunk_depth = chunk_depth

    def cache_params(self) -> dict[str, object]:
        # k / chunk_depth are query settings: one built index serves every depth. The bm25s
        # version is keyed because its weighting code decides every score.
        return {
            "k1": self.k1,
            "b": self.b,
            "method": self.method,
            "stopwords": self.stopwords,
            "stemmer": self.stemmer,
            "bm25s": _bm25s().__version__,
        }

    def search_params(self) -> dict[str, object]:
        return {"k": self.k, "chunk_depth": self.chunk_depth}

    def depth(self, n_chunks: int) -> int:
        """Chunks fetched per query: ``chunk_depth`` (or 3 * k) capped at ``n_chunks``."""
        return min(n_chunks, self.chunk_depth if self.chunk_depth is not None else 3 * self.k)

    def fold(self, result: SearchResult, chunk_doc: np.ndarray, id_key: np.ndarray) -> Hits:
        """Chunk rows -> top-``k`` documents (a document ranks at its best chunk)."""
        return fold_chunks(result, chunk_doc, id_key, k=self.k)

    def _tokenize(self, texts: list[str]) -> list[list[str]]:
        # one tokeniser for chunks and queries: lower-case, \w\w+ tokens, stop words, stems
        tokens: list[list[str]] = _bm25s().tokenize(
            texts,
            stopwords=self.stopwords,
            stemmer=self._stem,
            return_ids=False,
            show_progress=False,
        )
        return tokens

    def build(self, texts: Sequence[str]) -> BuiltBM25:
        """Index chunk texts (row i = chunk i); scores are precomputed (bm25s is eager)."""
        if not texts:
            raise ValueError("cannot build a BM25 index over zero chunks")
        model = _bm25s().BM25(k1=self.k1, b=self.b, method=self.method, backend="numpy")
        model.index(self._tokenize(list(texts)), show_progress=False)
        return BuiltBM25(model, self._tokenize, self.cache_params())

    def load(self, directory: Path) -> BuiltBM25:
        """Read what ``BuiltBM25.save`` wrote; the build options must equal this index's."""
        directory = Path(directory)
        meta = json.loads((directory / META_FILE).read_text())
        if meta != self.cache_params():
            raise ValueError(
                f"{directory} holds a BM25 index built with {meta}, not {self.cache_params()}"
            )
        model = _bm25s().BM25.load(directory, mmap=False, allow_pickle=False, load_corpus=False)
        return BuiltBM25(model, self._tokenize, meta)
