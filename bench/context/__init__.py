"""Stage `context`: ranked passages fitted to the generator's token budget, tagged for citation."""
