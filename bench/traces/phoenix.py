"""A round trip through a real Arize Phoenix server: spans in over OTLP/HTTP, evaluations in
as span annotations, both read back through Phoenix's REST API.

Phoenix (arize-phoenix 20.26) receives spans at ``/v1/traces`` (OTLP/HTTP protobuf) and maps
the GenAI retrieval attributes to OpenInference (span kind ``RETRIEVER``,
``retrieval.documents``). It has no ``/v1/logs`` receiver (a POST answers 405), so
``gen_ai.evaluation.result`` events cannot reach it as OTLP logs; its own form of an
evaluation is a span annotation (``POST /v1/span_annotations``: span id, name, score, label,
explanation), which ``annotate`` sends, one per evaluation, with the same values.

Phoenix pins its own dependency set (it conflicts with bench's), so it lives in its own venv
(``PHOENIX_VENV``, default ``/work/venvs/phoenix``: ``python -m venv /work/venvs/phoenix &&
/work/venvs/phoenix/bin/pip install arize-phoenix==20.26.1``); ``PhoenixServer`` starts
``phoenix serve`` from it as a subprocess with its own working directory and ports, offline,
and stops it.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.errors import ConfigError

DEFAULT_VENV = "/work/venvs/phoenix"


def phoenix_venv() -> Path:
    return Path(os.environ.get("PHOENIX_VENV", DEFAULT_VENV))


class PhoenixServer:
    """``with PhoenixServer(workdir) as px:`` a running ``phoenix serve``; ``px.base_url``."""

    def __init__(self, workdir: str | Path, *, venv: str | Path | None = None,
                 start_timeout_s: float = 120.0) -> None:
        self.venv = Path(venv) if venv is not None else phoenix_venv()
        self.workdir = Path(workdir)
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.base_url = ""

    def __enter__(self) -> PhoenixServer:
        import httpx

        from bench.http.client import free_port

        exe = self.venv / "bin" / "phoenix"
        if not exe.is_file():
            raise ConfigError("PHOENIX_VENV", f"{exe} not found (install arize-phoenix in "
                                              "its own venv, docs/traces.md)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        port, grpc = free_port(), free_port()
        env = {**os.environ, "PHOENIX_WORKING_DIR": str(self.workdir),
               "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
               "PHOENIX_GRPC_PORT": str(grpc), "PHOENIX_TELEMETRY_ENABLED": "false",
               "HF_HUB_OFFLINE": "1"}
        self.log = (self.workdir / "phoenix.log").open("wb")
        self.proc = subprocess.Popen([str(exe), "serve"], cwd=self.workdir, env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.base_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            if self.proc.poll() is not None:
                self._stop()
                tail = (self.workdir / "phoenix.log").read_text(errors="replace")[-800:]
                raise RuntimeError(f"phoenix serve exited with {self.proc.returncode}: {tail}")
            try:
                if httpx.get(self.base_url + "/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self._stop()
                raise RuntimeError(f"phoenix serve not up after {self.start_timeout_s} s")
            time.sleep(0.5)

    def _stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def __exit__(self, *exc: object) -> None:
        self._stop()

    def python(self) -> Path:
        """Phoenix's venv's interpreter (its client: ``phoenix.client.Client``)."""
        return self.venv / "bin" / "python"


def annotation_rows(evals: Sequence[Any]) -> list[dict[str, Any]]:
    """Phoenix span annotations of ``Evaluation`` s (bench.traces.evaluations)."""
    return [{"span_id": e.span_id, "name": e.name, "annotator_kind": "CODE",
             "result": {"score": e.value, "label": e.label, "explanation": e.explanation},
             "metadata": {"source": "bench", "trace_id": e.trace_id}} for e in evals]


def annotate(base_url: str, evals: Sequence[Any], *, timeout_s: float = 30.0) -> int:
    """POST the evaluations as span annotations (synchronously); the HTTP status."""
    import httpx

    r = httpx.post(base_url + "/v1/span_annotations", params={"sync": "true"},
                   json={"data": annotation_rows(evals)}, timeout=timeout_s)
    return r.status_code


def _paged(url: str, params: dict[str, Any], timeout_s: float) -> list[dict[str, Any]]:
    """Every row of a paged Phoenix REST read (``data`` pages chained by ``next_cursor``)."""
    import httpx

    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = dict(params, **({"cursor": cursor} if cursor else {}))
        r = httpx.get(url, params=page, timeout=timeout_s)
        r.raise_for_status()
        body = r.json()
        out += body["data"]
        cursor = body.get("next_cursor")
        if not cursor:
            return out


def read_annotations(base_url: str, span_ids: Sequence[str], *, project: str = "default",
                     timeout_s: float = 30.0) -> list[dict[str, Any]]:
    """Every span annotation of ``span_ids`` (paged REST reads, 50 spans a request)."""
    ids = list(span_ids)
    url = f"{base_url}/v1/projects/{project}/span_annotations"
    return [row for i in range(0, len(ids), 50)
            for row in _paged(url, {"span_ids": ids[i:i + 50], "limit": 1000}, timeout_s)]


def read_spans(base_url: str, *, project: str = "default", timeout_s: float = 30.0
               ) -> list[dict[str, Any]]:
    """Every span of a project through the REST API (``GET /v1/projects/P/spans``)."""
    return _paged(f"{base_url}/v1/projects/{project}/spans", {"limit": 1000}, timeout_s)


EXPORT_SCRIPT = """
import sys
from phoenix.client import Client
df = Client(base_url=sys.argv[1]).spans.get_spans_dataframe(project_identifier=sys.argv[2],
                                                           limit=100000)
df.to_parquet(sys.argv[3])
print(len(df))
"""


def export_dataframe(px: PhoenixServer, out: str | Path, *, project: str = "default") -> int:
    """Phoenix's own span export (its client's ``get_spans_dataframe``, run in Phoenix's venv)
    written as Parquet, the file ``bench.traces import`` reads as OpenInference."""
    done = subprocess.run([str(px.python()), "-c", EXPORT_SCRIPT, px.base_url, project,
                           str(out)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PHOENIX_TELEMETRY_ENABLED": "false"})
    if done.returncode != 0:
        raise RuntimeError(f"phoenix client export failed: {done.stderr[-800:]}")
    return int(done.stdout.strip().splitlines()[-1])
