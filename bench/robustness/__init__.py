"""Robustness sets: cases built from a golden set, outcome classes, poisoning
(``bench.robustness.study``)."""
