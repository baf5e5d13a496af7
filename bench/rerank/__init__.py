"""Stage `rerank`: rescore cached candidate pools (cross-encoder, flashrank, MaxSim over token
vectors, bi-encoder). See ``base.py`` for the Protocol."""
