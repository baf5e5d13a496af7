"""Stage `report`: human-readable report and plots from the typed results of a run."""
