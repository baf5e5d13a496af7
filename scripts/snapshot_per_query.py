"""Snapshot (or compare) the per-query values of finished runs, keyed by config LABEL.

Config ids may change when the id scheme changes; labels ("dense", "rrf(k=60)",
"dense(efSearch=16)", "bm25|hard") name the same config across code versions, so the
before/after identity of a redesign is checked on (experiment, label, query_id, metric).

    python scripts/snapshot_per_query.py snap OUT.parquet NAME=RUN_DIR [NAME=RUN_DIR ...]
    python scripts/snapshot_per_query.py diff BEFORE.parquet AFTER.parquet

A RUN_DIR may be a multirun folder: every job folder under it is taken.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

Key = tuple[str, str, str, str]


def values_of(name: str, run_dir: Path) -> dict[Key, float]:
    labels = dict(zip(*(pq.read_table(run_dir / "configs.parquet",
                                      columns=["config_id", "label"]).to_pydict().values()),
                      strict=True))
    t = pq.read_table(run_dir / "per_query.parquet").to_pydict()
    out = {}
    # schema 1 had no status: every row was a value
    statuses = t.get("status") or ["scored"] * len(t["value"])
    for cid, qid, metric, value, status in zip(t["config_id"], t["query_id"], t["metric"],
                                               t["value"], statuses, strict=True):
        if status in ("scored", "missing_run"):
            out[(name, labels[cid], qid, metric)] = float(value)
    return out


def run_dirs(base: Path) -> list[Path]:
    if (base / "per_query.parquet").is_file():
        return [base]
    return sorted(p for p in base.iterdir() if (p / "per_query.parquet").is_file())


def snap(out: Path, specs: list[str]) -> None:
    values: dict[Key, float] = {}
    for spec in specs:
        name, _, d = spec.partition("=")
        dirs = run_dirs(Path(d))
        for p in dirs:  # jobs of a multirun repeat labels: key them by job folder
            values.update(values_of(name if len(dirs) == 1 else f"{name}/{p.name}", p))
    keys = sorted(values)
    cols = list(zip(*keys, strict=True)) if keys else [[], [], [], []]
    table = pa.table({"experiment": cols[0], "label": cols[1], "query_id": cols[2],
                      "metric": cols[3], "value": [values[k] for k in keys]})
    pq.write_table(table, out)
    print(f"{out}: {table.num_rows} values")


def load(path: Path) -> dict[Key, float]:
    t = pq.read_table(path).to_pydict()
    return {(e, lab, q, m): v for e, lab, q, m, v in zip(
        t["experiment"], t["label"], t["query_id"], t["metric"], t["value"], strict=True)}


def compare(before: dict[Key, float], after: dict[Key, float]) -> tuple[int, int, float, list[str]]:
    """(values compared, values only in before, max |difference|, per-experiment lines)."""
    common = before.keys() & after.keys()
    only_before = len(before.keys() - after.keys())
    per_exp: dict[str, tuple[int, set[str], float]] = {}
    worst = 0.0
    for k in common:
        a, b = before[k], after[k]
        d = 0.0 if (a == b or (math.isnan(a) and math.isnan(b))) else abs(a - b)
        worst = max(worst, d)
        n, labels, w = per_exp.get(k[0], (0, set(), 0.0))
        labels.add(k[1])
        per_exp[k[0]] = (n + 1, labels, max(w, d))
    lines = [f"  {e}: {n} values, {len(labels)} configs, max |difference| {w:.3g}"
             for e, (n, labels, w) in sorted(per_exp.items())]
    return len(common), only_before, worst, lines


def diff(before_path: Path, after_path: Path) -> int:
    before, after = load(before_path), load(after_path)
    n, only_before, worst, lines = compare(before, after)
    print(f"compared {n} values ({len(before)} before, {len(after)} after); "
          f"missing after: {only_before}; max |difference| {worst:.3g}")
    print("\n".join(lines))
    return 0 if only_before == 0 and worst == 0.0 else 1


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in ("snap", "diff") or (
            sys.argv[1] == "diff" and len(sys.argv) != 4):
        print(__doc__.strip())
        sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
    if sys.argv[1] == "snap":
        snap(Path(sys.argv[2]), sys.argv[3:])
    else:
        sys.exit(diff(Path(sys.argv[2]), Path(sys.argv[3])))
