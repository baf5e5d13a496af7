"""The index memory math (``bench.index.memory``) against measured memory, per factory.

Each case builds a ``FaissIndex`` with ``build_in`` over a memory-mapped ``.npy`` of clustered
unit vectors in a FRESH ``python`` child (peak RSS is per process), sampling ``RssAnon`` (heap:
what must fit in RAM; the memmap's pages are RssFile, reclaimable) every 20 ms
(``bench_scale.RssSampler``). Per case: the predicted resident bytes and build peak, the
measured heap growth after the build (resident) and its peak during the build, relative errors.
The baseline is the child's RssAnon after faiss, numpy and the empty index are loaded.

Not a test: ``python scripts/bench_index_memory.py --out runs/index_memory [--n 300000]
[--dim 384]`` (writes index_memory.json and index_memory.md).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import RssSampler, read_status

ROOT = Path(__file__).resolve().parent.parent
MB = 1024 * 1024

#: (label, FaissIndex options); pq_m=48 as conf/index/ivf_pq.yaml
CASES: list[tuple[str, dict[str, object]]] = [
    ("Flat", {"factory": "Flat"}),
    ("SQ8", {"factory": "SQ8"}),
    ("IVF-Flat", {"factory": "IVF{nlist},Flat"}),
    ("IVF-Flat on disk", {"factory": "IVF{nlist},Flat", "on_disk": True}),
    ("IVF-PQ48", {"factory": "IVF{nlist},PQ{pq_m}", "pq_m": 48}),
    ("IVF-PQ48 on disk", {"factory": "IVF{nlist},PQ{pq_m}", "pq_m": 48, "on_disk": True}),
    ("HNSW32", {"factory": "HNSW32"}),
]


def write_vectors(path: Path, n: int, dim: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, dim))
    centers = rng.standard_normal((256, dim)).astype(np.float32)
    for i0 in range(0, n, 100_000):
        i1 = min(n, i0 + 100_000)
        v = centers[rng.integers(0, 256, i1 - i0)] + rng.standard_normal((i1 - i0, dim),
                                                                          dtype=np.float32)
        out[i0:i1] = v / np.linalg.norm(v, axis=1, keepdims=True)
    out.flush()


def child(vectors_path: Path, options: dict[str, object]) -> dict[str, object]:
    from bench.index.faiss_index import FaissIndex

    vectors = np.load(vectors_path, mmap_mode="r")
    index = FaissIndex(**options)  # type: ignore[arg-type]
    mem = index.memory(*vectors.shape)
    sampler = RssSampler()
    sampler.start()
    base = read_status()["RssAnon"]
    sampler.reset()
    with tempfile.TemporaryDirectory(dir=vectors_path.parent) as tmp:
        t0 = time.perf_counter()
        built, info = index.build_in(vectors, Path(tmp))
        build_s = time.perf_counter() - t0
        _, peak_anon = sampler.peaks()
        after = read_status()["RssAnon"]
        del built
    sampler.stop()
    return {"predicted_resident": mem.resident_bytes, "predicted_peak": mem.peak_bytes,
            "measured_resident": after - base, "measured_peak": peak_anon - base,
            "disk_lists": mem.disk_lists, "index_bytes": info.index_bytes, "build_s": build_s,
            "describe": mem.describe()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--n", type=int, default=300_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--child", nargs=2, metavar=("VECTORS", "OPTIONS_JSON"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(Path(args.child[0]), json.loads(args.child[1]))))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    vec = args.out / f"vectors_{args.n}x{args.dim}.npy"
    if not vec.exists():
        write_vectors(vec, args.n, args.dim)
    rows = []
    for label, options in CASES:
        proc = subprocess.run([sys.executable, __file__, "--out", str(args.out), "--child",
                               str(vec), json.dumps(options)], capture_output=True, text=True,
                              cwd=ROOT, check=True)
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        r["case"] = label
        rows.append(r)
        print(label, json.dumps(r), flush=True)
    (args.out / "index_memory.json").write_text(json.dumps(rows, indent=1))
    vec_mb = args.n * args.dim * 4 / MB
    lines = [f"{args.n:,} x {args.dim} float32 vectors (memmap, {vec_mb:,.0f} MB "
             "page cache, not counted); heap = RssAnon growth over the child's baseline", "",
             "| index | predicted resident MB | measured MB | error | predicted build peak MB "
             "| measured peak MB | error | lists on disk MB | build s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        pr, mr = int(r["predicted_resident"]), int(r["measured_resident"])
        pp, mp = int(r["predicted_peak"]), int(r["measured_peak"])
        lines.append(f"| {r['case']} | {pr / MB:,.1f} | {mr / MB:,.1f} | {(pr - mr) / mr:+.1%} "
                     f"| {pp / MB:,.1f} | {mp / MB:,.1f} | {(pp - mp) / mp:+.1%} "
                     f"| {int(r['disk_lists']) / MB:,.1f} | {float(r['build_s']):.1f} |")
    (args.out / "index_memory.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
