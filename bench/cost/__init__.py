"""The cost of one query, by component (``bench.cost.prices``)."""
