"""The `iterative` stage: search, look, reformulate, search again, under budgets (see ``base``)."""
