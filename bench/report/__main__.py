"""``python -m bench.report DIR... [--out OUT]``: one report over run dirs.

Each DIR is a run dir (holds run.json) or a multirun folder (its job folders are runs; a job
without run.json is counted as missing). All runs are merged into one report:
``OUT/report.md``, ``OUT/report.html`` (self-contained), ``OUT/figures/*.png`` and
``OUT/tensorboard/`` (``tensorboard --logdir OUT/tensorboard``). OUT defaults to
``<first DIR>/merged-report``. A bad DIR prints one line and exits 2.

``--in-run DIR``: the run's own report.md rendered again from its files (bench.report.inrun),
byte-identical to the one the run wrote when the renderer has not changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bench.docs import REPORTS
from bench.errors import InputError
from bench.metrics.cli import OneLineParser, run_cli
from bench.metrics.registry import parse_metric
from bench.report import content, html
from bench.report.load import load_runs
from bench.results.write import atomic_write_bytes


def _body(argv: Sequence[str] | None) -> int:
    p = OneLineParser(prog="python -m bench.report",
                      description="Merge run dirs into one report (md, html, png, tensorboard).",
                      epilog=REPORTS.help_line())
    p.add_argument("dirs", nargs="+", type=Path, help="run dirs or multirun folders")
    p.add_argument("--out", type=Path, default=None, help="output folder")
    p.add_argument("--metrics", nargs="+", default=None, help="quality metrics to show")
    p.add_argument("--front-metric", default=None,
                   help="metric of the Pareto fronts and drill-down (default: first shown)")
    p.add_argument("--all-pairs", action="store_true",
                   help="add the all-pairs comparison table (Holm over all pairs)")
    p.add_argument("--price-per-hour", type=float, default=None,
                   help="GPU/CPU-hour price for cost per query when runs did not record it")
    p.add_argument("--drill", type=int, default=5, help="queries per drill-down list")
    p.add_argument("--no-tensorboard", action="store_true")
    p.add_argument("--title", default="bench report")
    p.add_argument("--in-run", action="store_true",
                   help="re-render one run dir's own report.md from its files (into --out, a "
                        "file, default DIR/report.md) instead of a merged report")
    a = p.parse_args(argv)
    if a.in_run:
        from bench.report.inrun import rerender

        if len(a.dirs) != 1 or not (a.dirs[0] / "run.json").is_file():
            raise InputError(a.dirs[0], 0, "--in-run takes one run dir (holding run.json)")
        print(rerender(a.dirs[0], a.out))
        return 0
    for m in [*(a.metrics or []), *([a.front_metric] if a.front_metric else [])]:
        parse_metric(m)
    merged = load_runs(a.dirs)
    out: Path = a.out or a.dirs[0] / "merged-report"
    figs = out / "figures"
    figs.mkdir(parents=True, exist_ok=True)
    rep = content.build(merged, content.Options(
        metrics=tuple(a.metrics) if a.metrics else None, front_metric=a.front_metric,
        all_pairs=a.all_pairs, price_per_hour=a.price_per_hour, drill_n=a.drill,
        title=a.title))
    for s in _walk(rep.sections):
        for f in s.figures:
            atomic_write_bytes(figs / f.name, f.png)
    atomic_write_bytes(out / "report.md", content.render_markdown(rep, "figures/").encode())
    html.write(rep, out / "report.html")
    if not a.no_tensorboard:
        from bench.report.tensorboard import write_tensorboard

        write_tensorboard(merged, out / "tensorboard")
    print(f"{out / 'report.html'} ({len(merged.configs)} configs from {len(merged.runs)} runs"
          + (f", {len(merged.missing_jobs)} missing jobs" if merged.missing_jobs else "") + ")")
    return 0


def _walk(sections: Sequence[content.Section]) -> list[content.Section]:
    out: list[content.Section] = []
    for s in sections:
        out += [s, *_walk(s.children)]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    return run_cli(_body, argv)


if __name__ == "__main__":
    raise SystemExit(main())
