"""vLLM offline engine (``vllm.LLM``), batch-first, with JSON-schema structured outputs.

vllm is imported only here and only on first use; constructing the generator checks that the
package is importable so a missing extra fails before any retrieval work, as one line.

Latency comes from vLLM's own per-request stats when the engine returns them
(``RequestOutput.metrics``: ``RequestStateStats`` in the V1 engine, ``RequestMetrics`` in V0);
otherwise TTFT/TPOT are None, never estimated from the batch wall time. ``e2e_ms`` is then the
wall time of the whole ``LLM.chat`` call, which every request of the batch shares.
"""

from __future__ import annotations

import importlib.util
import json
import time
from collections.abc import Sequence
from typing import Any

from bench.config.build import OptionError
from bench.errors import MissingDependencyError
from bench.generation.base import Generation, GenerationRequest


def latency_from_metrics(metrics: Any, output_tokens: int) -> tuple[float | None, float | None,
                                                                     float | None]:
    """(ttft_ms, tpot_ms, e2e_ms) from a vLLM request-metrics object, None where absent.

    V1 ``RequestStateStats``: ``first_token_latency`` (s, from arrival) and monotonic
    ``first_token_ts`` / ``last_token_ts``. V0 ``RequestMetrics``: wall-clock
    ``arrival_time``, ``first_token_time``, ``last_token_time``.
    """
    if metrics is None:
        return None, None, None
    first_latency = getattr(metrics, "first_token_latency", None)
    first_ts = getattr(metrics, "first_token_ts", None)
    last_ts = getattr(metrics, "last_token_ts", None)
    if first_latency is None:  # V0 names
        arrival = getattr(metrics, "arrival_time", None)
        first_ts = getattr(metrics, "first_token_time", None)
        last_ts = getattr(metrics, "last_token_time", None)
        if arrival is not None and first_ts is not None:
            first_latency = first_ts - arrival
    # A zero timestamp is vLLM's "not recorded" (stats logging disabled).
    if not first_latency or first_latency <= 0:
        return None, None, None
    ttft = first_latency * 1000.0
    if not first_ts or not last_ts or last_ts < first_ts:
        return ttft, None, None
    decode_ms = (last_ts - first_ts) * 1000.0
    tpot = decode_ms / (output_tokens - 1) if output_tokens > 1 else None
    return ttft, tpot, ttft + decode_ms


class VLLMEngineGenerator:
    """``vllm.LLM`` in this process. Options map to ``vllm.LLM`` arguments; ``engine_args``
    passes any other (``enable_prefix_caching``, ``kv_cache_dtype``...). All of them are part
    of ``cache_params`` except ``gpu_memory_utilization`` (it changes capacity, not answers).
    """

    def __init__(
        self,
        *,
        model: str,
        dtype: str = "auto",
        max_model_len: int | None = None,
        gpu_memory_utilization: float = 0.9,
        tensor_parallel_size: int = 1,
        quantization: str | None = None,
        enforce_eager: bool = False,
        engine_args: dict[str, Any] | None = None,
    ) -> None:
        if not model:
            raise OptionError("model", "must name a model (hub name or local path)")
        if not 0.0 < gpu_memory_utilization <= 1.0:
            raise OptionError("gpu_memory_utilization", "must be in (0, 1]")
        if tensor_parallel_size < 1:
            raise OptionError("tensor_parallel_size", "must be >= 1")
        if importlib.util.find_spec("vllm") is None:
            raise MissingDependencyError("vllm", "vllm", "generator=vllm (the vLLM engine)")
        self.model = model
        self.dtype = dtype
        self.max_model_len = max_model_len
        self.gpu_memory_utilization = gpu_memory_utilization
        self.tensor_parallel_size = tensor_parallel_size
        self.quantization = quantization
        self.enforce_eager = enforce_eager
        self.engine_args = dict(engine_args or {})
        self._llm: Any = None

    def __repr__(self) -> str:
        return f"VLLMEngineGenerator(model={self.model!r}, dtype={self.dtype!r})"

    def cache_params(self) -> dict[str, object]:
        return {
            "backend": "vllm",
            "model": self.model,
            "dtype": self.dtype,
            "max_model_len": self.max_model_len,
            "tensor_parallel_size": self.tensor_parallel_size,
            "quantization": self.quantization,
            "enforce_eager": self.enforce_eager,
            "engine_args": dict(sorted(self.engine_args.items())),
        }

    def _engine(self) -> Any:
        if self._llm is None:
            from vllm import LLM

            kwargs: dict[str, Any] = {
                # Per-request stats (TTFT) are only recorded with stats logging on.
                "disable_log_stats": False,
                **self.engine_args,
                "model": self.model,
                "dtype": self.dtype,
                "max_model_len": self.max_model_len,
                "gpu_memory_utilization": self.gpu_memory_utilization,
                "tensor_parallel_size": self.tensor_parallel_size,
                "quantization": self.quantization,
                "enforce_eager": self.enforce_eager,
            }
            self._llm = LLM(**kwargs)
        return self._llm

    def count_tokens(self, text: str) -> int:
        tok = self._engine().get_tokenizer()
        return len(tok.encode(text, add_special_tokens=False))

    def _sampling(self, req: GenerationRequest) -> Any:
        from vllm import SamplingParams

        s = req.sampling
        kwargs: dict[str, Any] = {
            "max_tokens": s.max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "seed": s.seed,
        }
        if req.json_schema is not None:
            schema = json.loads(req.json_schema)
            try:  # vLLM >= 0.11: structured_outputs; guided_decoding was removed in 0.12
                from vllm.sampling_params import StructuredOutputsParams

                kwargs["structured_outputs"] = StructuredOutputsParams(json=schema)
            except ImportError:
                from vllm.sampling_params import GuidedDecodingParams

                kwargs["guided_decoding"] = GuidedDecodingParams(json=schema)
        return SamplingParams(**kwargs)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        if not requests:
            return []
        llm = self._engine()
        conversations = [
            [{"role": m.role, "content": m.content} for m in r.messages] for r in requests
        ]
        params = [self._sampling(r) for r in requests]
        t0 = time.perf_counter()
        try:
            outputs = llm.chat(conversations, sampling_params=params, use_tqdm=False)
        except Exception as exc:  # an engine failure becomes a record per request
            wall = (time.perf_counter() - t0) * 1000.0
            msg = f"{type(exc).__name__}: {exc}"
            return [_error(r, msg, wall) for r in requests]
        wall = (time.perf_counter() - t0) * 1000.0
        return [_record(r, out, wall) for r, out in zip(requests, outputs, strict=True)]

    def close(self) -> None:
        if self._llm is None:
            return
        llm, self._llm = self._llm, None
        shutdown = getattr(getattr(llm, "llm_engine", None), "shutdown", None)
        if callable(shutdown):
            shutdown()
        del llm
        import gc

        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass


def _record(req: GenerationRequest, out: Any, wall_ms: float) -> Generation:
    completion = out.outputs[0]
    n_out = len(completion.token_ids)
    ttft, tpot, e2e = latency_from_metrics(getattr(out, "metrics", None), n_out)
    finish = completion.finish_reason or "error"
    ok = finish in ("stop", "length")
    return Generation(
        request_id=req.request_id,
        text=completion.text,
        status="ok" if ok else "error",
        finish_reason=finish if ok else "error",
        prompt_tokens=len(out.prompt_token_ids or ()),
        output_tokens=n_out,
        ttft_ms=ttft,
        tpot_ms=tpot,
        e2e_ms=e2e if e2e is not None else wall_ms,
        error=None if ok else f"vLLM finish reason {finish!r}",
    )


def _error(req: GenerationRequest, msg: str, wall_ms: float) -> Generation:
    return Generation(req.request_id, "", "error", "error", 0, 0, None, None, wall_ms,
                      error=msg)
