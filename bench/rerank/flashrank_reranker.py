"""flashrank: small ONNX cross-encoders run by onnxruntime on the CPU.

flashrank downloads a model whenever ``cache_dir/<model_name>/`` is missing; this machine (and
any benchmark) must never download at run time, so the folder is checked when the option is
built and a missing file is a config error naming ``reranker.cache_dir``. The ONNX session is
opened on the first ``score`` call.

Filling the cache on a machine with network: ``flashrank.Ranker(model_name=M, cache_dir=D)``
once, then copy ``D/M/`` over.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from bench.config.build import OptionError
from bench.errors import ConfigError, MissingDependencyError
from bench.rerank.common import (
    DEFAULT_DEPTHS,
    check_depths,
    check_device,
    check_pools,
    check_positive,
)

log = logging.getLogger(__name__)

#: Files flashrank's ``Ranker`` reads besides the ONNX model (flashrank/Ranker.py
#: ``_get_tokenizer``); vocab.txt is optional there.
TOKENIZER_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json")


def _model_file_map() -> dict[str, str]:
    try:
        from flashrank.Config import listwise_rankers, model_file_map
    except ImportError:
        raise MissingDependencyError("flashrank", "flashrank", "the flashrank reranker") from None
    return {k: v for k, v in model_file_map.items() if k not in listwise_rankers}


class FlashrankReranker:
    """model_name: a pointwise flashrank model (``ms-marco-TinyBERT-L-2-v2``, ...; the
    listwise LLM rankers are not pointwise and not accepted). Scores are flashrank's sigmoid
    of the logit, in [0, 1]. Always runs on the CPU (onnxruntime's default provider)."""

    name = "flashrank"

    def __init__(
        self,
        *,
        cache_dir: str,
        model_name: str = "ms-marco-TinyBERT-L-2-v2",
        batch_size: int = 32,
        max_length: int = 512,
        depths: Sequence[int] = DEFAULT_DEPTHS,
        score_threshold: float | None = None,
        device: str = "cpu",
    ) -> None:
        files = _model_file_map()
        if model_name not in files:
            raise OptionError("model_name", f"must be one of {', '.join(sorted(files))}, "
                              f"got {model_name!r}")
        self.model_name = model_name
        self.batch_size = check_positive("batch_size", batch_size)
        if max_length < 8:
            raise OptionError("max_length", f"must be >= 8 tokens, got {max_length}")
        self.max_length = max_length
        self._depths = check_depths(depths)
        self.score_threshold = score_threshold
        if check_device(device) == "cuda":
            log.info("flashrank runs on the CPU (onnxruntime); device=cuda is not used by it")
        self.device = "cpu"
        self.cache_dir = Path(cache_dir).expanduser()
        self.model_dir = self.cache_dir / model_name
        self.onnx_file = self.model_dir / files[model_name]
        missing = [f.name for f in (self.onnx_file, *(self.model_dir / n for n in TOKENIZER_FILES))
                   if not f.is_file()]
        if missing:
            raise ConfigError("reranker.cache_dir", f"{self.model_dir} lacks {', '.join(missing)} "
                              "(flashrank would download them; fill the folder offline first)")

    @cached_property
    def _model_digest(self) -> str:
        # the folder, not the name, is the model: two cache dirs may hold different weights
        h = hashlib.blake2b(digest_size=16)
        with open(self.onnx_file, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()

    def cache_params(self) -> dict[str, object]:
        return {
            "model_name": self.model_name,
            "onnx_blake2b": self._model_digest,
            "max_length": self.max_length,
        }

    def depths(self) -> list[int]:
        return list(self._depths)

    @cached_property
    def _ranker(self) -> Any:
        from flashrank import Ranker

        return Ranker(model_name=self.model_name, cache_dir=str(self.cache_dir),
                      max_length=self.max_length, log_level="WARNING")

    def score(self, queries: Sequence[str], passages: Sequence[Sequence[str]]) -> list[np.ndarray]:
        check_pools(queries, passages)
        from flashrank import RerankRequest

        out = []
        for query, pool in zip(queries, passages, strict=True):
            scores = np.zeros(len(pool), dtype=np.float32)
            for b0 in range(0, len(pool), self.batch_size):
                request = RerankRequest(query=query, passages=[
                    {"id": b0 + i, "text": t} for i, t in enumerate(pool[b0:b0 + self.batch_size])
                ])
                # flashrank returns the passages sorted by score; ids put them back in place
                for hit in self._ranker.rerank(request):
                    scores[hit["id"]] = hit["score"]
            out.append(scores)
        return out
