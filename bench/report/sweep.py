"""Sweep-level report: gather every job of a multirun into one table, Pareto front and plots.

Runs as a Hydra callback at the end of ``python -m bench -m ...`` (any launcher: basic,
joblib, submitit/SLURM, Ray), and by hand with ``python -m bench.report.sweep SWEEP_DIR`` —
e.g. after cluster jobs finished separately. A job folder without ``run.json`` is counted as
missing (a failed or unfinished job), never silently left out.

Failures: each job's ``job_status.json`` (bench/report/jobs.py) says whether it failed (with
its one-line error), was killed before finishing (status still ``running``: timeout, OOM
killer, lost node) or never started. They are listed in the report and in
``sweep_status.json``, and the sweep's exit code is 4 (``EXIT_SWEEP_INCOMPLETE``) when any
job did not finish, else 3 when some job failed a release gate, else 0.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from bench.docs import REPORTS
from bench.errors import BenchError
from bench.report import ann_answers
from bench.report.fmt import num
from bench.report.jobs import EXIT_SWEEP_INCOMPLETE, read_status
from bench.report.load import Merged, RunData, load_run
from bench.report.views import cost_axes, front
from bench.results.write import atomic_write_bytes, write_table

log = logging.getLogger("bench")

SWEEP_CONFIGS = pa.schema([
    pa.field("schema_version", pa.int32(), nullable=False),
    pa.field("job", pa.string(), nullable=False),
    pa.field("overrides", pa.string(), nullable=False),
    pa.field("config_id", pa.string(), nullable=False),
    pa.field("label", pa.string(), nullable=False),
    pa.field("metric", pa.string(), nullable=False),
    pa.field("n", pa.int64(), nullable=False),
    pa.field("mean", pa.float64(), nullable=True),
    pa.field("ci_low", pa.float64(), nullable=True),
    pa.field("ci_high", pa.float64(), nullable=True),
    pa.field("recall_at_100", pa.float64(), nullable=True),
    pa.field("ann_recall_at_10", pa.float64(), nullable=True),
    pa.field("qps", pa.float64(), nullable=True),
    pa.field("p95_ms", pa.float64(), nullable=True),
    # per query, summed along the config's chain (search, fusion/filter shares, rerank): the
    # latency the Pareto front is drawn on (the search's p95 where a run predates it)
    pa.field("e2e_p95_ms", pa.float64(), nullable=True),
    pa.field("index_bytes", pa.int64(), nullable=True),
    pa.field("build_s", pa.float64(), nullable=True),
    pa.field("pruned_reason", pa.string(), nullable=True),
    pa.field("on_pareto_front", pa.bool_(), nullable=False),
    # the e2e p95's bootstrap CI over requests and the paired front rule's verdict
    # (bench.report.pareto: front | tied | dominated | pruned | no data)
    pa.field("e2e_p95_ci_low", pa.float64(), nullable=True),
    pa.field("e2e_p95_ci_high", pa.float64(), nullable=True),
    pa.field("front_status", pa.string(), nullable=False),
])


@dataclass(frozen=True)
class SweepRow:
    """One config of one finished job: a row of sweep_configs.parquet (``SWEEP_CONFIGS``)."""

    job: str
    overrides: str
    config_id: str
    label: str
    #: the metric of the row's mean and CI (the sweep report's ``metric``)
    metric: str
    n: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    recall_at_100: float | None
    ann_recall_at_10: float | None
    qps: float | None
    p95_ms: float | None
    e2e_p95_ms: float | None
    e2e_p95_ci_low: float | None
    e2e_p95_ci_high: float | None
    index_bytes: int | None
    build_s: float | None
    pruned_reason: str | None
    #: the paired front rule's verdict (bench.report.pareto: front | tied | dominated | ...)
    front_status: str
    on_pareto_front: bool

    def ci_err(self) -> tuple[float, float]:
        """(mean - ci_low, ci_high - mean) for an error bar; 0 where a bound is missing."""
        if self.mean is None:
            return 0.0, 0.0
        return (self.mean - (self.ci_low if self.ci_low is not None else self.mean),
                (self.ci_high if self.ci_high is not None else self.mean) - self.mean)


def _overrides(job_dir: Path) -> str:
    path = job_dir / ".hydra" / "overrides.yaml"
    if not path.is_file():
        return ""
    items = [ln.strip().removeprefix("- ").strip() for ln in path.read_text().splitlines()]
    return " ".join(i for i in items if i)


def collect(sweep_dir: Path, metric: str) -> tuple[list[SweepRow], list[str]]:
    """Rows (one per job x config) and the job folders that have no finished run."""
    found: list[tuple[str, dict[str, Any]]] = []
    missing: list[str] = []
    runs: list[RunData] = []
    jobs = sorted((p for p in sweep_dir.iterdir() if p.is_dir() and not p.name.startswith(".")),
                  key=lambda p: (len(p.name), p.name))
    for job in jobs:
        status = read_status(job)
        failed = status is not None and status.status in ("failed", "running")
        if failed or not (job / "run.json").is_file():
            if failed or (job / ".hydra").is_dir():
                missing.append(job.name)
            continue
        run = load_run(job, name=job.name, prefix_keys=True)
        runs.append(run)
        for c in run.configs:
            main, rec, ann = (c.summary.get(("all", m))
                              for m in (metric, "recall@100", "ann_recall@10"))
            row = c.row
            found.append((c.key, {
                "job": job.name, "overrides": _overrides(job), "config_id": c.config_id,
                "label": c.label, "metric": metric, "n": main.n if main else 0,
                "mean": main.mean if main else None,
                "ci_low": main.ci_low if main else None,
                "ci_high": main.ci_high if main else None,
                "recall_at_100": rec.mean if rec else None,
                "ann_recall_at_10": ann.mean if ann else None,
                "qps": row.qps, "p95_ms": row.p95_ms, "e2e_p95_ms": row.e2e_p95_ms,
                "e2e_p95_ci_low": row.e2e_p95_ci_low, "e2e_p95_ci_high": row.e2e_p95_ci_high,
                "index_bytes": row.index_bytes, "build_s": row.build_s,
                "pruned_reason": row.pruned_reason}))
    # one front over every job's configs: point front, then the paired rule for the rest
    # (jobs on one dataset pair per query; the latency axis carries the p95 CIs)
    verdict = {p.key: p.status for p in front(Merged(tuple(runs)), metric,
                                              cost_axes()[0]).points} if runs else {}
    rows = [SweepRow(**r, front_status=verdict.get(key, "no data"),
                     on_pareto_front=verdict.get(key) == "front") for key, r in found]
    return rows, missing


def _latency(r: SweepRow) -> float | None:
    """The config's end-to-end p95 per query (a reranked config pays its reranker), or the
    search's p95 for runs written before end-to-end latency was recorded."""
    return float(r.e2e_p95_ms) if r.e2e_p95_ms else r.p95_ms


@dataclass(frozen=True)
class Unfinished:
    """A job of the sweep without results: why, and its error when it raised one."""

    job: str
    overrides: str
    status: str  # failed | killed | not started
    error_type: str | None
    error: str


def unfinished(sweep_dir: Path, names: list[str]) -> list[Unfinished]:
    out = []
    for name in names:
        job = sweep_dir / name
        st = read_status(job)
        if st is None:
            out.append(Unfinished(name, _overrides(job), "not started", None,
                                  "no job_status.json: never started, or killed before starting"))
        elif st.status == "running":
            out.append(Unfinished(name, _overrides(job), "killed", None,
                                  f"started on {st.host} (pid {st.pid}) and never finished: "
                                  "timeout, out of memory or lost node; see the job's log"))
        else:
            out.append(Unfinished(name, _overrides(job), st.status, st.error_type,
                                  st.error or ""))
    return out


def sweep_exit_code(sweep_dir: Path) -> int:
    """4 if any job did not finish, else 3 if any job failed a gate, else 0."""
    status = json.loads((sweep_dir / "sweep_status.json").read_text())
    return int(status["exit_code"])


def write_sweep_report(sweep_dir: Path, *, metric: str = "ndcg@10",
                       x_key: str | None = None) -> Path:
    if not sweep_dir.is_dir():
        raise BenchError(f"{sweep_dir}: no such sweep folder")
    rows, missing = collect(sweep_dir, metric)
    write_table([asdict(r) for r in rows], SWEEP_CONFIGS,
                sweep_dir / "sweep_configs.parquet")
    lines = [f"# Sweep report: {sweep_dir}", "",
             f"{len({r.job for r in rows})} finished jobs, {len(rows)} configs; "
             f"missing (failed or unfinished) jobs: {len(missing)}"
             + (f" ({', '.join(missing)})" if missing else ""), "",
             f"| job | overrides | config | {metric} (95 % CI) | n | Recall@100 | "
             "ANN recall@10 | QPS | search p95 ms | e2e p95 ms | index MiB | build s | Pareto |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if r.pruned_reason:
            lines.append(f"| {r.job} | `{r.overrides}` | {r.label} | pruned: "
                         f"{r.pruned_reason} |")
            continue
        ci = ("-" if r.mean is None else
              f"{r.mean:.4f} [{r.ci_low:.4f}, {r.ci_high:.4f}]")
        lines.append(
            f"| {r.job} | `{r.overrides}` | {r.label} | {ci} | {r.n} | "
            f"{num(r.recall_at_100, 4)} | {num(r.ann_recall_at_10, 4)} | "
            f"{num(r.qps, 0)} | "
            f"{num(r.p95_ms, 2)} | {_e2e(r)} | "
            f"{num(None if r.index_bytes is None else r.index_bytes / 2**20, 1)} | "
            f"{num(r.build_s, 2)} | {_MARK.get(r.front_status, '')} |")
    answer_rows = ann_answers.sweep_rows(sweep_dir, sorted({r.job for r in rows},
                                                          key=lambda j: (len(j), j)))
    lines += ann_answers.sweep_section(answer_rows)
    if answer_rows:
        write_table(ann_answers.sweep_records(answer_rows), ann_answers.SWEEP_ANN_ANSWERS,
                    sweep_dir / "sweep_ann_answers.parquet")
    failures = unfinished(sweep_dir, missing)
    gates = {r.job: st.failed_gates for r in rows
             if (st := read_status(sweep_dir / r.job)) is not None and st.failed_gates}
    if failures:
        lines += ["", "## Failed or unfinished jobs", "",
                  "| job | overrides | status | error |", "|---|---|---|---|"]
        lines += [f"| {f.job} | `{f.overrides}` | {f.status} | "
                  f"{(f.error_type + ': ') if f.error_type else ''}{_cell(f.error)} |"
                  for f in failures]
    if gates:
        lines += ["", "## Failed release gates", ""]
        lines += [f"- job {job}: {g}" for job, gs in gates.items() for g in gs]
    code = EXIT_SWEEP_INCOMPLETE if failures else 3 if gates else 0
    lines += ["", f"Sweep exit code: {code} ({_MEANING[code]})."]
    lines += ["", f"Pareto (★): no other config has at least as high {metric} and at least as "
              "low end-to-end p95 latency per query (search plus fusion, filter and reranking "
              "along its chain), and is strictly better on one. ≈: off that front but "
              "statistically tied with it — the best front config costing no more is neither "
              f"better on {metric} by the paired per-query 95 % CI (jobs on one dataset pair "
              "per query) nor faster by separated p95 CIs. e2e p95 [95 % CI]: bootstrap over "
              "the interleaved requests it rests on.", ""]
    plot = _plot(rows, sweep_dir / "sweep_pareto.png", metric)
    if plot is not None:
        lines += [f"![quality vs latency]({plot.name})", ""]
    if x_key:
        xplot = _plot_against(rows, x_key, sweep_dir / "sweep_vs_x.png", metric)
        if xplot is not None:
            lines += [f"![{metric} vs {x_key}]({xplot.name})", ""]
    out = sweep_dir / "sweep_report.md"
    atomic_write_bytes(out, "\n".join(lines).encode())
    (sweep_dir / "sweep_missing.json").write_text(json.dumps(missing))
    atomic_write_bytes(sweep_dir / "sweep_status.json", json.dumps({
        "exit_code": code, "finished": sorted({r.job for r in rows}),
        "unfinished": [asdict(f) for f in failures],
        "gate_failed": {job: list(g) for job, g in gates.items()}}, indent=2).encode())
    log.info("sweep report: %s (%d configs, %d missing jobs)", out, len(rows), len(missing))
    return out


#: the Pareto column per front status (bench.report.pareto)
_MARK = {"front": "★", "tied": "≈"}

_MEANING = {0: "every job finished", 3: "a release gate failed",
            EXIT_SWEEP_INCOMPLETE: "incomplete: some jobs failed or did not finish"}


def _e2e(r: SweepRow) -> str:
    if r.e2e_p95_ms is None or r.e2e_p95_ci_low is None:
        return num(r.e2e_p95_ms, 2)
    return f"{r.e2e_p95_ms:.2f} [{r.e2e_p95_ci_low:.2f}, {r.e2e_p95_ci_high:.2f}]"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _plot(rows: list[SweepRow], path: Path, metric: str) -> Path | None:
    pts = [r for r in rows if r.mean is not None and _latency(r)]
    if len(pts) < 2:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    has_ann = any(r.ann_recall_at_10 is not None and r.qps for r in pts)
    fig, axes = plt.subplots(1, 2 if has_ann else 1, figsize=(11 if has_ann else 6, 4.5),
                             squeeze=False)
    ax = axes[0][0]
    for r in pts:
        ax.errorbar(_latency(r), r.mean, yerr=[[r.ci_err()[0]], [r.ci_err()[1]]],
                    fmt="*" if r.on_pareto_front else "o", capsize=2)
        ax.annotate(f"{r.job}:{r.label}", (_latency(r), r.mean), fontsize=6)
    ax.set_xlabel("end-to-end p95 latency per query (ms)")
    ax.set_ylabel(f"{metric} (95 % CI)")
    ax.set_title("quality vs latency (★ Pareto)")
    if has_ann:
        ax2 = axes[0][1]
        ann = [r for r in pts if r.ann_recall_at_10 is not None and r.qps]
        for job in dict.fromkeys(r.job for r in ann):
            mine = sorted((r for r in ann if r.job == job), key=lambda r: r.ann_recall_at_10 or 0.0)
            name = " ".join(o for o in mine[0].overrides.split() if "experiment=" not in o)
            ax2.plot([r.ann_recall_at_10 for r in mine], [r.qps for r in mine], "o-",
                     label=f"{job}: {name}"[:60])
            for r in mine:
                ax2.annotate(r.label.removeprefix("dense"), (r.ann_recall_at_10, r.qps),
                             fontsize=6)
        ax2.legend(fontsize="x-small")
        ax2.set_xlabel("ANN recall@10 vs exact")
        ax2.set_ylabel("QPS (batch mode)")
        ax2.set_yscale("log")
        ax2.set_title("recall vs QPS")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _split(overrides: str, x_key: str) -> tuple[float | None, str]:
    """(value of x_key, the other overrides) of one job."""
    x, rest = None, []
    for item in overrides.split():
        key, _, value = item.partition("=")
        if key.lstrip("+") == x_key:
            try:
                x = float(value)
            except ValueError:
                return None, overrides
        else:
            rest.append(item)
    return x, " ".join(rest)


def _plot_against(rows: list[SweepRow], x_key: str, path: Path,
                  metric: str) -> Path | None:
    """metric and Recall@100 against a swept numeric key, one line per other setting."""
    series: dict[str, list[tuple[float, SweepRow]]] = {}
    for r in rows:
        x, rest = _split(r.overrides, x_key)
        if x is not None and r.mean is not None:
            series.setdefault(f"{rest} {r.label}".strip(), []).append((x, r))
    if not series:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), squeeze=False)
    for name, pts in sorted(series.items()):
        pts.sort(key=lambda p: p[0])
        xs = [p[0] for p in pts]
        axes[0][0].errorbar(xs, [p[1].mean for p in pts],
                            yerr=[[p[1].ci_err()[0] for p in pts],
                                  [p[1].ci_err()[1] for p in pts]],
                            marker="o", capsize=2, label=name)
        axes[0][1].plot(xs, [p[1].recall_at_100 for p in pts], marker="o", label=name)
    axes[0][0].set_ylabel(f"{metric} (95 % CI)")
    axes[0][1].set_ylabel("Recall@100")
    for ax in axes[0]:
        ax.set_xlabel(x_key)
    axes[0][0].legend(fontsize="x-small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


class SweepReportCallback(Callback):
    """Hydra callback: writes the sweep report when a multirun ends.

    x_key: a swept numeric override (e.g. chunker.size) to plot the metric against.
    """

    def __init__(self, metric: str = "ndcg@10", x_key: str | None = None) -> None:
        self.metric = metric
        self.x_key = x_key

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        global _ACTIVE
        _ACTIVE = (Path(config.hydra.sweep.dir), self.metric, self.x_key)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        global _ACTIVE
        _ACTIVE = None
        if config.get("plan_only"):  # the jobs wrote their plans and ran nothing
            code = finish_plan(Path(config.hydra.sweep.dir))
            if code:
                raise SystemExit(code)
            return
        code = finish(Path(config.hydra.sweep.dir), metric=self.metric, x_key=self.x_key)
        if code:
            # Hydra swallows a callback's Exception but not SystemExit: this sets the
            # process exit code once every job has run and the report is written.
            raise SystemExit(code)


#: the multirun in progress in this process (sweep dir, metric, x_key), for launcher errors
_ACTIVE: tuple[Path, str, str | None] | None = None


#: sections a multirun's other callbacks leave for its merged report (``<name>.md``, appended
#: in name order): Hydra calls the ``on_multirun_end`` of callbacks in reverse order, so one
#: listed after ``sweep_report`` runs before the merged report exists
SECTIONS_DIR = "report_sections"


def merged_report_path(sweep_dir: Path) -> Path:
    return sweep_dir / "merged-report" / "report.md"


def append_sections(sweep_dir: Path) -> None:
    """Append ``<sweep dir>/report_sections/*.md`` to the merged report just written."""
    folder, report = sweep_dir / SECTIONS_DIR, merged_report_path(sweep_dir)
    if not folder.is_dir() or not report.is_file():
        return
    with report.open("a") as f:
        for section in sorted(folder.glob("*.md")):
            f.write("\n" + section.read_text())


def finish(sweep_dir: Path, *, metric: str = "ndcg@10", x_key: str | None = None) -> int:
    """Write the report, print one line if the sweep is not clean, return its exit code."""
    out = write_sweep_report(sweep_dir, metric=metric, x_key=x_key)
    # and the merged report of every job (md, self-contained html, png, tensorboard) in
    # <sweep dir>/merged-report; a failure there prints one line and keeps the above
    from bench.report.__main__ import main as merged_report

    merged_report([str(sweep_dir)])
    append_sections(sweep_dir)
    code = sweep_exit_code(sweep_dir)
    if code == EXIT_SWEEP_INCOMPLETE:
        n = len(json.loads((sweep_dir / "sweep_status.json").read_text())["unfinished"])
        print(f"bench: sweep incomplete: {n} job(s) failed or did not finish, see {out}",
              file=sys.stderr)
    elif code:
        print(f"bench: sweep finished with failed release gates, see {out}", file=sys.stderr)
    return code


def finish_plan(sweep_dir: Path) -> int:
    """``plan_only=true`` on a multirun: print one plan across the jobs (nodes the jobs
    share, each job's configs), write ``sweep_plan.txt`` / ``sweep_plan.json``; exit 0, or 4
    when a job wrote no plan (it failed: its error is in its folder)."""
    from bench.pipeline.plan import sweep_plan
    from bench.results.write import write_json

    dirs = sorted((p for p in sweep_dir.iterdir() if p.is_dir() and p.name.isdigit()),
                  key=lambda p: int(p.name))
    missing = [p.name for p in dirs if not (p / "plan.json").is_file()]
    jobs = [(p.name, json.loads((p / "plan.json").read_text())) for p in dirs
            if p.name not in missing]
    text, merged = sweep_plan(jobs)
    (sweep_dir / "sweep_plan.txt").write_text(text + "\n")
    write_json(sweep_dir / "sweep_plan.json", merged)
    print(text)
    if missing:
        print(f"bench: sweep plan incomplete: job(s) {', '.join(missing)} wrote no plan",
              file=sys.stderr)
        return EXIT_SWEEP_INCOMPLETE
    return 0


def finish_after_launcher_error(exc: BaseException) -> int | None:
    """A launcher (submitit, Ray) raised while collecting jobs — typically a job killed by
    its time limit. Write the report of what finished; None if no sweep was running."""
    global _ACTIVE
    if _ACTIVE is None:
        return None
    sweep_dir, metric, x_key = _ACTIVE
    _ACTIVE = None
    print(f"bench: launcher error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}",
          file=sys.stderr)
    finish(sweep_dir, metric=metric, x_key=x_key)
    return EXIT_SWEEP_INCOMPLETE


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report.sweep",
                                     description="Rebuild a sweep's report from its jobs' result "
                                                 "files.",
                                     epilog=REPORTS.help_line())
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument("--metric", default="ndcg@10")
    parser.add_argument("--x-key", default=None, help="swept numeric key to plot against")
    args = parser.parse_args(argv)
    try:
        code = finish(args.sweep_dir, metric=args.metric, x_key=args.x_key)
    except BenchError as exc:
        print(f"bench: error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    print(args.sweep_dir / "sweep_report.md")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
