"""Plan and run an experiment: cached stage nodes, results, report, gates."""
