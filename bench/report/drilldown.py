"""Per-query drill-down: the queries behind a config's mean.

For each config: its worst queries on a metric, and its largest per-query wins and losses
against the run's baseline (the first config), each with the query text, the gold document ids
and the top retrieved ids with their titles.

Inputs, all read from files:

- ``per_query.parquet`` (config_id, query_id, category, metric, value[, status]);
- the run's TREC files (``run.json`` ``configs.<id>.trec_run``, else ``run.<config_id>.trec``);
- query text, gold ids and titles from, in order: ``queries.parquet`` in the run dir
  (``query_id``, ``query``, ``relevant_ids: list<string>``) plus ``documents.parquet``
  (``doc_id``, ``title``) when the pipeline writes them; else the dataset itself, rebuilt from
  ``run.json``'s resolved ``config.dataset`` (its ``_target_`` class and options), checked
  against the recorded fingerprint; else ids only, and the report says why.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from bench.report.load import ConfigView, RunData

log = logging.getLogger("bench")


@dataclass(frozen=True)
class QueryInfo:
    text: str
    gold_ids: tuple[str, ...]


@dataclass(frozen=True)
class Lookup:
    """Query texts, gold ids and document titles of a run's dataset (possibly partial)."""

    queries: dict[str, QueryInfo]
    titles: dict[str, str]
    #: where the texts came from, or why they are missing
    source: str


@dataclass(frozen=True)
class Retrieved:
    doc_id: str
    title: str
    relevant: bool


@dataclass(frozen=True)
class QueryRow:
    query_id: str
    category: str
    value: float
    #: the baseline's value (wins/losses), else None
    baseline: float | None
    text: str
    gold_ids: tuple[str, ...]
    top: tuple[Retrieved, ...]


@dataclass(frozen=True)
class Drilldown:
    config_key: str
    metric: str
    worst: tuple[QueryRow, ...]
    wins: tuple[QueryRow, ...]
    losses: tuple[QueryRow, ...]


def dataset_lookup(run: RunData) -> Lookup:
    """Texts for the drill-down (see the module docstring for the order tried)."""
    qp, dp = run.run_dir / "queries.parquet", run.run_dir / "documents.parquet"
    if qp.is_file():
        queries = {r["query_id"]: QueryInfo(r.get("query") or "",
                                            tuple(r.get("relevant_ids") or ()))
                   for r in pq.read_table(qp).to_pylist()}
        titles = ({r["doc_id"]: r.get("title") or "" for r in pq.read_table(dp).to_pylist()}
                  if dp.is_file() else {})
        return Lookup(queries, titles, f"{qp.name}" + (f" + {dp.name}" if titles else ""))
    node = (run.manifest.get("config") or {}).get("dataset")
    if not node or not node.get("_target_"):
        return Lookup({}, {}, "run.json records no dataset config: ids only")
    try:
        from omegaconf import OmegaConf

        from bench.config.build import build

        source = build(OmegaConf.create(node), "dataset")
        if source is None:
            return Lookup({}, {}, "run.json's dataset is disabled: ids only")
        data = source.load()
    except Exception as exc:  # any failure only costs the texts, and the report says so
        return Lookup({}, {}, f"dataset not reachable ({' '.join(str(exc).split())[:160]}): "
                              "ids only")
    recorded = (run.manifest.get("dataset") or {}).get("fingerprint")
    note = ""
    if recorded and data.fingerprint and recorded != data.fingerprint:
        note = " — WARNING: its fingerprint differs from the run's (the files changed since)"
    queries = {q.query_id: QueryInfo(q.text, tuple(d for d, g in q.qrels if g > 0))
               for q in data.queries}
    titles = {d.doc_id: d.title for d in data.documents}
    return Lookup(queries, titles, f"dataset {node['_target_'].rsplit('.', 1)[-1]} "
                                   f"rebuilt from run.json{note}")


def _trec_path(run: RunData, config_id: str) -> Path:
    name = ((run.manifest.get("configs") or {}).get(config_id) or {}).get("trec_run")
    return run.run_dir / (name or f"run.{config_id}.trec")


def read_top(path: Path, query_ids: set[str], depth: int) -> dict[str, list[str]]:
    """Top ``depth`` doc ids per query (by score, ties by doc id descending as trec_eval)."""
    if not path.is_file():
        return {}
    found: dict[str, list[tuple[float, str]]] = {}
    with path.open() as fh:
        for line in fh:
            parts = line.split()
            if len(parts) >= 5 and parts[0] in query_ids:
                found.setdefault(parts[0], []).append((float(parts[4]), parts[2]))
    return {q: [d for _, d in sorted(v, key=lambda t: (-t[0], _neg(t[1])))[:depth]]
            for q, v in found.items()}


def _neg(doc: str) -> tuple[int, ...]:
    # descending doc id as a sort key inside an ascending sort
    return (*tuple(-ord(ch) for ch in doc), 1)


def _values(config: ConfigView, metric: str) -> dict[str, tuple[float, str]]:
    """query id -> (value, category) of the queries whose status carries a value (a
    missing_run query scores as an empty ranking, trec_eval -c, and is a loss)."""
    s = config.scores
    if s is None or metric not in s.values:
        return {}
    ok = s.valued(metric)
    return {q: (float(v), cat) for q, v, cat, keep
            in zip(s.query_ids, s.values[metric], s.categories, ok, strict=True) if keep}


def drilldown(run: RunData, config: ConfigView, baseline: ConfigView | None, metric: str,
              lookup: Lookup, *, higher_is_better: bool = True, n: int = 5,
              depth: int = 5) -> Drilldown:
    """Worst ``n`` queries of ``config`` and its ``n`` largest wins and losses vs baseline."""
    mine = _values(config, metric)
    sign = 1.0 if higher_is_better else -1.0
    worst_ids = sorted(mine, key=lambda q: (sign * mine[q][0], q))[:n]
    base = (_values(baseline, metric)
            if baseline is not None and baseline.config_id != config.config_id else {})
    shared = [q for q in mine if q in base]
    delta = {q: sign * (mine[q][0] - base[q][0]) for q in shared}
    wins = [q for q in sorted(shared, key=lambda q: (-delta[q], q)) if delta[q] > 0][:n]
    losses = [q for q in sorted(shared, key=lambda q: (delta[q], q)) if delta[q] < 0][:n]
    wanted = set(worst_ids) | set(wins) | set(losses)
    top = read_top(_trec_path(run, config.config_id), wanted, depth)

    def row(q: str, with_base: bool) -> QueryRow:
        info = lookup.queries.get(q, QueryInfo("", ()))
        gold = set(info.gold_ids)
        return QueryRow(q, mine[q][1], mine[q][0], base[q][0] if with_base else None,
                        info.text, info.gold_ids,
                        tuple(Retrieved(d, lookup.titles.get(d, ""), d in gold)
                              for d in top.get(q, [])))

    return Drilldown(config.key, metric, tuple(row(q, q in base) for q in worst_ids),
                     tuple(row(q, True) for q in wins), tuple(row(q, True) for q in losses))


def all_drilldowns(run: RunData, metric: str, lookup: Lookup, *, higher_is_better: bool = True,
                   n: int = 5, depth: int = 5) -> list[Drilldown]:
    kept = [c for c in run.configs if c.kept]
    base = kept[0] if kept else None
    return [drilldown(run, c, base, metric, lookup, higher_is_better=higher_is_better, n=n,
                      depth=depth) for c in kept]


def all_pairs(runs: Sequence[RunData], metric: str, scope: str = "all", *,
              resamples: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """Every pair of kept configs of ``runs`` (which must share their queries, e.g. the jobs
    of one multirun) compared per query on the queries both scored (delta = B - A, bootstrap
    CI, sign-flip p), Holm-adjusted over ALL pairs of this metric and scope."""
    from bench.metrics.pairing import paired, scope_mask
    from bench.metrics.stats import holm, paired_compare

    kept = [c for r in runs for c in r.configs if c.kept and c.scores is not None]
    out: list[dict[str, Any]] = []
    for i, a in enumerate(kept):
        for b in kept[i + 1:]:
            assert a.scores is not None and b.scores is not None
            va, vb, cats = paired(a.scores, b.scores, metric)  # the one pairing rule
            sel = scope_mask(cats, scope)
            if not sel.any():
                continue
            cmp = paired_compare(va[sel], vb[sel], resamples=resamples, seed=seed)
            out.append({"a": a.key, "b": b.key, "a_label": a.display, "b_label": b.display,
                        "metric": metric, "scope": scope, "n": cmp.n, "mean_a": cmp.mean_a,
                        "mean_b": cmp.mean_b, "delta": cmp.delta, "ci_low": cmp.ci_low,
                        "ci_high": cmp.ci_high, "p_value": cmp.p_value})
    for row, p in zip(out, holm([r["p_value"] for r in out]) if out else [], strict=True):
        row["p_holm"] = p
    return out
