"""Shared HTTP plumbing of the remote backends (embedder, reranker, generator, judge)."""
