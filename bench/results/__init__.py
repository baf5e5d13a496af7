"""Versioned result tables (Parquet) and the run manifest (run.json)."""
