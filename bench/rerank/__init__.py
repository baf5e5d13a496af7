"""Stage `rerank`: reorder cached candidate pools (cross-encoders, flashrank)."""
