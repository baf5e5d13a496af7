"""Read run directories back from their result FILES (README "Results schema").

Every reader of the decision layer (Pareto fronts, HTML, TensorBoard, drill-down) starts from
:func:`load_runs`, never from in-memory pipeline objects, so a report can be rebuilt for any
run dir — a single run, the jobs of a multirun, or several runs merged.

Columns are read by name; optional ones (``status``, ``peak_vram_bytes``, ``cost_per_query``,
``query_id`` in timings, ...) may be absent and read as None. Required files: ``run.json``,
``configs.parquet``, ``summary.parquet``; ``per_query``, ``comparisons`` and ``timings`` are
optional (the parts of the report that need them say they are missing).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from bench.errors import InputError
from bench.metrics.registry import find_metric
from bench.pipeline.lanes import ConfigKind
from bench.results.records import Comparison, ConfigRow, SummaryRow
from bench.results.scores import ConfigScores, read_table, scores_of_table

R = TypeVar("R")

REQUIRED_FILES = ("run.json", "configs.parquet", "summary.parquet")


@dataclass(frozen=True)
class Latency:
    """Single-query latency of a config and where the figures come from.

    ``source``: ``e2e: sum along the chain`` (configs.parquet's ``e2e_*`` columns: per query,
    the query-time stages of the config's chain added up — the query's encoding for a dense
    lane, search, the shares of fusion and filters, reranking — so a fused lane counts its
    inputs and a reranked config its reranker), ``search only`` (older runs without e2e
    columns: the first-stage search),
    ``sum of inputs: ...`` (such a run's fused lane: per query, its input lanes' single-query
    samples plus the fusion stage's per-query share) or ``none``.
    """

    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    n_samples: int
    source: str
    #: the p95's bootstrap CI over the requests (schema >= 4 e2e figures), else None
    p95_ci_low: float | None = None
    p95_ci_high: float | None = None


@dataclass(frozen=True)
class ConfigView:
    """One config of one finished run: the typed records the run wrote, read back by column
    name (the in-run report reads the same ``ConfigRow`` and ``SummaryRow`` in memory)."""

    key: str
    run_name: str
    run_dir: Path
    #: the config's configs.parquet row; a column an older file lacks reads as the field's
    #: default (None, or 0 for a count)
    row: ConfigRow
    #: the same row by column name, for the columns ``ConfigRow`` does not name (a cost column
    #: picked by ``--cost``)
    columns: Mapping[str, Any]
    #: summary rows keyed by (scope, metric)
    summary: Mapping[tuple[str, str], SummaryRow]
    #: per-query values and statuses from per_query.parquet (None without that file or when
    #: the config has no rows in it, e.g. pruned)
    scores: ConfigScores | None
    latency: Latency
    #: the config's peak VRAM, else the run's (run.json resources), else None
    peak_vram_bytes: int | None

    @property
    def config_id(self) -> str:
        return self.row.config_id

    @property
    def label(self) -> str:
        return self.row.label

    @property
    def kind(self) -> str:
        return self.row.kind

    @property
    def status(self) -> str:
        """``ok`` | ``pruned`` | any other value of the ``status`` column."""
        return self.row.status

    @property
    def pruned_reason(self) -> str | None:
        return self.row.pruned_reason

    @property
    def qps(self) -> float | None:
        return self.row.qps

    @property
    def cost_per_query(self) -> float | None:
        return self.row.cost_per_query

    @property
    def params(self) -> dict[str, Any]:
        return _params(self.row.params_json)

    @property
    def display(self) -> str:
        return self.label if self.key == self.config_id else f"{self.run_name}: {self.label}"

    @property
    def kept(self) -> bool:
        return self.status not in ("pruned", "failed") and self.pruned_reason is None

    def mean(self, metric: str, scope: str = "all") -> SummaryRow | None:
        """The summary row of ``metric`` at ``scope`` when it has a mean, else None."""
        row = self.summary.get((scope, metric))
        return row if row is not None and row.mean is not None else None


@dataclass(frozen=True)
class RunData:
    name: str
    run_dir: Path
    manifest: dict[str, Any]
    configs: tuple[ConfigView, ...]
    per_query: pa.Table | None
    comparisons: tuple[Comparison, ...]
    timings: pa.Table | None


@dataclass(frozen=True)
class Merged:
    """Every config of every run given, plus the multirun jobs that did not finish."""

    runs: tuple[RunData, ...]
    missing_jobs: tuple[str, ...] = ()
    configs: tuple[ConfigView, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "configs", tuple(c for r in self.runs for c in r.configs))

    def metrics(self) -> list[str]:
        """Metrics with an overall mean for some config, in first-seen order."""
        seen: dict[str, None] = {}
        for c in self.configs:
            for scope, metric in c.summary:
                if scope == "all":
                    seen.setdefault(metric, None)
        return list(seen)

    def higher_is_better(self, metric: str) -> bool:
        """Direction from the metric registry; a metric it does not know uses the summary's
        ``higher_is_better`` column."""
        spec = find_metric(metric)
        if spec is not None:
            return spec.higher_is_better
        for c in self.configs:
            for (_, m), row in c.summary.items():
                if m == metric:
                    return row.higher_is_better
        return True

    def run_of(self, c: ConfigView) -> RunData:
        return next(r for r in self.runs if r.run_dir == c.run_dir)


def record_of(cls: type[R], row: Mapping[str, Any]) -> R:
    """A typed record (frozen dataclass) from a Parquet row read by column name. A field the
    row lacks (a file written before the column existed) takes the field's default, else
    None, or 0 for a required count."""
    kwargs: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name in row:
            kwargs[f.name] = row[f.name]
        elif f.default is not MISSING:
            kwargs[f.name] = f.default
        elif f.default_factory is not MISSING:
            kwargs[f.name] = f.default_factory()
        else:
            kwargs[f.name] = 0 if f.type == "int" else "" if f.type == "str" else None
    return cls(**kwargs)


def is_run_dir(path: Path) -> bool:
    return (path / "run.json").is_file()


def expand(dirs: Sequence[Path]) -> tuple[list[tuple[str, Path]], list[str]]:
    """(name, run dir) of every run under ``dirs`` and the unfinished multirun jobs.

    A run dir holds run.json; a multirun folder holds job folders (a job with ``.hydra`` but no
    run.json is missing). Anything else is an InputError naming the folder.
    """
    runs: list[tuple[str, Path]] = []
    missing: list[str] = []
    for d in dirs:
        if not d.is_dir():
            raise InputError(d, 0, "no such run folder")
        if is_run_dir(d):
            runs.append((d.name, d))
            continue
        jobs = sorted((p for p in d.iterdir() if p.is_dir() and not p.name.startswith(".")),
                      key=lambda p: (len(p.name), p.name))
        found = [j for j in jobs if is_run_dir(j)]
        missing += [f"{d.name}/{j.name}" for j in jobs if not is_run_dir(j)
                    and (j / ".hydra").is_dir()]
        if not found and not missing:
            raise InputError(d, 0, "not a run folder (no run.json) nor a multirun folder "
                                   "(no job folder holds a run.json)")
        runs += [(f"{d.name}/{j.name}", j) for j in found]
    names = [n for n, _ in runs]
    if len(set(names)) != len(names):
        # two folders of the same name from different places: fall back to full paths
        runs = [(str(p), p) for _, p in runs]
    return runs, missing


def load_runs(dirs: Sequence[Path]) -> Merged:
    """Load and merge run dirs (see :func:`expand`). Config keys are unique across runs."""
    pairs, missing = expand(dirs)
    single = len(pairs) == 1
    return Merged(tuple(load_run(p, name=n, prefix_keys=not single) for n, p in pairs),
                  tuple(missing))


def load_run(run_dir: Path, *, name: str | None = None, prefix_keys: bool = False) -> RunData:
    for f in REQUIRED_FILES:
        if not (run_dir / f).is_file():
            raise InputError(run_dir / f, 0, "missing: not a finished run dir")
    try:
        manifest = json.loads((run_dir / "run.json").read_text())
    except json.JSONDecodeError as exc:
        raise InputError(run_dir / "run.json", exc.lineno, f"invalid JSON: {exc.msg}") from None
    if not isinstance(manifest, dict):
        raise InputError(run_dir / "run.json", 1, "not a JSON object")
    configs_t = read_table(run_dir / "configs.parquet")
    summary_t = read_table(run_dir / "summary.parquet")
    for table, path, cols in ((configs_t, "configs.parquet", ("config_id", "label")),
                              (summary_t, "summary.parquet",
                               ("config_id", "scope", "metric", "mean"))):
        lacking = [c for c in cols if c not in table.column_names]
        if lacking:
            raise InputError(run_dir / path, 0, f"missing columns {lacking}")
    opt = {n: (read_table(run_dir / f"{n}.parquet") if (run_dir / f"{n}.parquet").is_file()
               else None) for n in ("per_query", "comparisons", "timings")}
    summaries: dict[str, dict[tuple[str, str], SummaryRow]] = {}
    for s in summary_t.to_pylist():
        rec = record_of(SummaryRow, s)
        if s.get("higher_is_better") is None:  # schema 1 had no direction: the registry's
            spec = find_metric(rec.metric)
            rec = replace(rec, higher_is_better=spec.higher_is_better if spec else True)
        summaries.setdefault(rec.config_id, {})[(rec.scope, rec.metric)] = rec
    columns = configs_t.to_pylist()
    rows = [_config_row(c) for c in columns]
    timings = opt["timings"]
    scores = ({} if opt["per_query"] is None
              else scores_of_table(opt["per_query"], run_dir / "per_query.parquet"))
    name = name or run_dir.name
    vram_run = _run_peak_vram(manifest)
    views = tuple(ConfigView(
        key=f"{name}/{row.config_id}" if prefix_keys else row.config_id, run_name=name,
        run_dir=run_dir, row=row, columns=col, summary=summaries.get(row.config_id, {}),
        scores=scores.get(row.config_id), latency=_latency(row, rows, timings),
        peak_vram_bytes=(int(row.peak_vram_bytes) if row.peak_vram_bytes is not None
                         else vram_run))
        for row, col in zip(rows, columns, strict=True))
    comps = (() if opt["comparisons"] is None else
             tuple(record_of(Comparison, c) for c in opt["comparisons"].to_pylist()))
    return RunData(name, run_dir, manifest, views, opt["per_query"], comps, timings)


_ROW_NAMES = frozenset(f.name for f in fields(ConfigRow))


def _config_row(col: dict[str, Any]) -> ConfigRow:
    row = record_of(ConfigRow, col)
    # schema 1 had no status column: a pruned config was one with a pruned_reason
    status = col.get("status") or ("pruned" if row.pruned_reason else "ok")
    return replace(row, config_id=str(row.config_id), label=str(row.label),
                   kind=str(row.kind or ""), status=str(status),
                   n_latency_samples=int(row.n_latency_samples or 0),
                   n_e2e_samples=int(row.n_e2e_samples or 0),
                   # a stage's own columns (declared after schema 5)
                   extra={k: v for k, v in col.items()
                          if k not in _ROW_NAMES and k not in ("schema_version", "run_id")})


def _params(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        out = json.loads(raw)
    except json.JSONDecodeError:
        return {"params_json": raw}
    return out if isinstance(out, dict) else {"params": out}


def _run_peak_vram(manifest: dict[str, Any]) -> int | None:
    """Run-wide peak VRAM from run.json's resources (None when no GPU was sampled)."""
    vals = [int(r["peak_vram_bytes"]) for r in manifest.get("resources") or []
            if isinstance(r, dict) and r.get("peak_vram_bytes") is not None]
    return max(vals) if vals else None


def _query_samples(timings: pa.Table, config_id: str) -> dict[str, tuple[np.ndarray, list[Any]]]:
    """stage -> (single-query wall_ms in recorded order, query ids or None per sample)."""
    cols = timings.column_names
    cid = np.asarray(timings.column("config_id").to_pylist(), dtype=object)
    kind = np.asarray(timings.column("sample_kind").to_pylist(), dtype=object)
    sel = np.flatnonzero((cid == config_id) & (kind == "query"))
    stages = timings.column("stage").to_pylist()
    wall = timings.column("wall_ms").to_numpy(zero_copy_only=False)
    qids = timings.column("query_id").to_pylist() if "query_id" in cols else None
    out: dict[str, tuple[list[float], list[Any]]] = {}
    for i in sel:
        ms, q = out.setdefault(stages[i], ([], []))
        ms.append(float(wall[i]))
        q.append(qids[i] if qids is not None else None)
    return {s: (np.asarray(ms), q) for s, (ms, q) in out.items()}


#: Latency.source of the e2e columns and of the first-stage search figures
E2E_SOURCE = "e2e: sum along the chain"
SEARCH_SOURCE = "search only"


def _latency(row: ConfigRow, rows: Sequence[ConfigRow], timings: pa.Table | None) -> Latency:
    # every config on one footing: what a query costs end to end, where the run recorded it
    if row.e2e_p95_ms is not None:
        return Latency(row.e2e_p50_ms, row.e2e_p95_ms, row.e2e_p99_ms, row.n_e2e_samples,
                       E2E_SOURCE if row.latency_source is None
                       else f"e2e: {row.latency_source}",
                       row.e2e_p95_ci_low, row.e2e_p95_ci_high)
    if row.p95_ms is not None:
        return Latency(row.p50_ms, row.p95_ms, row.p99_ms, row.n_latency_samples,
                       SEARCH_SOURCE)
    if row.kind != ConfigKind.FUSED or timings is None:
        return Latency(None, None, None, 0, "none")
    return fused_latency(row, rows, timings)


def fused_latency(row: ConfigRow, rows: Sequence[ConfigRow], timings: pa.Table) -> Latency:
    """Per-query latency of a fused lane = sum of its inputs' single-query samples + fusion.

    Inputs: the lane's own single-query stage samples (the pipeline records the dense lane's
    under the fused config) plus, for each single-query stage the lane lacks, the samples of
    the first unfused lane of the run that has that stage (the BM25 lane's ``lexical``). The
    fusion stage's ``total`` sample is spread evenly over its items. Samples pair by
    ``query_id`` when timings has that column, else by recorded order (both lanes run the
    queries in the same order); only fully paired queries count.
    """
    own = _query_samples(timings, row.config_id)
    parts = dict(own)
    for other in rows:
        if other.kind == ConfigKind.FUSED or other.config_id == row.config_id:
            continue
        for stage, samples in _query_samples(timings, other.config_id).items():
            if stage not in parts and other.kind in (ConfigKind.LEXICAL, ConfigKind.DENSE, ""):
                parts[stage] = samples
    if not parts:
        return Latency(None, None, None, 0, "none")
    per_query: np.ndarray | None = None
    if all(q is not None for _, qs in parts.values() for q in qs):
        common = set.intersection(*(set(qs) for _, qs in parts.values()))
        order = sorted(common)
        per_query = np.zeros(len(order))
        for ms, qs in parts.values():
            idx = {q: i for i, q in enumerate(qs)}
            per_query += np.asarray([ms[idx[q]] for q in order])
    else:
        n = min(len(ms) for ms, _ in parts.values())
        per_query = np.sum([ms[:n] for ms, _ in parts.values()], axis=0)
    fusion = _fusion_share(timings, row.config_id)
    stages = list(parts)
    if fusion is not None:
        per_query = per_query + fusion
        stages.append("fusion/query")
    if per_query.size == 0:
        return Latency(None, None, None, 0, "none")
    p50, p95, p99 = (float(v) for v in np.percentile(per_query, [50, 95, 99]))
    return Latency(p50, p95, p99, int(per_query.size), "sum of inputs: " + " + ".join(stages))


def _fusion_share(timings: pa.Table, config_id: str) -> float | None:
    total, items = 0.0, 0
    for r in timings.select([c for c in ("config_id", "stage", "sample_kind", "n_items",
                                         "wall_ms") if c in timings.column_names]).to_pylist():
        if r["config_id"] == config_id and r["stage"] == "fusion" and r["sample_kind"] == "total":
            total += r["wall_ms"]
            items += r["n_items"]
    return total / items if items else None
