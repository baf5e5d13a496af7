"""Synthetic scale profiles (``scripts/bench_scale.py``'s scale.json) whose figures follow
known laws exactly, for the scale planner's tests (tests/scaling)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

MIB = 2**20
Q = 1000


def nlist(n: int) -> int:
    """conf/index/ivf_flat.yaml's auto nlist: round(4 sqrt n), at most min(n, 100k) // 39."""
    return min(round(4 * math.sqrt(n)), min(n, 100_000) // 39)


def ivf_work(n: int) -> float:
    """faiss' IVF build: 10 k-means iterations on the capped sample, then every vector."""
    lists = nlist(n)
    return 10 * min(n, 100_000, 256 * lists) * lists + n * lists


#: laws the synthetic profile follows exactly (seconds, bytes)
LAWS = {
    "chunk": lambda n: 0.2 + 2e-5 * n,
    "embed": lambda n: 3e-5 * n,
    "embed_queries": lambda n: 0.02,
    "index": lambda n: 0.1 + 2e-11 * ivf_work(n),
    "search": lambda n: 1e-9 * Q * n,
    "search_ann": lambda n: 0.05,
    "metrics": lambda n: 0.04,
}


def anon(n: int) -> int:
    return 200 * MIB + 1700 * n


def record(n: int, **extra: Any) -> dict[str, Any]:
    stages = [{"stage": "generate", "seconds": 9.0, "n_items": n, "peak_rss_bytes": 1,
               "peak_anon_bytes": 1}]
    stages += [{"stage": s, "seconds": law(n), "n_items": n,
                "peak_rss_bytes": anon(n) + 1536 * n, "peak_anon_bytes": anon(n)}
               for s, law in LAWS.items()]
    out = {"size": n, "n_docs": n, "n_chunks": n, "n_queries": Q, "embedder": "static_l3",
           "chunker": "fixed_tokens", "ann": "ivf_flat", "ann_params": {"nprobe": 16},
           "k": 100, "shard_size": 50_000, "stages": stages,
           "peak_rss_bytes": anon(n) + 1536 * n + 10 * MIB, "vectors_bytes": 1536 * n + 128,
           "disk_bytes": {"chunks": 60 * n + 4096, "vectors": 1536 * n + 128,
                          "index": 1544 * n}, "dim": 384, "n_chars": 250 * n,
           "loadavg": [0.5, 0.5, 0.5], "cpus": 2}
    out.update(extra)
    return out


def write_profile(path: Path, sizes: list[int], **extra: Any) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "scale.json").write_text(json.dumps({"results": [record(n, **extra)
                                                             for n in sizes]}))
    return path
