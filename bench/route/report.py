"""The route stage's results: routes.parquet, the classification table, quality and latency.

For the routed config (``routed[NAME]``), on the queries the run evaluates (never the ones a
classifier router was fitted on):

- **classification**: the route chosen against the label derived from the data
  (``bench.route.labels``), scikit-learn's ``classification_report`` (per class precision,
  recall, F1, support; accuracy; macro and weighted averages) and the confusion matrix.
  Accuracy is the routing correctness;
- **quality and latency against each fixed route**: the routed config beside every route's
  config served to every query (``route:none``, the one-shot config, the iterative config,
  a named chain): the run's first two ranking metrics, the share of must-abstain queries
  left without evidence (the ``none`` route's job), ``answer_correct`` where a generator ran
  on that pool, and the interleaved latency pass's end-to-end p50 / p95;
- **per route taken**: the queries the router sent down each route, the routed config's
  first ranking metric on them beside each fixed route's on the SAME queries, and the p95
  of the routed requests of that route (interleaved pass) against the route's SLO
  (``slo_p95_ms``; "-" where none is set).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.pipeline.lanes import ConfigKind
from bench.report.base import StageReport
from bench.report.fmt import num
from bench.results import schema
from bench.results.records import Comparison
from bench.results.scores import ConfigScores
from bench.results.write import write_records
from bench.route.labels import route_label
from bench.route.stage import NONE_LABEL, RoutedPool, RouteOp

if TYPE_CHECKING:
    from bench.pipeline.latency import LatencyRun
    from bench.pipeline.outcome import ConfigRun
    from bench.pipeline.view import RunView

TABLE = "routes.parquet"


def classification(labels: Sequence[str], routes: Sequence[str]) -> dict[str, Any]:
    """scikit-learn's classification report (dict) and confusion matrix over the union of
    classes, labels first."""
    from sklearn.metrics import classification_report, confusion_matrix

    classes = list(dict.fromkeys([*sorted(set(labels)), *sorted(set(routes))]))
    rep = classification_report(list(labels), list(routes), labels=classes, output_dict=True,
                                zero_division=0)
    cm = confusion_matrix(list(labels), list(routes), labels=classes)
    return {"classes": classes, "report": rep, "confusion": cm.tolist(),
            "accuracy": float(np.mean([a == b for a, b in zip(labels, routes, strict=True)]))}


def _mean_on(s: ConfigScores, metric: str, ids: set[str] | None = None) -> tuple[float, int]:
    if metric not in s.values:
        return float("nan"), 0
    ok = s.valued(metric)
    sel = np.asarray([o and (ids is None or q in ids) for o, q in zip(ok, s.query_ids,
                                                                      strict=True)])
    v = np.asarray(s.values[metric])[sel]
    return (float(v.mean()) if v.size else float("nan")), int(v.size)


def _answers_of(done: RunView, leaf_key: str) -> ConfigScores | None:
    for c, s in zip(done.configs, done.scores, strict=True):
        if (c.spec.kind is ConfigKind.GENERATED and c.pool is not None
                and c.spec.pool is not None and c.spec.pool.key == leaf_key):
            return s
    return None


def write(done: RunView, run_dir: Path, comparisons: Sequence[Comparison],
          latency: LatencyRun) -> StageReport | None:
    routed = [(c, s) for c, s in zip(done.configs, done.scores, strict=True)
              if isinstance(c.pool, RoutedPool) and c.spec.kind is not ConfigKind.GENERATED]
    if not routed:
        return None
    ds = done.dataset
    level = done.settings.metrics.relevance_level
    labels = [route_label(q, level) for q in ds.queries]
    by_id = {c.spec.config_id: (c, s) for c, s in zip(done.configs, done.scores, strict=True)}
    names = list(done.settings.metrics.names)[:2]
    rows: list[dict[str, Any]] = []
    manifest: dict[str, Any] = {"configs": []}
    lines = ["## Routing", "",
             "Labels are derived from the data, not judged: must-abstain (or no relevant "
             "document) -> `none`, two or more relevant documents -> `iterative`, else "
             "`one_shot` (bench/route/labels.py). A classifier router is fitted on the "
             "held-out queries only; every figure here is on the evaluated queries. "
             f"Per-query decisions: `{TABLE}`. docs/routing-and-iterative.md.", ""]
    for c, s in routed:
        pool = c.pool
        assert isinstance(pool, RoutedPool)
        op = c.spec.leaf.op
        assert isinstance(op, RouteOp)
        slot_cfg = {n.input_names[i]: n.inputs[i] for n in [c.spec.leaf]
                    for i in range(len(n.inputs))}
        fixed: dict[str, ConfigRun] = {}  # route -> the config serving it to every query
        leaf_to_cfg = {x.spec.leaf.key: x for x in done.configs}
        for route, slot in op.slots:
            if slot is None:
                none = next((x for x in done.configs if x.spec.label == NONE_LABEL), None)
                if none is not None:
                    fixed[route] = none
            elif slot_cfg[slot].key in leaf_to_cfg:
                fixed[route] = leaf_to_cfg[slot_cfg[slot].key]
        routes = list(pool.routes)
        for query, route, label in zip(ds.queries, routes, labels, strict=True):
            target = fixed.get(route)
            rows.append({"config_id": c.spec.config_id, "query_id": query.query_id,
                         "category": query.category, "label": label, "route": route,
                         "target_config_id": "" if target is None or target.spec.label
                         == NONE_LABEL else target.spec.config_id,
                         "correct": route == label})
        cls = classification(labels, routes)
        rep = cls["report"]
        lines += [f"### `{c.spec.config_id}` {c.spec.label}", "",
                  f"Routing correctness (accuracy): **{cls['accuracy']:.3f}** over "
                  f"{len(routes)} queries.", "",
                  "| class | precision | recall | f1-score | support |",
                  "|---|---:|---:|---:|---:|"]
        for k in cls["classes"]:
            r = rep[k]
            lines.append(f"| {k} | {r['precision']:.3f} | {r['recall']:.3f} | "
                         f"{r['f1-score']:.3f} | {int(r['support'])} |")
        for k in ("macro avg", "weighted avg"):
            r = rep[k]
            lines.append(f"| {k} | {r['precision']:.3f} | {r['recall']:.3f} | "
                         f"{r['f1-score']:.3f} | {int(r['support'])} |")
        lines += ["", "Confusion (rows: label, columns: route chosen):", "",
                  "| label \\ route | " + " | ".join(cls["classes"]) + " |",
                  "|---|" + "---:|" * len(cls["classes"])]
        for k, row in zip(cls["classes"], cls["confusion"], strict=True):
            lines.append(f"| {k} | " + " | ".join(str(v) for v in row) + " |")
        # quality and latency: routed vs each fixed route, every evaluated query
        abstain = {q.query_id for q in ds.queries if q.must_abstain}
        est = latency.estimates

        def no_evidence_share(x: ConfigRun, abstain: set[str] = abstain) -> float:
            if not abstain or x.pool is None:
                return float("nan")
            h = x.pool.hits
            return float(np.mean([h.offsets[i + 1] == h.offsets[i]
                                  for i, q in enumerate(ds.queries) if q.query_id in abstain]))

        lines += ["", "Quality and latency, routed vs each route served to every query "
                  "(e2e from the interleaved latency pass: a routed request runs its decision "
                  "and its route only):", "",
                  "| config | " + " | ".join(names) + " | must-abstain without evidence | "
                  "answer_correct | e2e p50 ms | e2e p95 ms |",
                  "|---|" + "---:|" * (len(names) + 4)]
        table_cfgs = [("routed", c), *((f"always {r}", x) for r, x in fixed.items())]
        quality: dict[str, Any] = {}
        for name, x in table_cfgs:
            xs = by_id[x.spec.config_id][1]
            ans = _answers_of(done, x.spec.leaf.key)
            e = est.get(x.spec.config_id)
            vals = [_mean_on(xs, n)[0] for n in names]
            ac = _mean_on(ans, "answer_correct")[0] if ans is not None else float("nan")
            lines.append(f"| {name}: `{x.spec.config_id}` {x.spec.label} | "
                         + " | ".join(num(v, 3, finite=True) for v in vals)
                         + f" | {num(no_evidence_share(x), 3, finite=True)} | "
                         f"{num(ac, 3, finite=True)} | "
                         f"{'-' if e is None else f'{e.p50.value:.1f}'} | "
                         f"{'-' if e is None else f'{e.p95.value:.1f}'} |")
            quality[name] = {"config_id": x.spec.config_id, **dict(zip(names, vals,
                                                                       strict=True)),
                             "answer_correct": ac, "e2e_p50_ms": None if e is None
                             else e.p50.value, "e2e_p95_ms": None if e is None else e.p95.value}
        # per route taken: quality on its queries vs each fixed route, latency vs SLO
        req_ms: dict[str, list[float]] = {}
        route_of = dict(zip((q.query_id for q in ds.queries), routes, strict=True))
        for r in latency.requests:
            if r.config_id == c.spec.config_id and not r.warmup:
                req_ms.setdefault(route_of[r.query_id], []).append(r.e2e_ms)
        metric = names[0]
        slo = op.router.slo_p95_ms
        lines += ["", f"Per route taken: {metric} of the routed config on the queries sent "
                  "down the route, beside each fixed route on the same queries; the p95 of "
                  "those routed requests against the route's SLO.", "",
                  f"| route | queries | label precision | routed {metric} | "
                  + " | ".join(f"always {r}" for r in fixed) + " | requests | p95 ms | "
                  "SLO p95 ms | SLO |", "|---|" + "---:|" * (len(fixed) + 6) + "---|"]
        per_route: dict[str, Any] = {}
        for route in op.router.route_names():
            ids = {q.query_id for q, rr in zip(ds.queries, routes, strict=True) if rr == route}
            if not ids:
                lines.append(f"| {route} | 0 | - | - | " + " | ".join("-" for _ in fixed)
                             + " | 0 | - | " + num(slo.get(route), 0, finite=True) + " | - |")
                continue
            mine, n_scored = _mean_on(s, metric, ids)
            others = [_mean_on(by_id[x.spec.config_id][1], metric, ids)[0]
                      for x in fixed.values()]
            prec = float(np.mean([route_label(q, level) == route for q in ds.queries
                                  if q.query_id in ids]))
            ms = req_ms.get(route, [])
            p95 = float(np.percentile(ms, 95)) if ms else None
            goal = slo.get(route)
            verdict = ("-" if goal is None or p95 is None else
                       ("met" if p95 <= goal else "MISSED"))
            lines.append(f"| {route} | {len(ids)} | {prec:.3f} | "
                         f"{num(mine, 3, finite=True)} (n={n_scored}) | "
                         + " | ".join(num(v, 3, finite=True) for v in others)
                         + f" | {len(ms)} | {num(p95, 1, finite=True)} | "
                         f"{num(goal, 0, finite=True)} | {verdict} |")
            per_route[route] = {"queries": len(ids), "label_precision": prec, metric: mine,
                                "requests": len(ms), "p95_ms": p95, "slo_p95_ms": goal,
                                "slo": verdict}
        lines += ["", "With fewer than 20 requests on a route its p95 is the largest few "
                  "requests: read it as indicative.", ""]
        manifest["configs"].append({
            "config_id": c.spec.config_id, "accuracy": cls["accuracy"],
            "classification": rep, "confusion": {"classes": cls["classes"],
                                                 "matrix": cls["confusion"]},
            "quality": quality, "routes": per_route})
    write_records(rows, schema.ROUTES, run_dir / TABLE, done.run_id)
    return StageReport("route", (TABLE,), tuple(lines), manifest)
