"""Compute precision of the torch encoders: ``fp32 | fp16 | bf16 | auto``, resolved once.

* fp32: the weights' float32 (the default; every published number was measured with it).
* bf16 on CPU: ``torch.autocast("cpu", dtype=torch.bfloat16)`` around the forward pass, weights
  left in float32. The matrix products run in bf16 (AMX / AVX-512 BF16 kernels where the CPU
  has them), layer norms and the pooled, normalised vectors stay float32. Measured on a Xeon
  with AMX: all-MiniLM-L6-v2 2.2-3.0x faster than bare sentence-transformers fp32
  (scripts/bench_embed.py, 400 FOLDOC chunks), min cosine to fp32 0.99994 over all 4871
  quickstart chunks. Not bit-identical, so not the default: on quickstart 69 of 600 queries
  change some per-query value (top-10 sets equal on 660 of 700 queries), no metric mean moves
  significantly (largest: recall@10 +0.0017, 95 % CI [-0.0011, 0.0056]).
  On a CPU without bf16 instructions it still runs (emulated), only slower: nothing refuses it.
* bf16 / fp16 on CUDA: the weights are cast (``model.bfloat16()`` / ``model.half()``).
  fp16 on CPU is refused: torch has no fast fp16 CPU kernels.
* auto: bf16 where the hardware has native bf16 (CPU flags ``amx_bf16`` or ``avx512_bf16``;
  a CUDA GPU that torch says supports bf16), fp32 elsewhere. The choice is recorded
  (``PrecisionChoice``, run.json ``precision``), and the RESOLVED precision is what cache
  keys see, so ``auto`` on a CPU without the flags shares fp32's cached vectors.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Protocol, runtime_checkable

from bench.config.build import OptionError

log = logging.getLogger(__name__)

PRECISIONS = ("fp32", "fp16", "bf16", "auto")
#: /proc/cpuinfo flags of native bf16 arithmetic (Intel AMX; AVX-512 BF16 on Intel and AMD)
CPU_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


@dataclass(frozen=True)
class PrecisionChoice:
    """What was asked, what runs (fp32|fp16|bf16) and why."""

    requested: str
    resolved: str
    reason: str


@runtime_checkable
class HasPrecision(Protocol):
    """A component whose compute precision is an option (recorded in run.json). None: not
    for this instance (a bi-encoder reranker over an embedder without the option)."""

    @property
    def precision_choice(self) -> PrecisionChoice | None: ...


def precision_json(component: object) -> dict[str, str] | None:
    """run.json's record of a component's precision; None when it has no such option."""
    choice = component.precision_choice if isinstance(component, HasPrecision) else None
    return None if choice is None else asdict(choice)


def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU's feature flags (first ``flags`` line of ``path``); empty when unreadable
    (not Linux, a sandbox): ``auto`` then resolves to fp32, the safe side."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "flags":
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def cuda_bf16_supported() -> bool:
    import torch

    return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())


def resolve_precision(
    requested: str,
    device: str,
    *,
    flags: Callable[[], frozenset[str]] | None = None,
    cuda_bf16: Callable[[], bool] | None = None,
    option: str = "precision",
) -> PrecisionChoice:
    """``requested`` on ``device`` (cpu|cuda, already resolved) -> the precision that runs.

    ``flags`` and ``cuda_bf16`` are the hardware probes (default: ``cpu_flags``,
    ``cuda_bf16_supported``, looked up when called so tests can replace them), injectable so
    that tests do not depend on the machine they run on; each is called only when ``auto``
    needs it."""
    if requested not in PRECISIONS:
        raise OptionError(option, f"must be one of {', '.join(PRECISIONS)}, got {requested!r}")
    if requested == "fp16" and device != "cuda":
        raise OptionError(option, f"fp16 needs device=cuda (got {device}); on CPU use bf16 "
                                  "or auto")
    if requested != "auto":
        return PrecisionChoice(requested, requested, "requested")
    if device == "cuda":
        if (cuda_bf16 or cuda_bf16_supported)():
            return PrecisionChoice("auto", "bf16", "the CUDA GPU supports bf16")
        return PrecisionChoice("auto", "fp32", "the CUDA GPU has no bf16 support")
    found = sorted(set(CPU_BF16_FLAGS) & (flags or cpu_flags)())
    if found:
        return PrecisionChoice("auto", "bf16", f"the CPU reports {', '.join(found)}")
    return PrecisionChoice("auto", "fp32", f"the CPU reports none of {', '.join(CPU_BF16_FLAGS)}")


def log_choice(component: str, choice: PrecisionChoice) -> None:
    """One line for an ``auto`` choice (explicit requests need no explanation)."""
    if choice.requested == "auto":
        log.info("%s precision auto -> %s (%s)", component, choice.resolved, choice.reason)


@contextlib.contextmanager
def autocast(choice: PrecisionChoice, device: str) -> Iterator[None]:
    """The forward pass's context: bf16 autocast on CPU, nothing otherwise (fp32, and on CUDA
    the weights themselves are cast when the model is loaded)."""
    if choice.resolved == "bf16" and device == "cpu":
        import torch

        with torch.autocast("cpu", dtype=torch.bfloat16):
            yield
    else:
        yield
