"""Plan operation of the `embedding` stage: texts -> a memory-mapped .npy of vectors."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.chunking.base import ChunkTable
from bench.data.base import Dataset
from bench.embedding.base import Embedder, EmbeddingStats
from bench.telemetry.base import TimingLog


@dataclass(frozen=True)
class Embeddings:
    vectors: np.ndarray  # float32 [n, dim], memory-mapped
    stats: EmbeddingStats  # throughput of the pass that computed them


@dataclass(frozen=True)
class EmbedOp:
    """Chunks (``kind="document"``) or the dataset's queries (``kind="query"``) -> vectors,
    streamed into a memmap so they are never all in RAM at once."""

    embedder: Embedder
    kind: str  # document | query
    device: str
    version: str = "1"

    @property
    def stage(self) -> str:
        return "embed_docs" if self.kind == "document" else "embed_queries"

    def params(self) -> Mapping[str, Any]:
        return {"embedder": self.embedder.cache_params(), "kind": self.kind}

    @staticmethod
    def texts(source: Any) -> Sequence[str]:
        if isinstance(source, ChunkTable):
            return source.text
        assert isinstance(source, Dataset)
        return [q.text for q in source.queries]

    def write(self, inputs: Sequence[Any], directory: Path, timing: TimingLog) -> None:
        texts = self.texts(inputs[0])
        out = np.lib.format.open_memmap(directory / "vectors.npy", mode="w+", dtype=np.float32,
                                        shape=(len(texts), self.embedder.dim))
        with timing.measure("total", len(texts), sync_cuda=self.device == "cuda"):
            stats = self.embedder.encode(texts, kind=self.kind, out=out)
        out.flush()
        del out
        (directory / "stats.json").write_text(json.dumps(stats.__dict__))

    def load(self, directory: Path, inputs: Sequence[Any]) -> Embeddings:
        return Embeddings(np.load(directory / "vectors.npy", mmap_mode="r"),
                          EmbeddingStats(**json.loads((directory / "stats.json").read_text())))
