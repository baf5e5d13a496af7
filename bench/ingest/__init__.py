"""The ingestion benchmark (``bench.ingest.build``) and its metrics (``bench.ingest.metrics``).

The benchmark is a folder of raw files (PDF, scanned PNG / image-only PDF, HTML, DOCX) with a
truth JSON beside each, laid out as docs/ingestion-benchmark.md describes; the metrics are pure
functions of (what a parser extracted, that truth) returning per-document values.
"""
