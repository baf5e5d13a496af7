"""Plan operations of the `index` stage: build once (cached), and the exact top-k reference."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bench.config.build import OptionError
from bench.errors import ConfigError
from bench.index.base import (
    BuildInfo,
    BuildsInDirectory,
    BuiltIndex,
    SearchResult,
    VectorIndex,
)
from bench.pipeline.lanes import PlanState, params_label
from bench.pipeline.node import Node, OpTraits, Phase
from bench.telemetry.base import TimingLog

if TYPE_CHECKING:
    from bench.embedding.stage import Embeddings

#: chunk-level columns kept per query for ANN recall (recall@k needs k <= this)
ANN_COLUMNS = 100


@dataclass(frozen=True)
class IndexArtifact:
    built: BuiltIndex
    info: BuildInfo


def save_search(result: SearchResult, directory: Path, prefix: str) -> None:
    np.save(directory / f"{prefix}_ids.npy", result.ids, allow_pickle=False)
    np.save(directory / f"{prefix}_scores.npy", result.scores, allow_pickle=False)


def load_search(directory: Path, prefix: str) -> SearchResult:
    return SearchResult(ids=np.load(directory / f"{prefix}_ids.npy", allow_pickle=False),
                        scores=np.load(directory / f"{prefix}_scores.npy", allow_pickle=False))


@dataclass(frozen=True)
class IndexInputs:
    embeddings: Embeddings


@dataclass(frozen=True)
class IndexOp(OpTraits):
    """Document Embeddings -> a built index. Keyed on the BUILD options only; query-time
    settings (efSearch, nprobe) are swept on the one built index. Options derived from the
    corpus size (an automatic nlist) are keyed as "auto": the size is fixed by the upstream
    embeddings key, and the resolved value is recorded in build.json."""

    index: VectorIndex
    device: str
    stage: str = "index"
    version: str = "2"
    phase: ClassVar[Phase] = Phase.INDEX
    Inputs: ClassVar[type] = IndexInputs

    def params(self) -> Mapping[str, Any]:
        return {"index": self.index.cache_params(), "kind": type(self.index).__name__}

    def write(self, inputs: IndexInputs, directory: Path, timing: TimingLog) -> None:
        vectors = np.asarray(inputs.embeddings.vectors)
        try:
            if isinstance(self.index, BuildsInDirectory):
                built, info = self.index.build_in(vectors, directory)
            else:
                built, info = self.index.build(vectors)
        except OptionError as exc:  # a build option that only fails against real vectors
            raise ConfigError(f"index.{exc.option}", exc.message) from None
        built.save(directory)
        (directory / "build.json").write_text(json.dumps(info.__dict__))
        timing.add("total", info.n_vectors, info.build_s * 1000.0)

    def load(self, directory: Path, inputs: IndexInputs) -> IndexArtifact:
        info = BuildInfo(**json.loads((directory / "build.json").read_text()))
        return IndexArtifact(self.index.load(directory), info)


@dataclass(frozen=True)
class ExactInputs:
    docs: Embeddings
    queries: Embeddings


@dataclass(frozen=True)
class ExactTopKOp(OpTraits):
    """(document Embeddings, query Embeddings) -> exact chunk-level top-k for every query:
    the reference of ANN recall, computed once per dataset x embedder."""

    device: str
    k: int = ANN_COLUMNS
    stage: str = "exact_topk"
    version: str = "2"
    #: the reference of ANN recall: evaluation work, never on a request's path
    phase: ClassVar[Phase] = Phase.OFFLINE
    Inputs: ClassVar[type] = ExactInputs

    def params(self) -> Mapping[str, Any]:
        return {"k": self.k}

    def write(self, inputs: ExactInputs, directory: Path, timing: TimingLog) -> None:
        from bench.index.exact import exact_topk

        docs, queries = inputs.docs, inputs.queries
        with timing.measure("total", len(queries.vectors)):
            res = exact_topk(np.asarray(docs.vectors), np.asarray(queries.vectors),
                             min(self.k, len(docs.vectors)))
        save_search(res, directory, "exact")

    def load(self, directory: Path, inputs: ExactInputs) -> SearchResult:
        return load_search(directory, "exact")


def expand(s: PlanState) -> PlanState:
    """The run's index over the document vectors, built once; for an approximate index also
    the exact top-k reference of ANN recall."""
    index, device = s.comps.index, s.device
    docs = s.node("embed_docs")
    built = Node.of(IndexOp(index, device),
                    f"{type(index).__name__} {params_label(index.cache_params())}",
                    embeddings=docs)
    exact = None if index.exact else Node.of(ExactTopKOp(device), "exact top-k reference",
                                             docs=docs, queries=s.node("embed_queries"))
    return s.with_nodes(index=built, exact=exact)
