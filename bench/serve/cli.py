"""Entry point of ``python -m bench.serve``: compose the config like ``python -m bench``,
validate and plan (a config error is one line and exit 2 before the port is bound), bind the
port, then load the served chain in the background while ``/health`` answers and ``/ready``
says ``loading``. A failed load (a remote backend refusing, a broken artifact) prints one
line, stops the server and exits 2. SIGTERM / SIGINT drain: the port stops accepting, requests
in flight get ``serve.shutdown_timeout_s`` to finish, the generator is released, and the
process ends by the signal uvicorn re-raises after the drain.

``config=<config_id>`` is shorthand for ``serve.config=<config_id>``.
"""

from __future__ import annotations

import importlib.util
import logging
import socket
import sys
import threading
import time

import hydra
from omegaconf import DictConfig

from bench.app import CONF_DIR, one_line_errors
from bench.config.schema import register
from bench.errors import BenchError, ConfigError, MissingDependencyError

log = logging.getLogger("bench")


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before any loading so a busy port fails at once.

    Created with ``IPPROTO_TCP`` named: asyncio sets TCP_NODELAY on an accepted connection
    only when its socket says ``proto == IPPROTO_TCP`` (``base_events._set_nodelay``), and an
    accepted socket inherits the listener's ``proto``. Created with proto 0 (the default),
    every connection kept Nagle's algorithm on: a response written as headers then body
    waited for the client's delayed ACK, ~40 ms on every request (a GET /health took 44 ms
    on an idle machine, a 12 ms retrieval 56 ms)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError("serve.port", f"cannot listen on {host}:{port}: "
                                        f"{exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def set_torch_threads(n: int) -> None:
    """torch's intra-op threads for the whole process; the worker threads that run requests
    read it when they first call torch. A component with its own thread setting
    (``embedder.num_threads``) still sets its own around its calls."""
    if importlib.util.find_spec("torch") is None:
        return  # nothing in this process computes with torch
    import torch

    torch.set_num_threads(n)


def serve(cfg: DictConfig) -> int:
    """Serve until SIGTERM / SIGINT; the exit code (2: the chain failed to load)."""
    t_start = time.perf_counter()
    for package in ("fastapi", "uvicorn"):
        if importlib.util.find_spec(package) is None:
            raise MissingDependencyError(package, "serve", "python -m bench.serve")
    from bench.serve.service import prepare_service

    service, settings = prepare_service(cfg)
    if settings.torch_threads is not None:
        set_torch_threads(settings.torch_threads)
    sock = bind(settings.host, settings.port)
    host, port = sock.getsockname()[:2]

    import uvicorn

    from bench.serve.app import ServerState, create_app

    tracer = None
    if settings.traces is not None:
        from bench.traces.importer import corpus_fingerprint
        from bench.traces.otel import GenAITracer

        tracer = GenAITracer(settings.traces, capture_content=settings.traces_content,
                             resource={"service.name": "bench.serve",
                                       "bench.config_id": service.spec.config_id,
                                       "gen_ai.data_source.id": service.dataset.name,
                                       "bench.corpus.fingerprint": corpus_fingerprint(
                                           service.dataset.documents)})
        log.info("serve: OpenTelemetry GenAI spans to %s", settings.traces)

    def close() -> None:
        service.close()
        if tracer is not None:
            tracer.shutdown()

    state = ServerState()
    app = create_app(service, settings, state, on_shutdown=close, tracer=tracer)
    server = uvicorn.Server(uvicorn.Config(
        app, log_config=None, access_log=False, lifespan="on",
        timeout_graceful_shutdown=round(settings.shutdown_timeout_s)))
    exit_code: list[int] = []

    def load() -> None:
        try:
            service.load()
        except BenchError as exc:
            state.error = exc.one_line()
            state.phase = "failed"
            print(f"bench: error: {state.error}", file=sys.stderr, flush=True)
            exit_code.append(exc.exit_code)
            server.should_exit = True
            return
        except Exception as exc:  # a bug: its traceback, and the server stops
            log.exception("serve: loading the chain failed")
            state.error = f"{type(exc).__name__}: {exc}"
            state.phase = "failed"
            exit_code.append(1)
            server.should_exit = True
            return
        state.phase = "ready"
        log.info("serve: ready on http://%s:%d — config %s %s; chain loaded in %.2f s, %.2f s "
                 "after start", host, port, service.spec.config_id, service.spec.label,
                 service.load_s or 0.0, time.perf_counter() - t_start)

    log.info("serve: listening on http://%s:%d (loading; /ready says when it is done)",
             host, port)
    threading.Thread(target=load, name="bench-serve-load", daemon=True).start()
    server.run(sockets=[sock])
    log.info("serve: stopped")
    return exit_code[0] if exit_code else 0


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def _hydra_entry(cfg: DictConfig) -> None:
    try:
        code = serve(cfg)
    except BenchError as exc:
        print(f"bench: error: {exc.one_line()}", file=sys.stderr)
        sys.exit(exc.exit_code)
    if code:
        sys.exit(code)


def _alias(argv: list[str]) -> list[str]:
    """``config=X`` is ``serve.config=X`` (the form the issue and docs use)."""
    return [f"serve.{a}" if a.startswith("config=") else a for a in argv]


USAGE = """python -m bench.serve +experiment=NAME config=<config_id> [overrides]

Serves one config of the run over HTTP (FastAPI + uvicorn): POST /v1/retrieve, /v1/answer
(SSE), OpenAI-compatible /v1/embeddings and /v1/chat/completions, /v1/rerank (Cohere) and
/rerank (TEI); GET /health, /ready, /v1/config. The overrides are python -m bench's; serve.*
sets the server: serve.host, serve.port, serve.max_concurrency, serve.max_queue,
serve.shutdown_timeout_s, serve.torch_threads, serve.traces (an OTLP JSON file of GenAI
spans; off by default). List a run's config ids with
python -m bench ... plan_only=true.
"""


def main() -> None:
    register()
    if "--help" in sys.argv[1:] or "-h" in sys.argv[1:]:
        from bench.docs import SERVE

        print(USAGE + SERVE.help_line() + "\n")  # then Hydra's own help: groups and options
    sys.argv[1:] = _alias(sys.argv[1:])
    one_line_errors(_hydra_entry)
