"""A classifier router on query embeddings, fitted on the labelled held-out queries only.

The classes are the derived route labels (``bench.route.labels``: none / one_shot /
iterative), each of which must be a route of ``routes``. Training data: the loaded queries
the run does NOT evaluate (``PlanState.held_out``: the other splits of a dataset with splits,
``train_split`` when given; else the queries outside ``subset.max_queries``), encoded by the
run's embedder — never a query the run scores. ``classifier``:

- ``logistic``: multinomial logistic regression (scikit-learn ``LogisticRegression``, lbfgs,
  L2 with ``C``, classes weighted to balance unless ``balanced=false``);
- ``centroid``: nearest centroid by cosine (scikit-learn ``NearestCentroid`` on the unit
  vectors).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from bench.config.build import OptionError
from bench.route.base import Fitted
from bench.route.common import check_routes
from bench.route.labels import LABELS

CLASSIFIERS = ("logistic", "centroid")


class EmbeddingRouter:
    name = "embedding"

    def __init__(self, *, routes: Mapping[str, str], classifier: str = "logistic",
                 C: float = 1.0, balanced: bool = True, train_split: str | None = None,
                 min_per_class: int = 2, slo_p95_ms: Mapping[str, float | None] | None = None,
                 seed: int = 0) -> None:
        self.routes, self.slo_p95_ms = check_routes(routes, slo_p95_ms)
        missing = [c for c in LABELS if c not in self.routes]
        if missing:
            raise OptionError("routes", f"a classifier router predicts the labels "
                                        f"{', '.join(LABELS)}; routes lacks {missing}")
        if classifier not in CLASSIFIERS:
            raise OptionError("classifier", f"unknown classifier {classifier!r}; use one of "
                                            f"{', '.join(CLASSIFIERS)}")
        if not C > 0:
            raise OptionError("C", f"must be > 0, got {C}")
        if min_per_class < 1:
            raise OptionError("min_per_class", f"must be >= 1, got {min_per_class}")
        self.classifier = classifier
        self.C = float(C)
        self.balanced = balanced
        self.train_split = train_split
        self.min_per_class = min_per_class
        self.seed = seed

    def cache_params(self) -> dict[str, object]:
        return {"routes": dict(self.routes), "classifier": self.classifier, "C": self.C,
                "balanced": self.balanced, "train_split": self.train_split, "seed": self.seed}

    def route_names(self) -> tuple[str, ...]:
        return tuple(self.routes)

    def fit(self, vectors: np.ndarray, labels: Sequence[str]) -> Fitted:
        x = np.asarray(vectors, dtype=np.float64)
        support = dict(Counter(labels))
        model: object
        if self.classifier == "logistic":
            from sklearn.linear_model import LogisticRegression

            model = LogisticRegression(C=self.C, max_iter=2000, random_state=self.seed,
                                       class_weight="balanced" if self.balanced else None)
        else:
            from sklearn.neighbors import NearestCentroid

            x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
            model = NearestCentroid()
        model.fit(x, list(labels))  # type: ignore[attr-defined]
        classes = tuple(str(c) for c in model.classes_)  # type: ignore[attr-defined]
        return Fitted(classes, model, len(labels), support)

    def predict(self, fitted: Fitted, vectors: np.ndarray) -> list[str]:
        x = np.asarray(vectors, dtype=np.float64)
        if self.classifier == "centroid":
            x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        return [str(p) for p in fitted.model.predict(x)]  # type: ignore[attr-defined]
