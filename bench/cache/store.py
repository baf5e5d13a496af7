"""Content-addressed artifact store.

An artifact is a folder ``<root>/<stage>/<key[:2]>/<key>/`` holding Parquet / .npy / faiss
files and ``_meta.json``. The key is a sha256 over the stage name, the stage code version, the
stage's own semantic parameters and the keys of its upstream artifacts (which transitively
include the dataset fingerprint). Writers fill a private temp folder and publish it with one
atomic ``rename``: a crashed writer leaves no half artifact, and when two sweep workers (SLURM,
Ray) compute the same key on a shared cache, the first rename wins and the other's copy is
discarded. Nothing is pickled: loaders read only plain formats.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger("bench")

T = TypeVar("T")

META = "_meta.json"


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def make_key(stage: str, version: str, params: Mapping[str, Any], upstream: Sequence[str]) -> str:
    payload = canonical_json(
        {"stage": stage, "version": version, "params": params, "upstream": list(upstream)}
    )
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class CacheEvent:
    """One stage resolution: a hit (loaded) or a miss (computed and stored)."""

    stage: str
    key: str
    hit: bool
    wall_s: float
    path: str


class ArtifactStore:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.events: list[CacheEvent] = []

    def path_for(self, stage: str, key: str) -> Path:
        return self.root / stage / key[:2] / key

    def lookup(self, stage: str, key: str) -> Path | None:
        path = self.path_for(stage, key)
        return path if (path / META).is_file() else None

    @contextmanager
    def _writer(self, stage: str, key: str, meta: Mapping[str, Any]) -> Iterator[Path]:
        final = self.path_for(stage, key)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.parent / f".tmp-{key[:12]}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            yield tmp
            (tmp / META).write_text(json.dumps(dict(meta), indent=2, default=str))
            try:
                os.rename(tmp, final)
            except OSError:
                # Another worker published the same key first; its artifact is equivalent.
                if (final / META).is_file():
                    shutil.rmtree(tmp, ignore_errors=True)
                else:
                    raise
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def resolve(
        self,
        stage: str,
        *,
        version: str,
        params: Mapping[str, Any],
        upstream: Sequence[str],
        compute: Callable[[Path], None],
        load: Callable[[Path], T],
    ) -> tuple[T, str, bool]:
        """Load the artifact for these inputs, computing and storing it on a miss.

        ``compute(tmp_dir)`` writes the artifact files into ``tmp_dir``; ``load(dir)`` reads
        them back. Returns (artifact, key, hit). Logs one line with hit/miss and wall time.
        """
        key = make_key(stage, version, params, upstream)
        t0 = time.perf_counter()
        found = self.lookup(stage, key)
        hit = found is not None
        if found is None:
            log.info("stage %-10s building (cache miss, key %s)", stage, key[:12])
            meta = {
                "stage": stage,
                "version": version,
                "params": params,
                "upstream": list(upstream),
                "created_unix": time.time(),
            }
            with self._writer(stage, key, meta) as tmp:
                compute(tmp)
            found = self.path_for(stage, key)
        value = load(found)
        wall = time.perf_counter() - t0
        self.events.append(CacheEvent(stage, key, hit, wall, str(found)))
        log.info(
            "stage %-10s done in %.2fs (cache %s, key %s)",
            stage,
            wall,
            "hit" if hit else "miss",
            key[:12],
        )
        return value, key, hit
