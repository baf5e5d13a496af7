"""``embedder=openai_http``: vectors from an OpenAI-compatible ``/v1/embeddings`` server
(vLLM, TEI, Infinity, hosted APIs, ``bench.serve``).

Texts go in batches of ``batch_size`` (longest first when a tokenizer is given: the same
batches the in-process backends form, so a server running the same model pads the same
way), at most ``max_concurrency`` requests in flight, each with ``timeout_s``; connection
errors, 429 and 5xx are retried ``max_retries`` times with exponential backoff
(``bench.http.client``). The API key comes only from the environment variable named by
``api_key_env``. Every response is checked: one vector per input, indices a permutation, every
vector ``dimensions`` long (the first answer's length when ``dimensions`` is null), finite;
vectors are L2-normalised when ``normalize`` is set. Index-time work cannot go on without its
vectors, so a request that still fails is one line naming ``embedder.base_url`` and the
endpoint, no further batch is sent, and the configs that need those vectors fail; a query
batch that still fails gives its queries that request's status (``failed`` / ``timeout`` /
``invalid``) and the pass goes on (``encode_partial``). The requests of a pass (latency,
attempts, status, the server's own time) are kept next to the vectors
(``requests.parquet``) and summarised in the log.

``memo_dir``: every answered batch is also kept there (one ``.npy`` per batch, keyed by the
embedder's cache parameters and the batch's texts, written atomically), so a pass cut short —
the server died, a request still failed after its retries — resumes on the rerun: only the
batches never answered are requested again (null: no memo).

``replicas``: further API roots serving the same model (a fan-out for a corpus pass: vLLM or
TEI behind several ports or hosts). Each batch goes to the live replica with the fewest
requests in flight, ``max_concurrency`` per replica; the batches and so the vectors are the
single server's (the replicas are not in the cache key). A replica whose request still fails
after its retries is left out for the rest of the pass and the batch is sent again to another
(counted: ``shards_redone``, and the log names the replica); only when every replica has failed
does the pass fail as a single server's would. ``EmbeddingStats.workers`` is the replica count.

``tokenizer``: a local Hugging Face tokenizer (a folder, or ``packaged:all-MiniLM-L6-v2``)
for token-based chunkers and the truncation statistics; ``max_input_tokens``: the tokens of
text the server embeds (its max length minus special tokens), for those statistics only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from bench.config.build import OptionError
from bench.embedding.base import EmbeddingStats
from bench.embedding.batching import with_prefix
from bench.errors import ConfigError
from bench.http.client import (
    JSONEndpoint,
    RemoteError,
    RequestRecord,
    check_api_key_env,
    check_base_url,
    check_robustness,
    summary_line,
)

log = logging.getLogger("bench")

#: the key errors name
KEY = "embedder"
PATH = "/embeddings"


class OpenAIHTTPEmbedder:
    """Remote embedder. ``base_url``: the API root (``http://host:8000/v1``); ``model``: the
    served model's name (sent as ``model``, part of the cache key); ``dimensions``: the
    vector length every response must have (null: whatever the first response gives);
    ``send_dimensions``: also ask the server for that length (Matryoshka models, OpenAI's
    text-embedding-3); ``extra_body``: further request fields (part of the cache key)."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        dimensions: int | None = None,
        send_dimensions: bool = False,
        normalize: bool = True,
        batch_size: int = 64,
        max_concurrency: int = 4,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        api_key_env: str | None = None,
        tokenizer: str | None = None,
        max_input_tokens: int | None = None,
        query_prefix: str = "",
        document_prefix: str = "",
        extra_body: dict[str, Any] | None = None,
        memo_dir: str | None = None,
        replicas: Sequence[str] = (),
        device: str = "cpu",
    ) -> None:
        if not model:
            raise OptionError("model", "must name the served model")
        if batch_size < 1:
            raise OptionError("batch_size", f"must be >= 1, got {batch_size}")
        if dimensions is not None and dimensions < 1:
            raise OptionError("dimensions", f"must be >= 1 or null, got {dimensions}")
        if send_dimensions and dimensions is None:
            raise OptionError("send_dimensions", "needs dimensions (the length to ask for)")
        if max_input_tokens is not None and max_input_tokens < 1:
            raise OptionError("max_input_tokens", f"must be >= 1 or null, got "
                                                  f"{max_input_tokens}")
        check_robustness(max_concurrency=max_concurrency, timeout_s=timeout_s,
                         max_retries=max_retries, backoff_s=backoff_s)
        check_api_key_env(api_key_env)
        self.base_url = check_base_url(base_url)
        self.model = model
        self.dimensions = dimensions
        self.send_dimensions = send_dimensions
        self.normalize = normalize
        self.batch_size = batch_size
        self.max_concurrency = max_concurrency
        self.tokenizer_name = tokenizer
        self.max_input_tokens = max_input_tokens
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.extra_body = dict(extra_body or {})
        self.memo_dir = Path(memo_dir).expanduser() if memo_dir else None
        self.device = device  # the server's device is its own; kept for the common signature
        urls = [self.base_url]
        for i, url in enumerate(replicas or ()):
            urls.append(check_base_url(str(url), option=f"replicas[{i}]"))
            if urls[-1] in urls[:-1]:
                raise OptionError(f"replicas[{i}]", f"{url} is already listed")
        self.endpoints = [JSONEndpoint(base_url=u, key=KEY, api_key_env=api_key_env,
                                       timeout_s=timeout_s, max_retries=max_retries,
                                       backoff_s=backoff_s, max_concurrency=max_concurrency)
                          for u in urls]
        self.endpoint = self.endpoints[0]  # single requests (probe, one query) go here
        self._dim: int | None = dimensions
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAIHTTPEmbedder(model={self.model!r}, base_url={self.base_url!r})"

    # -- Protocol ---------------------------------------------------------------------------
    def cache_params(self) -> dict[str, object]:
        # Where the server runs, its batching and the client's limits do not change vectors.
        params: dict[str, object] = {"backend": "openai_http", "model": self.model,
                                     "normalize": self.normalize,
                                     "query_prefix": self.query_prefix,
                                     "document_prefix": self.document_prefix}
        if self.send_dimensions:
            params["dimensions"] = self.dimensions
        if self.extra_body:
            params["extra_body"] = dict(sorted(self.extra_body.items()))
        return params

    @property
    def dim(self) -> int:
        """The vector length: ``dimensions``, else one probe request's answer (which also
        says, before any work, whether the server is there)."""
        if self._dim is None:
            vec = self._post(["dimension probe"])[0]
            with self._lock:
                self._dim = self._dim or int(vec.shape[0])
        return self._dim

    def preflight(self) -> None:
        """One probe request: the server is there and answers ``dimensions``-long vectors
        (an error here is one line, exit 2, before any work)."""
        vec = self._post(["dimension probe"])[0]
        with self._lock:
            self._dim = self._dim or int(vec.shape[0])
        self.endpoint.take_records()  # not part of any stage's requests

    @property
    def tokenizer(self) -> Any:
        if self.tokenizer_name is None:
            raise ConfigError(f"{KEY}.tokenizer", "this chunker counts tokens in the "
                              "embedder's tokenizer: set embedder.tokenizer to a local "
                              "tokenizer folder (or packaged:all-MiniLM-L6-v2), or use a "
                              "chunker that does not count tokens")
        return self._tokenizer

    @cached_property
    def _tokenizer(self) -> Any:
        from bench.embedding.sentence_transformers import HFTokenizer, resolve_model_path

        name = str(self.tokenizer_name)

        def load() -> Any:
            from transformers import AutoTokenizer

            try:
                return AutoTokenizer.from_pretrained(resolve_model_path(name))
            except OSError as exc:
                raise ConfigError(f"{KEY}.tokenizer", f"cannot load {name!r}: {exc}") from None

        return HFTokenizer(load, name)

    def encode_query(self, text: str) -> np.ndarray:
        """One query's vector [1, dim], one request (what a served chain does per query)."""
        return self._post([self.query_prefix + text])[None, 0].astype(np.float32)

    def encode(self, texts: Sequence[str], *, kind: str, out: np.ndarray) -> EmbeddingStats:
        """Every vector or a ``RemoteError`` (an index-time pass needs them all): after the
        first failed batch no new batch is sent; the answered ones are in the memo."""
        return self._encode(texts, kind=kind, out=out, partial=False)[0]

    def encode_partial(self, texts: Sequence[str], *, kind: str, out: np.ndarray
                       ) -> tuple[EmbeddingStats, dict[int, str]]:
        """The query pass: a batch whose request still fails leaves its rows zero and gives
        each its status (``failed`` / ``timeout`` / ``invalid``); the other batches go on."""
        return self._encode(texts, kind=kind, out=out, partial=True)

    def _encode(self, texts: Sequence[str], *, kind: str, out: np.ndarray, partial: bool
                ) -> tuple[EmbeddingStats, dict[int, str]]:
        inputs = with_prefix(texts, kind=kind, query_prefix=self.query_prefix,
                             document_prefix=self.document_prefix)
        counts = (self._tokenizer.count(inputs) if self.tokenizer_name is not None
                  else np.zeros(len(inputs), dtype=np.int64))
        limit = self.max_input_tokens if self.max_input_tokens is not None else 1 << 62
        order = np.argsort(-counts, kind="stable")  # longest first, as in-process batching
        batches = [order[b0:b0 + self.batch_size] for b0 in range(0, len(inputs),
                                                                   self.batch_size)]
        before = [len(e.records()) for e in self.endpoints]
        pool = _Pool(len(self.endpoints))
        t0 = time.perf_counter()
        usage = [0]
        memo_hits = [0]
        failed: dict[int, str] = {}
        stop = threading.Event()  # an index-time pass stops sending after a failure

        def one(idx: np.ndarray) -> None:
            batch = [inputs[int(i)] for i in idx]
            kept = self._memo_load(batch)
            if kept is not None:
                out[idx] = kept
                with self._lock:
                    memo_hits[0] += 1
                return
            if stop.is_set():
                return
            try:
                vecs, n_tok = self._post_routed(batch, pool)
            except RemoteError as exc:
                if not partial:
                    stop.set()
                    raise
                out[idx] = 0.0
                with self._lock:
                    failed.update((int(i), exc.status) for i in idx)
                    if len(failed) == len(idx):  # the first failed batch says why, once
                        log.warning("stage %-10s %s", "embed", exc.one_line())
                return
            self._memo_save(batch, vecs)
            out[idx] = vecs
            with self._lock:
                usage[0] += n_tok

        if batches:
            workers = self.max_concurrency * len(self.endpoints)
            with ThreadPoolExecutor(max_workers=min(workers, len(batches))) as ex:
                for f in [ex.submit(one, b) for b in batches]:
                    f.result()  # an index-time pass: the first failure raises (one line)
        wall = time.perf_counter() - t0
        records = [r for e, b in zip(self.endpoints, before, strict=True)
                   for r in e.records()[b:]]
        where = self.base_url + PATH if len(self.endpoints) == 1 else (
            f"{len(self.endpoints)} replicas (" + ", ".join(
                f"{e.base_url}: {len(e.records()) - b} requests"
                + (" - left out after a failure" if i in pool.down else "")
                for i, (e, b) in enumerate(zip(self.endpoints, before, strict=True))) + ")")
        log.info("stage %-10s %s %s: %s%s%s%s", "embed", where, kind,
                 summary_line(records), f"; {memo_hits[0]} of {len(batches)} batches from "
                 f"the memo {self.memo_dir}" if memo_hits[0] else "",
                 f"; {pool.redone} batches sent again to another replica" if pool.redone
                 else "",
                 f"; {len(failed)} of {len(inputs)} texts without a vector" if failed else "")
        n_tokens = (int(np.minimum(counts, limit).sum()) if self.tokenizer_name is not None
                    else usage[0])
        fan = len(self.endpoints) > 1
        return EmbeddingStats(
            n_texts=len(inputs), n_tokens=n_tokens, wall_s=wall,
            n_truncated=int((counts > limit).sum()),
            n_truncated_tokens=int(np.maximum(counts - limit, 0).sum()),
            max_tokens=self.max_input_tokens,
            # the fan-out's figures (None for one server, as for any pass in one process)
            workers=len(self.endpoints) if fan else None, shards=len(batches) if fan else None,
            shards_reused=memo_hits[0] if fan else None,
            shards_redone=pool.redone if fan else None), failed

    def take_records(self) -> list[RequestRecord]:
        """The requests since the last call (the embedding stage stores them), every
        replica's."""
        return [r for e in self.endpoints for r in e.take_records()]

    def close(self) -> None:
        for e in self.endpoints:
            e.close()

    # -- the batch memo (resume after a cut-short pass) ----------------------------------------
    def _memo_path(self, batch: list[str]) -> Path | None:
        if self.memo_dir is None:
            return None
        h = hashlib.sha256(json.dumps(self.cache_params(), sort_keys=True).encode())
        for t in batch:
            h.update(b"\x00" + t.encode())
        key = h.hexdigest()
        return self.memo_dir / key[:2] / f"{key}.npy"

    def _memo_load(self, batch: list[str]) -> np.ndarray | None:
        path = self._memo_path(batch)
        if path is None or not path.is_file():
            return None
        try:
            vecs = np.load(path, allow_pickle=False)
        except (OSError, ValueError):
            return None  # a damaged entry is asked again
        if vecs.shape != (len(batch), self.dim) or vecs.dtype != np.float32:
            return None
        return vecs

    def _memo_save(self, batch: list[str], vecs: np.ndarray) -> None:
        path = self._memo_path(batch)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.save(fh, np.ascontiguousarray(vecs, dtype=np.float32), allow_pickle=False)
            os.replace(tmp, path)  # atomic: a crash leaves no half-written entry
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    # -- one request ------------------------------------------------------------------------
    def _post(self, texts: list[str]) -> np.ndarray:
        return self._post_counted(texts)[0]

    def _post_routed(self, texts: list[str], pool: _Pool) -> tuple[np.ndarray, int]:
        """One batch on the least busy live replica; a replica that still fails after its
        retries is left out and the batch goes to the next (the last failure raises). An
        answer of the wrong shape is the server's contract, not a replica's: it raises."""
        while True:
            i = pool.take()
            try:
                return self._post_counted(texts, self.endpoints[i])
            except RemoteError as exc:
                # an invalid answer (wrong dimension, malformed) is not a replica being down
                if exc.status == "invalid" or not pool.fail(i):
                    raise
                log.warning("stage %-10s replica %s left out for this pass: %s", "embed",
                            self.endpoints[i].base_url, exc.one_line())
            finally:
                pool.release(i)

    def _post_counted(self, texts: list[str], endpoint: JSONEndpoint | None = None
                      ) -> tuple[np.ndarray, int]:
        endpoint = endpoint or self.endpoint
        body: dict[str, Any] = {**self.extra_body, "model": self.model, "input": texts,
                                "encoding_format": "float"}
        if self.send_dimensions:
            body["dimensions"] = self.dimensions
        res = endpoint.post(PATH, body, n_items=len(texts))
        if not res.ok:
            raise endpoint.fail(res.record)
        try:
            vecs = self._parse(res.body, len(texts))
        except DimensionMismatch as exc:
            raise endpoint.fail(endpoint.invalid(res, f"wrong dimension: {exc}"),
                                key=f"{KEY}.dimensions") from None
        except ValueError as exc:
            raise endpoint.fail(endpoint.invalid(res, f"malformed response: {exc}")) from None
        usage = res.body.get("usage") if isinstance(res.body, dict) else None
        n_tok = usage.get("prompt_tokens", 0) if isinstance(usage, dict) else 0
        return vecs, int(n_tok) if isinstance(n_tok, int) else 0

    def _parse(self, body: Any, n: int) -> np.ndarray:
        """[n, dim] float32 from an embeddings response, or ValueError saying what is wrong."""
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise ValueError("no `data` list")
        if len(data) != n:
            raise ValueError(f"{len(data)} embeddings for {n} inputs")
        rows: list[Any] = [None] * n
        for pos, item in enumerate(data):
            if not isinstance(item, dict) or not isinstance(item.get("embedding"), list):
                raise ValueError(f"data[{pos}] has no `embedding` list")
            i = item.get("index", pos)
            if not isinstance(i, int) or not 0 <= i < n or rows[i] is not None:
                raise ValueError(f"data[{pos}].index {i!r} is not a fresh input position")
            rows[i] = item["embedding"]
        lengths = {len(r) for r in rows}
        if len(lengths) != 1:
            raise ValueError(f"vectors of different lengths {sorted(lengths)}")
        got = lengths.pop()
        want = self._dim
        if want is not None and got != want:
            said = "embedder.dimensions" if self.dimensions is not None else "the first answer"
            raise DimensionMismatch(f"{got}-d vectors, {said} says {want}")
        try:
            vecs = np.asarray(rows, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError("an embedding holds a non-number") from None
        if not np.all(np.isfinite(vecs)):
            raise ValueError("an embedding holds NaN or infinity")
        if self.normalize:
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
            if np.any(norms == 0):
                raise ValueError("a zero vector cannot be normalised")
            vecs = vecs / norms
        return vecs.astype(np.float32)


class DimensionMismatch(ValueError):
    """The server's vectors are not the configured length."""


class _Pool:
    """Which replicas are live and how busy: ``take`` the live one with the fewest requests
    in flight (ties: the first listed), ``release`` it after; ``fail`` leaves a replica out
    and says whether another is live (then the batch is sent again: ``redone``)."""

    def __init__(self, n: int) -> None:
        self.busy = [0] * n
        self.down: set[int] = set()
        self.redone = 0
        self._lock = threading.Lock()

    def take(self) -> int:
        with self._lock:
            live = [i for i in range(len(self.busy)) if i not in self.down] or [0]
            i = min(live, key=lambda j: self.busy[j])
            self.busy[i] += 1
            return i

    def release(self, i: int) -> None:
        with self._lock:
            self.busy[i] -= 1

    def fail(self, i: int) -> bool:
        with self._lock:
            self.down.add(i)
            if len(self.down) == len(self.busy):
                return False
            self.redone += 1
            return True
