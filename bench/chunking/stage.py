"""Plan operations of the `chunking` stage: the chunk table and its report."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq

from bench.chunking.base import ARROW_NAME, CHUNKS_SCHEMA, Chunker, ChunkTable, Tokenizer
from bench.chunking.stats import ChunkStats, NearDupPair, NearDupReport
from bench.data.base import Corpus
from bench.pipeline.lanes import PlanState, params_label
from bench.pipeline.node import Node, OpTraits, Phase
from bench.telemetry.base import TimingLog


@dataclass(frozen=True)
class NearDupExample:
    pair: NearDupPair
    text_a: str  # the first 160 characters of each chunk
    text_b: str


@dataclass(frozen=True)
class ChunkReport:
    """What the report says about a chunking: counts, token stats, traceability and
    near-duplicates, with a few example pairs."""

    stats: ChunkStats
    near_duplicates: NearDupReport
    examples: tuple[NearDupExample, ...]

    def to_json(self) -> dict[str, Any]:
        nd = asdict(self.near_duplicates)
        nd["examples"] = [{**asdict(e.pair), "text_a": e.text_a, "text_b": e.text_b}
                          for e in self.examples]
        return {"stats": asdict(self.stats), "near_duplicates": nd}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ChunkReport:
        nd = dict(obj["near_duplicates"])
        raw = nd.pop("examples")
        examples = tuple(
            NearDupExample(NearDupPair(e["chunk_a"], e["chunk_b"], e["jaccard"], e["same_doc"]),
                           e["text_a"], e["text_b"]) for e in raw)
        return cls(ChunkStats(**obj["stats"]),
                   NearDupReport(**nd, examples=tuple(e.pair for e in examples)), examples)


#: documents chunked at a time: the chunk table is written block by block (one Parquet row
#: group each), so the chunker's lists hold one block, never the corpus' chunks twice over.
#: Every chunker chunks each document on its own, so the table is the one-call table
CHUNK_BLOCK = 65_536


@dataclass(frozen=True)
class ChunkInputs:
    corpus: Corpus


@dataclass(frozen=True)
class ChunkOp(OpTraits):
    """Corpus -> ChunkTable. Keyed on the corpus alone (never the queries) and the
    tokenizer too: every chunker reports n_tokens in the embedder's tokens."""

    chunker: Chunker
    tokenizer: Tokenizer
    stage: str = "chunk"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.INDEX
    Inputs: ClassVar[type] = ChunkInputs

    def params(self) -> Mapping[str, Any]:
        return {"chunker": self.chunker.cache_params(), "kind": type(self.chunker).__name__,
                "tokenizer": self.tokenizer.name}

    #: documents per block (not in ``params``: the table is the same for any block size)
    block: int = CHUNK_BLOCK

    def write(self, inputs: ChunkInputs, directory: Path, timing: TimingLog) -> None:
        docs = inputs.corpus.documents
        with timing.measure("total", len(docs)), \
                pq.ParquetWriter(directory / "chunks.parquet", CHUNKS_SCHEMA) as writer, \
                pa.ipc.new_file(str(directory / ARROW_NAME), CHUNKS_SCHEMA) as twin:
            for lo in range(0, len(docs), self.block):
                table = self.chunker.chunk(docs[lo : lo + self.block], tokenizer=self.tokenizer)
                block = table.to_arrow(doc_offset=lo)
                writer.write_table(block)
                twin.write_table(block)

    def load(self, directory: Path, inputs: ChunkInputs) -> ChunkTable:
        return ChunkTable.load(directory / "chunks.parquet")


@dataclass(frozen=True)
class ChunkStatsInputs:
    corpus: Corpus
    chunks: ChunkTable


@dataclass(frozen=True)
class ChunkStatsOp(OpTraits):
    """(Corpus, ChunkTable) -> ChunkReport, once per chunking."""

    stage: str = "chunk_stats"
    version: str = "1"
    phase: ClassVar[Phase] = Phase.OFFLINE
    Inputs: ClassVar[type] = ChunkStatsInputs

    def params(self) -> Mapping[str, Any]:
        return {}

    def write(self, inputs: ChunkStatsInputs, directory: Path, timing: TimingLog) -> None:
        from bench.chunking.stats import chunk_stats, near_duplicates

        corpus, chunks = inputs.corpus, inputs.chunks
        with timing.measure("total", len(chunks)), \
                tempfile.TemporaryDirectory(prefix="bench-neardup-", dir=directory) as scratch:
            stats = chunk_stats(chunks, corpus.documents)
            dups = near_duplicates(chunks, scratch=Path(scratch))  # signatures on disk
        report = ChunkReport(stats, dups, tuple(
            NearDupExample(p, chunks.text[p.chunk_a][:160], chunks.text[p.chunk_b][:160])
            for p in dups.examples))
        (directory / "chunk_stats.json").write_text(
            json.dumps(report.to_json(), indent=2, default=str))

    def load(self, directory: Path, inputs: ChunkStatsInputs) -> ChunkReport:
        return ChunkReport.from_json(json.loads((directory / "chunk_stats.json").read_text()))


def expand(s: PlanState) -> PlanState:
    """The chunk table of the corpus and its report (shared by every config), read from the
    corpus root: keyed on the documents, whatever queries the run evaluates."""
    c = s.comps
    corpus = s.node("corpus")
    chunk = Node.of(ChunkOp(c.chunker, c.embedder.tokenizer),
                    f"{type(c.chunker).__name__} {params_label(c.chunker.cache_params())}",
                    corpus=corpus)
    return s.with_nodes(chunk=chunk, chunk_stats=Node.of(ChunkStatsOp(), "chunk report",
                                                         corpus=corpus, chunks=chunk))
