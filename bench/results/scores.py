"""A config's per-query values read back as one typed record, wherever they come from.

``ConfigScores`` is what the pipeline scores (``bench.pipeline.scoring``) and what every
reader of finished results rebuilds from ``per_query.parquet`` (:func:`scores_of_table`): the
in-run comparisons, ``bench.compare`` (two runs), its multi-config modes
(``bench.compare.runs``), the merged report's evidence tables and the ANN answer tables all
pair values through ``bench.metrics.pairing.paired`` on this record, so a comparison of two
configs is the same numbers whichever of them computes it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.errors import InputError
from bench.pipeline.stages import valued_statuses
from bench.results.records import Accounting, SummaryRow

#: the columns of per_query.parquet a ConfigScores is built from
LONG_COLUMNS = ("config_id", "query_id", "category", "metric", "value")


@dataclass(frozen=True)
class ConfigScores:
    """A config's per-query values over the expected queries, with statuses and summary."""

    config_id: str
    query_ids: tuple[str, ...]
    categories: tuple[str, ...]
    #: float64 per query; NaN where the status carries no value
    values: Mapping[str, np.ndarray]
    statuses: Mapping[str, tuple[str, ...]]
    summary: tuple[SummaryRow, ...]
    #: per metric, the queries it is expected on (bool mask over ``query_ids``); a metric
    #: absent here is expected on every query. Retrieval metrics are expected on queries with
    #: a relevant document, answer metrics on the answered subset where they apply.
    expected: Mapping[str, np.ndarray] = field(default_factory=dict)

    def expects(self, metric: str) -> np.ndarray:
        mask = self.expected.get(metric)
        return np.ones(len(self.query_ids), dtype=bool) if mask is None else mask

    def accounting(self, metric: str) -> Accounting:
        mask = self.expects(metric)
        return Accounting.of(tuple(s for s, m in zip(self.statuses[metric], mask, strict=True)
                                   if m))

    def valued(self, metric: str) -> np.ndarray:
        """bool mask of the queries whose value for ``metric`` counts."""
        valued = valued_statuses()
        return np.asarray([s in valued for s in self.statuses[metric]],
                          dtype=bool) & self.expects(metric)


def scores_from_long(config_id: str, query_ids: Sequence[str], categories: Sequence[str],
                     metrics: Sequence[str], values: Sequence[float | None],
                     statuses: Sequence[str]) -> ConfigScores:
    """One config's ``per_query.parquet`` rows (parallel columns) back as ``ConfigScores``, so
    configs of finished runs are compared with :func:`compare` (summary left empty). A metric
    is expected on the queries it has a row for (a metric that does not apply has none)."""
    qids = list(dict.fromkeys(query_ids))
    pos = {q: i for i, q in enumerate(qids)}
    cat_of = dict(zip(query_ids, categories, strict=True))
    vals: dict[str, np.ndarray] = {}
    stats: dict[str, list[str]] = {}
    expected: dict[str, np.ndarray] = {}
    for q, m, v, st in zip(query_ids, metrics, values, statuses, strict=True):
        if m not in vals:
            vals[m] = np.full(len(qids), np.nan)
            stats[m] = ["failed"] * len(qids)
            expected[m] = np.zeros(len(qids), bool)
        i = pos[q]
        vals[m][i] = np.nan if v is None else float(v)
        stats[m][i] = st
        expected[m][i] = True
    return ConfigScores(config_id, tuple(qids), tuple(cat_of[q] for q in qids), vals,
                        {m: tuple(s) for m, s in stats.items()}, (), expected)


def read_table(path: Path, columns: Sequence[str] | None = None) -> pa.Table:
    """A Parquet table; a missing, unreadable or corrupt file is one InputError line."""
    if not path.is_file():
        raise InputError(path, 0, "missing: not a finished run dir")
    try:
        return pq.read_table(path, columns=list(columns) if columns else None)
    except (pa.ArrowException, OSError, ValueError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise InputError(path, 0, f"not a readable Parquet file ({first})") from None


def scores_of_table(table: pa.Table, path: Path) -> dict[str, ConfigScores]:
    """config_id -> ConfigScores of a per_query table (read from ``path``, named in errors),
    configs and queries in file order (the run's dataset order).

    A (config, query, metric) given twice, or a NaN under a status that carries a value, is an
    InputError: such a file would pair or average a wrong number."""
    missing = [c for c in LONG_COLUMNS if c not in table.column_names]
    if missing:
        raise InputError(path, 0, f"missing columns {missing}")
    try:
        cols = {c: table.column(c).to_pylist() for c in LONG_COLUMNS}
        values = [None if v is None else float(v) for v in cols["value"]]
    except (pa.ArrowException, TypeError, ValueError) as err:
        raise InputError(path, 0, f"unreadable columns ({err})") from None
    # schema 1 had no status: a value was a scored query
    status = (table.column("status").to_pylist() if "status" in table.column_names
              else ["scored" if v is not None else "failed" for v in values])
    rows: dict[str, list[int]] = {}
    seen: set[tuple[str, str, str]] = set()
    valued = valued_statuses()
    for i, cid in enumerate(cols["config_id"]):
        key = (cid, cols["query_id"][i], cols["metric"][i])
        if key in seen:
            raise InputError(path, 0, f"config {cid!r}: metric {key[2]!r} of query "
                                      f"{key[1]!r} appears twice")
        seen.add(key)
        v = values[i]
        if status[i] in valued and (v is None or math.isnan(v)):
            raise InputError(path, 0, f"config {cid!r}: metric {key[2]!r} of query "
                                      f"{key[1]!r} is NaN (status {status[i]}: a value expected)")
        rows.setdefault(cid, []).append(i)
    return {cid: scores_from_long(cid, [cols["query_id"][i] for i in idx],
                                  [cols["category"][i] for i in idx],
                                  [cols["metric"][i] for i in idx],
                                  [values[i] for i in idx], [status[i] for i in idx])
            for cid, idx in rows.items()}
