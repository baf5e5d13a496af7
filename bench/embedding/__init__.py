"""Stage `embedding`: texts -> L2-normalised float32 vectors, batched, streamed to disk."""
