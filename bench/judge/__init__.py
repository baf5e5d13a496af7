"""Stage `judge`: deterministic checks first, then schema-guided LLM judges."""
