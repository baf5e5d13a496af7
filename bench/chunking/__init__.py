"""Stage `chunking`: split documents into retrievable chunks that keep their provenance."""
