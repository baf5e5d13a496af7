"""User-facing errors.

Every problem the user can fix (a bad config value, a malformed input row, a missing optional
package) is raised as a ``BenchError`` subclass. Entry points print ``str(err)`` as ONE line and
exit with ``err.exit_code`` (2); a traceback means a bug in bench, not in the user's input.
"""

from __future__ import annotations

from pathlib import Path


class BenchError(Exception):
    """An error the user can act on; printed as one line, exit code 2."""

    exit_code = 2

    def one_line(self) -> str:
        return " ".join(str(self).split())


class ConfigError(BenchError):
    """A config value is invalid. ``key`` is the dotted config path (``embedder.batch_size``)."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message
        super().__init__(f"config key {key}: {message}")


class InputError(BenchError):
    """A malformed input file. Names ``file:line`` (line is 1-based; 0 = whole file)."""

    def __init__(self, path: str | Path, line: int, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line > 0 else self.path
        super().__init__(f"{where}: {message}")


class MissingDependencyError(BenchError):
    """An optional package is not installed; names the extra that provides it."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        super().__init__(
            f"{purpose} needs the Python package '{package}': install it with "
            f"`pip install -e '.[{extra}]'` (or `make setup EXTRAS={extra}`)"
        )


class ServiceError(BenchError):
    """A served backend (a remote embedder or reranker, a database) failed DURING work: the
    server died, refused or kept failing after its retries. Raised where work cannot go on
    without it (an index-time build); the run marks the configs that need that work
    ``failed`` with this line and completes the others (exit code 5)."""


class DeviceError(BenchError):
    """A device was requested that this machine does not have (never a silent fallback)."""
