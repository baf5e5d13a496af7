"""Helpers shared by the metric CLIs (``bench.evaluate``, ``bench.compare``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from bench.errors import BenchError


class UsageError(BenchError):
    """A bad command line."""


class OneLineParser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see --help)")


def run_cli(body: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None) -> int:
    """Run ``body``; a BenchError or unreadable file becomes one stderr line and exit 2."""
    try:
        return body(argv)
    except BenchError as err:
        print(err.one_line(), file=sys.stderr)
        return err.exit_code
    except OSError as err:
        where = err.filename if err.filename is not None else "input"
        print(f"{where}: {err.strerror or err}", file=sys.stderr)
        return 2


def format_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Plain aligned text table; floats with 4 decimals."""

    def cell(v: object) -> str:
        if isinstance(v, float):
            return f"{v:.4f}"
        return "-" if v is None else str(v)

    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)
