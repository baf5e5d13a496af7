"""Guardrails over a window of production traffic: ``python -m bench.monitor RULES WINDOW``
(``rules`` reads the rules file, ``check`` evaluates it; docs/traces.md)."""
