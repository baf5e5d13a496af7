"""The `rewrite` stage: the query is rewritten before retrieval (see ``base``)."""
