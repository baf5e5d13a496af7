"""An MTEB-style results JSON for a retrieval run (``mteb`` writes one per task).

Shape (MTEB's ``TaskResult`` files)::

    {"task_name": ..., "dataset_revision": ..., "mteb_version": null,
     "evaluation_time": seconds, "kg_co2_emissions": null,
     "scores": {SPLIT: [{"ndcg_at_10": ..., ..., "main_score": ..., "hf_subset": "default",
                          "languages": [...]}]}}

Keys are MTEB's (``ndcg_at_10``, ``map_at_100``, ``recall_at_5``, ``precision_at_1``,
``mrr_at_10``), values fractions in [0, 1] as MTEB stores them (its leaderboards show x100);
bench metrics MTEB has no key for are left out. ``main_score`` is nDCG@10 for retrieval, as
in MTEB. ``mteb_version`` is null: bench computed these numbers, not mteb.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from bench.errors import BenchError
from bench.metrics.registry import find_metric

#: our family -> MTEB's key prefix (``<prefix>_at_<k>``)
MTEB_KEYS = {"ndcg": "ndcg", "map": "map", "recall": "recall", "precision": "precision",
             "mrr": "mrr"}


def mteb_key(metric: str) -> str | None:
    """MTEB's key for a bench metric name (``ndcg@10`` -> ``ndcg_at_10``), None if it has none."""
    spec = find_metric(metric)
    if spec is None or spec.k is None or spec.family not in MTEB_KEYS:
        return None
    return f"{MTEB_KEYS[spec.family]}_at_{spec.k}"


def mteb_result(
    *,
    task: str,
    split: str,
    aggregate: Mapping[str, float],
    evaluation_time_s: float,
    main_metric: str = "ndcg@10",
    languages: Sequence[str] = ("eng-Latn",),
    hf_subset: str = "default",
    dataset_revision: str | None = None,
) -> dict[str, object]:
    """The results object; ``aggregate`` maps bench metric names to means (``Evaluation``'s
    ``aggregate()`` or the summary's ``all`` scope). Raises BenchError when ``main_metric``
    was not computed."""
    if main_metric not in aggregate:
        raise BenchError(f"MTEB results need the main score {main_metric!r}; computed: "
                         f"{', '.join(aggregate) or 'nothing'}")
    scores: dict[str, object] = {}
    for name, value in aggregate.items():
        key = mteb_key(name)
        if key is not None:
            scores[key] = float(value)
    scores["main_score"] = float(aggregate[main_metric])
    scores["hf_subset"] = hf_subset
    scores["languages"] = list(languages)
    return {
        "dataset_revision": dataset_revision,
        "task_name": task,
        "mteb_version": None,
        "scores": {split: [scores]},
        "evaluation_time": float(evaluation_time_s),
        "kg_co2_emissions": None,
    }


def write_mteb_json(path: str | Path, **kwargs: object) -> Path:
    """Write :func:`mteb_result` (same keyword arguments) to ``path``; returns the path."""
    path = Path(path)
    result = mteb_result(**kwargs)  # type: ignore[arg-type]
    path.write_text(json.dumps(result, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return path
