"""Why the packaged "int8" MiniLM (``embedder=onnx_minilm_int8``) is slower than fp32 torch.

Prints (1) the op types of the ONNX file and of the graph ONNX Runtime actually runs (after
its graph optimisations), (2) ORT's per-op time shares for one batch, and (3) one batch
through torch fp32, torch bf16 autocast, ORT on the packaged file, and ORT on a dynamic int8
quantisation of it (``onnxruntime.quantization.quantize_dynamic``, every MatMul), timed
interleaved in one process (medians over ``--reps``), with the token states' min cosine to
torch fp32. Input: random token ids (a kernel profile, not a quality measurement; quality on
FOLDOC text is ``scripts/bench_embed.py --cases onnx-int8``).
Not a test: ``HF_HUB_OFFLINE=1 python scripts/profile_onnx_int8.py [--batch 32] [--seq 128]``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads, both sides")
    args = parser.parse_args(argv)

    import onnx
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from sentence_transformers import SentenceTransformer

    from bench.embedding.onnx import resolve_onnx_path
    from bench.embedding.sentence_transformers import resolve_model_path

    torch.set_num_threads(args.threads)
    packaged = str(resolve_onnx_path("packaged:all-MiniLM-L6-v2-int8"))
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, 20000, (args.batch, args.seq)).astype(np.int64)
    ids[:, 0], ids[:, -1] = 101, 102  # [CLS] ... [SEP]
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids),
            "token_type_ids": np.zeros_like(ids)}

    def session(path: str, *, optimized: str | None = None, profile: str | None = None,
                level: object = None) -> object:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = args.threads
        opts.log_severity_level = 3
        if level is not None:
            opts.graph_optimization_level = level
        if optimized:
            opts.optimized_model_filepath = optimized
        if profile:
            opts.enable_profiling, opts.profile_file_prefix = True, profile
        return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])

    def ops(model: onnx.ModelProto) -> str:
        count = collections.Counter(n.op_type for n in model.graph.node)
        dtypes = collections.Counter(onnx.TensorProto.DataType.Name(t.data_type)
                                     for t in model.graph.initializer)
        return (", ".join(f"{k} {v}" for k, v in count.most_common(8))
                + f"; initializers {dict(dtypes)}")

    with tempfile.TemporaryDirectory() as tmp:
        folded, runs = os.path.join(tmp, "folded.onnx"), os.path.join(tmp, "runs.onnx")
        print(f"file:      {ops(onnx.load(packaged))}")
        session(packaged, optimized=runs)  # the graph ORT runs (all optimisations)
        print(f"ORT runs:  {ops(onnx.load(runs))}")
        prof = session(packaged, profile=os.path.join(tmp, "prof"))
        prof.run(["last_hidden_state"], feed)  # type: ignore[attr-defined]
        prof.run(["last_hidden_state"], feed)  # type: ignore[attr-defined]
        shares: collections.Counter[str] = collections.Counter()
        for e in json.loads(Path(prof.end_profiling()).read_text()):  # type: ignore[attr-defined]
            if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
                shares[e["args"]["op_name"]] += e["dur"]
        total = sum(shares.values())
        print("ORT op time: " + ", ".join(f"{k} {100 * v / total:.1f} %"
                                          for k, v in shares.most_common(8)))
        # basic optimisations only: the weights folded, no CPU-specific layout in the file
        session(packaged, optimized=folded, level=ort.GraphOptimizationLevel.ORT_ENABLE_BASIC)
        quantize_dynamic(folded, os.path.join(tmp, "dyn.onnx"), weight_type=QuantType.QInt8)
        s_file, s_dyn = session(packaged), session(os.path.join(tmp, "dyn.onnx"))

    st = SentenceTransformer(resolve_model_path("packaged:all-MiniLM-L6-v2"), device="cpu")
    st.eval()
    bert: Any = st[0].auto_model
    tfeed = {k: torch.from_numpy(v) for k, v in feed.items()}

    def torch_run(bf16: bool) -> Callable[[], np.ndarray]:
        def run() -> np.ndarray:
            with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16,
                                                        enabled=bf16):
                return bert(**tfeed).last_hidden_state.float().numpy()
        return run

    cases: dict[str, Callable[[], np.ndarray]] = {
        "torch fp32": torch_run(False),
        "torch bf16 autocast": torch_run(True),
        "ORT, packaged int8 file": lambda: s_file.run(["last_hidden_state"], feed)[0],  # type: ignore[attr-defined]
        "ORT, dynamic int8 (MatMulInteger)": lambda: s_dyn.run(["last_hidden_state"], feed)[0],  # type: ignore[attr-defined]
    }
    outs = {k: f() for k, f in cases.items()}  # warm-up, untimed
    walls: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(args.reps):
        for k, f in cases.items():
            t0 = time.perf_counter()
            outs[k] = f()
            walls[k].append(time.perf_counter() - t0)
    ref = outs["torch fp32"].reshape(-1, outs["torch fp32"].shape[-1]).astype(np.float64)
    base = statistics.median(walls["torch fp32"])
    print(f"\n[{args.batch} x {args.seq}] batch, {args.threads} intra-op thread(s), {args.reps} "
          "interleaved reps (medians)\n")
    print("| case | median s | speed vs torch fp32 | token-state min cosine |")
    print("|---|---:|---:|---:|")
    for k in cases:
        x = outs[k].reshape(ref.shape).astype(np.float64)
        cos = (x * ref).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(ref, axis=1)
        med = statistics.median(walls[k])
        print(f"| {k} | {med:.2f} | {base / med:.2f}x | {cos.min():.5f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
