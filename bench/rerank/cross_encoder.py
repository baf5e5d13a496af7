"""sentence-transformers ``CrossEncoder``: the query and passage read together, one forward
pass per pair. The most accurate kind of reranker and the recommended one on GPU boxes.

The model loads on the first ``score`` call, so building the option (config checks, plans,
fully cached runs) needs neither torch nor the weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

import numpy as np

from bench.config.build import OptionError
from bench.errors import ConfigError, MissingDependencyError
from bench.precision import PrecisionChoice, autocast, log_choice, resolve_precision
from bench.rerank.common import (
    DEFAULT_DEPTHS,
    check_depths,
    check_device,
    check_pools,
    check_positive,
    local_or_hub,
    split,
)


class CrossEncoderReranker:
    """model: a local folder or a hub name (a hub name needs a reachable hub the first time).
    Scores are the model's default activation of its single logit (sigmoid for
    sentence-transformers cross-encoders), so ``score_threshold`` is in that scale.
    precision: fp32 | bf16 | auto | fp16 (``bench.precision``: bf16 on CPU is autocast over
    float32 weights; fp16 needs device cuda).
    """

    name = "cross_encoder"

    def __init__(
        self,
        *,
        model: str,
        batch_size: int = 32,
        max_length: int | None = 512,
        precision: str = "fp32",
        depths: Sequence[int] = DEFAULT_DEPTHS,
        score_threshold: float | None = None,
        device: str = "cpu",
    ) -> None:
        if not model:
            raise OptionError("model", "must name a local folder or a hub model")
        self.model_name = model
        self.batch_size = check_positive("batch_size", batch_size)
        if max_length is not None and max_length < 8:
            raise OptionError("max_length", f"must be >= 8 tokens, got {max_length}")
        self.max_length = max_length
        self.device = check_device(device)
        self.precision_choice: PrecisionChoice = resolve_precision(precision, self.device)
        #: the precision that runs (auto resolved): what the cache key sees
        self.precision = self.precision_choice.resolved
        log_choice("reranker (cross-encoder)", self.precision_choice)
        self._depths = check_depths(depths)
        self.score_threshold = score_threshold

    def cache_params(self) -> dict[str, object]:
        # batch_size and device excluded: same scores up to float rounding
        return {
            "model": self.model_name,
            "max_length": self.max_length,
            "precision": self.precision,
        }

    def depths(self) -> list[int]:
        return list(self._depths)

    @cached_property
    def _model(self) -> Any:
        try:
            from sentence_transformers import CrossEncoder
        except ImportError:
            raise MissingDependencyError("sentence-transformers", "cpu",
                                         "the cross-encoder") from None
        try:
            model = CrossEncoder(local_or_hub(self.model_name), device=self.device,
                                 max_length=self.max_length)
        except (OSError, ValueError) as exc:  # missing folder, offline hub, not a model
            raise ConfigError("reranker.model", f"cannot load {self.model_name!r}: "
                              f"{' '.join(str(exc).split())}") from None
        if model.num_labels != 1:
            raise ConfigError("reranker.model", f"{self.model_name!r} has {model.num_labels} "
                              "output labels; a reranking cross-encoder has one")
        if self.precision == "fp16":
            model.half()
        elif self.precision == "bf16" and self.device == "cuda":
            model.bfloat16()
        # bf16 on CPU: autocast over the float32 weights at predict time
        model.eval()
        return model

    def score(self, queries: Sequence[str], passages: Sequence[Sequence[str]]) -> list[np.ndarray]:
        check_pools(queries, passages)
        pairs = [(q, p) for q, pool in zip(queries, passages, strict=True) for p in pool]
        if not pairs:
            return split(np.zeros(0, dtype=np.float32), passages)
        # one predict over every pair: sentence-transformers sorts them by length across
        # queries, so batches carry little padding
        with autocast(self.precision_choice, self.device):
            flat = self._model.predict(pairs, batch_size=self.batch_size,
                                       convert_to_numpy=True, show_progress_bar=False)
        return split(np.asarray(flat, dtype=np.float32).reshape(-1), passages)
