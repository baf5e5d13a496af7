"""Exercise every GPU path present and print one figures table (run by scripts/gpu_check.sh).

Sections, each timed and reported as ok / skip (with the reason) / FAIL (with the error):

  env          torch, CUDA, GPU, and which optional packages are importable
  embed        SentenceTransformerEmbedder bf16 on CUDA (fp32 on CPU): texts/s, and the
               cosine of its vectors with fp32 ones of the same weights
  torch_flat   index=torch_flat fp32/fp16/bf16: build s, QPS, recall@k vs fp32, and fp32 ids vs
               a numpy CPU brute force on a query sample; peak VRAM / GPU use from NVML
  faiss        faiss Flat and IVF on the GPU, only where faiss has GPUs (faiss-cpu on --cpu)
  kernels      tests/kernels/cuda_twin_check.py: numba.cuda twins vs CPU kernels (numba's
               simulator on --cpu)
  pipeline     `python -m bench` in-process: synthetic dataset, the embedder above,
               index=torch_flat, telemetry=nvml on CUDA; its nDCG@10
  gpu tests    pytest -m gpu on tests/index/test_torch_flat.py (CUDA only)
  vllm         importable? It cannot run on the lent device machine: its wheels (~336 MB)
               exceed the 64 MiB a call carries

Writes OUT/gpu_check.md (the table) and OUT/gpu_check.json. Exit 1 when a section FAILED.
``--cpu`` runs the same plumbing with CPU fallbacks and small sizes (what CI can check);
``--hide faiss,vllm`` makes those imports fail, to prove a path does not need them.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
PACKAGED = "packaged:all-MiniLM-L6-v2"
SECTIONS = ("env", "nvml", "embed", "torch_flat", "faiss", "kernels", "pipeline", "gpu_tests",
            "vllm")


@dataclass
class Row:
    section: str
    item: str
    status: str  # ok | skip | FAIL
    figures: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class Sizes:
    n_texts: int
    n_vectors: int
    n_queries: int
    k: int
    dim: int
    n_twin_queries: int
    n_reference_queries: int


CUDA_SIZES = Sizes(n_texts=50_000, n_vectors=1_000_000, n_queries=10_000, k=100, dim=384,
                   n_twin_queries=20_000, n_reference_queries=200)
CPU_SIZES = Sizes(n_texts=64, n_vectors=5_000, n_queries=64, k=10, dim=384,
                  n_twin_queries=40, n_reference_queries=16)


class Check:
    def __init__(self, *, device: str, sizes: Sizes, model: str, out: Path,
                 budget_s: float) -> None:
        self.device = device
        self.sizes = sizes
        self.model = model
        self.out = out
        self.deadline = time.monotonic() + budget_s
        self.rows: list[Row] = []
        self.nvml: Any = None
        self._data: tuple[np.ndarray, np.ndarray] = (np.zeros((0, 0)), np.zeros((0, 0)))
        self._reference: Any = None  # the fp32 torch_flat result, the recall reference

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def section(self, name: str, fn: Callable[[], None], *, needs_s: float) -> None:
        """Run one section; an exception is a FAIL row, not the end of the check."""
        if self.left() < needs_s:
            self.rows.append(Row(name, "-", "skip", note=f"time budget: {self.left():.0f} s "
                                                         f"left, needs ~{needs_s:.0f} s"))
            return
        t0 = time.perf_counter()
        n_before = len(self.rows)
        try:
            fn()
        except Exception as exc:  # one broken path must not hide the others' figures
            traceback.print_exc()
            self.rows.append(Row(name, "-", "FAIL", note=f"{type(exc).__name__}: "
                                                         f"{' '.join(str(exc).split())[:300]}"))
        dt = time.perf_counter() - t0
        for row in self.rows[n_before:]:
            row.seconds = row.seconds or dt
        print(f"[gpu_check] {name} done in {dt:.1f} s ({self.left():.0f} s left)", flush=True)

    # ------------------------------------------------------------------ sections

    def env(self) -> None:
        import torch

        figures: dict[str, Any] = {"python": sys.version.split()[0], "torch": torch.__version__,
                                   "cuda": torch.version.cuda or "-"}
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            figures["gpu"] = props.name
            figures["vram_gib"] = round(props.total_memory / 2**30, 1)
        for mod in ("faiss", "numba", "pynvml", "vllm", "hydra", "omegaconf", "bm25s",
                    "datasketch", "sentence_transformers"):
            try:
                m = importlib.import_module(mod)
                figures[mod] = getattr(m, "__version__", "yes")
            except Exception:
                figures[mod] = "absent"
        self.rows.append(Row("env", self.device, "ok", figures))

    def _texts(self, n: int) -> list[str]:
        from bench.data.synthetic import SyntheticDataset

        docs = SyntheticDataset(n_docs=160, n_queries=8, seed=0).load().documents
        # distinct texts of realistic length (~50 tokens): a doc plus a numbered suffix
        return [f"{docs[i % len(docs)].text} Record {i}." for i in range(n)]

    def embed(self) -> None:
        from bench.embedding.sentence_transformers import SentenceTransformerEmbedder

        texts = self._texts(self.sizes.n_texts)
        precision = "bf16" if self.device == "cuda" else "fp32"
        emb = SentenceTransformerEmbedder(model=self.model, precision=precision,
                                          device=self.device,
                                          batch_size=256 if self.device == "cuda" else 32)
        warm = np.zeros((min(512, len(texts)), emb.dim), dtype=np.float32)
        emb.encode(texts[: len(warm)], kind="document", out=warm)  # load + CUDA warm-up
        out = np.zeros((len(texts), emb.dim), dtype=np.float32)
        self._sync()
        t0 = time.perf_counter()
        emb.encode(texts, kind="document", out=out)
        self._sync()
        wall = time.perf_counter() - t0
        ref = SentenceTransformerEmbedder(model=self.model, precision="fp32",
                                          device=self.device, batch_size=64)
        n_cmp = min(256, len(texts))
        ref_out = np.zeros((n_cmp, emb.dim), dtype=np.float32)
        ref.encode(texts[:n_cmp], kind="document", out=ref_out)
        cos = np.sum(out[:n_cmp] * ref_out, axis=1)
        self.rows.append(Row("embed", f"MiniLM {precision} on {self.device}", "ok", {
            "texts": len(texts), "texts_per_s": round(len(texts) / wall, 1),
            "min_cos_vs_fp32": round(float(cos.min()), 5),
            "mean_cos_vs_fp32": round(float(cos.mean()), 6)}))
        if self.device == "cuda" and float(cos.min()) < 0.99:
            raise AssertionError(f"bf16 vectors drift from fp32: min cosine {cos.min():.4f}")

    def _sync(self) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()

    def _vectors(self) -> tuple[np.ndarray, np.ndarray]:
        s = self.sizes
        rng = np.random.default_rng(0)
        x = rng.standard_normal((s.n_vectors, s.dim), dtype=np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        # queries near corpus points, as real queries are, so the top-k is not all ties
        q = x[rng.choice(s.n_vectors, s.n_queries, replace=False)]
        q = q + 0.5 * rng.standard_normal(q.shape, dtype=np.float32) / np.sqrt(s.dim)
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        return x, q

    @contextlib.contextmanager
    def _watch(self, stage: str) -> Iterator[dict[str, Any]]:
        figures: dict[str, Any] = {}
        if self.nvml is None:
            yield figures
            return
        with self.nvml.watch(stage):
            yield figures
        sample = self.nvml.samples[-1]
        figures["peak_vram_gib"] = round(sample.peak_vram_bytes / 2**30, 2)
        if sample.mean_gpu_util_pct is not None:
            figures["gpu_util_pct"] = round(sample.mean_gpu_util_pct, 1)

    def nvml_open(self) -> None:
        if self.device != "cuda":
            self.rows.append(Row("nvml", "sampler", "skip", note="no CUDA device"))
            return
        from bench.telemetry.nvml import NvmlTelemetry

        self.nvml = NvmlTelemetry(interval_ms=20)
        with self.nvml.watch("probe"):
            time.sleep(0.1)
        s = self.nvml.samples[-1]
        self.rows.append(Row("nvml", "sampler", "ok", {
            "vram_used_gib": round(s.peak_vram_bytes / 2**30, 2),
            "gpu_util_pct": s.mean_gpu_util_pct}))

    def torch_flat(self) -> None:
        from bench.index.exact import ann_recall_at_k
        from bench.index.torch_flat import TorchFlatIndex

        s = self.sizes
        x, q = self._vectors()
        self._data = (x, q)
        precisions = ("fp32", "fp16", "bf16") if self.device == "cuda" else ("fp32",)
        reference = None
        for precision in precisions:
            index = TorchFlatIndex(precision=precision, device=self.device,
                                   query_batch=1024 if self.device == "cuda" else 32,
                                   block_rows=262_144 if self.device == "cuda" else 1024)
            with self._watch(f"torch_flat {precision}") as figures:
                built, info = index.build(x)
                built.search(q[:64], s.k, {})  # warm-up (cuBLAS handles, allocator)
                t0 = time.perf_counter()
                res = built.search(q, s.k, {})
                wall = time.perf_counter() - t0
            figures.update({"n": s.n_vectors, "queries": s.n_queries, "k": s.k,
                            "build_s": round(info.build_s, 3),
                            "qps": round(s.n_queries / wall, 1)})
            if reference is None:
                reference = res
                figures.update(self._cpu_reference(x, q, res))
            else:
                # half-precision scores are rounded: rescore the returned ids exactly first
                figures[f"recall@{s.k}_vs_fp32"] = round(float(ann_recall_at_k(
                    res, reference, s.k, vectors=x, queries=q).mean()), 5)
            del built
            self.rows.append(Row("torch_flat", f"{precision} {self.device}", "ok", figures))
        self._reference = reference

    def _cpu_reference(self, x: np.ndarray, q: np.ndarray, res: Any) -> dict[str, Any]:
        """fp32 torch_flat ids vs a float64 numpy brute force on a query sample."""
        n = self.sizes.n_reference_queries
        k = self.sizes.k
        sims = q[:n].astype(np.float64) @ x.T.astype(np.float64)
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        kth = np.take_along_axis(sims, top, 1).min(axis=1)
        got_scores = np.take_along_axis(sims, res.ids[:n], 1)
        # an id counts when its exact score reaches the exact k-th score (ties allowed)
        agree = float(np.mean(got_scores >= kth[:, None] - 1e-6))
        max_err = float(np.abs(got_scores - res.scores[:n]).max())
        if agree < 0.999:
            raise AssertionError(f"fp32 torch_flat disagrees with numpy on {1 - agree:.2%}")
        return {"ids_vs_numpy": round(agree, 5), "score_err_vs_numpy": f"{max_err:.1e}"}

    def faiss(self) -> None:
        try:
            import faiss
        except ImportError:
            self.rows.append(Row("faiss", "Flat/IVF", "skip", note="faiss not installed "
                                 "(index=torch_flat is the exact GPU search without it)"))
            return
        gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
        if self.device == "cuda" and gpus == 0:
            self.rows.append(Row("faiss", "Flat/IVF", "skip", note="faiss has no GPU support "
                                 "here (faiss-cpu); faiss-gpu not installed"))
            return
        from bench.index.exact import ann_recall_at_k
        from bench.index.faiss_index import FaissIndex

        x, q = self._data
        s = self.sizes
        nlist = 4096 if self.device == "cuda" else 64
        sweeps: list[tuple[str, list[dict[str, int]]]] = [
            ("Flat", [{}]), (f"IVF{nlist},Flat", [{"nprobe": 16}, {"nprobe": 64}])]
        reference = self._reference
        assert reference is not None
        for factory, params in sweeps:
            index = FaissIndex(factory=factory, query_params=params, device=self.device)
            with self._watch(f"faiss {factory}") as figures:
                built, info = index.build(x)
                rows = []
                for p in params:
                    built.search(q[:64], s.k, p)
                    t0 = time.perf_counter()
                    res = built.search(q, s.k, p)
                    wall = time.perf_counter() - t0
                    recall = float(ann_recall_at_k(res, reference, s.k).mean())
                    rows.append((p, s.n_queries / wall, recall))
            for p, qps, recall in rows:
                label = f"{factory} {self.device}" + (f" nprobe={p['nprobe']}" if p else "")
                self.rows.append(Row("faiss", label, "ok", {
                    **figures, "build_s": round(info.build_s, 2), "qps": round(qps, 1),
                    f"recall@{s.k}_vs_torch_fp32": round(recall, 5)}))

    def kernels(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(ROOT), str(ROOT / "kernels"), os.environ.get("PYTHONPATH", "")])}
        if self.device == "cuda":
            env.pop("NUMBA_ENABLE_CUDASIM", None)
            mode = "numba.cuda"
        else:
            env["NUMBA_ENABLE_CUDASIM"] = "1"
            mode = "numba simulator"
        n = self.sizes.n_twin_queries
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-W", "ignore",
                               str(ROOT / "tests" / "kernels" / "cuda_twin_check.py"), str(n)],
                              capture_output=True, text=True, env=env,
                              timeout=max(30, self.left() - 30), check=False)
        wall = time.perf_counter() - t0
        last = (proc.stdout.strip().splitlines() or proc.stderr.strip().splitlines() or ["?"])[-1]
        status = "ok" if proc.returncode == 0 else "FAIL"
        self.rows.append(Row("kernels", f"CUDA twins vs CPU ({mode})", status,
                             {"queries": n, "wall_s": round(wall, 1)}, note=last[:200]))

    def pipeline(self) -> None:
        from hydra.core.global_hydra import GlobalHydra

        import bench.app

        work = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-gpu-check-{os.getpid()}"
        precision = "bf16" if self.device == "cuda" else "fp32"
        argv = ["bench", "dataset=synthetic", "dataset.n_docs=160", "dataset.n_queries=64",
                f"device={self.device}", "index=torch_flat", f"embedder.model={self.model}",
                f"embedder.precision={precision}",
                f"telemetry={'nvml' if self.device == 'cuda' else 'basic'}",
                "metrics.bootstrap_resamples=200",
                f"cache_dir={work}/cache", f"hydra.run.dir={work}/run"]
        GlobalHydra.instance().clear()
        os.environ.pop("HYDRA_FULL_ERROR", None)
        old, sys.argv = sys.argv, argv
        err = io.StringIO()
        code: int | str | None = 0
        t0 = time.perf_counter()
        try:
            with contextlib.redirect_stderr(err):
                bench.app.main()
        except SystemExit as exc:
            code = exc.code
        finally:
            sys.argv = old
        wall = time.perf_counter() - t0
        figures: dict[str, Any] = {"exit": code, "wall_s": round(wall, 1)}
        summary = work / "run" / "summary.parquet"
        if summary.is_file():
            import pyarrow.parquet as pq

            t = pq.read_table(summary).to_pylist()
            for r in t:
                if r["metric"] == "ndcg@10" and r["scope"] == "all":
                    figures["ndcg@10"] = round(r["mean"], 4)
                    break
        ok = code == 0 and "ndcg@10" in figures
        self.rows.append(Row("pipeline", f"synthetic, torch_flat, MiniLM {precision}",
                             "ok" if ok else "FAIL", figures,
                             note="" if ok else err.getvalue().strip()[-300:]))

    def gpu_tests(self) -> None:
        if self.device != "cuda":
            self.rows.append(Row("gpu_tests", "pytest -m gpu", "skip", note="no CUDA device"))
            return
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(ROOT), str(ROOT / "kernels"), os.environ.get("PYTHONPATH", "")])}
        # the CUDA twins already ran in `kernels`; these need neither faiss nor our model
        tests = ["tests/index/test_torch_flat.py"]
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p",
                               "no:cacheprovider", *tests], cwd=ROOT, env=env,
                              capture_output=True, text=True,
                              timeout=max(30, self.left() - 20), check=False)
        last = (proc.stdout.strip().splitlines() or ["?"])[-1]
        # exit 5 = nothing collected; 0 = all passed
        status = "ok" if proc.returncode in (0, 5) else "FAIL"
        self.rows.append(Row("gpu_tests", "pytest -m gpu", status, note=last[:200]))

    def vllm(self) -> None:
        try:
            import vllm
        except ImportError:
            self.rows.append(Row("vllm", "generation", "skip", note=(
                "not installed: vLLM cannot run on the lent device machine (its ~336 MB "
                "wheels exceed the 64 MiB a call carries); on a user's box: make setup-vllm")))
            return
        self.rows.append(Row("vllm", "generation", "skip", {"version": vllm.__version__},
                             note="installed; no offline generator model is packaged, so "
                                  "no generation is run here"))


def table(rows: list[Row]) -> str:
    lines = ["| section | item | status | s | figures / note |", "|---|---|---|---:|---|"]
    for r in rows:
        figs = ", ".join(f"{k}={v}" for k, v in r.figures.items())
        text = "; ".join(t for t in (figs, r.note) if t)
        lines.append(f"| {r.section} | {r.item} | {r.status} | {r.seconds:.1f} | {text} |")
    return "\n".join(lines)


class _Hidden:
    """A meta-path finder that makes ``import NAME`` fail for the hidden packages."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.split(".")[0] in self.names:
            raise ImportError(f"{name} hidden by gpu_check --hide")
        return None


def default_model() -> str:
    payload = ROOT / ".gpu_payload" / "minilm-fp16"
    if (payload / "model.safetensors").is_file():
        return str(payload)
    return PACKAGED


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu_check_out")))
    ap.add_argument("--cpu", action="store_true",
                    help="CPU fallbacks and small sizes: checks the plumbing on any machine")
    ap.add_argument("--model", default=None, help="embedder folder (default: the payload's "
                    "fp16 MiniLM, else the packaged one)")
    ap.add_argument("--budget-s", type=float, default=450.0,
                    help="stop starting sections after this many seconds (default 450)")
    ap.add_argument("--hide", default="", help="comma-separated packages to make unimportable")
    ap.add_argument("--only", default="", help=f"comma-separated sections to run (default all: "
                                               f"{', '.join(SECTIONS)})")
    args = ap.parse_args(argv)
    if args.hide:
        sys.meta_path.insert(0, _Hidden({h.strip() for h in args.hide.split(",") if h.strip()}))
    import torch

    if not args.cpu and not torch.cuda.is_available():
        print("gpu_check: torch sees no CUDA GPU; use --cpu for the plumbing check",
              file=sys.stderr)
        return 2
    device = "cpu" if args.cpu else "cuda"
    args.out.mkdir(parents=True, exist_ok=True)
    chk = Check(device=device, sizes=CPU_SIZES if args.cpu else CUDA_SIZES,
                model=args.model or default_model(), out=args.out, budget_s=args.budget_s)
    only = {o.strip() for o in args.only.split(",") if o.strip()} or set(SECTIONS)
    unknown = only - set(SECTIONS)
    if unknown:
        print(f"gpu_check: unknown section(s) {sorted(unknown)}; known: {', '.join(SECTIONS)}",
              file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    plan: list[tuple[str, Callable[[], None], float]] = [
        ("env", chk.env, 1), ("nvml", chk.nvml_open, 1), ("embed", chk.embed, 30),
        ("torch_flat", chk.torch_flat, 30), ("faiss", chk.faiss, 30),
        ("kernels", chk.kernels, 40), ("pipeline", chk.pipeline, 40),
        ("gpu_tests", chk.gpu_tests, 60), ("vllm", chk.vllm, 0)]
    for name, fn, needs_s in plan:
        if name not in only:
            continue
        if name == "faiss" and chk._reference is None:
            chk.rows.append(Row("faiss", "Flat/IVF", "skip", note="needs the torch_flat "
                                                                  "reference"))
            continue
        chk.section(name, fn, needs_s=needs_s)
    text = table(chk.rows)
    total = time.perf_counter() - t0
    print(f"\n## gpu_check ({device}, {total:.0f} s)\n\n{text}")
    (args.out / "gpu_check.md").write_text(f"# gpu_check ({device}, {total:.0f} s)\n\n{text}\n")
    (args.out / "gpu_check.json").write_text(json.dumps(
        {"device": device, "total_s": total, "rows": [asdict(r) for r in chk.rows]},
        indent=2, default=str) + "\n")
    return 1 if any(r.status == "FAIL" for r in chk.rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
