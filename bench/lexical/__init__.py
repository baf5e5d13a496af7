"""Stage `lexical`: sparse term-matching retrieval (BM25) over the same chunks as the dense lane."""
