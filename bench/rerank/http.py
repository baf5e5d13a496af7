"""``reranker=http``: scores from a ``/rerank`` server — the API shape Cohere, Jina, vLLM,
Infinity and ``bench.serve`` share (``api: cohere``: ``{query, documents, top_n}`` ->
``{results: [{index, relevance_score}]}``) or TEI's (``api: tei``: ``{query, texts}`` ->
``[{index, score}]``).

One request per query with its candidates (``max_documents`` per request at most: a longer
pool is split, scores are pointwise), at most ``max_concurrency`` in flight, each with
``timeout_s``; connection errors, 429 and 5xx retried ``max_retries`` times with backoff
(``bench.http.client``); the API key only from the environment variable ``api_key_env``.
Every response must score each document exactly once with a finite number; anything else is
``invalid``. The rerank stage needs every score, so a request that still fails is one line
naming ``reranker.base_url`` and the endpoint (exit 2); the requests are stored with the
scores (``requests.parquet``) and summarised in the log.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from bench.config.build import OptionError
from bench.http.client import (
    JSONEndpoint,
    RequestRecord,
    check_api_key_env,
    check_base_url,
    check_robustness,
    summary_line,
)
from bench.rerank.common import DEFAULT_DEPTHS, check_depths, check_pools, dedupe

log = logging.getLogger("bench")

KEY = "reranker"
APIS = ("cohere", "tei")


class HTTPReranker:
    """Remote pointwise reranker. ``base_url``: the API root (``http://host:8000/v1`` for
    Cohere-shaped servers; TEI serves ``/rerank`` at its root); ``path``: the endpoint under
    it; ``model``: sent as ``model`` (Cohere shape) and part of the cache key."""

    name = "http"

    def __init__(
        self,
        *,
        base_url: str,
        model: str = "",
        api: str = "cohere",
        path: str = "/rerank",
        depths: Sequence[int] = DEFAULT_DEPTHS,
        score_threshold: float | None = None,
        max_documents: int = 1000,
        max_concurrency: int = 4,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        api_key_env: str | None = None,
        extra_body: dict[str, Any] | None = None,
        device: str = "cpu",
    ) -> None:
        if api not in APIS:
            raise OptionError("api", f"must be one of {', '.join(APIS)}, got {api!r}")
        if not path.startswith("/"):
            raise OptionError("path", f"must start with /, got {path!r}")
        if max_documents < 1:
            raise OptionError("max_documents", f"must be >= 1, got {max_documents}")
        check_robustness(max_concurrency=max_concurrency, timeout_s=timeout_s,
                         max_retries=max_retries, backoff_s=backoff_s)
        check_api_key_env(api_key_env)
        self.base_url = check_base_url(base_url)
        self.model = model
        self.api = api
        self.path = path
        self._depths = check_depths(depths)
        self.score_threshold = score_threshold
        self.max_documents = max_documents
        self.max_concurrency = max_concurrency
        self.extra_body = dict(extra_body or {})
        self.device = device
        self.endpoint = JSONEndpoint(base_url=self.base_url, key=KEY, api_key_env=api_key_env,
                                     timeout_s=timeout_s, max_retries=max_retries,
                                     backoff_s=backoff_s, max_concurrency=max_concurrency)

    def __repr__(self) -> str:
        return f"HTTPReranker(api={self.api!r}, url={self.base_url + self.path!r})"

    def cache_params(self) -> dict[str, object]:
        # The server's address and the client's limits do not change scores.
        params: dict[str, object] = {"backend": "http", "api": self.api, "model": self.model}
        if self.extra_body:
            params["extra_body"] = dict(sorted(self.extra_body.items()))
        return params

    def depths(self) -> list[int]:
        return list(self._depths)

    def score(self, queries: Sequence[str], passages: Sequence[Sequence[str]]) -> list[np.ndarray]:
        check_pools(queries, passages)
        jobs: list[tuple[int, int, list[str]]] = []
        where: list[np.ndarray] = []
        for qi, pool in enumerate(passages):
            texts, w = dedupe([pool])  # equal texts get equal scores, asked once
            where.append(w[0])
            for s in range(0, len(texts), self.max_documents):
                jobs.append((qi, s, texts[s:s + self.max_documents]))
        distinct: list[np.ndarray] = [np.zeros(int(w.max(initial=-1)) + 1, dtype=np.float32)
                                      for w in where]
        before = len(self.endpoint.records())

        def one(job: tuple[int, int, list[str]]) -> None:
            qi, start, docs = job
            distinct[qi][start:start + len(docs)] = self._post(queries[qi], docs)

        if jobs:
            with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(jobs))) as ex:
                for f in [ex.submit(one, j) for j in jobs]:
                    f.result()  # the first failure raises (one line, exit 2)
        if len(jobs) > 1:
            log.info("stage %-10s %s: %s", "rerank", self.base_url + self.path,
                     summary_line(self.endpoint.records()[before:]))
        return [np.ascontiguousarray(d[w], dtype=np.float32)
                for d, w in zip(distinct, where, strict=True)]

    def take_records(self) -> list[RequestRecord]:
        return self.endpoint.take_records()

    def close(self) -> None:
        self.endpoint.close()

    def _post(self, query: str, docs: list[str]) -> np.ndarray:
        if self.api == "cohere":
            body: dict[str, Any] = {**self.extra_body, "query": query, "documents": docs,
                                    "top_n": len(docs), "return_documents": False}
            if self.model:
                body["model"] = self.model
        else:
            body = {**self.extra_body, "query": query, "texts": docs, "raw_scores": False,
                    "return_text": False}
        res = self.endpoint.post(self.path, body, n_items=len(docs))
        if not res.ok:
            raise self.endpoint.fail(res.record)
        try:
            return self._parse(res.body, len(docs))
        except ValueError as exc:
            raise self.endpoint.fail(self.endpoint.invalid(res, f"malformed response: {exc}")
                                     ) from None

    def _parse(self, body: Any, n: int) -> np.ndarray:
        if self.api == "cohere":
            rows = body.get("results") if isinstance(body, dict) else None
            field = "relevance_score"
            if not isinstance(rows, list):
                raise ValueError("no `results` list (is api=tei the shape this server "
                                 "speaks?)")
        else:
            rows, field = body, "score"
            if not isinstance(rows, list):
                raise ValueError("not a list of {index, score} (is api=cohere the shape this "
                                 "server speaks?)")
        scores = np.full(n, np.nan, dtype=np.float64)
        for pos, row in enumerate(rows):
            if not isinstance(row, dict):
                raise ValueError(f"item {pos} is not an object")
            i, s = row.get("index"), row.get(field)
            if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < n:
                raise ValueError(f"item {pos}: index {i!r} is not a document position")
            if not math.isnan(scores[i]):
                raise ValueError(f"document {i} scored twice")
            if not isinstance(s, int | float) or isinstance(s, bool) or not math.isfinite(s):
                raise ValueError(f"item {pos}: {field} {s!r} is not a finite number")
            scores[i] = float(s)
        missing = int(np.isnan(scores).sum())
        if missing:
            raise ValueError(f"{missing} of {n} documents not scored")
        return scores.astype(np.float32)
