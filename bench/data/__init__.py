"""Stage `data`: load a benchmark (corpus + golden queries + qrels) into a ``Dataset``."""
