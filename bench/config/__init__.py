"""Config schema (ConfigStore) and the builder that validates and instantiates `_target_` nodes."""
