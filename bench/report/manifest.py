"""run.json read back as typed records: :class:`RunManifest` (README "Results schema").

The run writes run.json from its typed records (``dataclasses.asdict`` and each record's
``to_json``); this module is the way back. Records are rebuilt with pydantic's ``TypeAdapter``
over the same dataclasses (lists become tuples, nested records are validated), so a report
renders from a finished run dir exactly what it rendered from the run's memory. A key an older
run.json lacks reads as empty (None, ``()``, ``{}``); a malformed one is an InputError naming
run.json and the key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from bench.errors import InputError

T = TypeVar("T")

MANIFEST = "run.json"


@dataclass(frozen=True)
class DatasetInfo:
    """run.json ``dataset``."""

    name: str
    fingerprint: str
    documents: int
    queries: int
    chunks: int
    dropped_queries: int = 0
    dropped_reason: str = ""


@dataclass(frozen=True)
class ConfigEntry:
    """run.json ``configs.<config_id>``: label, query params (in the order the plan gave them),
    the primary metric's completion, and why it has no values (pruned / failed)."""

    label: str
    params: Mapping[str, Any]
    #: expected, scored, missing, timeout, invalid, no_claims, pruned (CompletionAccounting)
    completion: Mapping[str, int]
    pruned_reason: str | None = None
    failed_reason: str | None = None


@dataclass(frozen=True)
class RunManifest:
    """A finished run's run.json. ``raw`` keeps the whole object for the keys not typed here
    (packages, plan, cache events, telemetry, budget)."""

    raw: Mapping[str, Any]
    #: the run.json file (named in errors)
    path: Path
    schema_version: int
    run_id: str
    experiment: str
    device: str
    #: the resolved Hydra config of the run
    config: Mapping[str, Any]
    dataset: DatasetInfo
    wall_s: float
    #: plan node name -> whether the cache had it
    cache_hits: Mapping[str, bool]
    truncated_chunks: int
    #: the sentence saying what the embedder's maximum length cut off ("" when nothing)
    truncation: str
    configs: Mapping[str, ConfigEntry]
    failed_gates: tuple[str, ...]
    #: run.json ``stages``: each stage writer's entry (its tables and figures), stage order
    stages: Mapping[str, Mapping[str, Any]]
    #: report header lines: the queries evaluated and contamination warnings
    data_notes: tuple[str, ...]

    @property
    def filters_enabled(self) -> bool:
        """Whether a filter stage ran (``filters`` built a component)."""
        block = self.config.get("filters")
        return isinstance(block, Mapping) and block.get("_target_") is not None

    def section(self, key: str) -> Any:
        """The raw value of a top-level key (None when absent)."""
        return self.raw.get(key)

    def typed(self, key: str, tp: Any) -> Any:
        """run.json[``key``] validated as ``tp`` (a dataclass, a ``tuple[...]`` of them);
        None when the key is absent or null."""
        value = self.raw.get(key)
        return None if value is None else records(tp, value, key, self.path)


def records(tp: Any, value: Any, key: str, path: Path = Path(MANIFEST)) -> Any:
    """``value`` (JSON from run.json) validated as ``tp``; an InputError naming the key."""
    from pydantic import ValidationError

    try:
        return _adapter(tp).validate_python(value)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in (key, *first["loc"]))
        raise InputError(path, 0, f"{where}: {first['msg']}") from None


@cache
def _adapter(tp: Any) -> Any:
    from pydantic import TypeAdapter

    adapter = TypeAdapter(tp)
    if not adapter.pydantic_complete:  # names the records' modules import for typing only
        adapter.rebuild(_types_namespace=_typing_only_names())
    return adapter


def _typing_only_names() -> dict[str, Any]:
    from bench.context.metrics import ContextDiagnosis
    from bench.judge.pairing import PairwiseSummary

    return {"ContextDiagnosis": ContextDiagnosis, "PairwiseSummary": PairwiseSummary}


def read_manifest(run_dir: Path) -> RunManifest:
    """run_dir/run.json as a :class:`RunManifest`."""
    path = run_dir / MANIFEST
    if not path.is_file():
        raise InputError(path, 0, "missing: not a finished run dir")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InputError(path, exc.lineno, f"invalid JSON: {exc.msg}") from None
    if not isinstance(raw, dict):
        raise InputError(path, 1, "not a JSON object")
    return manifest_of(raw, path)


def manifest_of(raw: Mapping[str, Any], path: Path) -> RunManifest:
    for key in ("run_id", "dataset", "configs"):
        if key not in raw:
            raise InputError(path, 0, f"missing key {key!r}")
    emb = raw.get("embedding") or {}
    ds = raw["dataset"]
    dataset = DatasetInfo(str(ds.get("name", "")), str(ds.get("fingerprint", "")),
                          int(ds.get("documents", 0)), int(ds.get("queries", 0)),
                          int(ds.get("chunks", 0)), int(ds.get("dropped_queries") or 0),
                          str(ds.get("dropped_reason") or ""))
    configs = {cid: ConfigEntry(str(c.get("label", cid)), dict(c.get("params") or {}),
                                dict(c.get("completion") or {}), c.get("pruned_reason"),
                                c.get("failed_reason"))
               for cid, c in (raw.get("configs") or {}).items()}
    return RunManifest(
        raw=raw, path=path, schema_version=int(raw.get("schema_version", 1)),
        run_id=str(raw["run_id"]),
        experiment=str(raw.get("experiment", "")), device=str(raw.get("device", "")),
        config=raw.get("config") or {}, dataset=dataset, wall_s=float(raw.get("wall_s", 0.0)),
        cache_hits=dict((raw.get("cache") or {}).get("hits") or {}),
        truncated_chunks=int(emb.get("truncated_chunks") or 0),
        truncation=str(emb.get("truncation") or ""), configs=configs,
        failed_gates=tuple(raw.get("failed_gates") or ()),
        stages=dict(raw.get("stages") or {}), data_notes=_data_notes(raw))


def _data_notes(raw: Mapping[str, Any]) -> tuple[str, ...]:
    """The header lines the run printed: the queries evaluated (a split or a sample) and each
    contamination warning (``QuerySelection.to_json`` / ``Contamination.to_json``)."""
    out = []
    sel = raw.get("queries_selected")
    if sel and (sel.get("split") is not None or sel.get("max_queries") is not None):
        out.append(f"Queries evaluated: {sel['summary']}.")
    cont = raw.get("contamination")
    if cont:
        out += [f"⚠ Contamination: {w}" for w in cont.get("warnings") or ()]
    return tuple(out)
