"""The `system` stage: a whole RAG service measured as a black box (``system=http``)."""
