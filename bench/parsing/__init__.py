"""The `parsing` stage: raw files (PDF, HTML, DOCX, Markdown/text, scans) to corpus documents
(``bench.parsing.base``; docs/ingestion.md)."""
