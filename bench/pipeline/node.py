"""Plan nodes and the two kinds of stage operation the executor resolves.

A stage declares, next to its own code, an operation object with its ``stage`` name, code
``version``, semantic ``params`` and how it computes, saves and loads its value:

- ``CachedOp``: ``write(inputs, directory, timing)`` fills a fresh artifact folder and
  ``load(directory, inputs)`` reads it back (Parquet / .npy / faiss; never pickle). The
  executor resolves it through ``bench.cache.store.ArtifactStore``: the key is
  hash(stage, version, params, input keys), so a value computed once is loaded by every config
  and every later run that shares it.
- ``EphemeralOp``: ``run(inputs, timing)`` returns the value; cheap steps (fusion, filters,
  depth cuts) recomputed each run, keyed the same way for identity.

Bump an op's ``version`` when its code changes what it produces: old artifacts are then never
reused. ``Node`` is one step of a plan: an op, its input nodes, a display label. Its ``key``
is the content key above; its ``ident`` leaves code versions out, so a config's id
(``bench.pipeline.plan.Plan``) survives a version bump and names the same chain in every run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from bench.cache.store import canonical_json, make_key
from bench.telemetry.base import TimingLog


@runtime_checkable
class CachedOp(Protocol):
    stage: str
    version: str

    def params(self) -> Mapping[str, Any]:
        """The semantic parameters of this step (they key the artifact)."""
        ...

    def write(self, inputs: Sequence[Any], directory: Path, timing: TimingLog) -> None:
        """Compute from ``inputs`` (the values of the input nodes, in order) and write the
        artifact files into ``directory``, timing the work in ``timing``."""
        ...

    def load(self, directory: Path, inputs: Sequence[Any]) -> Any:
        """Read the value back from ``directory``."""
        ...


@runtime_checkable
class EphemeralOp(Protocol):
    stage: str
    version: str

    def params(self) -> Mapping[str, Any]: ...

    def run(self, inputs: Sequence[Any], timing: TimingLog) -> Any:
        """Compute the value from ``inputs`` (not stored)."""
        ...


Op = CachedOp | EphemeralOp


@dataclass(frozen=True, eq=False)
class Node:
    """One step of a plan. Nodes with equal ``key`` are the same computation."""

    op: Any  # CachedOp | EphemeralOp (Protocols are checked where ops are built)
    inputs: tuple[Node, ...]
    label: str
    #: the root's key is given (the dataset fingerprint); others derive from op and inputs
    root_key: str | None = None
    key: str = field(init=False)
    ident: str = field(init=False)

    def __post_init__(self) -> None:
        params = dict(self.op.params())
        if self.root_key is not None:
            key = ident = self.root_key
        else:
            upstream = [n.key for n in self.inputs]
            key = make_key(self.op.stage, self.op.version, params, upstream)
            ident = hashlib.sha256(canonical_json(
                {"stage": self.op.stage, "params": params,
                 "inputs": [n.ident for n in self.inputs]}).encode()).hexdigest()
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "ident", ident)

    @property
    def stage(self) -> str:
        return str(self.op.stage)

    @property
    def cached(self) -> bool:
        return isinstance(self.op, CachedOp)

    def ancestors(self) -> list[Node]:
        """This node and every node upstream of it, each once, inputs before users."""
        seen: dict[str, Node] = {}

        def visit(n: Node) -> None:
            if n.key in seen:
                return
            for i in n.inputs:
                visit(i)
            seen[n.key] = n

        visit(self)
        return list(seen.values())


@dataclass(frozen=True)
class ValueOp:
    """A root that hands an already-loaded value to the plan (the dataset)."""

    stage: str
    value: Any
    version: str = "1"

    def params(self) -> Mapping[str, Any]:
        return {}

    def run(self, inputs: Sequence[Any], timing: TimingLog) -> Any:
        return self.value
