"""Hydra wiring and the error boundary.

User errors (``BenchError``: bad config value, malformed input, missing extra, missing GPU)
and Hydra/OmegaConf composition errors (unknown key, wrong type, unknown option) are printed
as ONE line on stderr and exit with code 2. Anything else is a bug in bench and keeps its
traceback. Release-gate failures exit 3.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from bench.config.schema import register
from bench.errors import BenchError

CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")

log = logging.getLogger("bench")


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def _hydra_entry(cfg: DictConfig) -> None:
    from bench.pipeline.run import run  # heavy imports after argument parsing

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    if HydraConfig.get().mode == RunMode.MULTIRUN:
        # One failing job must not stop the sweep: record it, the sweep report counts it.
        from bench.report.jobs import run_isolated

        run_isolated(lambda: run(cfg, run_dir), run_dir)
        return
    try:
        result = run(cfg, run_dir)
    except BenchError as exc:
        print(f"bench: error: {exc.one_line()}", file=sys.stderr)
        sys.exit(exc.exit_code)
    if result.plan_text is not None:  # plan_only (a multirun prints one plan at its end)
        print(result.plan_text)
    if result.exit_code:
        for line in result.failed_configs:
            print(f"bench: error: {line}", file=sys.stderr)
        for gate in result.failed_gates:
            print(f"bench: gate failed: {gate}", file=sys.stderr)
        sys.exit(result.exit_code)
    n_gates = len(cfg.get("gates") or [])
    if n_gates:  # a passing gate run says so, not just by its exit code
        print(f"bench: {n_gates} release gate{'s' if n_gates != 1 else ''} passed",
              file=sys.stderr)
    if cfg.get("gates_against"):
        crit = cfg.regression.critical
        print(f"bench: regression gates against {cfg.gates_against} passed "
              f"({len(cfg.regression.gates)} gates, {len(crit.query_ids)} critical queries"
              + (f" and categories {', '.join(crit.categories)}" if crit.categories else "")
              + ")", file=sys.stderr)


def _config_error_line(exc: BaseException) -> str | None:
    """One line for a Hydra/OmegaConf composition error, or None if exc is not one."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and len(chain) < 8:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    if not any(isinstance(e, HydraException | OmegaConfBaseException) for e in chain):
        return None
    omega = next((e for e in chain if isinstance(e, OmegaConfBaseException)), None)
    key = getattr(omega, "full_key", None) if omega is not None else None
    first = (str(omega) if omega is not None else str(exc)).strip().splitlines()
    msg = first[0] if first else type(exc).__name__
    if key:
        return f"config key {key}: {msg}"
    return " ".join(str(exc).split()) if omega is None else msg


def main() -> None:
    register()
    if "--help" in sys.argv[1:] or "-h" in sys.argv[1:]:
        from bench.intro import intro  # bench's own help first; Hydra's generic help follows

        print(intro(CONF_DIR))
    one_line_errors(_hydra_entry, on_launcher_error=True)


def one_line_errors(entry: Callable[[], object], *, on_launcher_error: bool = False) -> None:
    """Run a Hydra entry point (``python -m bench``, ``python -m bench.serve``) so that bad
    input is one line and exit 2: a BenchError's own line and code, a composition error as
    ``bench: config error: ...``; anything else stays a traceback. ``on_launcher_error``: a
    multirun whose launcher failed still finishes its sweep report (bench.report.sweep)."""
    user_wants_trace = "HYDRA_FULL_ERROR" in os.environ
    # Let composition errors reach us instead of Hydra's multi-line report with exit 1. Only
    # for this call: a caller in the same process (a test, a notebook) and the processes it
    # starts later must not inherit it, or their config errors would become tracebacks.
    if not user_wants_trace:
        os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        try:
            entry()
        except BenchError as exc:
            print(f"bench: error: {exc.one_line()}", file=sys.stderr)
            sys.exit(exc.exit_code)
        except Exception as exc:
            line = _config_error_line(exc)
            if on_launcher_error and line is None and not user_wants_trace:
                from bench.report.sweep import finish_after_launcher_error

                code = finish_after_launcher_error(exc)
                if code is not None:
                    sys.exit(code)
            if line is None or user_wants_trace:
                raise
            print(f"bench: config error: {line}", file=sys.stderr)
            sys.exit(2)
    finally:
        if not user_wants_trace:
            os.environ.pop("HYDRA_FULL_ERROR", None)
