"""Production traffic in: trace import, sampling, review queues, drift, evaluation write-back.

``python -m bench.traces import`` reads OTLP JSON (GenAI conventions), OpenInference / Phoenix
span exports and Langfuse observation exports into one typed ``TraceRecord`` per request
(``record``, ``importer``); ``sample`` draws a seeded uniform sample apart from oversampled
strata (``sample``); ``review`` writes a review queue and merges reviewed rows into a golden
set (``review``); ``drift`` compares query-embedding windows (``drift``); ``writeback``
writes scores as ``gen_ai.evaluation.result`` events (``evaluations``). ``bench.serve`` emits
the spans through ``otel``. Guardrails over a window are ``python -m bench.monitor``.
See docs/traces.md.
"""
