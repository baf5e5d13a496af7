"""Records and Protocols of the `index` stage.

Build settings are apart from query settings (ann-benchmarks' args vs query_args): a
``VectorIndex`` is configured with BUILD options, ``build`` returns a ``BuiltIndex`` that is
cached on disk, and ``search`` takes QUERY options (efSearch, nprobe, ...) so a sweep over
them reuses one built index.

Adding an index: implement ``VectorIndex`` and ``BuiltIndex`` in a module here, add
``conf/index/<name>.yaml``. Device-specific imports (faiss GPU resources) stay in the module.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class SearchResult:
    """Top-k per query: ``ids`` int64 [n_q, k] (-1 = no result), ``scores`` float32 [n_q, k].
    ``incomplete``: rows whose search a database server did not answer (connection lost:
    ``failed``; statement timeout: ``timeout``), by row; their ids are all -1."""

    ids: np.ndarray
    scores: np.ndarray
    incomplete: Mapping[int, str] = field(default_factory=dict, kw_only=True)

    def by_query(self, query_ids: Sequence[str]) -> dict[str, str]:
        """``incomplete`` keyed by query id (``query_ids``: the ids of the rows searched):
        the carrier every stage downstream joins (``bench.pipeline.statuses.QueryStatuses``).
        A backend sees vectors, not queries, so it reports rows."""
        return {query_ids[r]: st for r, st in self.incomplete.items()}


@dataclass(frozen=True)
class BuildInfo:
    build_s: float
    index_bytes: int
    n_vectors: int
    dim: int


class BuiltIndex(Protocol):
    def search(
        self, queries: np.ndarray, k: int, params: Mapping[str, int | float]
    ) -> SearchResult:
        """Search float32 [n_q, dim] queries; higher score = more similar."""
        ...

    def save(self, directory: Path) -> None: ...


class VectorIndex(Protocol):
    #: True when search returns the exact top-k (the reference for ANN recall)
    exact: bool

    def cache_params(self, n_vectors: int | None = None) -> dict[str, object]:
        """Build options (go into the index artifact's cache key); options derived from the
        corpus size (e.g. an automatic nlist) are resolved when ``n_vectors`` is given."""
        ...

    def query_params(self) -> list[dict[str, int | float]]:
        """The query-time settings to sweep on the built index ([{}] when none)."""
        ...

    def build(self, vectors: np.ndarray) -> tuple[BuiltIndex, BuildInfo]: ...

    def load(self, directory: Path) -> BuiltIndex: ...


@runtime_checkable
class BuildsInDirectory(Protocol):
    """An index whose build writes files of its own into the artifact directory while it
    builds (faiss: the memory math; an on-disk index's inverted lists)."""

    def build_in(self, vectors: np.ndarray, directory: Path) -> tuple[BuiltIndex, BuildInfo]:
        ...


# -------------------------------------------------------------- filtered search (optional)
#
# A capability of the database backends (``bench.index.remote`` and the engines on it), a
# separate protocol rather than a probe: the filter is pushed down into the engine's own
# query (SQL ``WHERE`` / LanceDB ``where`` / a Milvus expression / a Qdrant filter), so what
# is measured is what the engine does with a filter (pre-filter, post-filter, or a planner's
# choice of an exact scan), not a filter applied in Python to its unfiltered top-k.


class FilteredSearch(Protocol):
    def search_where(
        self, queries: np.ndarray, k: int, params: Mapping[str, int | float], *,
        column: str, values: np.ndarray,
    ) -> SearchResult:
        """Top-``k`` of query i among the rows whose integer attribute ``column`` equals
        ``values[i]`` (int64 [n_q]); -1 ids pad a list the engine returned short."""
        ...


@runtime_checkable
class FilteredSearchIn(FilteredSearch, Protocol):
    """A filtered search whose filter is a SET of values per query (SQL ``col = ANY(...)``,
    LanceDB ``col IN (...)``): the pipeline's push-down of a hard filter
    (``bench.filters.pushdown``), where one query may see several classes of documents."""

    def search_where_in(
        self, queries: np.ndarray, k: int, params: Mapping[str, int | float], *,
        column: str, allowed: Sequence[np.ndarray],
    ) -> SearchResult:
        """Top-``k`` of query i among the rows whose integer attribute ``column`` is one of
        ``allowed[i]`` (int64); -1 ids pad a list the engine returned short."""
        ...


@runtime_checkable
class FilterableIndex(Protocol):
    def build_with_attributes(
        self, vectors: np.ndarray, attributes: Mapping[str, np.ndarray]
    ) -> tuple[FilteredSearch, BuildInfo]:
        """Build over ``vectors`` with one integer column per ``attributes`` entry (int32
        [N] each) that ``search_where`` can filter on."""
        ...


def build_key(params: Mapping[str, Any], vectors: np.ndarray,
              attributes: Mapping[str, np.ndarray]) -> str:
    """A database build's content key (the table or dataset it is stored under): its resolved
    build options, the vectors and the attribute columns filters push down, so a table built
    from other vectors or options is never read as this build."""
    h = hashlib.sha256()
    h.update(json.dumps(dict(params), sort_keys=True).encode())
    h.update(str(vectors.shape).encode())
    h.update(np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
    for name in sorted(attributes):
        h.update(name.encode() + b"\x00")
        h.update(np.ascontiguousarray(attributes[name], dtype=np.int32).tobytes())
    return h.hexdigest()


#: an IVF list needs about this many training points (faiss's k-means warns below 39)
MIN_POINTS_PER_LIST = 39


def auto_list_count(n_vectors: int, factor: float = 4.0) -> int:
    """The IVF list count of a database index left on ``auto`` (pgvector ``lists``, Milvus
    ``nlist``): ``factor`` x sqrt(N), at least 1, at most N / MIN_POINTS_PER_LIST."""
    upper = max(1, n_vectors // MIN_POINTS_PER_LIST)
    return int(min(max(round(factor * math.sqrt(n_vectors)), 1), upper))
