"""Per-document ingestion metrics: pure functions of extracted output and a truth dict.

Each function takes what a parser produced (text, blocks, tables, chunks) and the document's
truth (``truth/<doc_id>.json``, docs/ingestion-benchmark.md) and returns plain floats / ints
for one document; ``aggregate.summarise`` turns the per-document rows into means with
bootstrap CIs per slice (document type, layout). Which parts are a library and which are ours:

- text fidelity: CER / WER by jiwer; length ratio and empty pages ours (arithmetic);
- tables: TEDS (PubTabNet's definition) on apted's tree edit distance, cell text cost by
  rapidfuzz's normalised Levenshtein; cell accuracy ours;
- reading order: blocks located by rapidfuzz's partial-ratio alignment, the order compared by
  rapidfuzz's Levenshtein over the block sequence;
- boilerplate precision / recall: ours (occurrence counting);
- Unicode: NFC / NFKC by ``unicodedata``, default-ignorable code points and scripts by the
  ``regex`` module's Unicode properties; the counting is ours;
- language: lingua;
- PII: presidio-analyzer's pattern recognisers (no NLP engine: no spaCy model offline); the
  span matching, F-beta and destroyed-answer count are ours;
- chunk quality: ours (sentence / table cuts, token IoU of character ranges).
"""

from bench.ingest.metrics.aggregate import SliceMean, summarise
from bench.ingest.metrics.boilerplate import boilerplate_pr
from bench.ingest.metrics.chunks import chunk_cuts, locate_spans, metadata_accuracy, token_iou
from bench.ingest.metrics.language import language_match
from bench.ingest.metrics.order import reading_order
from bench.ingest.metrics.pii import destroyed_answers, detect_pii, pii_scores, scrub_pii
from bench.ingest.metrics.tables import cell_accuracy, table_scores, teds
from bench.ingest.metrics.text import page_emptiness, text_fidelity
from bench.ingest.metrics.unicode import unicode_counts

__all__ = [
    "SliceMean",
    "boilerplate_pr",
    "cell_accuracy",
    "chunk_cuts",
    "destroyed_answers",
    "detect_pii",
    "language_match",
    "locate_spans",
    "metadata_accuracy",
    "page_emptiness",
    "pii_scores",
    "reading_order",
    "scrub_pii",
    "summarise",
    "table_scores",
    "teds",
    "text_fidelity",
    "token_iou",
    "unicode_counts",
]
