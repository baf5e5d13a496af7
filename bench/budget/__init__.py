"""Budgets: probe a query sample first, prune configs (and their subtrees) that cannot fit."""
