"""The `route` stage: a router chooses, per query, which configured pipeline serves it."""
