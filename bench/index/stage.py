"""Plan operations of the `index` stage: build once (cached), and the exact top-k reference."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.config.build import OptionError
from bench.errors import ConfigError
from bench.index.base import BuildInfo, BuiltIndex, SearchResult, VectorIndex
from bench.telemetry.base import TimingLog

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
class IndexOp:
    """Document Embeddings -> a built index. Keyed on the BUILD options only; query-time
    settings (efSearch, nprobe) are swept on the one built index. Options derived from the
    corpus size (an automatic nlist) are keyed as "auto": the size is fixed by the upstream
    embeddings key, and the resolved value is recorded in build.json."""

    index: VectorIndex
    device: str
    stage: str = "index"
    version: str = "2"

    def params(self) -> Mapping[str, Any]:
        return {"index": self.index.cache_params(), "kind": type(self.index).__name__}

    def write(self, inputs: Sequence[Any], directory: Path, timing: TimingLog) -> None:
        (emb,) = inputs
        try:
            built, info = self.index.build(np.asarray(emb.vectors))
        except OptionError as exc:  # a build option that only fails against real vectors
            raise ConfigError(f"index.{exc.option}", exc.message) from None
        built.save(directory)
        (directory / "build.json").write_text(json.dumps(info.__dict__))
        timing.add("total", info.n_vectors, info.build_s * 1000.0)

    def load(self, directory: Path, inputs: Sequence[Any]) -> IndexArtifact:
        info = BuildInfo(**json.loads((directory / "build.json").read_text()))
        return IndexArtifact(self.index.load(directory), info)


@dataclass(frozen=True)
class ExactTopKOp:
    """(document Embeddings, query Embeddings) -> exact chunk-level top-k for every query:
    the reference of ANN recall, computed once per dataset x embedder."""

    device: str
    k: int = ANN_COLUMNS
    stage: str = "exact_topk"
    version: str = "2"

    def params(self) -> Mapping[str, Any]:
        return {"k": self.k}

    def write(self, inputs: Sequence[Any], directory: Path, timing: TimingLog) -> None:
        from bench.index.exact import exact_topk

        docs, queries = inputs
        with timing.measure("total", len(queries.vectors)):
            res = exact_topk(np.asarray(docs.vectors), np.asarray(queries.vectors),
                             min(self.k, len(docs.vectors)))
        save_search(res, directory, "exact")

    def load(self, directory: Path, inputs: Sequence[Any]) -> SearchResult:
        return load_search(directory, "exact")
