"""The served experiment's last step: the filtered-ANN selectivity table in its report.

``FilteredAnnCallback`` (a Hydra callback of ``+experiment=served``) runs
``scripts/bench_filtered_ann.py`` on the experiment's own vectors (the artifact cache the jobs
filled, the same ``overrides``) once every job has finished, writes ``<sweep
dir>/filtered_ann.md`` and leaves its section in ``<sweep dir>/report_sections/`` for the merged
report (``merged-report/report.md``). Hydra calls the callbacks' ``on_multirun_end`` in reverse
order, so this one runs before the sweep report's: the sweep report appends the section when it
writes the merged report; a merged report already written (another order) gets it appended
here. A failure is one warning line and a "Not produced" section in that report, saying why:
the jobs' results stand.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

log = logging.getLogger("bench")

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "bench_filtered_ann.py"


def _cache_dir(config: DictConfig) -> str:
    """``cache_dir`` as the jobs resolved it. Outside a job Hydra's own config is not set and
    the default reads ``${hydra:runtime.cwd}``: resolve it against the sweep's config."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    hc = HydraConfig.instance()
    if hc.cfg is not None:
        return str(config.cache_dir)
    # what HydraConfig.get() reads; set_config stores the same masked copy (typed HydraConf)
    hc.cfg = OmegaConf.masked_copy(config, "hydra")  # type: ignore[assignment]
    try:
        return str(config.cache_dir)
    finally:
        hc.cfg = None


class FilteredAnnCallback(Callback):
    def __init__(self, overrides: list[str] | None = None, queries: int = 0,
                 timeout_s: float = 900.0) -> None:
        self.overrides = list(overrides or [])
        self.queries = queries
        self.timeout_s = timeout_s

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if config.get("plan_only"):
            return
        sweep = Path(config.hydra.sweep.dir)
        out = sweep / "filtered_ann.md"
        if not SCRIPT.is_file():
            self._missing(sweep, f"{SCRIPT} not found (a source checkout has it)")
            return
        cmd = [sys.executable, str(SCRIPT), "--cache-dir", _cache_dir(config),
               "--queries", str(self.queries), "--out", str(out), *self.overrides]
        log.info("filtered ANN: %s", " ".join(cmd))
        try:
            done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                                  timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            self._missing(sweep, f"no table after {self.timeout_s:.0f} s")
            return
        if done.returncode != 0 or not out.is_file():
            tail = " | ".join(ln for ln in done.stderr.splitlines()[-3:] if ln.strip())
            self._missing(sweep, f"the script exited {done.returncode}: {tail}")
            return
        report = _section(sweep, out.read_text())
        log.info("filtered ANN: %s (for %s)", out, report)

    @staticmethod
    def _missing(sweep: Path, why: str) -> None:
        """The jobs' results stand, but the report says the table is missing and why (a
        report without it must not read as complete)."""
        log.warning("filtered ANN: table skipped: %s", why)
        _section(sweep, f"**Not produced:** {why}. Run `scripts/bench_filtered_ann.py` by hand "
                        "(docs/vector-databases.md).\n")


def _section(sweep: Path, body: str) -> Path:
    """Leave the section for the merged report (bench.report.sweep appends it when it writes
    the report); append it now when the report is already written."""
    from bench.report.sweep import SECTIONS_DIR, merged_report_path

    text = f"## Filtered ANN across selectivity\n\n{body}"
    folder = sweep / SECTIONS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "filtered_ann.md").write_text(text)
    report = merged_report_path(sweep)
    if report.is_file():
        with report.open("a") as f:
            f.write("\n" + text)
    return report
