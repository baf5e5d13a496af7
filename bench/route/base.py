"""Records and Protocols of the `route` stage: choose, per query, the pipeline that serves it.

A router maps each query to a ROUTE name; ``routes`` (an option of every router) maps each
route name to a TARGET, one of:

- ``none``: no retrieval — the query is answered without evidence or abstained on (an
  empty pool);
- ``one_shot``: the run's first dense config (one search of the query);
- ``iterative``: that config's iterative twin (``iterative=...``: search, look, reformulate);
- the label of any other config of the plan (a named chain: ``dense>rocchio``,
  ``rrf(...)``, ``dense>rerank@20``...).

An unknown target, or a rule naming a route ``routes`` does not list, is a config error
naming the key (exit 2) before any work. The stage adds one ``routed`` config whose pool is,
per query, the chosen route's pool, and one ``route:none`` config (the empty pool for every
query) so the "never retrieve" route is a fixed baseline like the others.

Labels (what "the right route" is, for training and for the classification table) come from
the dataset, ``bench.route.labels``: must-abstain (or no relevant document) -> ``none``, two
or more relevant documents (a multi-hop question) -> ``iterative``, else ``one_shot``.

Adding a router: a class with keyword-only options implementing ``Router`` (text features)
or ``TrainedRouter`` (a classifier fitted on the labelled held-out queries' embeddings),
and ``conf/router/<name>.yaml`` naming it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

#: the special targets (anything else names a config label)
NONE, ONE_SHOT, ITERATIVE = "none", "one_shot", "iterative"
SPECIAL_TARGETS = (NONE, ONE_SHOT, ITERATIVE)


class Router(Protocol):
    """Chooses a route per query."""

    #: short name for labels (``rules``, ``embedding``)
    name: str
    #: route name -> target (see the module docstring)
    routes: Mapping[str, str]
    #: per-route latency objective, p95 in ms (the report checks each route's requests)
    slo_p95_ms: Mapping[str, float]

    def cache_params(self) -> dict[str, object]: ...

    def route_names(self) -> tuple[str, ...]:
        """Every route this router may choose (each a key of ``routes``)."""
        ...


@runtime_checkable
class RuleRouter(Router, Protocol):
    def choose(self, text: str) -> str:
        """The route of one query, from its text alone."""
        ...


@dataclass(frozen=True)
class Fitted:
    """A classifier fitted on labelled query vectors: what ``TrainedRouter.predict`` reads."""

    classes: tuple[str, ...]
    #: the fitted estimator (scikit-learn), opaque to the pipeline
    model: object
    n_train: int
    #: training queries per class
    support: Mapping[str, int]


@runtime_checkable
class TrainedRouter(Router, Protocol):
    #: the split of the held-out queries it is fitted on (None: every held-out query)
    train_split: str | None
    #: fewer training queries of a class than this is a config error
    min_per_class: int

    def fit(self, vectors: np.ndarray, labels: Sequence[str]) -> Fitted:
        """Fit on the held-out queries' vectors float32 [n, dim] and their route labels."""
        ...

    def predict(self, fitted: Fitted, vectors: np.ndarray) -> list[str]:
        """The route of each query vector [n, dim]."""
        ...
