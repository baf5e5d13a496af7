"""Small services the load tests and ``+experiment=capacity_http`` drive that are NOT
``bench.serve``: each module is standalone (the standard library, numpy and uvicorn; nothing
from bench), so it stands for a user's own service — what bench knows of it is only its
documented HTTP shape.

- :mod:`.chat`: an OpenAI-compatible ``/v1/chat/completions`` and ``/v1/completions`` server
  (vLLM's API shape, streamed) with scripted token timings;
- :mod:`.rag`: a RAG API (BM25 over a corpus file, an extractive answer, a scripted
  generation time, an LRU answer cache) written only against the ``system=http`` mapping
  documented in docs/black-box.md.
"""
