"""``python -m bench.serve +experiment=X config=<config_id>``: one config as an ASGI service.

``bench.serve.service`` builds the served chain exactly as a run does, ``bench.serve.app``
exposes it over HTTP (FastAPI), ``bench.serve.cli`` is the entry point (uvicorn, graceful
shutdown), ``bench.serve.launch.ServedProcess`` starts one as a subprocess for tests and
scripts. docs/serve.md documents the endpoints.
"""
