"""Read a scale profile: ``scripts/bench_scale.py``'s ``scale.json`` or its ``--out`` folder.

A file that is not JSON names its line; a size record without a figure the planner needs names
the record and the key. Both are ``InputError``: one line, exit 2, before any prediction.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.errors import InputError
from bench.scaling.base import Profile, ScalePoint, StagePoint

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
    for where, rec in records:
        point = _point(where, rec)
        mine = {k: rec.get(k) for k in SETTINGS}
        if settings is None:
            settings = mine
        elif mine != settings:
            diff = next(k for k in SETTINGS if mine[k] != settings[k])
            raise InputError(where, 0, f"measured with {diff}={mine[diff]!r}, the profile's "
                                       f"other sizes with {settings[diff]!r}: one curve per "
                                       "set of options")
        points[point.n_chunks] = point
        cpus = rec.get("cpus") if isinstance(rec.get("cpus"), int) else cpus
    if not points:
        raise InputError(source, 0, "the profile has no measured size")
    return Profile(str(source), settings or {}, tuple(points[n] for n in sorted(points)), cpus)
