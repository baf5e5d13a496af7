"""``python -m bench`` for the tests: as a user runs it (a subprocess), or in this process.

A subprocess starts a fresh interpreter and imports torch, Hydra and the pipeline again: 3-5 s
on a busy 2-core box before the first line of config checking. A test of what the command
says about a bad config before any work (exit 2, one line naming the key) needs none of that,
so each such table runs its first case as a subprocess (the real command line, end to end) and
the rest through :func:`bench_in_process`: ``bench.app.main`` with ``sys.argv`` set, stderr
and stdout captured, ``SystemExit`` read as the exit code, an uncaught exception printed as
its traceback with exit 1 (what the interpreter would do). Both return a
``CompletedProcess``, so a test asserts the same things of either.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def bench(*args: str, cwd: Path = REPO, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``python -m bench ARGS`` in a subprocess."""
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def in_process(main: Callable[[list[str]], object], argv: Sequence[str]
               ) -> subprocess.CompletedProcess[str]:
    """``main(argv)`` with its output captured and its exit read as a process's would be:
    the code it returns or exits with."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            ret = main(list(argv))  # an entry that returns its exit code, or None (0)
            code = ret if isinstance(ret, int) else 0
        except SystemExit as exc:  # sys.exit(message) prints it and exits 1
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, int | None):
                print(exc.code, file=sys.stderr)
        except BaseException:  # the interpreter would print it and exit 1
            traceback.print_exc(file=err)
            code = 1
    return subprocess.CompletedProcess(["bench", *argv], code, out.getvalue(), err.getvalue())


def run_bench_main(argv: list[str]) -> int:
    """``bench.app.main`` as the command line calls it, ready to be called again."""
    from hydra.core.global_hydra import GlobalHydra

    import bench.app

    GlobalHydra.instance().clear()
    # bench.app.main sets HYDRA_FULL_ERROR for its own process; a second in-process call
    # would read it as the user asking for tracebacks
    os.environ.pop("HYDRA_FULL_ERROR", None)
    old = sys.argv
    sys.argv = ["bench", *argv]
    try:
        bench.app.main()
    finally:
        sys.argv = old
    return 0


def bench_in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m bench ARGS`` in this process (module docstring)."""
    return in_process(run_bench_main, args)
