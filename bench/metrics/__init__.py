"""Metrics stage: trec_eval-exact ranking metrics on flat arrays, statistics, set-level rates.

Start at ``engine.py`` (evaluate / rank / rrf), ``registry.py`` (every metric declared once),
``stats.py`` (CIs and paired tests) and ``setlevel.py``.
"""
