"""A small run dir written file by file with the results schema (bench/results/schema.py), so
report tests know every number in it.

9 configs: #0 dense (baseline), #1 bm25, #2 rrf (fused, no latency of its own), #3-#7 dense
variants, #8 pruned. 6 queries in categories a (q1-q3) and b (q4-q6). ndcg@10 of config i on
query j (1-based) = ((i + 1) * j % 7) / 7; recall@100 = 1.0 everywhere (saturated).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.results.schema import COMPARISONS, CONFIGS, PER_QUERY, SUMMARY, TIMINGS
from bench.results.write import write_table

N_CONFIGS = 9
#: configs.parquet columns schema 4 added (null in these retrieval-only fixtures)
SCHEMA_4_CONFIG_COLUMNS = CONFIGS.names[CONFIGS.names.index("peak_vram_measure") + 1:]
QUERIES = [f"q{j}" for j in range(1, 7)]
CATEGORY = {q: ("a" if j <= 3 else "b") for j, q in enumerate(QUERIES, 1)}
DENSE_MS = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
LEXICAL_MS = 0.5
FUSION_TOTAL_MS = 6.0  # over 6 queries: 1 ms each


def ndcg(i: int, j: int) -> float:
    return ((i + 1) * j % 7) / 7


def cid(i: int) -> str:
    return f"c{i}"


def label(i: int) -> str:
    return {0: "dense", 1: "bm25", 2: "rrf(k=60)", 8: "dense(huge)"}.get(i, f"dense(ef={i})")


def kind(i: int) -> str:
    return {1: "lexical", 2: "fused"}.get(i, "dense")


def p95(i: int) -> float | None:
    return {0: 2.0, 1: 3.0, 2: None, 8: 9.0}.get(i, 0.5 + 0.25 * i)


def write_run(d: Path, *, extra: dict[str, list[Any]] | None = None, run_id: str = "r1") -> Path:
    d.mkdir(parents=True, exist_ok=True)
    base = {"run_id": run_id}
    configs = []
    for i in range(N_CONFIGS):
        p = p95(i)
        # every nullable column a newer schema adds reads as missing unless set below
        nullable = {f.name: None for f in CONFIGS if f.nullable}
        configs.append({**nullable, **base, "config_id": cid(i), "label": label(i), "kind": kind(i),
                        "params_json": json.dumps({"ef": i} if kind(i) == "dense" else {}),
                        "parent_config_id": None, "status": "pruned" if i == 8 else "ok",
                        "pruned_reason": "p95 9.00 ms > 5 ms" if i == 8 else None,
                        "e2e_p50_ms": None, "e2e_p95_ms": None, "e2e_p99_ms": None,
                        "n_e2e_samples": 0, "rerank_p50_ms": None, "rerank_p95_ms": None,
                        "rerank_p99_ms": None, "rerank_pairs_per_s": None,
                        "qps": None if p is None else 1000.0 / p,
                        "p50_ms": None if p is None else p / 2, "p95_ms": p,
                        "p99_ms": None if p is None else p * 1.5,
                        "n_latency_samples": 0 if p is None else 6, "build_s": None,
                        "index_bytes": None, "unauthorized_hits": 0, "filter_removed": None,
                        "false_exclusion_rate": None, "doc_false_exclusion_rate": None,
                        "ttft_p50_ms": None, "ttft_p95_ms": None, "tpot_p50_ms": None,
                        "tpot_p95_ms": None,
                        "budget_name": None, "budget_limit": None, "budget_measured": None,
                        "budget_bound": None, "cost_per_query": None, "cost_basis": None,
                        "peak_vram_bytes": None, "peak_vram_measure": None,
                        **dict.fromkeys(SCHEMA_4_CONFIG_COLUMNS)})
    write_table(configs, CONFIGS, d / "configs.parquet")
    if extra:
        t = pq.read_table(d / "configs.parquet")
        for name, values in extra.items():
            if name in t.column_names:  # a column of the schema given other values
                t = t.set_column(t.column_names.index(name), name,
                                 pa.array(values, type=t.schema.field(name).type))
            else:
                t = t.append_column(name, pa.array(values))
        pq.write_table(t, d / "configs.parquet")
    kept = range(N_CONFIGS - 1)
    per_query, summary = [], []
    for i in kept:
        for metric in ("ndcg@10", "recall@100"):
            vals = {q: (ndcg(i, j) if metric == "ndcg@10" else 1.0)
                    for j, q in enumerate(QUERIES, 1)}
            per_query += [{**base, "config_id": cid(i), "query_id": q, "category": CATEGORY[q],
                           "metric": metric, "value": v, "status": "scored"}
                          for q, v in vals.items()]
            for scope, qs in (("all", QUERIES), ("category:a", QUERIES[:3]),
                              ("category:b", QUERIES[3:])):
                m = float(np.mean([vals[q] for q in qs]))
                half = 0.0 if metric == "recall@100" else 0.05
                summary.append({**base, "config_id": cid(i), "scope": scope, "metric": metric,
                                "higher_is_better": True, "n": len(qs), "mean": m,
                                "ci_low": m - half, "ci_high": m + half, "n_expected": 6,
                                "n_scored": 6, "n_missing": 0, "n_timeout": 0, "n_invalid": 0,
                                "n_no_claims": 0, "n_pruned": 0, "n_failed": 0,
                                "n_budget_exhausted": 0})
    for metric in ("ndcg@10", "recall@100"):
        summary.append({**base, "config_id": cid(8), "scope": "all", "metric": metric,
                        "higher_is_better": True, "n": 0, "mean": None, "ci_low": None,
                        "ci_high": None, "n_expected": 6, "n_scored": 0, "n_missing": 0,
                        "n_timeout": 0, "n_invalid": 0, "n_no_claims": 0, "n_pruned": 6,
                        "n_failed": 0, "n_budget_exhausted": 0})
    write_table(per_query, PER_QUERY, d / "per_query.parquet")
    write_table(summary, SUMMARY, d / "summary.parquet")
    comps = []
    for i in range(1, N_CONFIGS - 1):
        a = [ndcg(0, j) for j in range(1, 7)]
        b = [ndcg(i, j) for j in range(1, 7)]
        comps.append({**base, "baseline_config_id": cid(0), "config_id": cid(i), "scope": "all",
                      "metric": "ndcg@10", "n": 6, "mean_baseline": float(np.mean(a)),
                      "mean_config": float(np.mean(b)),
                      "delta": float(np.mean(b) - np.mean(a)), "ci_low": -0.1, "ci_high": 0.1,
                      "p_value": 0.5, "p_holm": 1.0, "mde": 0.125})
    write_table(comps, COMPARISONS, d / "comparisons.parquet")
    timings = []

    def t(config: str, stage: str, sk: str, n: int, ms: float, q: str | None = None) -> None:
        timings.append({**base, "config_id": config, "stage": stage, "sample_kind": sk,
                        "n_items": n, "wall_ms": ms, "device": "cpu", "from_cache": False,
                        "query_id": q})

    for q, ms in zip(QUERIES, DENSE_MS, strict=False):
        t(cid(0), "retrieve", "query", 1, ms, q)
        t(cid(2), "retrieve", "query", 1, ms, q)  # the pipeline records the dense input here
        t(cid(1), "lexical", "query", 1, LEXICAL_MS, q)
    t(cid(2), "fusion", "total", 6, FUSION_TOTAL_MS)
    write_table(timings, TIMINGS, d / "timings.parquet")
    manifest = {"schema_version": 2, "run_id": run_id, "experiment": "fixture",
                "device": "cpu", "dataset": {"name": "tiny", "documents": 5, "queries": 6},
                "configs": {cid(i): {"label": label(i), "trec_run": f"run.{cid(i)}.trec"}
                            for i in range(N_CONFIGS)},
                "resources": [{"stage": "data", "peak_rss_bytes": 2**20,
                               "peak_vram_bytes": None}],
                "config": {}}
    (d / "run.json").write_text(json.dumps(manifest))
    # config i ranks d{(j + i) % 5 + 1} first for query j; gold of q_j is d{j % 5 + 1}
    for i in kept:
        lines = []
        for j, q in enumerate(QUERIES, 1):
            for r in range(5):
                doc = f"d{(j + i + r) % 5 + 1}"
                lines.append(f"{q} Q0 {doc} {r + 1} {10 - r:.1f} {cid(i)}")
        (d / f"run.{cid(i)}.trec").write_text("\n".join(lines) + "\n")
    pq.write_table(pa.table({"query_id": QUERIES,
                             "query": [f"what is thing {q}?" for q in QUERIES],
                             "relevant_ids": [[f"d{j % 5 + 1}"] for j in range(1, 7)]}),
                   d / "queries.parquet")
    pq.write_table(pa.table({"doc_id": [f"d{k}" for k in range(1, 6)],
                             "title": [f"Title {k}" for k in range(1, 6)]}),
                   d / "documents.parquet")
    return d
