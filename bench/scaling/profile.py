"""Read a scale profile: ``scripts/bench_scale.py``'s ``scale.json`` or its ``--out`` folder,
or ``python -m bench`` run folders (a folder holding several; one size each).

A pipeline run gives, per stage of its ``timings.parquet``, the seconds it spent computing
(the samples not served from the cache), ``rest`` = its wall time outside the timed stages
(scoring, CIs, writers, start-up), per stage of ``run.json``'s ``resources`` the peak VmRSS
after it (``ru_maxrss``) and its peak heap (``heap_peak_bytes``: RssAnon, ``peak_anon``), and
the bytes of the artifacts it wrote (the cache folders of its misses, where they still exist).
A stage without a resources entry (``rest``, the latency pass) takes the run's highest.

A run recorded before runs recorded their heap has no ``heap_peak_bytes``: the profile's heap
is then every run's RSS (one curve, one kind of figure), and ``Profile.notes`` says so.

A file that is not JSON names its line; a size record without a figure the planner needs names
the record and the key. Both are ``InputError``: one line, exit 2, before any prediction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.errors import InputError
from bench.scaling.base import LATENCY, REST, Profile, ScalePoint, StagePoint

#: the settings two sizes must share to sit on one curve
SETTINGS = ("embedder", "chunker", "ann", "ann_params", "k", "shard_size", "n_queries")


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InputError(path, exc.lineno, f"not JSON: {exc.msg}") from None
    except OSError as exc:
        raise InputError(path, 0, f"cannot read: {exc.strerror}") from None


def _records(path: Path) -> tuple[Path, list[tuple[str, Mapping[str, Any]]]]:
    """(the file named in errors, [(where, size record)])."""
    runs = sorted(p.parent for p in (path / "run.json", *path.glob("*/run.json"))
                  if p.is_file()) if path.is_dir() else []
    if runs:
        return path, [(str(r / "run.json"), _run_record(r)) for r in runs]
    if path.is_dir():
        summary = path / "scale.json"
        if summary.is_file():
            path = summary
        else:
            sizes = sorted(path.glob("size-*.json"))
            if not sizes:
                raise InputError(path, 0, "no scale.json or size-*.json here "
                                          "(write one with scripts/bench_scale.py --out DIR)")
            return path, [(str(p), _json(p)) for p in sizes]
    obj = _json(path)
    if isinstance(obj, Mapping) and isinstance(obj.get("results"), list):
        return path, [(f"{path} results[{i}]", r) for i, r in enumerate(obj["results"])]
    if isinstance(obj, Mapping) and "stages" in obj:  # one size-*.json
        return path, [(str(path), obj)]
    raise InputError(path, 0, "not a scale profile: expected bench_scale.py's scale.json "
                              "(a 'results' list) or a size-*.json")


def _run_record(run: Path) -> dict[str, Any]:
    """A ``python -m bench`` run folder as a size record (the scale script's keys)."""
    import pyarrow.parquet as pq

    where = run / "run.json"
    manifest = _json(where)
    try:
        rows = pq.read_table(run / "timings.parquet", columns=[
            "stage", "sample_kind", "n_items", "wall_ms", "from_cache", "query_id"]).to_pylist()
    except (OSError, ValueError) as exc:
        raise InputError(run / "timings.parquet", 0, f"cannot read: {exc}") from None
    events = [e for e in (manifest.get("cache") or {}).get("events") or []
              if isinstance(e, Mapping)]
    # the nodes it computed, from the cache's log (their writing included); a node shared by
    # several configs is one event, where timings.parquet repeats it under each config
    seconds: dict[str, float] = {}
    for e in events:
        if not e.get("hit") and isinstance(e.get("wall_s"), int | float):
            seconds[str(e["stage"])] = seconds.get(str(e["stage"]), 0.0) + float(e["wall_s"])
    if "chunk" not in seconds:
        raise InputError(where, 0, "its corpus pass came from the cache: a profile needs "
                                   "runs that computed it (an empty cache_dir)")
    nodes = set(seconds)
    seen: set[tuple[object, ...]] = set()
    for r in rows:  # work outside the nodes: the latency pass per query, scoring per config
        kind = r["sample_kind"]
        if r["from_cache"] or (r["stage"] in nodes and kind != "query"):
            continue
        sample = (r["stage"], kind, r["n_items"], r["wall_ms"], r["query_id"])
        if sample in seen:  # the same sample under another config
            continue
        seen.add(sample)
        name = f"{r['stage']}{LATENCY}" if kind == "query" else str(r["stage"])
        seconds[name] = seconds.get(name, 0.0) + r["wall_ms"] / 1000.0
    wall = manifest.get("wall_s")
    if not isinstance(wall, int | float):
        raise InputError(where, 0, "not a finished run: no wall_s")
    seconds[REST] = max(float(wall) - sum(seconds.values()), 0.0)
    peaks: dict[str, int] = {}
    heaps: dict[str, int] = {}
    resources = [r for r in manifest.get("resources") or [] if isinstance(r, Mapping)]
    for r in resources:
        stage = str(r.get("stage"))
        if isinstance(r.get("peak_rss_bytes"), int):
            peaks[stage] = max(peaks.get(stage, 0), r["peak_rss_bytes"])
        if isinstance(r.get("heap_peak_bytes"), int):  # None off Linux, absent before #36
            heaps[stage] = max(heaps.get(stage, 0), r["heap_peak_bytes"])
    heap_measured = bool(resources) and len(heaps) == len({str(r.get("stage"))
                                                           for r in resources})
    peak = manifest.get("peak_rss_bytes")
    peak = peak if isinstance(peak, int) else max(peaks.values(), default=0)
    heap = max(heaps.values(), default=0)
    disk: dict[str, int] = {}
    for e in events:
        folder = Path(str(e.get("path", "")))
        if not e.get("hit") and folder.is_dir():
            size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
            disk[str(e["stage"])] = disk.get(str(e["stage"]), 0) + size
    data = manifest.get("dataset") or {}
    config = manifest.get("config") or {}
    return {
        "n_chunks": data.get("chunks"), "n_docs": data.get("documents"),
        "n_queries": data.get("queries"), "dim": _dim_of(manifest),
        "stages": [{"stage": name, "seconds": s,
                    "peak_rss_bytes": peaks.get(name, peak),
                    "peak_anon_bytes": heaps.get(name, heap) if heap_measured
                    else peaks.get(name, peak)} for name, s in seconds.items()],
        "peak_rss_bytes": peak, "disk_bytes": disk, "heap_measured": heap_measured,
        # the options the curve is for (the corpus, its path and the cache are not)
        "settings": {"source": "python -m bench", "n_queries": data.get("queries"),
                     **{k: _without_paths(config.get(k)) for k in RUN_SETTINGS}},
    }


#: options that say where a stage keeps its scratch files (under each run's own cache_dir),
#: never what it computes or how fast: not part of a curve's settings
SCRATCH_PATHS = ("shards_dir",)


def _without_paths(option: Any) -> Any:
    if isinstance(option, Mapping):
        return {k: v for k, v in option.items() if k not in SCRATCH_PATHS}
    return option


#: the stage options two pipeline runs must share to sit on one curve
RUN_SETTINGS = ("chunker", "embedder", "embedding", "index", "retriever", "lexical", "fusion",
                "filters", "reranker", "generator", "judge", "metrics", "latency")


def _dim_of(manifest: Mapping[str, Any]) -> int:
    """The document vectors' width (``run.json``'s ``index`` block; 0 for a run without a
    vector index: the width is then not part of its curve)."""
    index = manifest.get("index")
    dim = index.get("dim") if isinstance(index, Mapping) else None
    return dim if isinstance(dim, int) else 0


def _need(where: str, rec: Mapping[str, Any], key: str, kind: type) -> Any:
    value = rec.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InputError(where, 0, f"size record lacks {key!r} ({kind.__name__})")
    return value


def _point(where: str, rec: Mapping[str, Any]) -> ScalePoint:
    if not isinstance(rec, Mapping):
        raise InputError(where, 0, "size record is not an object")
    stages: dict[str, StagePoint] = {}
    for i, s in enumerate(_need(where, rec, "stages", list)):
        at = f"{where} stages[{i}]"
        name = _need(at, s, "stage", str)
        seconds = s.get("seconds")
        if not isinstance(seconds, int | float) or seconds < 0:
            raise InputError(at, 0, "size record lacks 'seconds' (a number >= 0)")
        stages[name] = StagePoint(float(seconds), _need(at, s, "peak_rss_bytes", int),
                                  _need(at, s, "peak_anon_bytes", int))
    n_chunks = _need(where, rec, "n_chunks", int)
    if n_chunks < 1:
        raise InputError(where, 0, f"n_chunks must be >= 1, got {n_chunks}")
    disk = rec.get("disk_bytes")
    if disk is None:  # profiles before the disk figures: the vectors were always recorded
        disk = {"vectors": _need(where, rec, "vectors_bytes", int)}
    load = rec.get("loadavg")
    dim = rec.get("dim")
    if not isinstance(dim, int):  # older profiles: the vectors file's width
        dim = (_need(where, rec, "vectors_bytes", int) - 128) // (4 * n_chunks)
    return ScalePoint(
        n_chunks=n_chunks, n_docs=_need(where, rec, "n_docs", int),
        n_queries=_need(where, rec, "n_queries", int), dim=int(dim), stages=stages,
        peak_rss_bytes=_need(where, rec, "peak_rss_bytes", int),
        disk_bytes={str(k): int(v) for k, v in disk.items()},
        n_chars=rec.get("n_chars") if isinstance(rec.get("n_chars"), int) else None,
        loadavg=float(load[0]) if isinstance(load, list) and load else None)


def read_profile(path: str | Path) -> Profile:
    """The profile at ``path`` (a scale.json, a size-*.json, or the folder of either), its
    sizes ascending. Sizes measured with other stage options than the first are refused."""
    source, records = _records(Path(path))
    points: dict[int, ScalePoint] = {}
    settings: dict[str, object] | None = None
    cpus = None
    no_heap: list[str] = []
    for where, rec in records:
        if rec.get("heap_measured") is False:
            no_heap.append(where)
        point = _point(where, rec)
        mine = dict(rec["settings"]) if isinstance(rec.get("settings"), Mapping) else {
            k: rec.get(k) for k in SETTINGS}
        if settings is None:
            settings = mine
        elif mine != settings:
            diff = next(k for k in {**settings, **mine} if mine.get(k) != settings.get(k))
            raise InputError(where, 0, f"measured with {diff}={mine.get(diff)!r}, the "
                                       f"profile's other sizes with {settings.get(diff)!r}: "
                                       "one curve per set of options")
        points[point.n_chunks] = point
        cpus = rec.get("cpus") if isinstance(rec.get("cpus"), int) else cpus
    if not points:
        raise InputError(source, 0, "the profile has no measured size")
    ordered = tuple(points[n] for n in sorted(points))
    runs = (settings or {}).get("source") == "python -m bench"
    notes: tuple[str, ...] = ()
    if no_heap:  # one kind of figure on one curve: every size's RSS
        ordered = tuple(replace(p, stages={k: replace(s, peak_anon_bytes=s.peak_rss_bytes)
                                           for k, s in p.stages.items()}) for p in ordered)
        notes = (f"heap: {len(no_heap)} of {len(records)} runs record no heap_peak_bytes "
                 f"(run.json before #36; {no_heap[0]}{', ...' if len(no_heap) > 1 else ''}): "
                 "the heap figures are peak RSS, file pages included",)
    stages: list[str] = []
    for p in ordered:  # in the order they ran; measured at every size
        stages += [name for name in p.stages if name not in stages and name != "generate"]
    stages = [name for name in stages if all(name in p.stages for p in ordered)]
    if runs:  # a pipeline run's index option is its resolved config: the planner's "ann"
        settings = {**(settings or {}), "ann": (settings or {}).get("index")}
    return Profile(str(source), settings or {}, ordered, cpus, stages=tuple(stages),
                   heap_measured=not no_heap, notes=notes)
