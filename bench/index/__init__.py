"""Stage `index`: vector indexes (exact and ANN) built once, searched with swept query knobs."""
