"""Lazy imports of the ``ingest`` extra's libraries: a missing one is one line naming the extra."""

from __future__ import annotations

import importlib
from types import ModuleType

from bench.errors import MissingDependencyError


def need(module: str, package: str, purpose: str) -> ModuleType:
    """Import ``module`` or raise MissingDependencyError naming ``package`` and the extra."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependencyError(package, "ingest", purpose) from None


def normalise_ws(text: str) -> str:
    """Whitespace runs (spaces, newlines, tabs) as one space, stripped: layout is not text."""
    return " ".join(text.split())
