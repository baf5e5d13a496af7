"""The scale planner: wall time, peak memory and disk of a corpus size, predicted from a few
measured sizes (``scripts/bench_scale.py``) with the error of the prediction measured
(``python -m bench.scaling validate``). See docs/performance.md#the-scale-planner."""
