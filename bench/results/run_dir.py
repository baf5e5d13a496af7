"""A finished run's per-query results read back by config: the run dir's
``per_query.parquet`` as the pipeline's ``ConfigScores``, a config named by id or by its
label (``configs.parquet``). What ``bench.compare``, ``bench.power`` and the regression gates
read; one line naming the file on a bad input."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.errors import InputError
from bench.metrics.cli import UsageError
from bench.results.scores import ConfigScores, read_table, scores_of_table


def config_labels(run: Path) -> dict[str, str]:
    """config_id -> label from the configs.parquet beside the run's per_query.parquet (``run``:
    the run dir or that file; empty when the run has no configs.parquet). The one label map
    of compare, power and the regression gates."""
    configs = per_query_path(run).parent / "configs.parquet"
    if not configs.exists():
        return {}
    table = read_table(configs)
    if not {"config_id", "label"} <= set(table.column_names):
        raise InputError(configs, 0, "missing columns config_id/label")
    return dict(zip(table.column("config_id").to_pylist(), table.column("label").to_pylist(),
                    strict=True))


def _resolve(path: Path, wanted: str, configs: list[str]) -> str:
    """A config id given as an id or as a label (configs.parquet's ``label``)."""
    if wanted in configs:
        return wanted
    labels = config_labels(path)
    hits = [c for c in configs if labels.get(c) == wanted]
    if len(hits) == 1:
        return hits[0]
    shown = ", ".join(f"{c} ({labels[c]})" if c in labels else c for c in configs)
    if hits:
        raise UsageError(f"{path}: label {wanted!r} names configs {hits}: use an id ({shown})")
    raise UsageError(f"{path} has no config with id or label {wanted!r}; it holds {shown}")


def per_query_path(run_dir: Path) -> Path:
    """``run_dir/per_query.parquet`` (or ``run_dir`` itself when it is the file); InputError
    when it does not exist."""
    path = run_dir / "per_query.parquet" if run_dir.is_dir() else run_dir
    if not path.exists():
        raise InputError(path, 0, "not found (expected a run dir holding per_query.parquet)")
    return path


def config_ids(run_dir: Path) -> list[str]:
    """The config ids of a run's per_query.parquet, in file order (the first is the run's
    baseline: its comparisons pair every other config with it)."""
    path = per_query_path(run_dir)
    if "config_id" not in _read_schema(path).names:
        raise InputError(path, 0, "missing columns ['config_id']")
    return list(dict.fromkeys(read_table(path, ["config_id"]).column("config_id").to_pylist()))


def _read_schema(path: Path) -> pa.Schema:
    try:
        return pq.read_schema(path)
    except (pa.ArrowException, OSError, ValueError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise InputError(path, 0, f"not a readable Parquet file ({first})") from None


def load_side(run_dir: Path, config_id: str | None, flag: str) -> ConfigScores:
    """One config of ``run_dir/per_query.parquet`` as the pipeline's ``ConfigScores``.

    A file holding several configs needs ``config_id`` (the ``flag`` option): a config id or
    its label from the run's ``configs.parquet``; the error names the configs present. A
    corrupt file, a query given twice or a NaN value is an InputError (one line).
    """
    path = per_query_path(run_dir)
    scores = scores_of_table(read_table(path), path)
    configs = list(scores)
    if not configs:
        raise InputError(path, 0, "holds no rows")
    if config_id is None:
        if len(configs) > 1:
            labels = config_labels(path)
            shown = ", ".join(f"{c} ({labels[c]})" if c in labels else c for c in configs)
            raise UsageError(f"{path} holds configs {shown}: choose one with {flag} "
                             "(id or label)")
        return scores[configs[0]]
    return scores[_resolve(path, config_id, configs)]


def valued_metrics(s: ConfigScores) -> list[str]:
    """The metrics of a config with at least one value, in file order."""
    return [m for m in s.values if s.valued(m).any()]
