"""The scale plan of the plan preview: ``plan_only=true scale_plan.profile=DIR`` adds, per
chunker of the plan, the configured corpus' predicted wall time, peak memory and disk.

The corpus' chunk count is the cached chunk table's row count when the chunks are cached
(Parquet metadata: nothing is loaded), else an estimate, said so: the plan's own chunker on a
seeded sample of 500 documents (the one piece of work a plan does: under a second, nothing
cached), its chunks per character times the corpus' characters. The queries are the
dataset's. Beside the profile's figures it shows the memory math of the plan's own faiss
indexes at that size, and says when the plan's chunker, embedder or index is not the
profile's (their seconds are then the profile's options'). The profile and the stated figures
are read when the config is validated (one line, exit 2, before any work).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.cache.store import ArtifactStore
from bench.config.schema import ScalePlanConfig
from bench.data.base import Dataset
from bench.errors import ConfigError
from bench.index.memory import machine_memory_bytes
from bench.pipeline.node import Node
from bench.pipeline.plan import Plan
from bench.scaling.base import Prediction, Profile
from bench.scaling.planner import (
    METHODS,
    Stated,
    index_memory,
    memory_notes,
    predict,
    read_stated,
)
from bench.scaling.profile import read_profile
from bench.scaling.report import prediction_lines, to_json


@dataclass(frozen=True)
class ScaleInputs:
    profile: Profile
    stated: Stated | None
    method: str


def check_scale_plan(cfg: Mapping[str, Any]) -> ScaleInputs | None:
    """The ``scale_plan`` block read and checked (None: no profile configured)."""
    if cfg.get("profile") in (None, ""):
        return None
    method = cfg.get("method", "work")
    if method not in METHODS:
        raise ConfigError("scale_plan.method", f"must be one of {', '.join(METHODS)}, "
                                               f"got {method!r}")
    path = Path(str(cfg["profile"]))
    if not path.exists():
        raise ConfigError("scale_plan.profile", f"no such file or folder: {path} (write a "
                                                "profile with scripts/bench_scale.py --out DIR)")
    profile = read_profile(path)
    if len(profile.points) < 2:
        raise ConfigError("scale_plan.profile", f"{profile.source} has one measured size; "
                                                "the planner needs two")
    stated = None
    if cfg.get("stated") not in (None, ""):
        if not Path(str(cfg["stated"])).is_file():
            raise ConfigError("scale_plan.stated", f"no such file: {cfg['stated']}")
        stated = read_stated(str(cfg["stated"]))
    return ScaleInputs(profile, stated, str(method))


def cached_chunk_count(store: ArtifactStore, stage: str, key: str) -> int | None:
    """The chunk count of a cached chunks artifact (its Parquet metadata), else None."""
    import pyarrow.parquet as pq

    found = store.lookup(stage, key)
    if found is None or not (found / "chunks.parquet").is_file():
        return None
    return int(pq.ParquetFile(found / "chunks.parquet").metadata.num_rows)


#: documents chunked to estimate an uncached corpus' chunk count
SAMPLE_DOCS = 500


def _estimate(node: Node, dataset: Dataset, n_chars: int) -> tuple[int, int]:
    """(estimated chunks, documents sampled): this plan's chunker on a seeded sample of the
    documents, its chunks per character times the corpus' characters (nothing is cached)."""
    import random

    from bench.chunking.stage import ChunkOp

    docs = dataset.documents
    assert isinstance(node.op, ChunkOp)
    sample = docs if len(docs) <= SAMPLE_DOCS else tuple(
        docs[i] for i in sorted(random.Random(0).sample(range(len(docs)), SAMPLE_DOCS)))
    chars = sum(len(d.text) for d in sample)
    table = node.op.chunker.chunk(sample, tokenizer=node.op.tokenizer)
    if len(sample) == len(docs) or chars == 0:
        return max(1, len(table)), len(sample)
    return max(1, round(len(table) * n_chars / chars)), len(sample)


def _under(the_plan: Plan, key: str) -> list[Node]:
    """The plan's nodes computed from the node ``key`` (through any path)."""
    memo: dict[str, bool] = {}

    def reaches(n: Node) -> bool:
        if n.key not in memo:
            memo[n.key] = any(i.key == key or reaches(i) for i in n.inputs)
        return memo[n.key]

    return [n for n in the_plan.nodes() if reaches(n)]


def _plan_indexes(nodes: list[Node], n_chunks: int) -> list[dict[str, Any]]:
    """The memory math of the plan's own faiss indexes at ``n_chunks`` (its embedder's
    width), one per factory."""
    from bench.embedding.stage import EmbedOp
    from bench.index.faiss_index import FaissIndex
    from bench.index.stage import IndexOp

    out: dict[str, dict[str, Any]] = {}
    for node in nodes:
        if not (isinstance(node.op, IndexOp) and isinstance(node.op.index, FaissIndex)):
            continue
        embeds = [i.op for i in node.inputs if isinstance(i.op, EmbedOp)]
        if embeds:
            mem = node.op.index.memory(n_chunks, embeds[0].embedder.dim).as_dict()
            out.setdefault(str(mem["factory"]), mem)
    return list(out.values())


#: the plan's config groups the profile's settings name (profile setting -> group)
_COMPARED = {"chunker": "chunker", "embedder": "embedder", "ann": "index"}


def _other_options(profile: Profile, choices: Mapping[str, Any] | None) -> str | None:
    """A note when the plan's chunker, embedder or index is not the profile's."""
    if not choices:
        return None
    differ = [f"{group} {choices[group]} (profile: {profile.settings.get(setting)})"
              for setting, group in _COMPARED.items()
              # a scale script's option names compare with the plan's choices; a pipeline
              # run's resolved configs do not (they are not names)
              if group in choices and isinstance(profile.settings.get(setting), str)
              and profile.settings.get(setting) != "none"
              and str(choices[group]) != profile.settings.get(setting)]
    if not differ:
        return None
    return ("this plan's " + ", ".join(differ) + ": the seconds are the profile's options', "
            "not this plan's (measure a profile with them: scripts/bench_scale.py "
            "--embedder/--chunker/--ann)")


def hydra_choices() -> Mapping[str, Any] | None:
    """The config groups chosen for this run (Hydra's runtime choices), if Hydra runs it."""
    from hydra.core.hydra_config import HydraConfig

    try:
        return dict(HydraConfig.get().runtime.choices)
    except ValueError:  # not inside a Hydra run (a test calling run() directly)
        return None


def scale_preview(cfg: ScalePlanConfig, dataset: Dataset, the_plan: Plan,
                  store: ArtifactStore) -> tuple[list[str], list[dict[str, Any]]]:
    """(lines for plan.txt, entries for plan.json) — empty without a profile."""
    inputs = check_scale_plan(vars(cfg))
    if inputs is None:
        return [], []
    profile = inputs.profile
    choices = hydra_choices()
    chunk_nodes = {n.key: n for n in the_plan.nodes() if n.stage == "chunk"}
    n_chars = sum(len(d.text) for d in dataset.documents)
    lines: list[str] = []
    entries: list[dict[str, Any]] = []
    for key, node in chunk_nodes.items():
        counted = cached_chunk_count(store, node.stage, key)
        how = "the cached chunk table's rows"
        if counted is None:
            counted, sampled = _estimate(node, dataset, n_chars)
            how = (f"estimated: this plan's chunker on {sampled:,} sampled documents, scaled "
                   f"by the corpus' {n_chars:,} characters (the chunks are not cached)")
        pred: Prediction = predict(profile, counted, n_queries=len(dataset.queries),
                                   method=inputs.method, stated=inputs.stated)
        pred = replace(pred, index_memory=index_memory(profile.settings.get("ann"), counted,
                                                       profile.points[-1].dim))
        notes = [*pred.notes, f"chunks: {how}"]
        other = _other_options(profile, choices)
        if other:
            notes.append(other)
        for mem in _plan_indexes(_under(the_plan, key), counted):
            notes.append(f"this plan's index {mem['factory']} at {counted:,} x {mem['dim']}: "
                         f"resident {mem['resident_bytes'] / 2**30:,.2f} GiB, build peak "
                         f"{mem['peak_bytes'] / 2**30:,.2f} GiB (bench.index.memory)")
        notes += memory_notes(pred, inputs.stated, machine_memory_bytes())
        pred = replace(pred, notes=tuple(notes))
        lines += [f"[{node.label}]", *prediction_lines(profile, pred)]
        entries.append({"chunk_node": key, **to_json(profile, pred)})
    return lines, entries
