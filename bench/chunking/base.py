"""Records and Protocol of the `chunking` stage.

A ``ChunkTable`` is columnar: chunk i belongs to document ``doc_idx[i]`` (row in
``Dataset.documents``) and covers ``[start_char[i], end_char[i])`` of ``chunk_text_field(doc)``
(title line + body), so
every chunk is traceable to its source. Token counts use the EMBEDDER's tokenizer.

Adding a chunker: implement ``Chunker`` (keyword-only constructor options; raise
``OptionError`` for bad values), set ``uses_tokenizer`` and add ``conf/chunker/<name>.yaml``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.data.base import Document
from bench.data.table import TextColumn

#: the chunk table's uncompressed Arrow IPC copy beside its Parquet file (memory-mapped)
ARROW_NAME = "chunks.arrow"

CHUNKS_SCHEMA = pa.schema(
    [
        pa.field("doc_idx", pa.int32(), nullable=False),
        pa.field("start_char", pa.int32(), nullable=False),
        pa.field("end_char", pa.int32(), nullable=False),
        pa.field("n_tokens", pa.int32(), nullable=False),
        pa.field("section", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
    ]
)


@dataclass(frozen=True)
class ChunkTable:
    doc_idx: np.ndarray  # int32 [n_chunks]
    start_char: np.ndarray  # int32
    end_char: np.ndarray  # int32
    n_tokens: np.ndarray  # int32, embedder tokens (no special tokens)
    #: a tuple, or a ``TextColumn`` over the memory-mapped artifact (``load``)
    section: Sequence[str]  # section path ("" when the source has none)
    text: Sequence[str]

    def __len__(self) -> int:
        return len(self.text)

    def save(self, path: Path) -> None:
        pq.write_table(self.to_arrow(), path)

    def to_arrow(self, *, doc_offset: int = 0) -> pa.Table:
        """The table as Arrow (``CHUNKS_SCHEMA``); ``doc_offset`` is added to ``doc_idx`` (a
        block of documents chunked on its own, written at its place in the corpus)."""
        return pa.table(
            {
                "doc_idx": pa.array(self.doc_idx.astype(np.int64) + doc_offset, pa.int32()),
                "start_char": pa.array(self.start_char, pa.int32()),
                "end_char": pa.array(self.end_char, pa.int32()),
                "n_tokens": pa.array(self.n_tokens, pa.int32()),
                "section": pa.array(self.section, pa.string()),
                "text": pa.array(self.text, pa.string()),
            },
            schema=CHUNKS_SCHEMA,
        )

    @classmethod
    def load(cls, path: Path) -> ChunkTable:
        """The table of ``path``: its Arrow IPC twin (``ARROW_NAME`` beside it) memory-mapped
        when there is one (the strings then stay in the file's pages, not on the heap: at 10M
        chunks GBs), else the Parquet file with its strings read one row group at a time."""
        twin = path.with_name(ARROW_NAME)
        section: Sequence[str]
        text: Sequence[str]
        if twin.is_file():
            nums = pa.ipc.open_file(pa.memory_map(str(twin))).read_all()
            if not nums.schema.equals(CHUNKS_SCHEMA):
                raise ValueError(f"{twin}: schema {nums.schema} is not the chunk table's")
            section, text = TextColumn(nums["section"]), TextColumn(nums["text"])
        else:
            nums = pq.read_table(path, schema=CHUNKS_SCHEMA,
                                 columns=["doc_idx", "start_char", "end_char", "n_tokens"])
            sections: list[str] = []
            texts: list[str] = []
            pf = pq.ParquetFile(path)
            for g in range(pf.num_row_groups):
                t = pf.read_row_group(g, columns=["section", "text"])
                sections.extend(t["section"].to_pylist())
                texts.extend(t["text"].to_pylist())
            section, text = tuple(sections), tuple(texts)
        return cls(
            doc_idx=nums["doc_idx"].to_numpy(),
            start_char=nums["start_char"].to_numpy(),
            end_char=nums["end_char"].to_numpy(),
            n_tokens=nums["n_tokens"].to_numpy(),
            section=section,
            text=text,
        )


class Tokenizer(Protocol):
    """The embedder's tokenizer, as chunkers need it."""

    @property
    def name(self) -> str:
        """Identity of the tokenizer (goes into cache keys)."""
        ...

    def offsets(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Per text, an int array [n_tokens, 2] of (start_char, end_char), no special tokens."""
        ...


class Chunker(Protocol):
    """Splits documents into chunks. ``uses_tokenizer``: chunk boundaries depend on tokens."""

    uses_tokenizer: ClassVar[bool]

    def cache_params(self) -> dict[str, object]:
        """The options that change the output (go into the cache key)."""
        ...

    def chunk(self, documents: Sequence[Document], *, tokenizer: Tokenizer) -> ChunkTable:
        """Chunk every document; every document yields >= 1 chunk unless its text is empty."""
        ...


def chunk_text_field(doc: Document) -> str:
    """The text a chunker sees: the title on its own line, then the body (title helps recall);
    the text alone when it already holds the title (``title_in_text``, BEIR/MTEB passages)."""
    return f"{doc.title}\n{doc.text}" if doc.title and not doc.title_in_text else doc.text
