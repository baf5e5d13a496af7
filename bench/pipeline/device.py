"""Resolve ``device: auto|cpu|cuda``. Asking for cuda without a GPU is an error, not a fallback."""

from __future__ import annotations

from bench.errors import ConfigError, DeviceError

DEVICES = ("auto", "cpu", "cuda")


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def resolve_device(requested: str) -> str:
    if requested not in DEVICES:
        raise ConfigError("device", f"must be one of {', '.join(DEVICES)}, got {requested!r}")
    if requested == "auto":
        return "cuda" if cuda_available() else "cpu"
    if requested == "cuda" and not cuda_available():
        raise DeviceError(
            "config key device: cuda requested but no CUDA GPU is visible to torch "
            "(use device=cpu or device=auto)"
        )
    return requested
