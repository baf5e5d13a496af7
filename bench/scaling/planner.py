"""Predict a corpus size's wall time, peak memory and disk from a few measured sizes.

How each figure is extrapolated (``n`` = chunks):

- **seconds per stage** (``method="work"``): affine in the stage's work count, ``t = base +
  slope * work(n, q)``, through the two largest sizes fitted on. The work count is the
  algorithm's: chunks for chunking and embedding, queries x chunks for the exact brute force,
  and for an IVF index the k-means on its capped training sample plus the assignment of every
  vector (``10 * train * nlist + n * nlist``, nlist as the build resolves it) — the step that a
  power law in n cannot see, since the sample stops growing at ``train_size``; an IVF search
  scans ``nlist + nprobe * n / nlist`` per query, HNSW ``log2 n``. ``method="power"`` is the
  local power law in n (through the same two sizes), kept to compare against.
- **peak memory** (VmRSS and RssAnon, per stage and for the process): affine ``base + slope *
  n`` through the same two sizes — a fixed part (interpreter, model, kernels) plus bytes per
  chunk (the index's vectors, the memmap's pages); the slope is never negative. The heap
  (RssAnon) is what must be resident; the memory need adds the files the run maps (the
  vectors, on-disk IVF lists: their predicted disk bytes). RSS counts those files' pages as
  far as the measuring machine held them, so it is reported, never used for the verdict.
- **disk** per artifact (chunk shards, vectors, index): affine the same way.
- **stated figures** (``Stated``): a stage given a rate (items per second on another machine,
  a GPU box) takes ``items / rate`` instead of this machine's fit; the other stages keep this
  machine's, and the prediction says which is which.

``validate`` measures the method's error: each measured size is predicted from the sizes at
least ``ratio`` times smaller (two at least) and compared with what was measured.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.errors import InputError
from bench.scaling.base import (
    QUERY_ROLES,
    ROLES,
    Check,
    Fit,
    Prediction,
    Profile,
    ScalePoint,
    StagePrediction,
)

if TYPE_CHECKING:
    from bench.index.faiss_index import FaissIndex

METHODS = ("work", "power")


@dataclass(frozen=True)
class Stated:
    """Throughputs stated for another machine (a GPU box): per stage, its work units per
    second (``work_model``: chunks for chunking and embedding, queries x chunks for the exact
    search, queries for the query embeddings and the metrics)."""

    machine: str
    rates: dict[str, float]
    source: str = ""
    #: the machine's memory (GiB), to check the predicted heap against; None: not stated
    memory_gb: float | None = None


def read_stated(path: str | Path) -> Stated:
    """Stated figures: ``scripts/gpu_check.sh``'s ``gpu_check.json`` from the GPU box (its
    embedding texts/s and its exact search's queries/s over its vectors), or a YAML file::

        machine: 1x H100 80GB, 16 cores
        source: where the figures come from (a measured run, a vendor table)
        memory_gb: 128
        rates: {embed: 40000, search: 2.0e10}   # work units per second
    """
    import yaml

    p = Path(path)
    try:
        obj = yaml.safe_load(p.read_text())  # JSON is YAML
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(p, mark.line + 1 if mark is not None else 0,
                         f"not YAML: {getattr(exc, 'problem', exc)}") from None
    except OSError as exc:
        raise InputError(p, 0, f"cannot read: {exc.strerror}") from None
    if isinstance(obj, Mapping) and isinstance(obj.get("rows"), list):
        return _from_gpu_check(p, obj)
    if not isinstance(obj, Mapping) or not isinstance(obj.get("machine"), str):
        raise InputError(p, 0, "stated figures need 'machine' (a label) and 'rates'")
    rates = obj.get("rates")
    if not isinstance(rates, Mapping) or not rates:
        raise InputError(p, 0, "stated figures need 'rates': {stage: work units per second}")
    out: dict[str, float] = {}
    for stage, rate in rates.items():
        if isinstance(rate, str):  # YAML 1.1 reads 2e10 (no '+', no '.') as a string
            with contextlib.suppress(ValueError):
                rate = float(rate)
        if stage not in ROLES:
            raise InputError(p, 0, f"rates.{stage}: not a stage the planner knows "
                                   f"({', '.join(ROLES)})")
        if not isinstance(rate, int | float) or isinstance(rate, bool) or not rate > 0:
            raise InputError(p, 0, f"rates.{stage}: must be a number > 0, got {rate!r}")
        out[str(stage)] = float(rate)
    mem = obj.get("memory_gb")
    if mem is not None and (not isinstance(mem, int | float) or not mem > 0):
        raise InputError(p, 0, f"memory_gb: must be a number > 0, got {mem!r}")
    return Stated(obj["machine"], out, str(obj.get("source") or ""),
                  None if mem is None else float(mem))


def _from_gpu_check(p: Path, obj: Mapping[str, Any]) -> Stated:
    """gpu_check.json's figures as rates: ``embed`` = the embedding section's texts/s (MiniLM,
    bf16 on CUDA), ``search`` = the fp32 ``torch_flat`` queries/s x its vectors (the exact
    search's queries x chunks per second)."""
    rows = [r for r in obj["rows"] if isinstance(r, Mapping) and r.get("status") == "ok"]

    def row(section: str, item: str = "") -> Mapping[str, Any] | None:
        return next((r["figures"] for r in rows if r.get("section") == section
                     and str(r.get("item", "")).startswith(item)
                     and isinstance(r.get("figures"), Mapping)), None)

    rates: dict[str, float] = {}
    embed = row("embed")
    if embed and isinstance(embed.get("texts_per_s"), int | float):
        rates["embed"] = float(embed["texts_per_s"])
    flat = row("torch_flat", "fp32")
    if flat and isinstance(flat.get("qps"), int | float) and isinstance(flat.get("n"), int):
        rates["search"] = float(flat["qps"]) * flat["n"]
    if not rates:
        raise InputError(p, 0, "gpu_check.json has no embed or torch_flat fp32 figure "
                               "(a section that failed or was skipped)")
    env = row("env") or {}
    machine = f"{env.get('gpu', obj.get('device', 'the GPU box'))}"
    if isinstance(env.get("vram_gib"), int | float):
        machine += f" ({env['vram_gib']:g} GiB)"
    return Stated(machine, rates, f"{p} (scripts/gpu_check.sh)")


def _power(xs: Sequence[float], ys: Sequence[float]) -> Fit:
    (x1, y1), (x2, y2) = (xs[-2], max(ys[-2], 1e-9)), (xs[-1], max(ys[-1], 1e-9))
    b = min(max(math.log(y2 / y1) / math.log(x2 / x1), 0.0), 2.0)  # noise: never shrinking
    return Fit("power", exponent=b, n_ref=x2, y_ref=y2, fitted_on=tuple(int(x) for x in xs))


def _affine(xs: Sequence[float], ys: Sequence[float], *, sizes: Sequence[float] = (),
            unit: str = "chunk", of: str = "bytes") -> Fit:
    """``base + slope * x`` through the last two points; a negative slope (noise) is flat,
    a negative base (a fixed cost below zero) or one work count at both points (the queries
    of a profile that kept them fixed) is a line through the origin and the last point."""
    (x1, y1), (x2, y2) = (xs[-2], ys[-2]), (xs[-1], ys[-1])
    if x2 == x1:
        return Fit("affine", slope=y2 / x2 if x2 else 0.0, unit=unit, of=of,
                   fitted_on=tuple(int(x) for x in (sizes or xs)))
    slope = max((y2 - y1) / (x2 - x1), 0.0)
    base = y2 - slope * x2
    if base < 0:
        base, slope = 0.0, y2 / x2
    return Fit("affine", base=base, slope=slope, unit=unit, of=of,
               fitted_on=tuple(int(x) for x in (sizes or xs)))


@dataclass(frozen=True)
class Work:
    """What a stage's time is proportional to, by its algorithm."""

    unit: str
    count: Callable[[float, float], float]  # (chunks, queries) -> work units


def work_model(profile: Profile) -> dict[str, Work]:
    """Each role's work count (``bench.scaling.base.ROLES``), from the profile's stage
    options (its ANN index's nlist, training sample and nprobe as faiss_index resolves them)."""
    out = {"chunks": Work("chunk", lambda n, q: n), "queries": Work("query", lambda n, q: q),
           "exact": Work("query x chunk", lambda n, q: q * n)}
    index = _faiss_option(profile.settings.get("ann"))
    nprobe = _nprobe(profile.settings)
    if index is not None and index.resolve_nlist(1_000) is not None:
        def nlist(n: float) -> float:
            return float(index.resolve_nlist(int(n)) or 1)

        def build(n: float, q: float) -> float:
            lists = nlist(n)
            train = min(n, index.train_size, KMEANS_MAX_POINTS * lists)
            return KMEANS_NITER * train * lists + n * lists

        out["index"] = Work("k-means + assignment distance", build)
        out["ann"] = Work("list entry scanned",
                          lambda n, q: q * (nlist(n) + nprobe * n / nlist(n)))
    elif index is not None and "HNSW" in index.factory:
        out["index"] = Work("chunk x log2 chunks", lambda n, q: n * math.log2(max(n, 2)))
        out["ann"] = Work("query x log2 chunks", lambda n, q: q * math.log2(max(n, 2)))
    else:
        out["index"] = out["chunks"]
        out["ann"] = out["exact"]
    return out


def _nprobe(settings: Mapping[str, object]) -> float:
    """The nprobe a profile searched with: the script's ``ann_params``, or the sum over a
    pipeline run's swept ``query_params`` (each is searched)."""
    params = settings.get("ann_params")
    if isinstance(params, Mapping) and "nprobe" in params:
        return float(params["nprobe"])
    ann = settings.get("ann")
    swept = ann.get("query_params") if isinstance(ann, Mapping) else None
    if isinstance(swept, list):
        return float(sum(qp.get("nprobe", 0) for qp in swept if isinstance(qp, Mapping))) or 1.0
    return 1.0


#: faiss' IVF k-means: iterations and the sample's cap per centroid (IndexIVF's ``cp``)
KMEANS_NITER = 10
KMEANS_MAX_POINTS = 256


def _check_points(points: Sequence[ScalePoint]) -> None:
    if len({p.n_chunks for p in points}) < 2:
        raise ValueError("the planner needs two measured sizes at least")


def predict(profile: Profile, n_chunks: int, *, n_queries: int | None = None,
            method: str = "work", stated: Stated | None = None,
            points: Sequence[ScalePoint] | None = None) -> Prediction:
    """The prediction at ``n_chunks`` (and ``n_queries``: the profile's by default) from the
    profile's sizes (or ``points``, a subset of them)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    pts = sorted(points if points is not None else profile.points, key=lambda p: p.n_chunks)
    _check_points(pts)
    q_ref = pts[-1].n_queries
    q = q_ref if n_queries is None else n_queries
    xs = [float(p.n_chunks) for p in pts]
    stages: list[StagePrediction] = []
    works = work_model(profile)
    for stage in profile.stages:
        have = [p for p in pts if stage in p.stages]
        if len(have) < len(pts):  # measured at some sizes only: not on the path
            continue
        sx = [p.stages[stage] for p in pts]
        rss = _affine(xs, [float(s.peak_rss_bytes) for s in sx])(n_chunks)
        anon = _affine(xs, [float(s.peak_anon_bytes) for s in sx])(n_chunks)
        role = ROLES.get(stage)
        per_query = role in QUERY_ROLES
        w = works.get(role or "", Work("chunk", lambda n, q: n))
        if stated is not None and stage in stated.rates:  # work units per second there
            fit = Fit("stated", slope=1.0 / stated.rates[stage], unit=w.unit, of="seconds")
            seconds = w.count(n_chunks, q) / stated.rates[stage]
        elif method == "power" or role is None:  # no work count known: a power law
            fit = _power(xs, [s.seconds for s in sx])
            seconds = fit(n_chunks) * (q / q_ref if per_query else 1.0)
        else:  # affine in the stage's work count (queries as measured at each size)
            fit = _affine([w.count(p.n_chunks, p.n_queries) for p in pts],
                          [s.seconds for s in sx], sizes=xs, unit=w.unit, of="seconds")
            seconds = fit(w.count(n_chunks, q))
        stages.append(StagePrediction(stage, seconds, rss, anon, fit))
    disk = {name: _affine(xs, [float(p.disk_bytes.get(name, 0)) for p in pts])(n_chunks)
            for name in pts[-1].disk_bytes}
    # the process's peak is at least each stage's: a stage whose peak grows faster than the
    # others' takes over at scale, which one line through the overall peaks cannot see
    peak = max(_affine(xs, [float(p.peak_rss_bytes) for p in pts])(n_chunks),
               max((s.peak_rss_bytes for s in stages), default=0.0))
    notes: list[str] = []
    if stated is not None:
        notes.append(f"stages with stated rates ({', '.join(sorted(stated.rates))}) from "
                     f"{stated.machine}" + (f" ({stated.source})" if stated.source else "")
                     + "; the others from this profile's machine")
    return Prediction(n_chunks, q, tuple(stages), peak, disk,
                      stated.machine if stated is not None else "this profile's machine",
                      heap_measured=profile.heap_measured,
                      notes=(*profile.notes, *notes), mapped=mapped_artifacts(profile))


#: the artifacts holding the document vectors: the scale script's, a pipeline run's stage
VECTOR_ARTIFACTS = ("vectors", "embed_docs")


def mapped_artifacts(profile: Profile) -> tuple[str, ...]:
    """The profile's artifacts a run reads memory-mapped: the vectors always, the index when
    its inverted lists are on disk (an in-memory index is read into the heap)."""
    index = _faiss_option(profile.settings.get("ann"))
    names = (*VECTOR_ARTIFACTS, *(("index",) if index is not None and index.on_disk else ()))
    have = profile.points[-1].disk_bytes if profile.points else {}
    return tuple(n for n in names if n in have)


#: the stages that run with the index in memory (its bytes are in their heap)
_WITH_INDEX = ("index", "search", "search_ann", "metrics")
#: the stages that run with the vectors mapped (their pages are in their RSS)
_WITH_VECTORS = ("embed", "index", "search", "search_ann", "metrics")


def at_dim(pred: Prediction, profile: Profile, dim: int) -> Prediction:
    """The prediction for vectors of another width: the vectors' bytes (n x dim x 4) and the
    index's memory math recomputed, the heap and RSS of the stages holding them shifted by
    the differences. The seconds stay the profile's: an encoder of another width is another
    model, whose rate is measured or stated, not extrapolated."""
    ref = profile.points[-1].dim
    if dim == ref:
        return pred
    n = pred.n_chunks
    d_vectors = 4.0 * n * (dim - ref)
    ann = profile.settings.get("ann")
    old, new = index_memory(ann, n, ref), index_memory(ann, n, dim)
    d_index = 0.0 if old is None or new is None else \
        float(new["resident_bytes"]) - float(old["resident_bytes"])
    d_lists = 0.0 if old is None or new is None else \
        float(new["disk_lists_bytes"]) - float(old["disk_lists_bytes"])
    stages = tuple(replace(
        s, peak_anon_bytes=s.peak_anon_bytes + (d_index if s.stage in _WITH_INDEX else 0.0),
        peak_rss_bytes=s.peak_rss_bytes + (d_index if s.stage in _WITH_INDEX else 0.0)
        + (d_vectors if s.stage in _WITH_VECTORS else 0.0)) for s in pred.stages)
    disk = dict(pred.disk_bytes)
    if "vectors" in disk:
        disk["vectors"] += d_vectors
    if "index" in disk:
        disk["index"] += d_index + d_lists
    return replace(pred, stages=stages, disk_bytes=disk,
                   peak_rss_bytes=pred.peak_rss_bytes + d_index + d_vectors,
                   index_memory=new if new is not None else pred.index_memory,
                   notes=(*pred.notes, f"{dim}-d vectors: bytes from the math (the profile "
                                       f"measured {ref}-d); seconds are the {ref}-d "
                                       "encoder's"))


def memory_notes(pred: Prediction, stated: Stated | None, ram_bytes: int | None) -> list[str]:
    """What the predicted peaks mean for the machine that runs it."""
    out = []
    if stated is not None and stated.memory_gb is not None:
        ram_bytes, where = int(stated.memory_gb * 2**30), f"{stated.machine}'s stated"
    else:
        where = "this machine's"
    # the heap must be resident; mapped files' pages are evicted and read again when short
    over = next((s for s in pred.stages if ram_bytes and s.peak_anon_bytes > ram_bytes), None)
    if over is not None and ram_bytes:
        what = "heap" if pred.heap_measured else "RSS (the runs recorded no heap)"
        why = ("index.on_disk=true or a compressed index (docs/performance.md)"
               if ROLES.get(over.stage) in ("index", "ann", "exact") else
               "this stage holds the corpus (its chunks, their texts or statistics) in memory")
        out.append(f"the predicted {what} exceeds {where} memory ({ram_bytes / 2**30:.1f} "
                   f"GiB) from {over.stage} on ({over.peak_anon_bytes / 2**30:.1f} GiB): {why}")
    elif ram_bytes and pred.memory_need_bytes > ram_bytes:
        out.append(f"the predicted heap ({pred.peak_anon_bytes / 2**30:.1f} GiB) fits "
                   f"{where} memory ({ram_bytes / 2**30:.1f} GiB), the files it maps "
                   f"({pred.mapped_bytes / 2**30:.1f} GiB: {', '.join(pred.mapped)}) not "
                   "beside it: the kernel evicts their pages and reads them again")
    return out


def figures(pred: Prediction) -> dict[str, float]:
    """The prediction's figures by name (as ``Check.figures`` names them)."""
    out = {f"seconds.{s.stage}": s.seconds for s in pred.stages}
    out["seconds.total"] = pred.seconds
    out["peak_rss"] = pred.peak_rss_bytes
    out["peak_anon"] = pred.peak_anon_bytes
    out.update({f"peak_anon.{s.stage}": s.peak_anon_bytes for s in pred.stages})
    for name, b in pred.disk_bytes.items():
        out[f"disk.{name}"] = b
    out["disk.total"] = pred.disk_total_bytes
    return out


def measured(point: ScalePoint) -> dict[str, float]:
    """A measured size's figures, named as ``figures`` names them."""
    out = {f"seconds.{name}": s.seconds for name, s in point.stages.items()
           if name != "generate"}  # the script's set-up, not the path
    out["seconds.total"] = sum(out.values())
    out["peak_rss"] = float(point.peak_rss_bytes)
    out["peak_anon"] = float(max(s.peak_anon_bytes for name, s in point.stages.items()
                                 if name != "generate"))
    out.update({f"peak_anon.{name}": float(s.peak_anon_bytes)
                for name, s in point.stages.items() if name != "generate"})
    for name, b in point.disk_bytes.items():
        out[f"disk.{name}"] = float(b)
    out["disk.total"] = float(sum(point.disk_bytes.values()))
    return out


def validate(profile: Profile, *, ratio: float = 10.0, method: str = "work") -> list[Check]:
    """Each measured size predicted from the sizes at least ``ratio`` times smaller (when
    there are two), against what was measured."""
    checks: list[Check] = []
    for target in profile.points:
        train = [p for p in profile.points if p.n_chunks * ratio <= target.n_chunks * 1.0001]
        if len({p.n_chunks for p in train}) < 2:
            continue
        pred = figures(predict(profile, target.n_chunks, n_queries=target.n_queries,
                               method=method, points=train))
        meas = measured(target)
        checks.append(Check(target.n_chunks, tuple(p.n_chunks for p in train),
                            {k: (pred[k], meas[k]) for k in pred if k in meas}))
    return checks


def _faiss_option(ann: object) -> FaissIndex | None:
    """The profile's ANN index: a ``conf/index/<ann>.yaml`` option name (the scale script),
    or a resolved index config (a pipeline run's ``run.json``); None when it is not a faiss
    index or this checkout lacks the option."""
    from omegaconf import OmegaConf

    from bench.config.build import build
    from bench.index.faiss_index import FaissIndex

    if isinstance(ann, Mapping):
        if ann.get("_target_") != f"{FaissIndex.__module__}.{FaissIndex.__name__}":
            return None
        node: Any = OmegaConf.create(dict(ann))
    elif isinstance(ann, str) and ann != "none":
        conf = Path(__file__).resolve().parents[2] / "conf" / "index" / f"{ann}.yaml"
        if not conf.is_file():
            return None
        node = OmegaConf.load(conf)
    else:
        return None
    index = build(node, "index", device="cpu")  # type: ignore[arg-type]
    return index if isinstance(index, FaissIndex) else None


def index_memory(ann: object, n_chunks: int, dim: int) -> dict[str, Any] | None:
    """The memory math of the profile's ANN index at ``n_chunks`` x ``dim``
    (``bench.index.memory``); None when the option is not a faiss index."""
    index = _faiss_option(ann)
    if index is None:
        return None
    out: dict[str, Any] = index.memory(n_chunks, dim).as_dict()
    return out
